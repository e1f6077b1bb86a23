"""One repeat of an experiment: its seeds, its split of the data over the peers and its evaluation sample.

Section IV of the paper: the pooled training set of ``nodes x local_size``
instances and a disjoint test set are drawn at random; continuous features are
standardized with the pooled training mean and std; every peer's error is
measured on the *global* training set and on the test set. The simulator,
``crc split`` and ``crc launch`` all draw a repeat here, so they agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crc.core import metrics
from crc.core.data import Dataset, split_counts, split_indices, standardize
from crc.core.engine import default_ess
from crc.core.errors import named_errors
from crc.core.models import make_model
from crc.core.partition import design_matrix, local_sizes, partition
from crc.protocol.config import SimulationConfig
from crc.protocol.split import Split, warn_singular_qda
from crc.protocol.vertical import make_feature_split
from crc.tables.datasets import load_dataset


def load_for(config: SimulationConfig) -> Dataset:
    """Load the configured data set (the synthetic one sized to fit the run)."""
    train = config.train_size
    # a count, or the smallest total whose test fraction leaves room for the training set
    test = int(config.test_size) if config.test_size >= 1 else int(math.ceil(train * config.test_size / (1 - config.test_size))) + 1
    return load_dataset(config.data, label=config.label, categorical=config.categorical, synthetic_size=train + test,
                        seed=config.seed)


def make_split(dataset: Dataset, config: SimulationConfig, seed) -> Split:
    """Draw the training and test sets and share the training set out over the nodes.

    A class without training instance is allowed (``Split.absent`` names it; callers warn), and so is a data set too
    small for the test fraction (``Split.test_wanted`` says how many it asked for; callers note it). A vertical or
    hybrid partition shares out features too (``crc.protocol.vertical``).
    """
    if config.feature_partition is not None:
        return make_feature_split(dataset, config, seed)
    rng = np.random.default_rng(seed)
    train, test = split_indices(len(dataset), config.train_size, config.test_size, seed=rng, source=dataset.name)
    _, wanted = split_counts(len(dataset), config.train_size, config.test_size)
    absent = tuple(dataset.schema.classes[k] for k in sorted(set(range(dataset.schema.n_classes))
                                                            - set(np.unique(dataset.y[train]).tolist())))
    schema = dataset.schema.standardized(dataset.x[train][:, dataset.schema.continuous])
    model = make_model(config.model, schema, **config.model_options)
    x_train = standardize(schema, dataset.x[train])
    with named_errors(dataset.name):
        phi_train = model.features(x_train)
        phi_test = model.features(standardize(schema, dataset.x[test]))
    sizes = local_sizes(config.train_size, config.nodes, skew=config.size_skew, rng=rng)
    design = design_matrix(schema, x_train) if config.partition in ("covariate", "joint") else None
    parts = partition(config.partition, dataset.y[train], sizes, design=design, alpha=config.alpha, rng=rng)
    if config.model == "qda":
        warn_singular_qda(len(schema.continuous), dataset.y[train], schema.n_classes)
    return Split(model, phi_train, dataset.y[train], phi_test, dataset.y[test], parts, x_train, train, test, absent, wanted)


def repeat_seeds(seed: int, repeat: int) -> tuple[np.random.SeedSequence, ...]:
    """Seeds of the split, the graph and the evaluation sample of one repeat (the same in every command)."""
    return tuple(np.random.SeedSequence(seed, spawn_key=(repeat,)).spawn(3))


def evaluation_sample(split: Split, config: SimulationConfig, seed: np.random.SeedSequence):
    """Node indices and train/test instance indices used for evaluation (sampled when large).

    The instance samples do not depend on the number of nodes, so centralized
    errors are shared by runs that differ only in their network or partition.
    """
    node_seed, instance_seed = seed.spawn(2)
    nodes = np.arange(config.nodes)
    if config.nodes > config.eval_nodes:
        nodes = np.sort(np.random.default_rng(node_seed).choice(config.nodes, config.eval_nodes, replace=False))
    rng = np.random.default_rng(instance_seed)

    def sample(m: int) -> np.ndarray:
        return np.sort(rng.choice(m, config.eval_instances, replace=False)) if m > config.eval_instances else np.arange(m)

    return nodes, sample(len(split.y_train)), sample(len(split.y_test))


@dataclass
class Repeat:
    """One repeat's split, graph seed and evaluation sample, shared by the simulator and real launches."""

    index: int
    split: Split
    graph_seed: np.random.SeedSequence
    eval_nodes: np.ndarray
    train_idx: np.ndarray
    test_idx: np.ndarray

    def _train_errors(self, stats: np.ndarray) -> np.ndarray:
        split = self.split
        return metrics.node_errors(split.model, stats, split.phi_train[self.train_idx], split.y_train[self.train_idx])

    def errors(self, stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Train and test errors (n,) of node statistics (n, size) on the evaluation sample."""
        split = self.split
        return (self._train_errors(stats),
                metrics.node_errors(split.model, stats, split.phi_test[self.test_idx], split.y_test[self.test_idx]))

    def test_f1(self, stats: np.ndarray) -> np.ndarray:
        """F1 on the test sample (``crc.core.metrics.f1_scores``) of node statistics (n, size), shape (n,)."""
        split = self.split
        return metrics.node_f1(split.model, stats, split.phi_test[self.test_idx], split.y_test[self.test_idx])

    def evaluate(self, stats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Train errors, test errors and mean test log p(x, y) (in standardized units), each (n,), of node
        statistics (n, size) on the evaluation sample."""
        split = self.split
        test_err, test_loglik = metrics.node_errors_and_log_likelihood(split.model, stats, split.phi_test[self.test_idx],
                                                                       split.y_test[self.test_idx])
        return self._train_errors(stats), test_err, test_loglik

    @property
    def sampled(self) -> bool:
        split = self.split
        return bool(len(self.eval_nodes) < len(split.parts) or len(self.train_idx) < len(split.y_train)
                    or len(self.test_idx) < len(split.y_test))


def prepare_repeat(dataset: Dataset, config: SimulationConfig, repeat: int) -> Repeat:
    """Draw repeat number ``repeat``: its split, graph seed and evaluation sample."""
    split_seed, graph_seed, eval_seed = repeat_seeds(config.seed, repeat)
    split = make_split(dataset, config, split_seed)
    return Repeat(repeat, split, graph_seed, *evaluation_sample(split, config, eval_seed))


def ess_for(config: SimulationConfig) -> float:
    """``--ess``, or Eq. 5's ``m / (lr n)``."""
    return float(config.ess or default_ess(config.train_size, config.nodes, config.lr))
