"""The simulator: one data set, a network, CRC against centralized ML and RC, all peers in one process.

The network is passed in as a function ``network(n, seed) -> Mixing`` so that
this package needs no graph library. A mixing object that has a ``density()``
method (a topology schedule) has its density recorded.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from crc.core import acceleration as accel
from crc.core.attacks import byzantine_messages, byzantine_nodes
from crc.core.data import Dataset
from crc.core.distributed_noise import DistributedNoise
from crc.core.engine import CRCEngine, LocalData, Mixing
from crc.core.plausibility import count_slack, plausible
from crc.core.privacy import Privacy, clip_standardized, release
from crc.protocol.baseline import mixture_of_nodes
from crc.protocol.central import CentralCache, CentralProgress, central_results
from crc.protocol.config import SimulationConfig
from crc.protocol.fedpc import fedpc_results
from crc.protocol.loss import loss_seed, lossy_mixing
from crc.protocol.neighbourhoods import check_graph_protectable
from crc.protocol.network_sum import check_relayable, masking_summary, whole_network_mixing
from crc.protocol.repeat import Repeat, ess_for, load_for, prepare_repeat
from crc.protocol.results import add_honest, central_json, repeat_results, results_json
from crc.protocol.vertical import BestIterate, describe, resolve_partition

BYZANTINE_STREAM = 0xB1A5
"""Seeds the choice of Byzantine nodes and their noise apart from the split, graph and evaluation seeds."""
PRIVACY_STREAM = 0xD1FF
"""Seeds the peers' privacy noise apart from every other stream."""

Network = Callable[[int, np.random.SeedSequence], Mixing]
"""``network(n, seed)``: the mixing (matrix or per-round function) of one repeat's graph."""


def byzantine_for(rep: Repeat, config: SimulationConfig) -> tuple[np.ndarray, Callable | None]:
    """The repeat's Byzantine nodes (seeded) and the engine's ``messages`` hook that poisons what they send (None
    without any)."""
    if not config.byzantine:
        return np.zeros(0, dtype=np.int64), None
    rng = np.random.default_rng([config.seed, rep.index, BYZANTINE_STREAM])
    nodes = byzantine_nodes(config.nodes, config.byzantine, rng)
    return nodes, byzantine_messages(rep.split.model, nodes, config.attack, rng)


def receivers_check(rep: Repeat, config: SimulationConfig, privacy: Privacy | None) -> Callable:
    """The engine's ``accept`` hook: the wire's plausibility check (``crc.core.plausibility``) of every poisoned
    message, with the privacy slack of the run's noise."""
    model, ess = rep.split.model, ess_for(config)
    slack = count_slack(model, None if privacy is None else privacy.sigma)
    return lambda messages: plausible(messages, model, ess, slack=slack)


def private_release(rep: Repeat, config: SimulationConfig, privacy: Privacy | None) -> Callable | None:
    """The engine's ``release`` hook adding every peer's privacy noise (seeded), None without local noise."""
    if privacy is None or privacy.noise != "local":
        return None
    rng = np.random.default_rng([config.seed, rep.index, PRIVACY_STREAM])
    return lambda stats: release(rep.split.model, stats, privacy.sigma, rng)


def first_graph(mixing: Mixing):
    """The mixing matrix of round 1 (n, n)."""
    return mixing(1) if callable(mixing) else mixing


def distributed_noise(rep: Repeat, config: SimulationConfig, privacy: Privacy | None, mixing) -> Callable | None:
    """The engine's ``noise`` hook: every aggregate's share of the noise of its sum (``config.sums``, seeded), None
    without distributed noise."""
    if privacy is None or privacy.noise != "distributed":
        return None
    return DistributedNoise(rep.split.model, config.sums(first_graph(mixing)), privacy.sigma,
                            privacy.colluders, np.random.default_rng([config.seed, rep.index, PRIVACY_STREAM]), dropouts=privacy.dropouts)


def make_engine(rep: Repeat, config: SimulationConfig, network: Network,
                privacy: Privacy | None = None) -> tuple[CRCEngine, Mixing]:
    """The CRC engine of a repeat (its start, memory and safeguard as configured) and its mixing
    (with ``config.loss``, each round's mixing averages only the messages that arrived, or the last heard in place of a
    lost one: ``crc.core.acceleration.keeps_last_heard``; with ``config.sum_over`` network, the whole network's mean on
    a connected graph, ``crc.protocol.network_sum``). With ``privacy`` the
    peers learn from their data clipped to its bound and release noisy statistics."""
    split = rep.split
    phi = split.phi_train if privacy is None else split.model.features(clip_standardized(split.model.schema, split.x_train,
                                                                                          privacy.clip))
    local = LocalData.from_parts(phi, split.y_train, split.parts)
    mixing = network(config.nodes, rep.graph_seed)
    if config.sum_over == "network":
        check_relayable(first_graph(mixing))
        mixing = whole_network_mixing(config.nodes)
    if config.secure_aggregation:
        check_graph_protectable(first_graph(mixing), config.dp_colluders, config.dp_dropouts)
    messages = byzantine_for(rep, config)[1]
    delivered, last_heard = mixing, False
    if config.loss > 0:
        last_heard = messages is None and not config.secure_aggregation and accel.keeps_last_heard(split.model,
                                                                                                  config.acceleration)
        delivered = lossy_mixing(mixing, config.loss, [loss_seed(config.seed, rep.index, v) for v in range(config.nodes)],
                                 secure_aggregation=config.secure_aggregation, colluders=config.dp_colluders)
    engine = CRCEngine(rep.split.model, local, delivered, ess=ess_for(config), iterations=config.iters,
                       aggregation=config.aggregate, messages=messages,
                       accept=None if messages is None else receivers_check(rep, config, privacy), acceleration=config.acceleration,
                       release=private_release(rep, config, privacy), noise=distributed_noise(rep, config, privacy, mixing),
                       graph=mixing, last_heard=last_heard, release_every=config.release_every)
    return engine, mixing


def run_repeat(dataset: Dataset, config: SimulationConfig, network: Network, repeat: int, progress=None, *,
               cache: CentralCache | None = None, central_progress: CentralProgress | None = None) -> dict:
    """One repeat: split, ML, RC, CRC, and its results object."""
    rep = prepare_repeat(dataset, config, repeat)
    graph = network(config.nodes, rep.graph_seed)  # a graph the run cannot take is refused before centralized RC
    privacy = config.privacy(rep.split.model, first_graph(graph))
    engine, _ = make_engine(rep, config, lambda n, seed: graph, privacy)
    central = central_results(dataset, config, rep, cache, central_progress)
    curve = []
    vertical = config.feature_partition is not None and config.feature_partition.kind == "vertical"
    best = BestIterate(rep.split.model, rep.split.phi_train, rep.split.y_train, rep.split.parts, engine.stats) if vertical else None

    def on_round(round_: int, stats: np.ndarray) -> None:
        if best is not None:
            best.offer(stats)
        if config.curve:
            train_err, test_err = rep.errors(stats[rep.eval_nodes])
            curve.append({"round": round_, "train_error": float(train_err.mean()), "test_error": float(test_err.mean()),
                          "train_std": float(train_err.std()), "test_std": float(test_err.std())})
        if progress is not None:
            progress(round_)

    final = engine.run(config.rounds, on_round)
    if best is not None:
        final = best.best
    result = repeat_results(rep, central, final[rep.eval_nodes], ess=engine.ess)
    result["rounds"] = curve
    if config.feature_partition is not None:
        result["feature_partition"] = describe(config, rep.split.model)
    if privacy is not None:
        result["privacy"] = privacy.to_json()
    if config.secure_aggregation:
        result["secure_aggregation"] = masking_summary(config.sum_over, first_graph(graph), config.dp_colluders)
    if config.byzantine:
        add_honest(result, rep, final[rep.eval_nodes], rep.eval_nodes, byzantine_for(rep, config)[0])
        result["honest"]["refused"] = engine.refused  # poisoned messages the receivers' check left out
    if hasattr(graph, "density"):
        result["density"] = float(graph.density(config.rounds))
    if config.baseline:
        if config.feature_partition is None:
            result["mixture_of_nodes"] = mixture_of_nodes(rep)
        else:
            result["fedpc"] = fedpc_results(rep, dataset, seed=config.seed)
    return result


def simulate(config: SimulationConfig, network: Network, *, dataset: Dataset | None = None, progress=None,
             cache: CentralCache | None = None, central_progress: CentralProgress | None = None) -> dict:
    """Run ``config.repeats`` repeats and return the results JSON object of DESIGN.md.

    ``progress(repeat, round)``, if given, is called after every round, ``central_progress(what, iteration,
    at_most)`` after every iteration of the centralized RC runs (``crc.protocol.central``); ``cache``
    stores the centralized errors so that runs on the same split share them.
    """
    config.validate()
    dataset = dataset if dataset is not None else load_for(config)
    if config.feature_partition is not None:
        config = resolve_partition(config, dataset)
    repeats = []
    for index in range(config.repeats):
        hook = (lambda round_, index=index: progress(index, round_)) if progress else None
        repeats.append(run_repeat(dataset, config, network, index, hook, cache=cache, central_progress=central_progress))
    return results_json(config, dataset, repeats)


def simulate_central(config: SimulationConfig, *, dataset: Dataset | None = None, cache: CentralCache | None = None) -> dict:
    """Centralized ML and RC only, on pooled training sets of ``config.train_size`` (no network).

    The seeds, splits and means are those of ``simulate``, so its figures match a
    simulation's for the same configuration.
    """
    config.validate()
    dataset = dataset if dataset is not None else load_for(config)
    repeats = [central_results(dataset, config, prepare_repeat(dataset, config, index), cache)
               for index in range(config.repeats)]
    return central_json(config, dataset, repeats)
