"""Commands of a real deployment: ``crc schema``, ``crc node``, ``crc predict`` (kept light: a peer starts fast)."""

from __future__ import annotations

import datetime
import logging
import math
import signal
import socket
import sys
import time

import click
import numpy as np

from crc.cli.acceleration import acceleration_options, iters_option, loss_option
from crc.cli.model_options import with_model_options
from crc.cli.output import log_level as default_log_level
from crc.cli.output import warn
from crc.cli.privacy import privacy_options, secure_aggregation_option
from crc.core.acceleration import Acceleration, acceleration_of, describe, resolve
from crc.core.aggregation import AGGREGATION_HELP, AGGREGATIONS
from crc.core.attacks import ATTACK_HELP, ATTACKS
from crc.core.calibration import DEFAULT_LR
from crc.core.columns import Column
from crc.core.data import format_csv, write_csv
from crc.core.errors import CRCError, plain
from crc.core.model_file import TrainedModel, load_model
from crc.core.models import make_model, model_options
from crc.core.privacy import Privacy, check_settings
from crc.core.schema import Schema
from crc.nodes.keys import PeerKeys, load_key_pair, load_known_peers, load_neighbourhoods
from crc.nodes.local_data import load_local
from crc.nodes.peer import Peer, PeerSettings, SecureKeys
from crc.nodes.transport import Transport
from crc.tables.datasets import load_dataset
from crc.tables.reader import read_csv

LOG_LEVELS = ("debug", "info", "warning", "error")
SCHEME = "tcp://"
ALONE = 3
"""Exit status of a peer that finished its rounds without statistics from any neighbour (its model file is written)."""
MAX_CLASSES_LISTED = 12


def check_address(address: str, what: str) -> str:
    """``address`` if it is ``tcp://HOST:PORT`` with a resolvable host and a port in 1..65535. A malformed address
    is a click.BadParameter of option ``what`` (exit status 2, with the usage line), a host that does not resolve
    a CRCError. A peer is named by its bind address, so a wildcard host is malformed (its neighbours could not
    name it)."""
    def malformed(problem: str) -> click.BadParameter:
        return click.BadParameter(f"{address!r}: {problem}", param_hint=f"'{what}'")

    if not address.startswith(SCHEME):
        scheme = address.split("://")[0] + "://" if "://" in address else "no scheme"
        raise malformed(f"must start with {SCHEME} (got {scheme}), e.g. tcp://10.0.0.5:7000")
    host, colon, port = address[len(SCHEME):].rpartition(":")
    if not colon or not host:
        raise malformed("give a host and a port, as in tcp://10.0.0.5:7000")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise malformed(f"the port must be a number from 1 to 65535, got {port!r}")
    if host.startswith("[") or ":" in host:
        raise malformed("IPv6 addresses are not supported; use an IPv4 address or a host name")
    if host == "*" or host == "0.0.0.0":
        raise malformed("a peer is named by its bind address, which its neighbours list in --peers; bind the address "
                        "they connect to, not a wildcard")
    try:
        socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CRCError(f"{what} {address!r}: cannot resolve host {host!r} ({getattr(exc, 'strerror', None) or exc})") from None
    return address


@click.command(short_help="Write the schema every peer of a deployment must share.")
@click.option("--data", required=True, help="CSV file (or bundled data set name) the schema is inferred from.")
@click.option("--label", default=None, help="Class column (required for a CSV file).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Schema JSON file to write.")
def schema(data, label, out):
    """Write the schema every peer must share: classes, feature kinds and
    categories, and the standardization (mean, std) of continuous features,
    computed on DATA."""
    dataset = load_dataset(data, label=label)
    shared = dataset.schema.standardized(dataset.x[:, dataset.schema.continuous])
    shared.save(out)
    click.echo(f"{out}: {len(shared.features)} features ({len(shared.continuous)} continuous, "
               f"{len(shared.discrete)} discrete), {shared.n_classes} classes, label {shared.label!r}")


def _configure_logging(level: str, name: str) -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {name} %(message)s"))
    log = logging.getLogger(f"crc.node.{name}")
    log.handlers[:] = [handler]
    log.setLevel(level.upper())
    log.propagate = False
    return log


def option_list(options: dict):
    """Decorator adding the click ``options`` (by parameter name) in their order."""

    def decorate(function):
        for option in reversed(options.values()):
            function = option(function)
        return function

    return decorate


@click.command(short_help="Run one real peer over ZeroMQ.")
@click.option("--bind", required=True,
              help="Address this peer listens on, tcp://HOST:PORT (e.g. tcp://10.0.0.5:7000); also its name on the wire.")
@click.option("--peers", default="", help="Comma-separated bind addresses (tcp://HOST:PORT) of the neighbours. "
                                         "Without any the peer trains alone, on its own data (it says so).")
@click.option("--data", required=True, type=click.Path(dir_okay=False), help="This peer's local CSV file.")
@click.option("--label", default=None, help="Class column (default: the schema's label).")
@click.option("--schema", "schema_path", required=True, type=click.Path(dir_okay=False), help="Shared schema JSON (`crc schema`).")
@with_model_options
@click.option("--rounds", type=click.IntRange(min=1), default=64, show_default=True,
              help="Communication rounds; the same on every peer.")
@iters_option()
@option_list(acceleration_options())
@loss_option()
@option_list(privacy_options())
@click.option("--loss-seed", type=click.IntRange(min=0, max=2**64 - 1), default=0, show_default=True,
              help="Seed of --loss (crc launch passes the simulator's seed of this node, so that both lose the same messages).")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_LR, show_default=True,
              help="Only used for the default ESS.")
@click.option("--ess", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Equivalent sample size m0, the same on every peer [default: local size / lr, which is "
                   "m / (lr n) when all peers hold equally many instances].")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=PeerSettings.timeout_s,
              show_default=True, help="Seconds each round waits for the neighbours' statistics.")
@click.option("--first-round-timeout", type=click.FloatRange(min=0, min_open=True),
              default=PeerSettings.first_round_timeout_s, show_default=True,
              help="Seconds the first round waits, from the peer's start (or --start-at): covers the other peers' start-up "
                   "(no later round gives up before then either; a resumed peer uses --timeout only).")
@click.option("--start-at", default=None, metavar="TIME",
              help="Send the first statistics at this time (ISO 8601 with a time zone, e.g. 2026-11-24T09:00:00Z, "
                   "or seconds since the epoch), listening until then; peers given the same time begin their "
                   "rounds together. A time already past: at once; more than 7 days ahead: refused. A resumed "
                   "peer ignores it. [default: at once]")
@click.option("--checkpoint", type=click.Path(file_okay=False), default=None,
              help="Directory for the per-round checkpoint; a restarted peer resumes from it.")
@click.option("--run-id", default="crc", show_default=True, help="Peers only talk to peers of the same run id.")
@click.option("--aggregate", type=click.Choice(AGGREGATIONS), default=PeerSettings.aggregate, show_default=True,
              help=f"How the neighbours' statistics are combined with this peer's: {AGGREGATION_HELP}.")
@click.option("--down-after", type=click.IntRange(min=1), default=PeerSettings.down_after, show_default=True,
              help="Rounds a neighbour may miss in a row before it is marked down and no longer waited for "
                   "(until it sends again).")
@click.option("--attack", type=click.Choice(ATTACKS), default=None,
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
                   "its own neighbours (this peer included), from which the masks are agreed (`crc launch` writes it).")
@click.option("--insecure", is_flag=True,
              help="Run without keys: plaintext, and anyone who reaches the port can send statistics in a "
                   "neighbour's name. For trials on a trusted network only; a warning is logged.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Model file to write (JSON).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), default=None,
              help="Level of the log on standard error [default: info; debug with `crc -v`, warning with `crc -q`].")
@click.pass_context
def node(ctx, bind, peers, data, label, schema_path, model, rounds, iters, algorithm, momentum, start, safeguard, classifier,
         exact_diffusion, loss,
         dp_epsilon, dp_delta, clip, loss_seed, lr, ess, timeout, first_round_timeout, start_at, checkpoint, run_id,
         aggregate, down_after,
         attack, secret_key, known_peers, secure_aggregation, neighbourhoods, insecure, out, log_level, **structure):
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
    """
    check_address(bind, "--bind")
    neighbours = tuple(check_address(p.strip(), "--peers") for p in peers.split(",") if p.strip())
    if len(set(neighbours)) != len(neighbours):
        raise CRCError("--peers lists a neighbour twice")
    keys = _peer_keys(secret_key, known_peers, insecure, neighbours)
    secure = _secure_keys(secure_aggregation, neighbourhoods, keys, bind, neighbours, aggregate)
    shared = Schema.load(schema_path)
    if label is not None and label != shared.label:
        raise CRCError(f"--label {label!r} differs from the schema's label {shared.label!r}")
    options = model_options(model, structure)
    generative = make_model(model, shared, **options)
    chosen = resolve({"algorithm": algorithm, "momentum": momentum, "start": start, "safeguard": safeguard,
                      "classifier": classifier, "exact_diffusion": exact_diffusion, "iters": iters, "dp_epsilon": dp_epsilon})
    iters, speedup = chosen["iters"], acceleration_of(chosen)
    privacy = _privacy(generative, dp_epsilon, dp_delta, clip, rounds, iters, speedup)
    phi, y = load_local(data, shared, generative, clip=None if privacy is None else privacy.clip)
    log = _configure_logging(log_level or default_log_level("info"), bind)
    if privacy is not None:
        log.info("differential privacy: (%g, %g)-DP over %d releases, clip %g, sensitivity %.4g, noise sigma %.4g",
                 privacy.epsilon_spent, privacy.delta, privacy.releases, privacy.clip, privacy.sensitivity, privacy.sigma)
    log.info("algorithm %s", describe(chosen))
    if attack:
        log.warning("Byzantine peer (--attack %s): sending poisoned statistics every round", attack)
    if not neighbours:
        log.warning("no --peers: this peer has no neighbours and trains alone, on its own data only")
    try:
        settings = PeerSettings(bind=bind, peers=neighbours, rounds=rounds, iters=iters, timeout_s=timeout,
                                first_round_timeout_s=first_round_timeout, start_at=_start_time(start_at),
                                run=run_id, checkpoint_dir=checkpoint,
                                aggregate=aggregate, down_after=down_after, attack=attack,
                                known_keys=keys.known if keys else None, acceleration=speedup, loss=loss, loss_seed=loss_seed,
                                privacy=privacy, secure=secure)
        peer = Peer(generative, phi, y, ess=ess or len(y) / lr, settings=settings, log=log)
    except ValueError as exc:
        raise CRCError(str(exc)) from None
    if keys is None:
        log.warning("insecure: no keys, so statistics travel in plaintext and any process that reaches %s can send "
                    "them in a neighbour's name", bind)
    received = {}

    def stop(signum, frame):
        received["signal"] = signum
        peer.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    transport = Transport(bind, list(neighbours), max_frame_bytes=peer.expect.max_frame_bytes,
                          queue_messages=settings.queue_messages, poll_slice_s=settings.poll_slice_s, keys=keys)
    finished = peer.run(transport)  # closes the transport
    if not finished:
        sys.exit(128 + received.get("signal", signal.SIGTERM))
    metrics = {**peer.metrics.to_json(), "bind": bind, "peers": list(neighbours), "instances": int(len(y)), "ess": peer.ess,
               "aggregate": aggregate, "attack": attack, "secure_aggregation": secure is not None}
    if privacy is not None:
        metrics["privacy"] = privacy.to_json()
    TrainedModel(shared, model, peer.classifier_stats, metrics, **options).save(out)
    missing = sum(peer.metrics.missing.values())
    rejected = sum(peer.metrics.rejected.values())
    log.info("done: %d rounds, %d missing neighbour messages, %d rejected; model written to %s", peer.round, missing,
             rejected, out)
    if neighbours and peer.metrics.messages_received == 0:
        click.echo(f"Error: no statistics from any of the {len(neighbours)} neighbour(s) in {peer.round} rounds "
                   f"({rejected} message(s) rejected): this peer trained alone; its model is written to {out} all the same",
                   err=True)
        ctx.exit(ALONE)


MAX_START_DELAY_S = 7 * 24 * 3600
"""A --start-at further ahead than this is refused: most likely a typo, and the peer would sit idle."""


def _start_time(text: str | None) -> float | None:
    """``--start-at`` as seconds since the epoch (None: at once)."""
    if text is None:
        return None
    when = _epoch_seconds(text)
    if not math.isfinite(when) or when - time.time() > MAX_START_DELAY_S:
        raise CRCError(f"--start-at {text!r} is more than 7 days ahead (or not a number)")
    return when


def _epoch_seconds(text: str) -> float:
    """Seconds since the epoch, or an ISO 8601 time with a time zone, as seconds since the epoch."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise CRCError(f"--start-at {text!r} is neither an ISO 8601 time nor seconds since the epoch") from None
    if moment.tzinfo is None:
        raise CRCError(f"--start-at {text!r} has no time zone: add one, e.g. Z for UTC or +01:00")
    return moment.timestamp()


def _secure_keys(secure_aggregation: bool, neighbourhoods: str | None, keys: PeerKeys | None, bind: str,
                 neighbours: tuple[str, ...], aggregate: str) -> SecureKeys | None:
    """The keys of secure aggregation from --neighbourhoods, checked against the other options; None without it."""
    if not secure_aggregation:
        if neighbourhoods:
            raise click.UsageError("--neighbourhoods is for --secure-aggregation")
        return None
    if keys is None:
        raise click.UsageError("--secure-aggregation derives its masks from the peers' keys: give --secret-key and "
                               "--known-peers, not --insecure")
    if not neighbourhoods:
        raise click.UsageError("--secure-aggregation needs --neighbourhoods")
    if aggregate != "mean":
        raise click.UsageError("--secure-aggregation needs --aggregate mean: this peer sees only its neighbours' sum")
    hoods = load_neighbourhoods(neighbourhoods, bind, neighbours)
    for u in neighbours:
        if hoods[u][bind] != keys.own.public:
            raise CRCError(f"{neighbourhoods}: the key it gives this peer in the neighbourhood of {u} is not this peer's")
        if any(keys.known.get(w, key) != key for w, key in hoods[u].items()):
            raise CRCError(f"{neighbourhoods}: a key in the neighbourhood of {u} differs from the known-peers file's")
    return SecureKeys(keys.own.secret, hoods)


def _privacy(model, epsilon: float | None, delta: float, clip: float, rounds: int, iters: int,
             speedup: Acceleration) -> Privacy | None:
    """The peer's privacy plan (noise for (epsilon, delta) over its ``rounds`` releases), None without --dp-epsilon."""
    check_settings(epsilon=epsilon, delta=delta, clip=clip, iterations=iters, acceleration=speedup)
    if epsilon is None:
        return None
    from crc.protocol.accountant import plan

    return plan(model, epsilon=epsilon, delta=delta, clip=clip, releases=rounds)


def _peer_keys(secret_key: str | None, known_peers: str | None, insecure: bool,
               neighbours: tuple[str, ...]) -> PeerKeys | None:
    """The peer's keys from --secret-key and --known-peers (only the neighbours' keys kept); None with --insecure."""
    if insecure:
        if secret_key or known_peers:
            raise click.UsageError("--insecure runs without keys: drop --secret-key and --known-peers, or --insecure")
        return None
    if not secret_key and not known_peers:
        raise CRCError("refusing to run without keys: give --secret-key and --known-peers (write keys with `crc keys`), "
                       "or --insecure to run in plaintext on a trusted network")
    if not secret_key or not known_peers:
        raise click.UsageError("--secret-key and --known-peers go together")
    own = load_key_pair(secret_key)
    known = load_known_peers(known_peers, required=neighbours)
    if own.public in [known[address] for address in neighbours]:
        raise CRCError(f"{known_peers}: a neighbour has this peer's own key ({secret_key})")
    return PeerKeys(own=own, known={address: known[address] for address in neighbours})


def _deprecated_model(ctx, param, value):
    if value is not None and not ctx.resilient_parsing:
        warn("crc predict --model is deprecated: use --model-file (--model names a model kind everywhere else)")
    return value


@click.command(short_help="Predict classes and probabilities with a peer's model file.")
@click.option("--model-file", "model_path", type=click.Path(dir_okay=False), default=None,
              help="A trained model file (`crc node --out`, or an estimator's `to_model().save`).  [required]")
@click.option("--model", "old_model_path", type=click.Path(dir_okay=False), default=None, hidden=True,
              callback=_deprecated_model, help="Deprecated name of --model-file.")
@click.option("--data", required=True, type=click.Path(dir_okay=False), help="CSV file with the schema's feature columns.")
@click.option("--label", default=None,
              help="Class column, if present [default: the schema's label, when in the file]; its labels must be the "
                   "model's classes, and the accuracy on them is reported on standard error.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="CSV of predictions [default: standard output].")
def predict(model_path, old_model_path, data, label, out):
    """Predict classes and class probabilities with a trained peer's model;
    with labels, report the accuracy on standard error."""
    model_path = model_path or old_model_path
    if model_path is None:
        raise click.UsageError("Missing option '--model-file'.")
    trained = load_model(model_path)
    columns = read_csv(data)
    proba = trained.predict_proba(columns, source=data)  # a missing feature column first, then any label problem
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
                           f"is not a class of the model ({listed})")
        codes[i] = index[name]
    return np.append(codes, -1)[column.codes]
