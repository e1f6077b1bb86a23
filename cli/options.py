"""Options shared by the commands that run CRC (defined once)."""

from __future__ import annotations

import click

from crc.calibration import DEFAULT_LR
from crc.models import MODELS
from crc.partition import PARTITION_HELP, PARTITIONS
from crc.simulation import SimulationConfig
from topologies import HELP, parse

DEFAULTS = SimulationConfig()


def _check_topology(ctx, param, value: str) -> str:
    try:
        parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def run_options(function):
    """Data, model, network and CRC options, in the order --help shows them."""
    options = [
        click.option("--data", default=DEFAULTS.data, show_default=True,
                     help="Bundled data set name (see `crc datasets`), 'synthetic', or a CSV file path."),
        click.option("--label", default=None, help="Class column of a CSV file (required for CSV)."),
        click.option("--model", type=click.Choice(sorted(MODELS)), default=DEFAULTS.model, show_default=True,
                     help="Generative classifier: naive Bayes or QDA."),
        click.option("--topology", default=DEFAULTS.topology, show_default=True, callback=_check_topology,
                     help=f"Communication graph, drawn afresh (seeded) for every repeat: {HELP}."),
        click.option("--period", type=click.IntRange(min=1), default=None,
                     help="Redraw the graph every PERIOD rounds (dynamic network) [default: static]."),
        click.option("--nodes", type=click.IntRange(min=1), default=DEFAULTS.nodes, show_default=True, help="Number of peers n."),
        click.option("--local-size", type=click.IntRange(min=1), default=DEFAULTS.local_size, show_default=True,
                     help="Training instances per peer m_v."),
        click.option("--train-size", "pooled_size", type=click.IntRange(min=1), default=None,
                     help="Pooled training size m, shared out over the peers (fragmentation); overrides --local-size."),
        click.option("--partition", type=click.Choice(PARTITIONS), default=DEFAULTS.partition, show_default=True,
                     help=f"How the pooled training set is shared out: {PARTITION_HELP}."),
        click.option("--alpha", type=click.FloatRange(min=0, min_open=True), default=DEFAULTS.alpha, show_default=True,
                     help="Dirichlet concentration of --partition dirichlet (small = more skewed)."),
        click.option("--size-skew", type=click.FloatRange(min=0), default=DEFAULTS.size_skew, show_default=True,
                     help="Unequal local sizes: proportional to exp(N(0, SKEW^2)), at least 1 each; 0 = equal."),
        click.option("--rounds", type=click.IntRange(min=1), default=DEFAULTS.rounds, show_default=True,
                     help="Communication rounds (and RC iterations)."),
        click.option("--iters", type=click.IntRange(min=1), default=DEFAULTS.iters, show_default=True,
                     help="Local RC iterations per round."),
        click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_LR, show_default=True,
                     help="Learning rate of centralized RC."),
        click.option("--ess", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="Equivalent sample size m0 of every peer [default: m / (lr * n), Eq. 5]."),
        click.option("--test-size", type=click.FloatRange(min=0, min_open=True), default=DEFAULTS.test_size, show_default=True,
                     help="Test set: a fraction of the data if below 1, else a count."),
        click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True, help="Seed of splits, graphs and sampling."),
    ]
    for option in reversed(options):
        function = option(function)
    return function
