"""A receiver's test of its neighbours' statistics on its own data, for the ``screened`` aggregation.

A neighbour's statistics are admitted if the classifier they give is no worse than chance on the receiver's local
data: soft 0-1 loss ``1 - mean p(y|x)`` at most ``1 - 1 / K`` (K classes), the loss of the uniform classifier that
every peer starts from (``crc.core.acceleration.local_soft_loss``). An honest neighbour's model is trained on data
from the same task, so it does better than chance on the receiver's (in the byzantine study's clean runs the rule's
accuracies are the mean's to four decimals); a ``permute`` attacker (every class's statistics claimed for the next
class: a confident model with every label wrong) is refused as soon as it has learnt anything, and ``noise`` once it
predicts worse than chance. What is close to the receiver's own statistics (ClippedGossip's ``dissensus``) passes.
Under label drift (a peer holding few classes) an honest neighbour's early model can be worse than chance on the
receiver's data: without an attacker, on tree+80 with ``--partition label``, the rule cost 0.015 to 0.018 of test error
against the mean on magic, letter and satimage, 0.002 on penbased (results/robust/label_drift.md). Admitting a
neighbour that beats its own class prior on the receiver's data instead did not help (magic 0.227 against the
mean's 0.172, one throwaway run of 3 repeats).
"""

from __future__ import annotations

import numpy as np

from crc.core.acceleration import local_soft_loss
from crc.core.models.base import GenerativeModel


def better_than_chance(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Whether each of ``stats`` (E, size) classifies its receiver's data no worse than chance, (E,) bool.
    ``phi`` (E, m, k) and ``weights`` (E, m, K) are each receiver's local feature maps and label weights
    (``crc.core.models.base.labelled_weights``; padding rows weigh 0)."""
    if len(stats) == 0:
        return np.zeros(0, dtype=bool)
    return local_soft_loss(model, stats, phi, weights) <= 1.0 - 1.0 / model.n_classes
