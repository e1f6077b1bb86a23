"""Model/setting pairs known to end far from centralized RC, or worse than naive Bayes under CRC: ``crc simulate``
warns before such a run.

Measured in the default setting (50 peers x 50 instances, iid partition, a random tree, 64 rounds, the model's
default structure), 3 repeats, with ``sh results/models/measure.sh DATA`` (results/models/gaps.md). Only gaps of
CRC's test error to RC's above ``FAR``, and models clearly worse than naive Bayes (``NB_BETTER``), are listed;
another setting of the same pair is not known and not warned about.
"""

from __future__ import annotations

import math

from crc.core.acceleration import model_key
from crc.core.models.options import model_named
from crc.protocol.config import SimulationConfig

FAR = 0.02
"""A test gap CRC - RC above this is far from RC (issue 32's bar)."""

DEFAULT_SETTING = ("nodes", "local_size", "pooled_size", "partition", "size_skew", "topology", "period", "rounds", "iters",
                   "start", "exact_diffusion", "momentum", "safeguard", "classifier", "loss", "dp_epsilon", "ess", "lr",
                   "aggregate", "byzantine", "sum_over")
"""The settings that must be their defaults (for the run's algorithm, model and data) for a figure to apply."""

KNOWN_GAPS = {
    # (data set, model key, algorithm): mean test gap over 3 repeats
    ("letter", "qda", "accelerated"): 0.026,
    ("letter", "nb", "paper"): 0.081,
    ("letter", "qda", "paper"): 0.164,
    ("letter", "pc/mixture", "paper"): 0.094,
    ("letter", "pc/region-graph", "paper"): 0.150,
    ("satimage", "qda", "paper"): 0.126,
    ("satimage", "pc/mixture", "paper"): 0.031,
    ("satimage", "pc/region-graph", "paper"): 0.043,
    ("magic", "pc/mixture", "paper"): 0.026,
    ("magic", "pc/region-graph", "paper"): 0.068,
    ("penbased", "pc/region-graph", "paper"): 0.057,
    ("marketing", "nb", "paper"): 0.031,
    ("marketing", "qda", "paper"): 0.031,
    ("marketing", "pc/mixture", "paper"): 0.040,
    ("ring", "qda", "paper"): 0.025,
    ("ring", "pc/region-graph", "paper"): 0.035,
    ("texture", "qda", "paper"): 0.174,
    ("texture", "pc/region-graph", "paper"): 0.032,
}


NB_BETTER = {
    # (data set, model key, algorithm): (the model's CRC test error, naive Bayes' CRC test error), 3 repeats
    ("texture", "pc/region-graph", "accelerated"): (0.054, 0.032),
    ("letter", "pc/region-graph", "paper"): (0.370, 0.319),
    ("magic", "pc/region-graph", "paper"): (0.231, 0.205),
    ("satimage", "qda", "paper"): (0.271, 0.165),
    ("texture", "pc/region-graph", "paper"): (0.075, 0.061),
    ("texture", "qda", "paper"): (0.177, 0.061),
}
"""Pairs whose CRC ends clearly worse than naive Bayes under CRC (by more than ``clearly_worse``) although the model's
centralized RC is the better one: a user who picks the richer model gets the worse classifier."""


def clearly_worse(error: float, reference: float, test_instances: int) -> bool:
    """Whether test ``error`` is above ``reference`` by more than two standard errors of their difference, each a
    binomial proportion over ``test_instances`` (all repeats' test sets together; independent, which overstates the
    spread of errors measured on the same test sets, so what it calls worse is)."""
    spread = math.sqrt((error * (1 - error) + reference * (1 - reference)) / test_instances)
    return error - reference > 2 * spread


def _measured(table: dict, config: SimulationConfig):
    """``table``'s entry for ``config``'s data set, model and algorithm when ``config`` is the default setting it was
    measured in; else None."""
    key = model_key(config.model, config.model_options.get("structure"))
    entry = table.get((config.data, key, config.algorithm))
    if entry is None:
        return None
    default = SimulationConfig.from_settings(data=config.data, model=config.model, algorithm=config.algorithm,
                                             structure=config.model_options.get("structure"))
    if config.model_options != default.model_options:
        return None
    if any(getattr(config, name) != getattr(default, name) for name in DEFAULT_SETTING):
        return None
    return entry


def known_gap(config: SimulationConfig) -> float | None:
    """The measured gap of ``config``'s data set, model and algorithm in the default setting, when it is above ``FAR``
    and ``config`` is that setting; else None."""
    return _measured(KNOWN_GAPS, config)


def far_from_rc_warning(config: SimulationConfig) -> str | None:
    """The warning ``crc simulate`` prints before a run of a pair known to be far from RC, or None."""
    gap = known_gap(config)
    if gap is None:
        return None
    model = model_named(config.model, config.model_options.get("structure"))
    better = "" if config.algorithm == "accelerated" else "; the accelerated algorithm (the default) does better"
    return (f"{model} on {config.data} under the {config.algorithm} algorithm ends about {gap:+.3f} above centralized RC's "
            f"test error in this setting (the mean of 3 repeats, results/models/gaps.md: one run's gap varies around "
            f"it){better}")


def nb_better_warning(config: SimulationConfig) -> str | None:
    """The warning ``crc simulate`` prints before a run of a pair of ``NB_BETTER`` in its measured setting, or None."""
    errors = _measured(NB_BETTER, config)
    if errors is None:
        return None
    model = model_named(config.model, config.model_options.get("structure"))
    accelerated = (config.data, model_key(config.model, config.model_options.get("structure")), "accelerated")
    advice = ("under the accelerated algorithm (the default) it is not" if accelerated not in NB_BETTER
              else "--model nb is the better choice here")
    return (f"{model} on {config.data} under the {config.algorithm} algorithm ends worse under CRC than naive Bayes "
            f"under CRC in this setting (test error {errors[0]:.3f} against {errors[1]:.3f}, the mean of 3 repeats, "
            f"results/models/gaps.md), although its centralized RC at 64 iterations is the better one; {advice}")
