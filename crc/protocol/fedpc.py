"""FedPC's one-pass construction (federated circuits, Algorithm 1 of the FedPC paper) as a baseline for vertical
and hybrid runs, with naive-Bayes leaf circuits.

The features are cut into subspaces by the set of peers that hold them (here: the feature blocks):

* a block held by several peers (the G groups of a hybrid partition, for different instances) becomes a sum node
  over those peers' circuits of the block, weighted by their numbers of instances;
* a block held by one peer (a vertical partition) is clustered by that peer into ``FEDPC_CLUSTERS`` clusters of
  its instances (k-means on its standardized features), and the peer learns one circuit per cluster.

The root is a mixture over products; each product holds every sum node and one cluster circuit of every clustered
block ("combinatorial glueing": every combination of clusters). The paper sets the mixture weights after the
clients' training; with the peers' instances aligned by id the ML weights are the shares of the training instances
whose clusters form each combination, which is what this baseline uses. The label is a variable of block 0's
circuits (its holder's), so it learns in one pass with no calibration: each leaf circuit is an ML fit of its data.
In a hybrid partition every block is a sum node and no block is clustered: one product, and only block 0's
circuits (the ones that hold the label) decide the class.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.cluster.vq import kmeans2

from crc.core import metrics
from crc.core.data import Dataset, standardize
from crc.core.models.base import GenerativeModel
from crc.core.models.blocks import block_schema
from crc.core.models.naive_bayes import NaiveBayes
from crc.core.numeric import logsumexp
from crc.core.partition import design_matrix
from crc.protocol.repeat import Repeat

FEDPC_CLUSTERS = 2
"""Clusters per clustered block (the paper's K)."""
CLUSTER_STREAM = 0xFEDC
"""Seeds the peers' k-means apart from every other stream."""
DENSITY_CLASSES = ("all", "none")
"""Classes of the label-free leaf circuits: every instance is of class 0 (class 1 keeps the count floor)."""


def _density(schema, x: np.ndarray, rows: np.ndarray, labels: np.ndarray | None) -> tuple[GenerativeModel, dict]:
    """A naive-Bayes leaf circuit fitted to ``x[rows]``: over the features and the label when ``labels`` are given,
    else over the features alone (a one-class naive Bayes)."""
    if labels is None:
        model = NaiveBayes(schema.__class__(label=schema.label, classes=DENSITY_CLASSES, features=schema.features))
        y = np.zeros(len(rows), dtype=np.int64)
    else:
        model, y = NaiveBayes(schema), labels[rows]
    phi = model.features(x[rows])
    return model, model.theta(model.fit_ml(phi, y))


def _log_density(model: NaiveBayes, theta: dict, x: np.ndarray, labelled: bool) -> np.ndarray:
    """log p(x_b, y) (m, r) of a labelled leaf circuit, log p(x_b) (m, 1) of a label-free one."""
    scores = model.log_joint(theta, model.features(x))
    return scores if labelled else scores[:, :1] - theta["log_prior"][0]


def _clusters(design: np.ndarray, k: int, seed) -> np.ndarray:
    """k-means cluster labels (m,) of a block's design matrix, seeded; at most as many clusters as rows."""
    k = min(k, len(design))
    if k == 1 or not np.any(design.std(axis=0) > 0):
        return np.zeros(len(design), dtype=np.int64)
    _, labels = kmeans2(design, k, minit="++", seed=np.random.default_rng(seed))
    return labels


def fedpc_log_joint(rep: Repeat, x_train: np.ndarray, x_eval: list[np.ndarray], *, clusters: int = FEDPC_CLUSTERS,
                    seed: int = 0) -> list[np.ndarray]:
    """log p(x, y) (m, r) of FedPC's one-pass circuit, learned on a repeat's training instances ``x_train``
    (standardized, (m_train, d)), for each standardized matrix in ``x_eval``."""
    model, split = rep.split.model, rep.split
    schema, y = model.schema, split.y_train
    groups = split.parts
    components = []  # per block: a list of (log-density function inputs), one per product choice
    assignments = []  # per clustered block: the cluster of every training instance
    for b, block in enumerate(model.blocks):
        sub = block_schema(schema, block)
        labelled = b == 0
        xb = x_train[:, block]
        if len(groups) > 1:  # held by every group: a sum node over the groups' circuits, weighted by their sizes
            fits = [_density(sub, xb, rows, y if labelled else None) for rows in groups]
            weights = np.array([len(rows) for rows in groups], dtype=np.float64) / len(y)
            components.append([("sum", fits, weights)])
        else:  # held by one peer: one circuit per cluster of its instances
            labels = _clusters(design_matrix(sub, xb), clusters, [seed, rep.index, CLUSTER_STREAM, b])
            assignments.append(labels)
            components.append([("leaf", _density(sub, xb, np.flatnonzero(labels == c), y if labelled else None))
                               for c in range(int(labels.max()) + 1)])
    choices = list(itertools.product(*(range(len(options)) for options in components)))
    clustered = [b for b, options in enumerate(components) if options[0][0] == "leaf"]
    if clustered:
        tuples = np.stack([assignments[i] for i in range(len(clustered))], axis=1)
        counts = {choice: np.sum(np.all(tuples == [choice[b] for b in clustered], axis=1)) for choice in choices}
    else:
        counts = {choice: 1 for choice in choices}
    total = sum(counts.values())
    outputs = []
    for x in x_eval:
        block_scores = [[_component_score(option, x[:, block], b == 0) for option in options]
                        for b, (block, options) in enumerate(zip(model.blocks, components))]
        products = [np.log(counts[choice] / total) + sum(block_scores[b][c] for b, c in enumerate(choice))
                    for choice in choices if counts[choice] > 0]
        outputs.append(logsumexp(np.stack(products), axis=0))
    return outputs


def _component_score(option, xb: np.ndarray, labelled: bool) -> np.ndarray:
    """log-density of one block's component for instances ``xb``: (m, r) for block 0, (m, 1) for the others."""
    kind = option[0]
    if kind == "leaf":
        return _log_density(*option[1], xb, labelled)
    _, fits, weights = option
    return logsumexp(np.stack([np.log(w) + _log_density(*fit, xb, labelled) for fit, w in zip(fits, weights)]), axis=0)


def fedpc_results(rep: Repeat, dataset: Dataset, *, seed: int = 0) -> dict:
    """Train/test error and test F1 of FedPC's one-pass circuit on a repeat's evaluation sample."""
    split = rep.split
    schema = split.model.schema
    x_test = standardize(schema, dataset.x[split.test_rows])
    train_scores, test_scores = fedpc_log_joint(rep, split.x_train, [split.x_train[rep.train_idx], x_test[rep.test_idx]],
                                                seed=seed)
    y_train, y_test = split.y_train[rep.train_idx], split.y_test[rep.test_idx]
    test_predictions = test_scores.argmax(axis=1)
    return {"train_error": float(np.mean(train_scores.argmax(axis=1) != y_train)),
            "test_error": float(np.mean(test_predictions != y_test)),
            "test_f1": float(metrics.f1_scores(test_predictions[None, :], y_test, schema.n_classes)[0])}
