"""Commands of a real deployment: ``crc schema``, ``crc node``, ``crc predict`` (kept light: a peer starts fast)."""

from __future__ import annotations

import logging
import signal
import sys

import click
import numpy as np

from crc.cli.acceleration import acceleration_options, iters_option, loss_option
from crc.cli.config_file import ConfigFileCommand, StringList
from crc.cli.finite import FiniteFloatRange
from crc.cli.model_options import with_model_options
from crc.cli.options import usage_errors
from crc.cli.output import log_level as default_log_level
from crc.cli.output import warn
from crc.cli.privacy import (
    distributed_noise_options,
    privacy_options,
    refuse_idle_privacy_settings,
    release_every_option,
    secure_aggregation_option,
    sum_over_option,
)
from crc.core.aggregation import AGGREGATION_HELP, AGGREGATIONS
from crc.core.attacks import ATTACK_HELP, PEER_ATTACKS
from crc.core.calibration import DEFAULT_LR
from crc.core.columns import Column
from crc.core.data import format_csv, write_csv
from crc.core.errors import CRCError, plain
from crc.core.feature_partition import parse_feature_partition
from crc.core.group_model import GroupModel
from crc.core.model_file import load_model
from crc.core.models import all_options
from crc.nodes.node import NodeOptions, prepare
from crc.nodes.settings import PeerSettings
from crc.protocol.rules import MAX_ROUNDS

LOG_LEVELS = ("debug", "info", "warning", "error")
ALONE = 3
"""Exit status of a peer that finished its rounds without statistics from any neighbour (its model file is written),
and of a vertical group's peer whose group stopped because a member was silent."""
MAX_CLASSES_LISTED = 12


def _configure_logging(level: str, name: str) -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {name} %(message)s"))
    log = logging.getLogger(f"crc.node.{name}")
    log.handlers[:] = [handler]
    log.setLevel(level.upper())
    log.propagate = False
    return log


def _check_vertical(ctx, param, value):
    """``--partition``: vertical:K or hybrid:GxK, parsed up front."""
    if value is None:
        return None
    try:
        parsed = parse_feature_partition(value)
    except CRCError as exc:
        raise click.BadParameter(str(exc)) from None
    return parsed.spec


def vertical_options() -> dict:
    """The options of a peer of a vertical group, by parameter name."""
    return {
        "partition": click.option(
            "--partition", default=None, metavar="vertical:K|hybrid:GxK", callback=_check_vertical,
            help="Be one of a group of K peers that hold different features of the same instances "
                 "(docs/how-to/vertical-data.md), with --blocks, --block and --id-column: --peers are the other members, and the "
                 "label holder is the one peer whose --data has the label column. hybrid:GxK: one of G such groups, "
                 "whose blocks are averaged with --block-peers (needs --ess). [default: a horizontal peer]"),
        "block_peers": click.option(
            "--block-peers", type=StringList(), default="", metavar="ADDRESSES",
            help="With --partition hybrid:GxK: comma-separated addresses of the peers holding the same block in the "
                 "neighbouring groups, with whom this block's statistics are averaged every round."),
        "blocks": click.option(
            "--blocks", type=click.Path(dir_okay=False), default=None,
            help='With --partition: the blocks file, {"blocks": [[feature names of block 0], ...]}, the same on every '
                 "member (`crc split` writes blocks.json)."),
        "block": click.option("--block", type=click.IntRange(min=0), default=None,
                              help="With --partition: the block this peer holds (0 to K - 1); its --data has that "
                                   "block's columns."),
        "id_column": click.option("--id-column", default="id", show_default=True,
                                  help="With --partition: the column of instance ids, which aligns the group's rows "
                                       "(by a private set intersection; rows not held by every member are dropped)."),
        "label_holder": click.option(
            "--label-holder", default=None, metavar="ADDRESS",
            help="With --partition: the address of the group's label holder (this peer's own on the label holder, one "
                 "of --peers on a member). A member answers only its PSI request; without it, the first request is "
                 "answered, and a member posing as the label holder could learn which of its guessed ids this peer "
                 "holds. `crc split` and `crc launch` give it."),
    }


def option_list(options: dict):
    """Decorator adding the click ``options`` (by parameter name) in their order."""

    def decorate(function):
        for option in reversed(options.values()):
            function = option(function)
        return function

    return decorate


@click.command(cls=ConfigFileCommand, short_help="Run one real peer over ZeroMQ.")
@click.option("--bind", required=True,
              help="Address this peer listens on, tcp://HOST:PORT (e.g. tcp://10.0.0.5:7000); also its name on the wire.")
@click.option("--peers", type=StringList(), default="", metavar="ADDRESSES",
              help="Comma-separated bind addresses (tcp://HOST:PORT) of the neighbours (in a --config file, a list). "
                   "Without any the peer trains alone, on its own data (it says so).")
@click.option("--via", type=StringList(), default="", metavar="NAME=ADDRESS,...",
              help="Reach the neighbour NAME (an address of --peers) at ADDRESS instead: a relay, a tunnel or a forwarded "
                   "port. NAME stays its name on the wire and in --known-peers. [default: each neighbour at its name]")
@click.option("--data", required=True, type=click.Path(dir_okay=False), help="This peer's local CSV file.")
@click.option("--label", default=None, help="Class column (default: the schema's label).")
@click.option("--schema", required=True, type=click.Path(dir_okay=False), help="Shared schema JSON (`crc schema`).")
@option_list(vertical_options())
@with_model_options
@click.option("--rounds", type=click.IntRange(min=1, max=MAX_ROUNDS), default=PeerSettings.rounds, show_default=True,
              help="Communication rounds; the same on every peer.")
@iters_option()
@option_list(acceleration_options())
@loss_option()
@option_list(privacy_options())
@option_list(distributed_noise_options())
@release_every_option()
@click.option("--dp-sums-per-round", type=click.IntRange(min=1), default=None,
              help="With --dp-noise distributed: the most distinct closed-neighbourhood sums any peer is in each round "
                   "(with --dp-dropouts above 0, every recipient's sum counts: the largest closed neighbourhood) "
                   "(the same on every peer; `crc launch` computes it from the graph); the noise is planned for "
                   "--rounds times it [default: this peer's own count, right on a graph where all peers have it].")
@click.option("--loss-seed", type=click.IntRange(min=0, max=2**64 - 1), default=0, show_default=True,
              help="Seed of --loss (crc launch passes the simulator's seed of this node, so that both lose the same messages).")
@click.option("--lr", type=FiniteFloatRange(min=0, min_open=True), default=DEFAULT_LR, show_default=True,
              help="Only used for the default ESS.")
@click.option("--ess", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="Equivalent sample size m0, the same on every peer [default: local size / lr, which is "
                   "m / (lr n) when all peers hold equally many instances].")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(min=0, min_open=True), default=PeerSettings.timeout_s,
              show_default=True, help="Seconds each round waits for the neighbours' statistics (longer for a neighbour "
                                      "that says it is itself still waiting).")
@click.option("--first-round-timeout", "first_round_timeout_s", type=FiniteFloatRange(min=0, min_open=True),
              default=PeerSettings.first_round_timeout_s, show_default=True,
              help="Seconds the first round waits, from the peer's start (or --start-at): covers the other peers' start-up "
                   "(that round only; a resumed peer uses --timeout only).")
@click.option("--start-at", default=None, metavar="TIME",
              help="Send the first statistics at this time (ISO 8601 with a time zone, e.g. 2026-11-24T09:00:00Z, "
                   "or seconds since the epoch), listening until then; peers given the same time begin their "
                   "rounds together. A time already past: at once; more than 7 days ahead: refused. A resumed "
                   "peer ignores it. [default: at once]")
@click.option("--checkpoint", type=click.Path(file_okay=False), default=None,
              help="Directory for the per-round checkpoint; a restarted peer resumes from it.")
@click.option("--run-id", "run", default=PeerSettings.run, show_default=True, help="Peers only talk to peers of the same run id.")
@click.option("--aggregate", type=click.Choice(AGGREGATIONS), default=PeerSettings.aggregate, show_default=True,
              help=f"How the neighbours' statistics are combined with this peer's: {AGGREGATION_HELP}.")
@click.option("--down-after", type=click.IntRange(min=1), default=PeerSettings.down_after, show_default=True,
              help="Rounds in a row without anything from a neighbour before it is marked down and no longer waited "
                   "for (until it sends again).")
@click.option("--attack", type=click.Choice(PEER_ATTACKS), default=None,
              help=f"Research only: make this peer Byzantine, sending poisoned statistics every round ({ATTACK_HELP}).")
@click.option("--secret-key", type=click.Path(dir_okay=False), default=None,
              help="This peer's secret key file (NAME.key_secret, written by `crc keys`, mode 0600): every connection "
                   "is then CURVE-encrypted and authenticated. Needs --known-peers.")
@click.option("--known-peers", type=click.Path(dir_okay=False), default=None,
              help="JSON file mapping each neighbour's address to its public key (z85), like ssh's known_hosts; "
                   "only these keys may connect, and a frame must come with the key of the neighbour it names.")
@secure_aggregation_option()
@click.option("--neighbourhoods", type=click.Path(dir_okay=False), default=None,
              help="With --secure-aggregation: JSON file mapping each neighbour's address to {address: public key} of "
                   "its own neighbours (this peer included), from which the masks are agreed (`crc launch` writes it). "
                   "Every member's key must be the one --known-peers gives it (keys known out of band).")
@sum_over_option()
@click.option("--roster", type=click.Path(dir_okay=False), default=None,
              help='With --sum-over network: JSON file {"peers": {address: public key}, "edges": [[address, address], '
                   "...]} of every peer of the run and the graph, the same on every peer (`crc launch` and `crc split "
                   "--keys-for ... --sum-over network` write roster.json). It must list this peer with its own key and "
                   "--peers as its neighbours, and every other peer with the key --known-peers gives it.")
@click.option("--insecure", "plaintext", is_flag=True,
              help="Run without keys: plaintext, and anyone who reaches the port can send statistics in a "
                   "neighbour's name. For trials on a trusted network only; a warning is logged.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Model file to write (JSON).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), default=None,
              help="Level of the log on standard error [default: info; debug with `crc -v`, warning with `crc -q`].")
@click.option("--metrics-port", type=click.IntRange(min=1, max=65535), default=None,
              help="Serve the peer's metrics for Prometheus (round, neighbours up and down, messages by cause, round "
                   "times, privacy spent) at http://METRICS-HOST:PORT/metrics while it runs; `crc status` reads them "
                   "[default: not served].")
@click.option("--metrics-host", default=NodeOptions.metrics_host, show_default=True,
              help="Address the metrics endpoint binds: this machine only unless you give another (e.g. 0.0.0.0 for "
                   "every interface; the endpoint has no authentication).")
@click.pass_context
def node(ctx, log_level, **options):
    """Run one CRC peer: exchange statistics with the --peers every round, calibrate
    on the local --data, and write the trained model to --out.

    Every connection is encrypted and authenticated with the keys of
    --secret-key and --known-peers (see `crc keys`); without them the peer
    refuses to run unless given --insecure.

    Logs go to standard error, one line per event. SIGINT/SIGTERM stop the peer
    within a second, after writing its checkpoint if it has --checkpoint (exit
    status 130/143). A peer
    that finished without statistics from any neighbour in the whole run still
    writes its model file but exits with status 3.

    With --partition vertical:K the peer is one of a vertical group: it holds
    one block of features of the group's instances, aligned by --id-column;
    its model file holds its block's statistics. A peer of the group silent
    for --down-after waits stops the group: exit status 3. With --partition
    hybrid:GxK it is one of G such groups, and averages its block's
    statistics with the --block-peers every round.
    """
    refuse_idle_privacy_settings(ctx)
    structure = {option.name: options.pop(option.name) for option in all_options()}
    given = NodeOptions(model_options=structure, **options)
    with usage_errors(ctx):
        prepared = prepare(given, _configure_logging(log_level or default_log_level("info"), given.bind))
    received = {}

    def stop(signum, frame):
        received["signal"] = signum
        prepared.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    outcome = prepared.run()
    if outcome.group_stopped:
        click.echo(f"Error: {outcome.group_stopped}", err=True)
        ctx.exit(ALONE)
    if not outcome.finished:
        sys.exit(128 + received.get("signal", signal.SIGTERM))
    if outcome.alone:
        absent = f"; missing most: {', '.join(outcome.absent)}" if outcome.absent else ""
        heard = (f"no network sum released in {outcome.rounds_done} rounds (every round a peer of the roster missing "
                 f"or its words rejected: a peer not running, or given another roster file{absent})"
                 if outcome.network else
                 f"no statistics from any of the {outcome.neighbours} neighbour(s) in {outcome.rounds_done} rounds")
        click.echo(f"Error: {heard} ({outcome.rejected} message(s) rejected): this peer trained alone; its model is "
                   f"written to {given.out} all the same", err=True)
        ctx.exit(ALONE)


def _deprecated_model(ctx, param, value):
    if value is not None and not ctx.resilient_parsing:
        warn("crc predict --model is deprecated: use --model-file (--model names a model kind everywhere else)")
    return value


@click.command(short_help="Predict classes and probabilities with a peer's model file.")
@click.option("--model-file", "model_paths", type=click.Path(dir_okay=False), multiple=True,
              help="A trained model file (`crc node --out`, or an estimator's `to_model().save`); for a vertical group, "
                   "one per block, every peer's (`--model-file vmodel-0.json --model-file vmodel-1.json`): the group's "
                   "classifier is their product.  [required]")
@click.option("--model", "old_model_path", type=click.Path(dir_okay=False), default=None, hidden=True,
              callback=_deprecated_model, help="Deprecated name of --model-file.")
@click.option("--data", required=True, type=click.Path(dir_okay=False), help="CSV file with the schema's feature columns.")
@click.option("--label", default=None,
              help="Class column, if present [default: the schema's label, when in the file]; its labels must be the "
                   "model's classes, and the accuracy on them is reported on standard error.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="CSV of predictions [default: standard output].")
def predict(model_paths, old_model_path, data, label, out):
    """Predict classes and class probabilities with a trained peer's model
    (a vertical group's: every block's model file); with labels, report the
    accuracy on standard error."""
    from crc.tables.reader import read_csv  # pandas, imported on use: `crc node` in this module starts without it

    model_paths = list(model_paths) or ([old_model_path] if old_model_path else [])
    if not model_paths:
        raise click.UsageError("Missing option '--model-file'.")
    blocks = [load_model(path) for path in model_paths]
    trained = blocks[0]
    columns = read_csv(data)
    # a missing feature column first, then any label problem
    classifier = GroupModel(blocks, model_paths) if len(blocks) > 1 else trained
    proba = classifier.predict_proba(columns, source=data)
    if label is not None and label not in columns:
        raise CRCError(f"{data}: no label column {label!r}")
    label = label or trained.schema.label
    truth = _labels(columns[label], trained, data, label) if label in columns else None
    predicted = trained.classes[proba.argmax(axis=1)]
    table = {"prediction": list(predicted)}
    for k, name in enumerate(trained.schema.classes):
        table[f"p({name})"] = [repr(float(p)) for p in proba[:, k]]
    if out:
        write_csv(out, table)
    else:
        click.echo(format_csv(table), nl=False)
    if truth is not None:
        labelled = truth >= 0
        unlabelled = f" ({len(truth) - labelled.sum()} without a label left out)" if not labelled.all() else ""
        if labelled.any():
            accuracy = float(np.mean(proba.argmax(axis=1)[labelled] == truth[labelled]))
            click.echo(f"accuracy {accuracy:.4f} on {labelled.sum()} instances (error {1 - accuracy:.4f}){unlabelled}", err=True)
        else:
            click.echo(f"no accuracy: column {label!r} has no labels", err=True)


def _labels(column: Column, trained, source: str, label: str) -> np.ndarray:
    """(m,) each row's class code in the model, -1 for a missing label; a CRCError naming the file, the row and
    the label for one that is not a class of the model."""
    known = list(trained.schema.classes)
    index = {name: k for k, name in enumerate(known)}
    codes = np.empty(len(column.values), dtype=np.int64)
    for i, name in enumerate(column.canonical):
        if name not in index:
            listed = ", ".join(known[:MAX_CLASSES_LISTED]) + (", ..." if len(known) > MAX_CLASSES_LISTED else "")
            raise CRCError(f"{source}: data row {column.first_row(i) + 1}: label {plain(column.values[i])} in column {label!r} "
                           f"is not a class of the model ({listed}): the model never saw that class and cannot predict it; "
                           f"drop those rows, or the column {label!r} to predict without scoring")
        codes[i] = index[name]
    return np.append(codes, -1)[column.codes]
