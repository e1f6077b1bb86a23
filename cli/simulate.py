"""``crc simulate`` and ``crc datasets``."""

from __future__ import annotations

import json
import math
import sys

import click

from crc.cli.options import run_options
from crc.core.datasets import BUNDLED, load_bundled
from crc.protocol import SimulationConfig
from crc.protocol import simulate as run_simulation
from crc.topologies import network_factory


@click.command()
@run_options
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Independent repeats (fresh split and graph); figures are their means.")
@click.option("--curve", is_flag=True, help="Record the per-round errors (the results' 'rounds' list).")
@click.option("--baseline", is_flag=True,
              help="Also evaluate the mixture of the peers' own ML models weighted by local sizes (federated-circuits baseline).")
@click.option("--json", "as_json", is_flag=True, help="Print the results JSON to standard output and nothing else there.")
def simulate(as_json: bool, **options):
    """Simulate CRC on one machine and compare it with centralized ML and RC.

    With no options: naive Bayes, 50 peers on a random tree, 50 instances each,
    64 rounds, on the bundled 'letter' data set (the paper's default setting).
    """
    config = SimulationConfig.from_settings(**options)
    total = config.repeats * config.rounds
    with click.progressbar(length=total, label="simulating", file=sys.stderr, hidden=not sys.stderr.isatty()) as bar:
        network = network_factory(config.topology, config.period or math.inf)
        results = run_simulation(config, network, progress=lambda repeat, round_: bar.update(1))
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    cfg = results["config"]
    sizes = results["local_sizes"]
    per_peer = f"{sizes['min']}" if sizes["min"] == sizes["max"] else f"{sizes['min']}-{sizes['max']}"
    dynamic = f", redrawn every {cfg['period']} rounds" if cfg["period"] else ""
    click.echo(f"{cfg['data']}: {cfg['model']} on a {cfg['topology']} of {cfg['nodes']} peers{dynamic}, {per_peer} instances each "
               f"({cfg['partition']} partition), {cfg['rounds']} rounds, m0 = {cfg['ess']:g}, {cfg['repeats']} repeat(s)")
    click.echo(f"{'':18}{'train error':>12}{'test error':>12}{'test log-lik':>14}")
    rows = [("ML", "ml"), ("RC", "rc"), ("CRC", "crc")]
    if "mixture_of_nodes" in results:
        rows.append(("mixture of nodes", "mixture_of_nodes"))
    for title, name in rows:
        row = results[name]
        click.echo(f"{title:18}{row['train_error']:>12.4f}{row['test_error']:>12.4f}{row['test_loglik']:>14.5g}")
    click.echo(f"CRC std across peers: train {results['crc']['train_std']:.4f}, test {results['crc']['test_std']:.4f}")
    click.echo(f"gap CRC - RC: train {results['train_gap']:+.4f}, test {results['test_gap']:+.4f}")
    if results["evaluation"]["sampled"]:
        ev = results["evaluation"]
        click.echo(f"(errors on a sample: {ev['nodes']} peers, {ev['train_instances']} train, {ev['test_instances']} test instances)")


@click.command()
def datasets():
    """List the bundled data sets with their sizes and feature kinds."""
    click.echo(f"{'name':<12}{'instances':>10}{'features':>10}{'continuous':>12}{'discrete':>10}{'classes':>9}")
    for name in BUNDLED:
        schema = (ds := load_bundled(name)).schema
        click.echo(f"{name:<12}{len(ds):>10}{len(schema.features):>10}{len(schema.continuous):>12}"
                   f"{len(schema.discrete):>10}{schema.n_classes:>9}")
    click.echo("Also: 'synthetic' (seeded Gaussian classes, 20 continuous features, 3 classes, sized to the run).")
