"""``crc launch``: a whole network of real peers on this machine."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import replace

import click

from crc.cli.options import DEFAULTS, MODEL, options
from crc.nodes.launcher import launch as run_launch
from crc.nodes.peer import PeerSettings
from crc.protocol import SimulationConfig

LAUNCH_DEFAULTS = replace(DEFAULTS, data="penbased", nodes=10)


@click.command()
@options("data", "label", *MODEL, "topology", "nodes", "local_size", "pooled_size", "partition", "alpha", "size_skew",
         "rounds", "iters", "lr", "ess", "test_size", "seed", base=LAUNCH_DEFAULTS)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=PeerSettings.timeout_s,
              show_default=True,
              help=f"Seconds each peer waits for its neighbours per round; the first round waits up to "
                   f"{PeerSettings.first_round_timeout_s:g} s, for the peers' start-up.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the peers' files (data, logs, checkpoints, models) here [default: a temporary directory, removed].")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="warning", show_default=True,
              help="The peers' log level (their logs are in the work directory).")
@click.option("--json", "as_json", is_flag=True, help="Print the results JSON (with its 'network' section) and nothing else.")
def launch(timeout, workdir, log_level, as_json, **settings):
    """Run a network of real `crc node` processes on 127.0.0.1 with the same
    split, graph and ESS as `crc simulate` (its first repeat) and evaluate the
    peers' models like the simulator does.

    With no options: 10 peers on a random tree, 50 instances each of the
    bundled 'penbased' data, 64 rounds.
    """
    config = SimulationConfig.from_settings(**settings)
    directory = workdir or tempfile.mkdtemp(prefix="crc-launch-")
    try:
        with click.progressbar(length=config.nodes, label="peers finished", file=sys.stderr,
                               hidden=not sys.stderr.isatty()) as bar:
            def progress(done, total):
                bar.update(done - bar.pos)

            results = run_launch(config, directory, timeout=timeout, log_level=log_level, progress=progress)
    finally:
        if workdir is None:
            shutil.rmtree(directory, ignore_errors=True)
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    net = results["network"]
    click.echo(f"{config.data}: {config.model} on a {config.topology} of {config.nodes} real peers on 127.0.0.1, "
               f"{config.rounds} rounds; {net['finished']} finished in {net['wall_s']:.1f} s")
    click.echo(f"{'':6}{'train error':>12}{'test error':>12}")
    for name in ("ml", "rc", "crc"):
        click.echo(f"{name.upper():6}{results[name]['train_error']:>12.4f}{results[name]['test_error']:>12.4f}")
    click.echo(f"gap CRC - RC: train {results['train_gap']:+.4f}, test {results['test_gap']:+.4f}")
    click.echo(f"network: {net['messages']} messages, {net['bytes']} bytes ({net['bytes_per_message']:.0f} per message, "
               f"payload {net['payload_bytes']}), rejected {net['rejected']}, missing {net['missing']}, "
               f"round p50 {net['round_ms_p50']:.1f} ms, p99 {net['round_ms_p99']:.1f} ms")
    for failed in net["failed"]:
        click.echo(f"peer {failed['node']} ({failed['bind']}) failed: exit code {failed['exit_code']}, "
                   f"last round {failed['rounds_done']}", err=True)
