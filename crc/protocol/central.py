"""Centralized ML and RC on a repeat's pooled training set: the references CRC is compared with."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from crc.core import fields
from crc.core.calibration import CONVERGED_MAX_ITERATIONS, CONVERGED_PATIENCE, rc
from crc.core.data import Dataset
from crc.core.threads import single_threaded_blas
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import Repeat


class CentralCache(Protocol):
    """Storage for centralized ML/RC errors, shared by runs on the same pooled split."""

    def get(self, key: dict) -> dict | None: ...

    def put(self, key: dict, value: dict) -> None: ...


def central_key(dataset: Dataset, config: SimulationConfig, repeat: int) -> dict:
    """Everything the centralized errors of one repeat depend on."""
    feature_partition = {} if config.feature_partition is None else {
        "partition": config.partition, "feature_blocks": config.feature_blocks}
    return {"version": 4, "data": config.data, "label": config.label, "model_options": config.model_options,
            "schema": dataset.schema.fingerprint, "instances": len(dataset), "model": config.model,
            "train_size": config.train_size, "test_size": config.test_size, "lr": config.lr, "iterations": config.rc_iterations,
            "seed": config.seed, "repeat": repeat, "eval_instances": config.eval_instances,
            **({} if config.rc_converged else {"rc_converged": False}), **feature_partition}


CentralProgress = Callable[[str, int, int], None]
"""``progress(what, iteration, at_most)`` after every iteration of a centralized RC run (``what``: ``RC`` or
``RC to convergence``)."""


FIGURES = ("train_error", "test_error", "test_loglik", "test_f1")
"""What ``central_results`` records of each run."""


def _is_central(value, *, converged: bool) -> bool:
    """Whether ``value`` (from a cache: a file) is what ``central_results`` records: each run's ``FIGURES`` as finite
    numbers, ``rc_converged`` (with ``converged``) also its whole numbers of iterations."""
    runs = ("ml", "rc", "rc_converged") if converged else ("ml", "rc")
    if not (isinstance(value, dict) and set(value) == set(runs)):
        return False
    for name in runs:
        run, counts = value[name], ("iterations", "best_iteration") if name == "rc_converged" else ()
        if not (isinstance(run, dict) and all(fields.is_number(run.get(f)) and math.isfinite(run[f]) for f in FIGURES)
                and all(type(run.get(count)) is int and run[count] >= 0 for count in counts)):
            return False
    return True


def central_results(dataset: Dataset, config: SimulationConfig, rep: Repeat, cache: CentralCache | None = None,
                    progress: CentralProgress | None = None) -> dict:
    """``{"ml": ..., "rc": ..., "rc_converged": ...}``: train/test errors and test log-likelihood of centralized
    learning, cached if asked. ``rc`` runs ``config.rc_iterations`` iterations (the paper's gold standard);
    ``rc_converged`` (left out with ``config.rc_converged`` false) runs until the training soft 0-1 loss has not
    improved for ``CONVERGED_PATIENCE`` iterations (at most ``CONVERGED_MAX_ITERATIONS``) and records the
    ``iterations`` it ran and its ``best_iteration``."""
    key = central_key(dataset, config, rep.index)
    central = cache.get(key) if cache is not None else None
    if not _is_central(central, converged=config.rc_converged):  # none, or a damaged entry: computed again
        split = rep.split

        def reporting(what: str, at_most: int):
            return None if progress is None else lambda iteration, _: progress(what, iteration, at_most)

        # One BLAS thread: the products are modest, and a threaded BLAS on a busy machine stalled them (measured).
        # Both RC runs start from the ML statistics, fitted once; RC at rc_iterations is read off the run to
        # convergence when that run gets that far (its first iterates are the same).
        with single_threaded_blas():
            ml_stats = split.model.fit_ml(split.phi_train, split.y_train)
            converged = None if not config.rc_converged else rc(
                split.model, split.phi_train, split.y_train, lr=config.lr, init=ml_stats,
                iterations=CONVERGED_MAX_ITERATIONS, patience=CONVERGED_PATIENCE, milestone=config.rc_iterations,
                callback=reporting("RC to convergence", CONVERGED_MAX_ITERATIONS))
            fixed = None if converged is None else converged.milestone
            if fixed is None:
                fixed = rc(split.model, split.phi_train, split.y_train, lr=config.lr, init=ml_stats,
                           iterations=config.rc_iterations, callback=reporting("RC", config.rc_iterations))
        rc_stats = fixed.stats
        central = {}
        runs = (("ml", ml_stats), ("rc", rc_stats)) + ((("rc_converged", converged.stats),) if converged is not None else ())
        for name, stats in runs:
            train_err, test_err, test_loglik = rep.evaluate(stats[None, :])
            central[name] = {"train_error": float(train_err[0]), "test_error": float(test_err[0]),
                             "test_loglik": float(test_loglik[0]), "test_f1": float(rep.test_f1(stats[None, :])[0])}
        if converged is not None:
            central["rc_converged"].update(iterations=len(converged.losses) - 1, best_iteration=converged.best_iteration)
        if cache is not None:
            cache.put(key, central)
    return central
