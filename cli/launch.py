"""``crc launch``: a whole network of real peers on this machine."""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import click

from crc.cli.config_file import ConfigFileCommand
from crc.cli.finite import FiniteFloatRange
from crc.cli.options import (
    ACCELERATION,
    DEFAULTS,
    MODEL,
    PRIVACY,
    check_partition_options,
    fit_local_size,
    options,
    out_option,
    plots_option,
)
from crc.cli.output import Progress, emit_json, log_level, note, tiny_test_set_warning, warn
from crc.cli.privacy import refuse_idle_privacy_settings, sum_over_option
from crc.cli.summary import note_short_test_set, print_summary, warn_absent_classes, warn_no_better_than_majority, warn_tiny_test_set
from crc.core.attacks import ATTACK_HELP, PEER_ATTACKS
from crc.core.errors import CRCError
from crc.nodes.block_steps import em_passes, rounds_of
from crc.nodes.checkpoint import completed_round
from crc.nodes.settings import PeerSettings
from crc.protocol import SimulationConfig

LAUNCH_DEFAULTS = replace(DEFAULTS, data="penbased", nodes=10)
CHECKPOINT_POLL_S = 0.25
"""How often the progress reads the peers' checkpoints (their completed rounds)."""


class _Stopped(Exception):
    """Ctrl-C or SIGTERM while the peers run: unwinds through the launcher, which reaps every peer."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum, frame):
    """The first SIGINT/SIGTERM stops the launch; later ones are ignored, so that they cannot cut the reaping short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Stopped(signum)


class _RoundsDone:
    """Rounds the peers have completed so far, read from their checkpoints (at most every ``CHECKPOINT_POLL_S``), at
    most ``rounds`` each: a vertical group's peers checkpoint passes, the ``em`` EM passes of a mixture first and,
    vertical, a last pass that only scores."""

    def __init__(self, directory: Path, nodes: int, rounds: int, em: int = 0):
        self.directory, self.nodes, self.cap, self.em = directory, nodes, rounds, em
        self.rounds = [0] * nodes
        self._read_at = -float("inf")

    def __call__(self) -> int:
        now = time.monotonic()
        if now - self._read_at >= CHECKPOINT_POLL_S:
            self._read_at = now
            for index in range(self.nodes):
                done = completed_round(self.directory / f"checkpoint-{index}")
                if done is not None:  # None: unreadable right now; keep the last reading
                    self.rounds[index] = max(self.rounds[index], rounds_of(done, self.em, self.cap))
        return sum(self.rounds)


def run_launch(config: SimulationConfig, directory: Path, **settings) -> dict:
    """``crc.nodes.launcher.launch`` (``settings``: its keywords), imported when the peers start: ``--help`` and a
    usage error stay without the launcher's libraries."""
    from crc.nodes import launcher

    return launcher.launch(config, directory, **settings)


@click.command(cls=ConfigFileCommand, short_help="Run real peers on 127.0.0.1; evaluate them like simulate.")
@options("data", "label", "categorical", *MODEL, "topology", "nodes", "local_size", "pooled_size", "partition", "feature_blocks", "alpha",
         "size_skew", "rounds", "rc_iterations", "rc_converged", "iters", *ACCELERATION, "loss", *PRIVACY, "dp_noise",
         "dp_colluders", "dp_dropouts", "release_every", "lr", "ess", "test_size", "seed", "aggregate",
         "secure_aggregation",
         base=LAUNCH_DEFAULTS)
@sum_over_option()
@click.option("--byzantine", type=click.IntRange(min=0), default=0, show_default=True,
              help="Attack study: this many peers (the ones `crc simulate --byzantine` picks) run `crc node --attack`; "
                   "the results add the honest peers' errors ('honest').")
@click.option("--attack", type=click.Choice(PEER_ATTACKS), default=SimulationConfig.attack, show_default=True,
              help=f"What the --byzantine peers send: {ATTACK_HELP}.")
@click.option("--timeout", type=FiniteFloatRange(min=0, min_open=True), default=PeerSettings.timeout_s,
              show_default=True,
              help=f"Seconds each peer waits for its neighbours per round; the first round waits up to "
                   f"{PeerSettings.first_round_timeout_s:g} s, for the peers' start-up.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the peers' files (data, logs, checkpoints, models) here [default: a temporary directory, removed].")
@click.option("--log-level", "peer_log_level", type=click.Choice(["debug", "info", "warning", "error"]), default=None,
              help="The peers' log level (their logs are in the work directory) [default: warning; info with `crc -v`].")
@click.option("--insecure", "plaintext", is_flag=True,
              help="Run the peers without keys, in plaintext (for comparison) [default: CURVE keys generated for "
                   "the run in the work directory: every connection authenticated and encrypted].")
@click.option("--json", "as_json", is_flag=True, help="Print the results JSON (with its 'network' section) and nothing else.")
@out_option("the results JSON (with its 'network' section)")
@plots_option("the peers' figure (local soft 0-1 loss and round time by round)")
@click.pass_context
def launch(ctx, timeout, workdir, peer_log_level, plaintext, as_json, out, plots, **settings):
    """Run a network of real `crc node` processes on 127.0.0.1 with the same
    split, graph and ESS as `crc simulate` (its first repeat) and evaluate the
    peers' models like the simulator does.

    With no options: 10 peers on a random tree, 50 instances each of the
    bundled 'penbased' data, 64 rounds. The peers authenticate and encrypt
    every connection with CURVE keys made for the run (--insecure: plaintext).
    Progress counts the rounds the peers have completed. Ctrl-C (or SIGTERM)
    stops and reaps every peer (exit status 130, or 143).

    With --secure-aggregation --sum-over network, every peer averages the
    whole network each round: the work directory's roster.json lists every
    peer's address and public key and the graph's edges, and each peer is
    given it (`crc node --sum-over network --roster`).
    """
    from crc.nodes.launcher import check_launch  # the launchers and graph libraries when it runs: not for --help
    from crc.nodes.vertical_launcher import launch_groups
    from crc.protocol.repeat import repeat_seeds
    from crc.topologies import Schedule

    refuse_idle_privacy_settings(ctx)
    config = SimulationConfig.from_settings(**settings)
    check_launch(config, plaintext=plaintext)
    check_partition_options(ctx, config, real_peers=True)
    config = fit_local_size(ctx, config)
    vertical = config.feature_partition is not None
    if not vertical:
        # The graph the launcher will draw, drawn now: an impossible topology stops here, before any process starts.
        Schedule(config.topology, config.nodes, seed=repeat_seeds(config.seed, 0)[1]).graph(1)
    warned = _warn_tiny_count(config.test_size)
    directory = Path(workdir or tempfile.mkdtemp(prefix="crc-launch-"))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CRCError(f"--workdir {workdir}: cannot create it ({exc.strerror or exc})") from None
    peers = config.feature_partition.peers if vertical else config.nodes
    rounds_done = _RoundsDone(directory, peers, config.rounds, em_passes(config.model) if vertical else 0)
    bar = Progress(peers * config.rounds, "launching", "peer-rounds", phases=1)
    bar.phase("preparing the peers' files and starting the peers")
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    stopped, failed = None, False
    for signum in previous:
        signal.signal(signum, _stop)
    try:
        run = launch_groups if vertical else run_launch
        results = run(config, directory, timeout=timeout, log_level=peer_log_level or log_level("warning"),
                      progress=lambda finished, total: bar.update(rounds_done()), plaintext=plaintext)
        bar.update(bar.total)
        figures = _draw_peer_figures(directory, config, plots, peers) if plots else []
    except _Stopped as stop:
        stopped = stop.signum
    except KeyboardInterrupt:  # a Ctrl-C that arrived before the handler was installed
        stopped = signal.SIGINT
    except Exception:
        # A launch that failed once peers ran (e.g. none finished) names its work directory: keep their logs there.
        failed = any(directory.glob("node-*.log"))
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        bar.close()
        if workdir is None and not failed:
            shutil.rmtree(directory, ignore_errors=True)
    if stopped is not None:
        click.echo(f"Interrupted: every peer was stopped{'' if workdir else ' and the work directory removed'}.", err=True)
        ctx.exit(128 + stopped)
    if workdir is None:  # it is gone: do not name it
        results["network"].pop("workdir", None)
    emit_json(results, out=out, to_stdout=as_json)
    if not as_json:
        print_summary(results)
    if not warned:
        warn_tiny_test_set(results)
    note_short_test_set(results)
    warn_absent_classes(results)
    warn_no_better_than_majority(results)
    for failed in results["network"]["failed"]:
        click.echo(f"peer {failed['node']} ({failed['bind']}) failed: exit code {failed['exit_code']}, "
                   f"last round {failed['rounds_done']}", err=True)
    for path in figures:
        note(f"wrote {path}")


def _warn_tiny_count(test_size: float) -> bool:
    message = tiny_test_set_warning(int(test_size)) if test_size >= 1 else None
    if message:
        warn(message)
    return message is not None


def _draw_peer_figures(directory: Path, config: SimulationConfig, plots: str, count: int) -> list[Path]:
    """The ``count`` peers' figure from their model files (read before a temporary work directory is removed)."""
    from crc.core.files import read_json
    from crc.report.plots import peer_rounds_figure

    peers = []
    for index in range(count):
        path = directory / f"model-{index}.json"
        if path.exists():
            metrics = read_json(path, what="model file").get("metrics", {})
            peers.append({"node": index, "soft_loss": metrics.get("soft_loss", []), "round_ms": metrics.get("round_ms", [])})
    Path(plots).mkdir(parents=True, exist_ok=True)
    where = f"a {config.partition} group" if config.feature_partition is not None else f"a {config.topology}"
    title = f"{config.data}: {count} real peers in {where}, {config.rounds} rounds"
    return peer_rounds_figure(peers, Path(plots) / "launch-peers.png", title=title)
