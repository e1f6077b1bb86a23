"""Vertical and hybrid runs: peers hold different features of the same instances (``crc.core.feature_partition``).

The model is a product over feature blocks (``crc.core.models.blocks``), so a
group of peers holding the same instances acts as one CRC node whose
statistics are its blocks' statistics side by side:

* within a group, every peer scores its block on the shared instances, the
  scores are summed, the label holder forms the residual weights ``Y - P``,
  and every peer adds ``(Y - P)^T phi_b`` to its block's statistics: one local
  step of the block product on the group's instances;
* across groups, each block's statistics are averaged with the peers that hold
  the same block for other instances, on one graph over the groups: the
  average of the joined statistics.

So the simulator runs the CRC engine over ``G`` group nodes with the block
product. A vertical partition has one group holding the pooled training set:
it runs centralized RC itself, exactly (the ML start scaled to the ESS, plain
steps of learning rate ``lr``, the iterate with the lowest training soft 0-1
loss), which the label holder can select because it sees the summed scores.
"""

from __future__ import annotations

import numpy as np

from crc.core.acceleration import PAPER
from crc.core.calibration import soft_zero_one
from crc.core.data import Dataset, split_indices, standardize
from crc.core.errors import CRCError, named_errors
from crc.core.feature_partition import blocks_from_names, feature_blocks
from crc.core.models.blocks import block_model
from crc.core.partition import local_sizes, partition
from crc.core.threads import single_threaded_blas
from crc.protocol.config import SimulationConfig
from crc.protocol.split import Split, warn_singular_qda

BLOCKS_STREAM = 0xB10C
"""Seeds the cut of the features into blocks apart from every other stream (the same cut in every repeat)."""


def held_out_count(n_instances: int, test_size: float) -> int:
    """Test instances of a data set of ``n_instances``: a fraction below 1, else a count."""
    return int(round(test_size * n_instances)) if test_size < 1 else int(test_size)


def resolve_partition(config: SimulationConfig, dataset: Dataset) -> SimulationConfig:
    """The engine's configuration of a vertical or hybrid run on ``dataset``: one node per group of instances,
    the pooled training set every instance the test set leaves (or ``pooled_size``), the paper's plain step (one
    local step a round: what the groups of real peers run). Every group starts from its own ML statistics scaled
    to the ESS, the counterpart of RC's ML start (measured on ``german``, hybrid:3, 3 repeats: test gap +0.002
    against +0.012 from the uniform start); so a vertical group runs RC itself."""
    fp = config.feature_partition
    train = config.pooled_size or len(dataset) - held_out_count(len(dataset), config.test_size)
    if train < fp.groups:
        source = f"--train-size {train} is" if config.pooled_size else f"{len(dataset)} instances leave {train} for training,"
        raise CRCError(f"{source} fewer than the {fp.groups} groups of partition {fp.spec}")
    settings = {"nodes": fp.groups, "pooled_size": train, "local_size": -(-train // fp.groups), "algorithm": "paper",
                "iters": 1, "momentum": PAPER.momentum, "safeguard": PAPER.safeguard, "classifier": PAPER.classifier,
                "exact_diffusion": PAPER.exact_diffusion, "start": "local"}
    return config.with_settings(**settings)


def blocks_for(config: SimulationConfig, feature_names: list[str]) -> list[list[int]]:
    """The feature blocks of a run: ``config.feature_blocks`` (names) if given, else a seeded cut."""
    fp = config.feature_partition
    if config.feature_blocks is not None:
        blocks = blocks_from_names([list(block) for block in config.feature_blocks], feature_names, "--blocks")
        if len(blocks) != fp.blocks:
            raise CRCError(f"--blocks lists {len(blocks)} blocks, partition {fp.spec} has {fp.blocks}")
        return blocks
    return feature_blocks(len(feature_names), fp.blocks, seed=np.random.default_rng([config.seed, BLOCKS_STREAM]))


def make_feature_split(dataset: Dataset, config: SimulationConfig, seed):
    """``crc.protocol.repeat.make_split`` for a vertical or hybrid partition: the block product over the run's
    feature blocks, and the training set cut at random into the groups' instances."""

    rng = np.random.default_rng(seed)
    train, test = split_indices(len(dataset), config.train_size, config.test_size, seed=rng, source=dataset.name)
    absent = tuple(dataset.schema.classes[k] for k in sorted(set(range(dataset.schema.n_classes))
                                                            - set(np.unique(dataset.y[train]).tolist())))
    schema = dataset.schema.standardized(dataset.x[train][:, dataset.schema.continuous])
    with named_errors(dataset.name):
        blocks = blocks_for(config, schema.feature_names)
        model = block_model(config.model, schema, blocks, **config.model_options)
        x_train = standardize(schema, dataset.x[train])
        phi_train, phi_test = model.features(x_train), model.features(standardize(schema, dataset.x[test]))
    groups = config.feature_partition.groups
    parts = partition("iid", dataset.y[train], local_sizes(config.train_size, groups, rng=rng))
    if config.model == "qda":  # a block's covariance spans its continuous features
        continuous = set(schema.continuous)
        widest = max(sum(j in continuous for j in block) for block in blocks)
        warn_singular_qda(widest, dataset.y[train], schema.n_classes, of=" of the widest block")
    return Split(model, phi_train, dataset.y[train], phi_test, dataset.y[test], parts, x_train, train, test, absent)


class BestIterate:
    """Each group's iterate with the lowest soft 0-1 loss on its own training instances, the start included: what a
    label holder keeps (RC's selection, when the group holds the pooled training set).

    ``offer(stats)`` after every round with the groups' statistics (G, size); ``best`` the kept ones (G, size).
    """

    def __init__(self, model, phi: np.ndarray, y: np.ndarray, parts: list[np.ndarray], start: np.ndarray):
        self.model, self.phi, self.y, self.parts = model, phi, y, parts
        self.best = np.array(start, dtype=np.float64)
        self.loss = self._losses(self.best)

    def _losses(self, stats: np.ndarray) -> np.ndarray:
        """Each group's training soft 0-1 loss (G,), with BLAS on one thread as in the engine's rounds: the posteriors
        of every training instance are a short product that a threaded BLAS stalled on a busy machine (splice,
        vertical:2: 1.4 s of a 5 s run, 0.3 s on one thread)."""
        with single_threaded_blas():
            return np.array([soft_zero_one(self.model.posteriors(self.model.theta(s), self.phi[part]), self.y[part])
                             for s, part in zip(stats, self.parts)])

    def offer(self, stats: np.ndarray) -> None:
        losses = self._losses(stats)
        better = losses < self.loss
        self.best[better], self.loss[better] = stats[better], losses[better]


def describe(config: SimulationConfig, model) -> dict:
    """What a vertical or hybrid run adds to the results' ``config``: the partition's shape and every block's
    feature names (block ``b`` is held by peer ``group * blocks + b`` of each group)."""
    fp = config.feature_partition
    names = model.schema.feature_names
    return {"groups": fp.groups, "blocks": fp.blocks, "peers": fp.peers,
            "block_features": [[names[j] for j in block] for block in model.blocks]}
