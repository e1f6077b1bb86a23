"""The results JSON (DESIGN.md), built in one place for the simulator and for real launches."""

from __future__ import annotations

import numpy as np

from crc.core import metrics
from crc.core.data import Dataset
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import Repeat


def repeat_results(rep: Repeat, central: dict, final: np.ndarray, *, ess: float, nodes: np.ndarray | None = None) -> dict:
    """One repeat's results object from the nodes' final statistics (n_eval, size).

    ``nodes`` are the node indices the rows of ``final`` belong to (default: the
    evaluation sample); local sizes are reported over all nodes of the split.
    """
    nodes = rep.eval_nodes if nodes is None else nodes
    result = {
        "ml": central["ml"],
        "rc": central["rc"],
        "crc": _errors(rep, final),
        "majority": _majority(rep),
        "rounds": [],
        "evaluation": {"nodes": int(len(nodes)), "train_instances": int(len(rep.train_idx)),
                       "test_instances": int(len(rep.test_idx)),
                       "sampled": bool(rep.sampled or len(nodes) < len(rep.split.parts))},
        "ess": float(ess),
        "local_sizes": {"min": int(min(map(len, rep.split.parts))), "max": int(max(map(len, rep.split.parts)))},
    }
    result["train_gap"] = result["crc"]["train_error"] - result["rc"]["train_error"]
    result["test_gap"] = result["crc"]["test_error"] - result["rc"]["test_error"]
    if rep.split.absent:
        result["absent_classes"] = [str(label) for label in rep.split.absent]
    if len(rep.split.test_rows) < rep.split.test_wanted:
        result["short_test_set"] = {"test": int(len(rep.split.test_rows)), "wanted": int(rep.split.test_wanted),
                                    "train": int(len(rep.split.train_rows))}
    if "rc_converged" in central:  # left out with --no-rc-converged
        result["rc_converged"] = central["rc_converged"]
        result["test_gap_converged"] = result["crc"]["test_error"] - central["rc_converged"]["test_error"]
    return result


def _majority(rep: Repeat) -> dict:
    """Train and test errors, on the evaluation sample, of always predicting the training set's most frequent class."""
    split = rep.split
    train, test = metrics.majority_errors(split.y_train, split.y_train[rep.train_idx], split.y_test[rep.test_idx])
    return {"train_error": train, "test_error": test}


def _errors(rep: Repeat, stats: np.ndarray) -> dict:
    train_err, test_err, test_loglik = rep.evaluate(stats)
    return {"train_error": float(train_err.mean()), "test_error": float(test_err.mean()),
            "train_std": float(train_err.std()), "test_std": float(test_err.std()),
            "test_loglik": float(test_loglik.mean()), "test_f1": float(rep.test_f1(stats).mean())}


def add_honest(result: dict, rep: Repeat, final: np.ndarray, nodes: np.ndarray, byzantine: np.ndarray) -> None:
    """Record the ``byzantine`` nodes of an attack study and the errors of the honest ones in ``result``.

    ``final`` (len(nodes), size) are the statistics of ``nodes``; ``honest`` is ``crc``'s block over the honest
    ones among them, with its gap to RC.
    """
    honest = ~np.isin(nodes, byzantine)
    result["byzantine_nodes"] = [int(v) for v in byzantine]
    result["honest"] = {**_errors(rep, final[honest]), "nodes": int(honest.sum())}
    result["honest"]["test_gap"] = result["honest"]["test_error"] - result["rc"]["test_error"]


def _mean_of(dicts: list[dict]) -> dict:
    return {key: float(np.mean([d[key] for d in dicts])) for key in dicts[0]}


def results_json(config: SimulationConfig, dataset: Dataset, repeats: list[dict]) -> dict:
    """The results object: the configuration and the means over ``repeats`` (``repeat_results`` objects)."""
    summary = {
        "config": {**config.to_json(), "ess": repeats[0]["ess"], "instances": len(dataset),
                   "classes": dataset.schema.n_classes},
        "ml": _mean_of([r["ml"] for r in repeats]),
        "rc": _mean_of([r["rc"] for r in repeats]),
        "crc": _mean_of([r["crc"] for r in repeats]),
        "majority": _mean_of([r["majority"] for r in repeats]),
        "train_gap": float(np.mean([r["train_gap"] for r in repeats])),
        "test_gap": float(np.mean([r["test_gap"] for r in repeats])),
        "rounds": [_mean_of([r["rounds"][t] for r in repeats]) for t in range(len(repeats[0]["rounds"]))],
        "evaluation": repeats[0]["evaluation"],
        "local_sizes": {"min": min(r["local_sizes"]["min"] for r in repeats),
                        "max": max(r["local_sizes"]["max"] for r in repeats)},
        "repeats": repeats,
    }
    if "feature_partition" in repeats[0]:
        summary["config"].update(repeats[0]["feature_partition"])
    if "rc_converged" in repeats[0]:
        summary["rc_converged"] = _mean_of([r["rc_converged"] for r in repeats])
        summary["test_gap_converged"] = float(np.mean([r["test_gap_converged"] for r in repeats]))
    if "honest" in repeats[0]:
        summary["honest"] = _mean_of([r["honest"] for r in repeats])
    for baseline in ("mixture_of_nodes", "fedpc"):
        if baseline in repeats[0]:
            summary[baseline] = _mean_of([r[baseline] for r in repeats])
    absent = sorted({label for r in repeats for label in r.get("absent_classes", [])})
    if absent:
        summary["absent_classes"] = absent
    for section in ("privacy", "secure_aggregation", "short_test_set"):
        if section in repeats[0]:
            summary[section] = repeats[0][section]
    if "density" in repeats[0]:
        summary["density"] = float(np.mean([r["density"] for r in repeats]))
    for row in summary["rounds"]:
        row["round"] = int(row["round"])
    return summary


def central_json(config: SimulationConfig, dataset: Dataset, repeats: list[dict]) -> dict:
    """The results object of centralized learning only (no network): configuration, ML and RC means, repeats."""
    summary = {"config": {**config.to_json(), "instances": len(dataset), "classes": dataset.schema.n_classes},
               "ml": _mean_of([r["ml"] for r in repeats]), "rc": _mean_of([r["rc"] for r in repeats])}
    if "rc_converged" in repeats[0]:
        summary["rc_converged"] = _mean_of([r["rc_converged"] for r in repeats])
    return {**summary, "repeats": repeats}
