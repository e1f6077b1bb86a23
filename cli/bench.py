"""``crc bench``: measures the CRC engine, the slower models and real peers; prints JSON."""

from __future__ import annotations

import click

from crc.bench import NETWORK_ROUNDS, REPEATS, SCENARIOS, VERTICAL_BLOCKS, VERTICAL_DATASETS
from crc.cli.finite import FiniteFloatRange
from crc.cli.model_options import with_model_options
from crc.cli.options import out_option
from crc.cli.output import emit_json
from crc.protocol import SimulationConfig


def _names(listed: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in listed.split(",") if name.strip())


def _group_sizes(ctx, param, value: str) -> tuple[int, ...]:
    """``--vertical-blocks``: whole numbers from 1."""
    try:
        sizes = tuple(int(k) for k in _names(value))
    except ValueError:
        raise click.BadParameter(f"{value!r}: comma-separated whole numbers, e.g. 2,4,8") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{value!r}: at least one group size, each 1 or more")
    return sizes


@click.command()
@click.option("--only", type=click.Choice(["engine", "scale", "models", "peers", "vertical", "network"]), default=None,
              help="Run one part only.")
@click.option("--data", default="letter", show_default=True, help="Data set of the engine and peers parts.")
@with_model_options
@click.option("--repeats", type=click.IntRange(min=1), default=REPEATS, show_default=True,
              help="Interleaved runs of the engine and models parts; the best of each is reported.")
@click.option("--scale-nodes", type=click.IntRange(min=2), default=10_000, show_default=True, help="Peers of the scale run.")
@click.option("--scale-local-size", type=click.IntRange(min=1), default=50, show_default=True,
              help="Local instances per peer of the scale run.")
@click.option("--vertical-datasets", default=",".join(VERTICAL_DATASETS), show_default=True,
              help="Comma-separated bundled data sets of the vertical part.")
@click.option("--vertical-blocks", default=",".join(map(str, VERTICAL_BLOCKS)), show_default=True, callback=_group_sizes,
              help="Comma-separated group sizes K (feature blocks) of the vertical part.")
@click.option("--network-data", default="twonorm", show_default=True, help="Data set of the network part.")
@click.option("--network-rounds", type=click.IntRange(min=1), default=NETWORK_ROUNDS, show_default=True,
              help="Rounds of the network part (its runs must outlast --partition-seconds).")
@click.option("--network-topology", default="regular:4", show_default=True, help="Graph of the network part's 16 peers.")
@click.option("--network-algorithm", type=click.Choice(["accelerated", "paper"]), default="accelerated", show_default=True,
              help="Algorithm of the network part's peers (the peers' default: accelerated).")
@click.option("--partition-seconds", type=FiniteFloatRange(min=0), default=30.0, show_default=True,
              help="How long the network part's partition lasts.")
@click.option("--network-scenarios", default=",".join(SCENARIOS), show_default=True,
              help="Comma-separated scenarios of the network part (loopback and wan always run: the bounds need them).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the splits and graphs.")
@out_option("the JSON")
def bench(only, data, repeats, scale_nodes, scale_local_size, vertical_datasets, vertical_blocks, network_data, network_rounds,
          network_topology, network_algorithm, partition_seconds, network_scenarios, seed, out, **model):
    """Measure the CRC engine; prints JSON.

    engine: the paper's algorithm in its default setting (50 peers x 50
    instances, 64 rounds, random tree) on --data: the vectorized engine beside a per-node Python loop and
    beside the machine's floor (GFLOP/s of one 2000 x 2000 float64 matrix
    product, on one thread and on the default BLAS threads), all interleaved in
    one process, best of --repeats; with the run's FLOP count and GFLOP/s.
    scale: the paper's algorithm on 'synthetic' data, --scale-nodes peers x
    --scale-local-size instances, 64 rounds: setup, rounds and sampled evaluation times, peak
    traced memory of each, maximum resident set size.
    models: one default repeat of `crc simulate` with naive Bayes beside the
    region-graph circuit on letter (target: at most 10 times naive Bayes) and
    beside QDA on optdigits (target: 5 times), interleaved, best of --repeats
    (the model options above do not apply).
    peers: 16 real `crc node` processes on loopback on a random tree, 64
    rounds on --data, against `crc simulate` of the same run; with CURVE keys
    and, in the same run, in plaintext (curve_cost: round p50/p99 and the
    bytes a message takes on a TCP connection, counted by a relay) and with
    secure aggregation (secure_aggregation_cost: messages, bytes and round
    times beside the CURVE run's, and the fraction of messages protected).
    vertical: for each of --vertical-datasets and each K of --vertical-blocks,
    one vertical group of K real peers (`crc launch --partition vertical:K`,
    64 rounds) beside K horizontal peers sharing the same training instances,
    in the same run: set-up (alignment and start), round p50/p99, bytes a peer
    sends a round, test gap to RC.
    network: 16 real peers (--network-data, --network-topology,
    --network-rounds, 1 s timeout) with every directed edge through a
    fault-injecting relay of 50 ms +- 20 ms each way (crc.bench.relay):
    on loopback, over the relay, with a --partition-seconds partition into
    two halves, with the best-connected peer killed (SIGKILL) at round 5 and
    restarted from its checkpoint, and with it started 20 rounds late. Each:
    wall time against its bound, messages lost and rounds marked down between
    live peers and on the faulted links, final test gap against the wan run's.
    """
    from crc.bench import engine_versus_loop, models_versus_nb, peers_run, scale_run, vertical_run  # on use
    from crc.bench.network import network_run

    report = {}
    if only in (None, "engine"):
        report["engine"] = engine_versus_loop(SimulationConfig.from_settings(data=data, seed=seed, algorithm="paper", **model),
                                              repeats)
    if only in (None, "scale"):
        report["scale"] = scale_run(SimulationConfig.from_settings(data="synthetic", nodes=scale_nodes, local_size=scale_local_size,
                                                                   seed=seed, algorithm="paper", **model))
    if only in (None, "models"):
        report["models"] = models_versus_nb(repeats, seed)
    if only in (None, "peers"):
        report["peers"] = peers_run(SimulationConfig.from_settings(data=data, nodes=16, seed=seed, **model))
    if only in (None, "vertical"):
        report["vertical"] = vertical_run(_names(vertical_datasets), vertical_blocks,
                                          seed=seed, **model)
    if only in (None, "network"):
        unknown = set(_names(network_scenarios)) - set(SCENARIOS)
        if unknown:
            raise click.BadParameter(f"{sorted(unknown)}: choose among {', '.join(SCENARIOS)}", param_hint="--network-scenarios")
        report["network"] = network_run(SimulationConfig.from_settings(data=network_data, nodes=16, rounds=network_rounds,
                                                                       topology=network_topology, algorithm=network_algorithm,
                                                                       seed=seed, **model),
                                        partition_s=partition_seconds, scenarios=_names(network_scenarios))
    emit_json(report, out=out, to_stdout=True)

