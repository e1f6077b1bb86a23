"""Options shared by the commands that run CRC (defined once)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import click

from crc.cli.acceleration import acceleration_options, iters_option, loss_option
from crc.cli.finite import FiniteFloatRange
from crc.cli.model_options import model_choice, option_decorators
from crc.cli.output import note
from crc.cli.privacy import (
    distributed_noise_options,
    privacy_options,
    release_every_option,
    secure_aggregation_option,
    sum_over_option,
)
from crc.core.aggregation import AGGREGATION_HELP, AGGREGATIONS
from crc.core.calibration import CONVERGED_MAX_ITERATIONS, CONVERGED_PATIENCE, DEFAULT_LR
from crc.core.errors import CRCError, MalformedOption, OptionConflict
from crc.core.feature_partition import FEATURE_PARTITION_HELP, is_feature_partition, parse_feature_partition, read_blocks_file
from crc.core.models import all_options
from crc.core.partition import PARTITION_HELP, PARTITIONS
from crc.protocol import SimulationConfig
from crc.protocol.rules import MAX_ROUNDS
from crc.report.plots import require_matplotlib
from crc.tables.datasets import BUNDLED, SYNTHETIC
from crc.topologies import HELP
from crc.topologies.syntax import FILE_PREFIX

DEFAULTS = SimulationConfig()


class DataSource(click.ParamType):
    """``--data``: a bundled data set's name, 'synthetic', or a CSV file (a path, relative to a configuration file
    when given in one)."""

    name = "name|path"

    def convert(self, value, param, ctx):
        return value

    def relative_to_config(self, value: str, directory: Path) -> str:
        if value == SYNTHETIC or (value in BUNDLED and not (directory / value).exists()):  # as load_dataset decides
            return value
        return os.fspath(directory / value)


class TopologySpec(click.ParamType):
    """``--topology``: a spec, or ``file:PATH`` (the path relative to a configuration file when given in one)."""

    name = "spec"

    def convert(self, value, param, ctx):
        return value

    def relative_to_config(self, value: str, directory: Path) -> str:
        if not value.startswith(FILE_PREFIX):
            return value
        return FILE_PREFIX + os.fspath(directory / value[len(FILE_PREFIX):])


def _check_topology(ctx, param, value: str) -> str:
    """The spec parses; a graph file (``file:PATH``) is also read now, so that a broken file is one line up front."""
    from crc.topologies import load_graph, parse  # networkx, when an option is checked: not for --help

    try:
        kind, params = parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if kind == "file":
        try:
            load_graph(params[0])
        except CRCError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def _check_partition(ctx, param, value: str) -> str:
    """A horizontal partition's name, or a vertical or hybrid spec that parses."""
    if value not in PARTITIONS and not is_feature_partition(value):
        raise click.BadParameter(f"{value!r} is not one of {', '.join(PARTITIONS)}, vertical[:K], hybrid[:GxK]")
    if value not in PARTITIONS:
        try:
            parse_feature_partition(value)
        except CRCError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def _read_blocks(ctx, param, value: str | None):
    """``--blocks FILE``: the blocks file, read and checked up front."""
    if value is None:
        return None
    try:
        return read_blocks_file(value)
    except CRCError as exc:
        raise click.BadParameter(str(exc)) from None


@contextmanager
def usage_errors(ctx: click.Context):
    """Options that conflict or do not parse, found in the library (OptionConflict, MalformedOption), as a usage
    error of the command ``ctx`` runs: exit status 2 with its usage line."""
    try:
        yield
    except (OptionConflict, MalformedOption) as exc:
        raise click.UsageError(str(exc), ctx=ctx) from None


PARTITION_SETS = ("nodes", "local_size", "start", "algorithm", "momentum", "safeguard", "classifier", "exact_diffusion",
                  "iters")
"""Options a vertical or hybrid partition sets itself (``crc.protocol.vertical.resolve_partition``)."""


def check_partition_options(ctx: click.Context, config: SimulationConfig, *, real_peers: bool = False) -> None:
    """A UsageError for options a vertical or hybrid partition does not take: its peers and training set follow
    from the partition and the data set. ``real_peers``: the command starts real peers, which take vertical and
    hybrid partitions without injected loss (hybrid: with the mean and
    without secure aggregation; vertical: secure aggregation of three peers or more)."""
    if config.feature_partition is None:
        return
    if real_peers:
        fp = config.feature_partition
        refused = [flag for flag, given in (("--secure-aggregation", config.secure_aggregation and (
                                                fp.kind == "hybrid" or fp.blocks < 3)),
                                            ("--loss", config.loss > 0),
                                            ("--aggregate", fp.kind == "hybrid" and config.aggregate != "mean"))
                   if given]
        if refused:
            why = {"--secure-aggregation": " (the label holder learns only the sum of its members' scores, which "
                                           "needs a vertical group of three peers or more)"}.get(refused[0], "")
            raise click.UsageError(f"{refused[0]}: not with --partition {config.partition} on real peers{why}")
    given = [f"--{name.replace('_', '-')}" for name in PARTITION_SETS
             if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"{' and '.join(given)}: not with --partition {config.partition}, whose "
                               f"{config.feature_partition.peers} peers follow from the partition (use --train-size "
                               "for fewer training instances) and whose groups start from their own ML statistics "
                               "and take the paper's plain step, one a round")


def fit_local_size(ctx: click.Context, config: SimulationConfig) -> SimulationConfig:
    """``config``, or with a horizontal partition on a data set too small for its default local size (neither
    --local-size nor --train-size given) every peer's share of the instances its test set leaves, with a note: so
    every bundled data set runs with the defaults (wdbc's 569 instances cannot give 50 peers 50 each)."""
    given = [name for name in ("local_size", "pooled_size") if name in ctx.params
             and ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]
    if config.feature_partition is not None or given or config.pooled_size is not None:
        return config
    from crc.protocol.repeat import load_for  # the data and its libraries, only when a run needs them

    m = len(load_for(config))
    if config.train_size < m or config.test_size >= 1:
        return config  # it fits (perhaps with a short test set, which the split notes), or a test count decides
    room = m - max(int(round(config.test_size * m)), 1)
    if room < config.nodes:
        return config  # not even one instance each: the split says why
    local = room // config.nodes
    note(f"{config.data}: {m} instances, too few for {config.nodes} peers x {config.local_size} beside the test set: "
         f"{local} instances each (--local-size or --train-size to choose)")
    return config.with_settings(local_size=local)


def _column_names(ctx, param, value: str | None) -> tuple[str, ...]:
    names = tuple(name.strip() for name in (value or "").split(",") if name.strip())
    if len(set(names)) != len(names):
        raise click.BadParameter(f"names a column twice: {value}")
    return names


def categorical_option():
    """``--categorical``: a CSV file's feature columns read as categorical whatever their values."""
    return click.option("--categorical", default=None, metavar="COLUMNS", callback=_column_names,
                        help="Comma-separated feature columns of a CSV file to read as categorical whatever their values "
                             "(a code column of more than ten distinct numbers, such as a ward or a postcode) "
                             "[default: the paper's rule: a column of at most ten distinct numbers, or of any text, is "
                             "categorical].")


def out_option(what: str = "the results JSON"):
    """``--out FILE``: write ``what`` to FILE as well (atomically)."""
    return click.option("--out", type=click.Path(dir_okay=False), default=None,
                        help=f"Also write {what} to this file (standard output keeps its usual text).")


def plots_directory(ctx, param, value: str | None) -> str | None:
    """Callback of ``--plots``: without matplotlib, fail before the run rather than after it."""
    if value is not None:
        try:
            require_matplotlib()
        except CRCError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def plots_option(what: str):
    """``--plots DIR``: write figures (PNG and PDF) into DIR."""
    return click.option("--plots", type=click.Path(file_okay=False), default=None, callback=plots_directory,
                        help=f"Write {what} into this directory as PNG and PDF (needs matplotlib: the 'plot' extra).")


def _all_options(base: SimulationConfig) -> dict:
    """Every shared option by parameter name, in the order --help shows them, with defaults from ``base``."""
    options = [
        click.option("--data", type=DataSource(), default=base.data, show_default=True,
                     help="Bundled data set name (see `crc datasets`), 'synthetic', or a CSV file path."),
        click.option("--label", default=None, help="Class column of a CSV file (required for CSV)."),
        categorical_option(),
        model_choice(base.model),
        *option_decorators(),
        click.option("--topology", type=TopologySpec(), default=base.topology, show_default=True, callback=_check_topology,
                     help=f"Communication graph, drawn from --seed (afresh for every repeat of a simulation): {HELP}."),
        click.option("--period", type=click.IntRange(min=1), default=None,
                     help="Redraw the graph every PERIOD rounds (dynamic network) [default: static]."),
        click.option("--nodes", type=click.IntRange(min=1), default=base.nodes, show_default=True, help="Number of peers n."),
        click.option("--local-size", type=click.IntRange(min=1), default=base.local_size, show_default=True,
                     help="Training instances per peer m_v."),
        click.option("--train-size", "pooled_size", type=click.IntRange(min=1), default=None,
                     help="Pooled training size m, shared out over the peers (fragmentation); overrides --local-size."),
        click.option("--partition", default=base.partition, show_default=True, callback=_check_partition,
                     metavar="|".join(PARTITIONS) + "|vertical[:K]|hybrid[:GxK]",
                     help=f"How the pooled training set is shared out, by instances: {PARTITION_HELP}; or by features "
                          f"too: {FEATURE_PARTITION_HELP}. Vertical and hybrid runs take every instance the test set "
                          "leaves, and their number of peers from the partition (not --nodes)."),
        click.option("--blocks", "feature_blocks", type=click.Path(dir_okay=False), default=None, callback=_read_blocks,
                     help='Vertical and hybrid partitions: a JSON file {"blocks": [[names of block 0], ...]} naming '
                          "each block's features [default: a seeded cut into blocks of near-equal size]."),
        click.option("--alpha", type=FiniteFloatRange(min=0, min_open=True), default=base.alpha, show_default=True,
                     help="Dirichlet concentration of --partition dirichlet (small = more skewed)."),
        click.option("--size-skew", type=FiniteFloatRange(min=0), default=base.size_skew, show_default=True,
                     help="Unequal local sizes: proportional to exp(N(0, SKEW^2)), at least 1 each; 0 = equal."),
        click.option("--rounds", type=click.IntRange(min=1, max=MAX_ROUNDS), default=base.rounds, show_default=True,
                     help="Communication rounds."),
        click.option("--rc-iterations", type=click.IntRange(min=0), default=base.rc_iterations, show_default=True,
                     help="Iterations of centralized RC, the gold standard (the paper: 64). RC run to convergence is "
                          "reported as well (see --rc-converged)."),
        click.option("--rc-converged/--no-rc-converged", default=base.rc_converged, show_default=True,
                     help="Also run centralized RC to convergence (until its training soft 0-1 loss has not improved "
                          f"for {CONVERGED_PATIENCE} iterations, at most {CONVERGED_MAX_ITERATIONS:,}) and report CRC's "
                          "gap to it. Most of a repeat's time, minutes for circuits: --no-rc-converged leaves it out "
                          "of the results."),
        iters_option(),
        *acceleration_options().values(),
        loss_option(),
        *privacy_options().values(),
        *distributed_noise_options().values(),
        release_every_option(),
        click.option("--lr", type=FiniteFloatRange(min=0, min_open=True), default=DEFAULT_LR, show_default=True,
                     help="Learning rate of centralized RC."),
        click.option("--ess", type=FiniteFloatRange(min=0, min_open=True), default=None,
                     help="Equivalent sample size m0 of every peer [default: m / (lr * n), Eq. 5]."),
        click.option("--test-size", type=FiniteFloatRange(min=0, min_open=True), default=base.test_size, show_default=True,
                     help="Test set: a fraction of the data if below 1, else a count."),
        click.option("--seed", type=click.IntRange(min=0), default=base.seed, show_default=True,
                     help="Seed of splits, graphs and sampling."),
        click.option("--aggregate", type=click.Choice(AGGREGATIONS), default=base.aggregate, show_default=True,
                     help=f"How a peer combines its neighbours' statistics with its own: {AGGREGATION_HELP}."),
        secure_aggregation_option(),
        sum_over_option(),
    ]
    names = ["data", "label", "categorical", "model", *(option.name for option in all_options()), "topology", "period", "nodes",
             "local_size", "pooled_size", "partition", "feature_blocks", "alpha", "size_skew", "rounds", "rc_iterations", "rc_converged",
             "iters", *acceleration_options(), "loss", *privacy_options(), *distributed_noise_options(),
             "release_every", "lr", "ess", "test_size", "seed", "aggregate",
             "secure_aggregation", "sum_over"]
    return dict(zip(names, options))


ACCELERATION = ("algorithm", "momentum", "start", "safeguard", "classifier", "exact_diffusion")
"""The names of ``--algorithm`` and of the acceleration options, for ``options(*ACCELERATION)``."""

PRIVACY = ("dp_epsilon", "dp_delta", "clip")
"""The names of the differential-privacy options."""

MODEL = ("model", *(option.name for option in all_options()))
"""The names of ``--model`` and of every model option, for ``options(*MODEL)``."""


def options(*names: str, base: SimulationConfig = DEFAULTS):
    """Decorator adding the named shared options (all of them if none are named), defaults taken from ``base``."""
    available = _all_options(base)

    def decorate(function):
        for name in reversed(names or tuple(available)):
            function = available[name](function)
        return function

    return decorate


run_options = options()
"""Data, model, network and CRC options: everything a simulation takes."""
