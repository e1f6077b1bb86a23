"""The simulator: one data set, a network, CRC against centralized ML and RC.

It follows section IV of the paper: the pooled training set of ``nodes x
local_size`` instances and a disjoint test set are drawn at random; continuous
features are standardized with the pooled training mean and std; every node's
error is measured on the *global* training set and on the test set.

The network is passed in as a function ``network(n, seed) -> Mixing`` so that
this module needs no graph library. A mixing object that has a ``density()``
method (a topology schedule) has its density recorded.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Protocol

import numpy as np

from crc.core import metrics
from crc.core.calibration import DEFAULT_LR, labelled_statistics, rc
from crc.core.data import Dataset, split_indices, standardize
from crc.core.datasets import load_dataset
from crc.core.engine import CRCEngine, LocalData, Mixing, default_ess
from crc.core.errors import CRCError
from crc.core.models import CIRCUIT_DEFAULTS, GenerativeModel, make_model, model_options
from crc.core.partition import PARTITIONS, design_matrix, local_sizes, partition

DEFAULT_EVAL_NODES = 1000
DEFAULT_EVAL_INSTANCES = 20_000


@dataclass(frozen=True)
class SimulationConfig:
    """Options of one simulated experiment; field names are those of the results JSON."""

    data: str = "letter"
    label: str | None = None
    model: str = "nb"
    structure: str = CIRCUIT_DEFAULTS["structure"]
    components: int = CIRCUIT_DEFAULTS["components"]
    depth: int = CIRCUIT_DEFAULTS["depth"]
    repetitions: int = CIRCUIT_DEFAULTS["repetitions"]
    sums: int = CIRCUIT_DEFAULTS["sums"]
    structure_seed: int = CIRCUIT_DEFAULTS["structure_seed"]
    topology: str = "tree"
    period: int | None = None
    nodes: int = 50
    local_size: int = 50
    pooled_size: int | None = None
    partition: str = "iid"
    alpha: float = 1.0
    size_skew: float = 0.0
    rounds: int = 64
    iters: int = 1
    lr: float = DEFAULT_LR
    ess: float | None = None
    test_size: float = 0.25
    seed: int = 0
    repeats: int = 1
    curve: bool = False
    baseline: bool = False
    eval_nodes: int = DEFAULT_EVAL_NODES
    eval_instances: int = DEFAULT_EVAL_INSTANCES

    def validate(self) -> None:
        checks = [
            (self.nodes >= 1, f"--nodes must be at least 1, got {self.nodes}"),
            (self.local_size >= 1, f"--local-size must be at least 1, got {self.local_size}"),
            (self.pooled_size is None or self.pooled_size >= self.nodes,
             f"--train-size {self.pooled_size} leaves some of the {self.nodes} nodes without data"),
            (self.partition in PARTITIONS, f"--partition must be one of {', '.join(PARTITIONS)}, got {self.partition!r}"),
            (self.alpha > 0 and math.isfinite(self.alpha), f"--alpha must be a positive number, got {self.alpha}"),
            (self.size_skew >= 0 and math.isfinite(self.size_skew), f"--size-skew must be >= 0, got {self.size_skew}"),
            (self.rounds >= 1, f"--rounds must be at least 1, got {self.rounds}"),
            (self.iters >= 1, f"--iters must be at least 1, got {self.iters}"),
            (self.lr > 0 and math.isfinite(self.lr), f"--lr must be a positive number, got {self.lr}"),
            (self.ess is None or (self.ess > 0 and math.isfinite(self.ess)), f"--ess must be positive, got {self.ess}"),
            (self.test_size > 0 and math.isfinite(self.test_size), f"--test-size must be positive, got {self.test_size}"),
            (self.repeats >= 1, f"--repeats must be at least 1, got {self.repeats}"),
            (self.components >= 1, f"--components must be at least 1, got {self.components}"),
            (min(self.depth, self.repetitions, self.sums) >= 1, "--depth, --repetitions and --sums must be at least 1"),
            (self.period is None or self.period >= 1, f"--period must be at least 1, got {self.period}"),
            (self.eval_nodes >= 1 and self.eval_instances >= 1, "evaluation sample sizes must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise CRCError(message)

    @property
    def model_options(self) -> dict:
        """Structure settings of the model (circuits only)."""
        return model_options(self.model, **{name: getattr(self, name) for name in CIRCUIT_DEFAULTS})

    @property
    def train_size(self) -> int:
        """Size m of the pooled training set: ``pooled_size`` if set (fragmentation), else n x m_v."""
        return self.pooled_size if self.pooled_size is not None else self.nodes * self.local_size


@dataclass
class Split:
    """One repeat's standardized training and test data and the nodes' parts.

    ``train_rows`` and ``test_rows`` index the data set; ``parts`` index the training set.
    """

    model: GenerativeModel
    phi_train: np.ndarray
    y_train: np.ndarray
    phi_test: np.ndarray
    y_test: np.ndarray
    parts: list
    train_rows: np.ndarray
    test_rows: np.ndarray


def load_for(config: SimulationConfig) -> Dataset:
    """Load the configured data set (the synthetic one sized to fit the run)."""
    train = config.train_size
    if config.test_size >= 1:
        test = int(config.test_size)
    else:  # the smallest total whose test fraction leaves room for the training set
        test = int(math.ceil(train * config.test_size / (1 - config.test_size))) + 1
    return load_dataset(config.data, label=config.label, synthetic_size=train + test, seed=config.seed)


def make_split(dataset: Dataset, config: SimulationConfig, seed, *, require_all_classes: bool = True) -> Split:
    """Draw the training and test sets and share the training set out over the nodes.

    A class without training instance is an error unless ``require_all_classes``
    is false (centralized learning curves on tiny samples).
    """
    rng = np.random.default_rng(seed)
    train, test = split_indices(len(dataset), config.train_size, config.test_size, seed=rng)
    absent = sorted(set(range(dataset.schema.n_classes)) - set(np.unique(dataset.y[train]).tolist()))
    if absent and require_all_classes:
        names = ", ".join(repr(dataset.schema.classes[k]) for k in absent)
        raise CRCError(f"class(es) {names} have no instance in the training split; use more training data or drop them")
    schema = dataset.schema.standardized(dataset.x[train][:, dataset.schema.continuous])
    model = make_model(config.model, schema, **config.model_options)
    x_train = standardize(schema, dataset.x[train])
    phi_train = model.features(x_train)
    phi_test = model.features(standardize(schema, dataset.x[test]))
    sizes = local_sizes(config.train_size, config.nodes, skew=config.size_skew, rng=rng)
    design = design_matrix(schema, x_train) if config.partition in ("covariate", "joint") else None
    parts = partition(config.partition, dataset.y[train], sizes, design=design, alpha=config.alpha, rng=rng)
    return Split(model, phi_train, dataset.y[train], phi_test, dataset.y[test], parts, train, test)


def repeat_seeds(seed: int, repeat: int) -> tuple[np.random.SeedSequence, ...]:
    """Seeds of the split, the graph and the evaluation sample of one repeat (the same in every command)."""
    return tuple(np.random.SeedSequence(seed, spawn_key=(repeat,)).spawn(3))


def _evaluation_sample(split: Split, config: SimulationConfig, seed: np.random.SeedSequence):
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


class CentralCache(Protocol):
    """Storage for centralized ML/RC errors, shared by runs on the same pooled split."""

    def get(self, key: dict) -> dict | None: ...

    def put(self, key: dict, value: dict) -> None: ...


def _central_key(dataset: Dataset, config: SimulationConfig, repeat: int) -> dict:
    """Everything the centralized errors of one repeat depend on."""
    return {"version": 2, "data": config.data, "label": config.label, "model_options": config.model_options, "schema": dataset.schema.fingerprint, "instances": len(dataset),
            "model": config.model, "train_size": config.train_size, "test_size": config.test_size, "lr": config.lr,
            "iterations": config.rounds, "seed": config.seed, "repeat": repeat, "eval_instances": config.eval_instances}


def _central_errors(split: Split, config: SimulationConfig, errors, loglik, cache: CentralCache | None, key: dict) -> dict:
    """Train and test errors of centralized ML and RC on the pooled training set, from the cache if there."""
    central = cache.get(key) if cache is not None else None
    if central is None:
        ml_stats = split.model.fit_ml(split.phi_train, split.y_train)
        rc_stats = rc(split.model, split.phi_train, split.y_train, lr=config.lr, iterations=config.rounds).stats
        central = {}
        for name, stats in (("ml", ml_stats), ("rc", rc_stats)):
            train_err, test_err = errors(stats[None, :])
            central[name] = {"train_error": float(train_err[0]), "test_error": float(test_err[0]),
                             "test_loglik": float(loglik(stats[None, :])[0])}
        if cache is not None:
            cache.put(key, central)
    return central


@dataclass
class Repeat:
    """One repeat's split, graph seed and evaluation sample, shared by the simulator and real launches."""

    index: int
    split: Split
    graph_seed: np.random.SeedSequence
    eval_nodes: np.ndarray
    train_idx: np.ndarray
    test_idx: np.ndarray

    def errors(self, stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Train and test errors (n,) of node statistics (n, size) on the evaluation sample."""
        split = self.split
        return (metrics.node_errors(split.model, stats, split.phi_train[self.train_idx], split.y_train[self.train_idx]),
                metrics.node_errors(split.model, stats, split.phi_test[self.test_idx], split.y_test[self.test_idx]))

    def test_log_likelihood(self, stats: np.ndarray) -> np.ndarray:
        """Mean test log p(x, y) (n,) of node statistics (n, size), in standardized units."""
        split = self.split
        return metrics.node_log_likelihood(split.model, stats, split.phi_test[self.test_idx], split.y_test[self.test_idx])

    def mixture_of_nodes(self) -> dict:
        """The federated-circuits baseline: each node's ML model on its own data, mixed by local sizes."""
        split = self.split
        local = LocalData.from_parts(split.phi_train, split.y_train, split.parts)
        stats = local_ml(split.model, local)
        weights = local.sizes / local.sizes.sum()
        result = {}
        for name, phi, y in (("train", split.phi_train[self.train_idx], split.y_train[self.train_idx]),
                             ("test", split.phi_test[self.test_idx], split.y_test[self.test_idx])):
            scores = metrics.mixture_log_joint(split.model, stats, weights, phi)
            result[f"{name}_error"] = float(np.mean(scores.argmax(axis=1) != y))
            if name == "test":
                result["test_loglik"] = float(np.take_along_axis(scores, y[:, None], axis=1).mean())
        return result

    @property
    def sampled(self) -> bool:
        split = self.split
        return bool(len(self.eval_nodes) < len(split.parts) or len(self.train_idx) < len(split.y_train)
                    or len(self.test_idx) < len(split.y_test))


def local_ml(model: GenerativeModel, local: LocalData) -> np.ndarray:
    """Every node's maximum-likelihood statistics on its own data (EM for circuits), (n, size)."""
    if model.latent:
        return model.fit_ml(local.phi, local.y, mask=local.mask)
    return labelled_statistics(model, local.phi, local.y, local.mask)


def prepare_repeat(dataset: Dataset, config: SimulationConfig, repeat: int) -> Repeat:
    split_seed, graph_seed, eval_seed = repeat_seeds(config.seed, repeat)
    split = make_split(dataset, config, split_seed)
    nodes, train_idx, test_idx = _evaluation_sample(split, config, eval_seed)
    return Repeat(repeat, split, graph_seed, nodes, train_idx, test_idx)


def ess_for(config: SimulationConfig) -> float:
    """``--ess``, or Eq. 5's ``m / (lr n)``."""
    return float(config.ess or default_ess(config.train_size, config.nodes, config.lr))


def central_results(dataset: Dataset, config: SimulationConfig, rep: Repeat, cache: CentralCache | None = None) -> dict:
    """``{"ml": ..., "rc": ...}`` errors of centralized learning on the repeat's pooled training set."""
    return _central_errors(rep.split, config, rep.errors, rep.test_log_likelihood, cache, _central_key(dataset, config, rep.index))


def crc_results(rep: Repeat, central: dict, final: np.ndarray, *, ess: float, nodes: np.ndarray | None = None) -> dict:
    """The repeat's results object from the nodes' final statistics (n_eval, size).

    ``nodes`` are the node indices the rows of ``final`` belong to (default: the
    evaluation sample); local sizes are reported over all nodes of the split.
    """
    train_err, test_err = rep.errors(final)
    nodes = rep.eval_nodes if nodes is None else nodes
    result = {
        "ml": central["ml"],
        "rc": central["rc"],
        "crc": {"train_error": float(train_err.mean()), "test_error": float(test_err.mean()),
                "train_std": float(train_err.std()), "test_std": float(test_err.std()),
                "test_loglik": float(rep.test_log_likelihood(final).mean())},
        "rounds": [],
        "evaluation": {"nodes": int(len(nodes)), "train_instances": int(len(rep.train_idx)),
                       "test_instances": int(len(rep.test_idx)),
                       "sampled": bool(rep.sampled or len(nodes) < len(rep.split.parts))},
        "ess": float(ess),
        "local_sizes": {"min": int(min(map(len, rep.split.parts))), "max": int(max(map(len, rep.split.parts)))},
    }
    result["train_gap"] = result["crc"]["train_error"] - result["rc"]["train_error"]
    result["test_gap"] = result["crc"]["test_error"] - result["rc"]["test_error"]
    return result


def make_engine(rep: Repeat, config: SimulationConfig, network: Callable[[int, object], Mixing]) -> tuple[CRCEngine, Mixing]:
    """The CRC engine of a repeat, every node at ``uniform(m0)``, and its mixing."""
    local = LocalData.from_parts(rep.split.phi_train, rep.split.y_train, rep.split.parts)
    mixing = network(config.nodes, rep.graph_seed)
    return CRCEngine(rep.split.model, local, mixing, ess=ess_for(config), iterations=config.iters), mixing


def run_repeat(dataset: Dataset, config: SimulationConfig, network: Callable[[int, object], Mixing], repeat: int,
               progress=None, *, cache: CentralCache | None = None) -> dict:
    """One repeat: split, ML, RC, CRC, and the errors of DESIGN.md's results JSON."""
    rep = prepare_repeat(dataset, config, repeat)
    central = central_results(dataset, config, rep, cache)
    engine, mixing = make_engine(rep, config, network)
    curve = []

    def on_round(round_: int, stats: np.ndarray) -> None:
        if config.curve:
            train_err, test_err = rep.errors(stats[rep.eval_nodes])
            curve.append({"round": round_, "train_error": float(train_err.mean()), "test_error": float(test_err.mean()),
                          "train_std": float(train_err.std()), "test_std": float(test_err.std())})
        if progress is not None:
            progress(round_)

    final = engine.run(config.rounds, on_round)
    result = crc_results(rep, central, final[rep.eval_nodes], ess=engine.ess)
    result["rounds"] = curve
    if hasattr(mixing, "density"):
        result["density"] = float(mixing.density(config.rounds))
    if config.baseline:
        result["mixture_of_nodes"] = rep.mixture_of_nodes()
    return result


def _mean_of(dicts: list[dict]) -> dict:
    return {key: float(np.mean([d[key] for d in dicts])) for key in dicts[0]}


def simulate(config: SimulationConfig, network: Callable[[int, object], Mixing], *, dataset: Dataset | None = None,
             progress=None, cache: CentralCache | None = None) -> dict:
    """Run ``config.repeats`` repeats and return the results JSON object of DESIGN.md.

    ``network(n, seed)`` returns the mixing (matrix or per-round function) for one
    repeat; ``progress(repeat, round)``, if given, is called after every round;
    ``cache`` stores the centralized errors so that runs on the same split share them.
    """
    config.validate()
    dataset = dataset if dataset is not None else load_for(config)
    repeats = []
    for index in range(config.repeats):
        hook = (lambda round_, index=index: progress(index, round_)) if progress else None
        repeats.append(run_repeat(dataset, config, network, index, hook, cache=cache))
    ess = repeats[0]["ess"]
    summary = {
        "config": {**asdict(config), "ess": ess, "instances": len(dataset), "classes": dataset.schema.n_classes},
        "ml": _mean_of([r["ml"] for r in repeats]),
        "rc": _mean_of([r["rc"] for r in repeats]),
        "crc": _mean_of([r["crc"] for r in repeats]),
        "train_gap": float(np.mean([r["train_gap"] for r in repeats])),
        "test_gap": float(np.mean([r["test_gap"] for r in repeats])),
        "rounds": [_mean_of([r["rounds"][t] for r in repeats]) for t in range(len(repeats[0]["rounds"]))],
        "evaluation": repeats[0]["evaluation"],
        "local_sizes": {"min": min(r["local_sizes"]["min"] for r in repeats), "max": max(r["local_sizes"]["max"] for r in repeats)},
        "repeats": repeats,
    }
    if "mixture_of_nodes" in repeats[0]:
        summary["mixture_of_nodes"] = _mean_of([r["mixture_of_nodes"] for r in repeats])
    if "density" in repeats[0]:
        summary["density"] = float(np.mean([r["density"] for r in repeats]))
    for row in summary["rounds"]:
        row["round"] = int(row["round"])
    return summary


def simulate_central(config: SimulationConfig, *, dataset: Dataset | None = None, cache: CentralCache | None = None) -> dict:
    """Centralized ML and RC only, on pooled training sets of ``config.train_size`` (no network).

    Returns ``{"config", "ml", "rc", "repeats"}`` with the same seeds, splits and
    means as ``simulate``, so its figures match a simulation's for the same config.
    """
    config.validate()
    dataset = dataset if dataset is not None else load_for(config)
    repeats = []
    for index in range(config.repeats):
        split_seed, graph_seed, eval_seed = repeat_seeds(config.seed, index)
        split = make_split(dataset, config, split_seed, require_all_classes=False)
        rep = Repeat(index, split, graph_seed, *_evaluation_sample(split, config, eval_seed))
        repeats.append(central_results(dataset, config, rep, cache))
    return {"config": {**asdict(config), "instances": len(dataset), "classes": dataset.schema.n_classes},
            "ml": _mean_of([r["ml"] for r in repeats]), "rc": _mean_of([r["rc"] for r in repeats]), "repeats": repeats}
