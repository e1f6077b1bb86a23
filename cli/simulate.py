"""``crc simulate`` and ``crc datasets``."""

from __future__ import annotations

import math
import time
from pathlib import Path

import click

from crc.cli.options import check_partition_options, fit_local_size, out_option, plots_option, run_options
from crc.cli.output import Progress, emit_json, note, tiny_test_set_warning, verbosity, warn
from crc.cli.privacy import refuse_idle_privacy_settings
from crc.cli.summary import note_short_test_set, print_summary, warn_absent_classes, warn_no_better_than_majority, warn_tiny_test_set
from crc.core.attacks import ATTACK_HELP, ATTACKS
from crc.protocol import SimulationConfig
from crc.protocol.known_gaps import far_from_rc_warning, nb_better_warning
from crc.tables.datasets import BUNDLED, load_bundled
from crc.topologies import network_factory


def run_simulation(config: SimulationConfig, network, **callbacks):
    """``crc.protocol.simulate`` (``callbacks``: its progress hooks), imported on the first run: ``--help`` and a usage
    error stay without the simulator and its libraries."""
    from crc.protocol import simulate

    return simulate(config, network, **callbacks)


@click.command(short_help="Simulate CRC on one machine against centralized ML and RC.")
@run_options
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Independent repeats (fresh split and graph); figures are their means.")
@click.option("--curve", is_flag=True, help="Record the per-round errors (the results' 'rounds' list); on with --plots.")
@click.option("--baseline", is_flag=True,
              help="Also evaluate the federated-circuits (FedPC) one-pass baseline: the mixture of the peers' own ML models "
                   "weighted by local sizes; with a vertical or hybrid partition, FedPC's Algorithm 1 (crc.protocol.fedpc).")
@click.option("--byzantine", type=click.IntRange(min=0), default=0, show_default=True,
              help="Attack study: this many seeded peers send poisoned (ESS-valid) statistics every round; the results "
                   "add the honest peers' errors ('honest').")
@click.option("--attack", type=click.Choice(ATTACKS), default=SimulationConfig.attack, show_default=True,
              help=f"What the --byzantine peers send: {ATTACK_HELP}.")
@click.option("--json", "as_json", is_flag=True, help="Print the results JSON to standard output and nothing else there.")
@out_option()
@plots_option("the convergence figure (CRC's test error by round, with RC and ML; turns --curve on)")
@click.pass_context
def simulate(ctx, as_json: bool, out: str | None, plots: str | None, **options):
    """Simulate CRC on one machine and compare it with centralized ML and RC.

    With no options: naive Bayes, 50 peers on a random tree, 50 instances each,
    64 rounds, on the bundled 'letter' data set (the paper's default setting).
    Progress goes to standard error: a bar on a terminal, else a line every 10 %
    or 5 s (none with `crc -q`).
    """
    refuse_idle_privacy_settings(ctx)
    if plots:
        options["curve"] = True
    config = SimulationConfig.from_settings(**options)
    check_partition_options(ctx, config)
    config = fit_local_size(ctx, config)
    warned = _warn_tiny_count(config.test_size)
    for known in (far_from_rc_warning(config), nb_better_warning(config)):
        if known:
            warn(known)
    network = network_factory(config.topology, config.period or math.inf)
    started = time.perf_counter()
    with Progress(config.repeats * config.rounds, "simulating", "rounds", phases=config.repeats) as bar:
        bar.phase(f"repeat 1/{config.repeats}: data, split, centralized ML and RC")

        def progress(repeat: int, round_: int) -> None:
            bar.update(repeat * config.rounds + round_)
            if round_ == config.rounds and repeat + 1 < config.repeats:
                bar.phase(f"repeat {repeat + 2}/{config.repeats}: split, centralized ML and RC")

        def central(what: str, iteration: int, at_most: int) -> None:
            bar.detail(f"{what}, iteration {iteration} (at most {at_most})")

        results = run_simulation(config, network, progress=progress, central_progress=central)
    if verbosity() > 0:
        note(f"{time.perf_counter() - started:.1f} s in all, {bar.work_s:.1f} s of it in the rounds")
    emit_json(results, out=out, to_stdout=as_json)
    if not as_json:
        print_summary(results)
    if not warned:
        warn_tiny_test_set(results)
    note_short_test_set(results)
    warn_absent_classes(results)
    warn_no_better_than_majority(results)
    if plots:
        draw_run_figures(results, plots)


def _warn_tiny_count(test_size: float) -> bool:
    """Warn before the run when --test-size is a count that is too small; whether it warned."""
    message = tiny_test_set_warning(int(test_size)) if test_size >= 1 else None
    if message:
        warn(message)
    return message is not None


def draw_run_figures(results: dict, directory: str) -> None:
    """The run's convergence figure (PNG and PDF) in ``directory``; says what it wrote."""
    from crc.report.plots import convergence_figure
    from crc.report.sources import run_curves

    Path(directory).mkdir(parents=True, exist_ok=True)
    written = convergence_figure(run_curves(results), Path(directory) / "convergence.png")
    note(f"wrote {', '.join(map(str, written))}")


@click.command(short_help="List the bundled data sets (sizes, feature kinds).")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON (one object per data set).")
@out_option("the list as JSON")
def datasets(as_json, out):
    """List the bundled data sets with their sizes and feature kinds."""
    rows = []
    for name in BUNDLED:
        schema = (ds := load_bundled(name)).schema
        rows.append({"name": name, "instances": len(ds), "features": len(schema.features),
                     "continuous": len(schema.continuous), "discrete": len(schema.discrete), "classes": schema.n_classes})
    emit_json(rows, out=out, to_stdout=as_json)
    if as_json:
        return
    click.echo(f"{'name':<12}{'instances':>10}{'features':>10}{'continuous':>12}{'discrete':>10}{'classes':>9}")
    for row in rows:
        click.echo(f"{row['name']:<12}{row['instances']:>10}{row['features']:>10}{row['continuous']:>12}"
                   f"{row['discrete']:>10}{row['classes']:>9}")
    click.echo("Also: 'synthetic' (seeded Gaussian classes, 20 continuous features, 3 classes, sized to the run).")
