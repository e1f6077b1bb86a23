"""The federated-circuits baseline: every peer's own ML model, mixed with weights proportional to local sizes."""

from __future__ import annotations

import numpy as np

from crc.core import metrics
from crc.core.engine import LocalData
from crc.protocol.repeat import Repeat


def mixture_of_nodes(rep: Repeat) -> dict:
    """Train/test error and test log-likelihood of the mixture of the peers' local ML models."""
    split = rep.split
    local = LocalData.from_parts(split.phi_train, split.y_train, split.parts)
    stats = split.model.fit_ml(local.phi, local.y, mask=local.mask)
    weights = local.sizes / local.sizes.sum()
    result = {}
    for name, phi, y in (("train", split.phi_train[rep.train_idx], split.y_train[rep.train_idx]),
                         ("test", split.phi_test[rep.test_idx], split.y_test[rep.test_idx])):
        scores = metrics.mixture_log_joint(split.model, stats, weights, phi)
        result[f"{name}_error"] = float(np.mean(scores.argmax(axis=1) != y))
        if name == "test":
            result["test_loglik"] = float(np.take_along_axis(scores, y[:, None], axis=1).mean())
            result["test_f1"] = float(metrics.f1_scores(scores.argmax(axis=1)[None, :], y, split.model.n_classes)[0])
    return result
