"""The human summary of a results JSON: one printer for ``crc simulate`` and ``crc launch`` (which adds its network)."""

from __future__ import annotations

import textwrap

import click

from crc.cli.output import note, tiny_test_set_warning, warn
from crc.core.acceleration import describe
from crc.core.calibration import CONVERGED_MAX_ITERATIONS
from crc.report.format import DEGENERATE_MARK, DEGENERATE_NOISE_NOTE, DEGENERATE_NOTE, degenerate_loglik, model_of

ABSENT_CLASSES_SHOWN = 10
"""The absent classes a warning names; more are counted (a data set may have hundreds of classes)."""
ROWS = (("ML", "ml"), ("RC", "rc"), ("RC converged", "rc_converged"), ("CRC", "crc"), ("CRC, honest peers", "honest"),
        ("mixture of nodes", "mixture_of_nodes"), ("FedPC one-pass", "fedpc"), ("majority class", "majority"))


def on_graph(topology: str) -> str:
    """The graph a summary says the peers are on: 'a tree', 'a ring', but 'a complete graph', 'an er:0.1 graph'."""
    if topology.split("+")[0] in ("tree", "chain", "star", "ring", "grid"):
        return f"a {topology}"
    return f"{'an' if topology.startswith('er') else 'a'} {topology} graph"


def summary_lines(results: dict) -> list[str]:
    """The summary of a run (simulator or real peers), line by line."""
    cfg, network = results["config"], results.get("network")
    sizes = results["local_sizes"]
    per_peer = f"{sizes['min']}" if sizes["min"] == sizes["max"] else f"{sizes['min']}-{sizes['max']}"
    dynamic = f", redrawn every {cfg['period']} rounds" if cfg.get("period") else ""
    peers = "real peers on 127.0.0.1" if network else "peers"
    if cfg["nodes"] == 1:
        peers = peers.replace("peers", "peer", 1) + " (alone: no neighbour to average with)"
    repeats = f", {cfg['repeats']} repeat(s)" if not network else ""
    if cfg.get("block_features"):
        lines = _feature_partition_head(cfg, per_peer, repeats)
    else:
        lines = [f"{cfg['data']}: {model_of(cfg)} on {on_graph(cfg['topology'])} of {cfg['nodes']} {peers}{dynamic}, {per_peer} "
                 f"instances each ({cfg['partition']} partition), {cfg['rounds']} rounds, m0 = {cfg['ess']:g}{repeats}"]
    if cfg.get("byzantine"):
        lines.append(f"attack: {cfg['byzantine']} Byzantine peer(s) sending '{cfg['attack']}' statistics; "
                     f"aggregation '{cfg['aggregate']}'")
    if not cfg.get("block_features"):
        lines.append(f"algorithm {describe(cfg)}" + (f"; message loss {cfg['loss']:g}" if cfg.get("loss") else "")
                     + (f"; local step and release every {cfg['release_every']} rounds, averaging only between"
                        if cfg.get("release_every", 1) > 1 else ""))
    privacy, masked = results.get("privacy"), results.get("secure_aggregation")
    network_sum = cfg.get("sum_over", "neighbourhood") == "network"  # results written before it: neighbourhood
    if privacy:
        shares = ("" if privacy.get("noise") != "distributed" else
                  f"; distributed: shares that add up in the network sum (one a round; --colluders "
                  f"{privacy['colluders']})" if network_sum else
                  f"; distributed: shares that add up in every neighbourhood sum ({privacy['sums_per_round']} sum(s) a "
                  f"round a peer; --colluders {privacy['colluders']}, --dp-dropouts {privacy['dropouts']})")
        lines.append(f"differential privacy: epsilon {privacy['epsilon']:g} (spent {privacy['epsilon_spent']:.4g}), "
                     f"delta {privacy['delta']:g}, clip {privacy['clip']:g}, noise sigma {privacy['sigma']:.4g} per release"
                     + (f", {privacy['rounds']} releases (one every {privacy['release_every']} rounds)"
                        if privacy.get("release_every", 1) > 1 else "") + shares)
    if masked and "scores" in masked:  # a vertical group's: the label holder sees only the sum of the scores
        lines.append(f"secure aggregation: the label holder sees {masked['scores']} of its {masked['members']} "
                     "members' scores")
    elif masked and network_sum:
        lines.append(f"secure aggregation: one sum of all {cfg['nodes']} peers a round, which every peer averages (the "
                     "relays see only masked partial sums, a round with a peer missing releases nothing): "
                     f"{masked['messages_per_round']} masked partial/total frames along a spanning tree of height "
                     f"{masked['tree_height']} ({masked['plain_messages_per_round']} messages a round in plain "
                     "neighbourhood averaging)")
    elif masked:
        lines.append(f"secure aggregation: {masked['protected_fraction']:.0%} of messages protected "
                     f"({masked['messages_per_round']} messages a round against {masked['plain_messages_per_round']} in plain)")
    if network:
        lines.append(f"{network['finished']} of {cfg.get('peers', cfg['nodes'])} peers finished in {network['wall_s']:.1f} s")
    lines.append(f"{'':18}{'train error':>12}{'test error':>12}{'test log-lik':>15}")
    marked = False
    for title, name in ROWS:
        if name not in results:
            continue
        row = results[name]
        value = row.get("test_loglik")
        mark = degenerate_loglik(value)
        marked |= mark
        text = "–" if value is None else f"{value:#.5g}" + (f" {DEGENERATE_MARK}" if mark else "  ")  # #: keeps trailing zeros
        lines.append(f"{title:18}{row['train_error']:>12.4f}{row['test_error']:>12.4f}{text:>15}")
    lines.append(f"CRC std across peers: train {results['crc']['train_std']:.4f}, test {results['crc']['test_std']:.4f}")
    lines.append(f"gap CRC - RC: train {results['train_gap']:+.4f}, test {results['test_gap']:+.4f}")
    if "rc_converged" in results:
        conv = results["rc_converged"]
        capped = ", the cap: RC was still improving" if conv["best_iteration"] >= CONVERGED_MAX_ITERATIONS else ""
        means = f"; means over {cfg['repeats']} repeats" if cfg.get("repeats", 1) > 1 and not network else ""
        lines.append(f"gap CRC - RC run to convergence ({conv['iterations']:.0f} iterations, best at "
                     f"{conv['best_iteration']:.0f}{capped}{means}): test {results['test_gap_converged']:+.4f}")
    ev = results["evaluation"]
    if ev["sampled"]:
        lines.append(f"(errors on a sample: {ev['nodes']} peers, {ev['train_instances']} train, {ev['test_instances']} test instances)")
    if network and "peers" in network:
        lines.extend(_group_network_lines(network))
    elif network:
        net = network
        masks = ", secure aggregation's messages included" if masked else ""
        lines.append(f"network: {net['messages']} messages, {net['bytes']} bytes ({net['bytes_per_message']:.0f} per message "
                     f"on average{masks}; statistics payload {net['payload_bytes']}), rejected {net['rejected']}, "
                     f"missing {net['missing']}, "
                     f"round p50 {net['round_ms_p50']:.1f} ms, p99 {net['round_ms_p99']:.1f} ms")
    if marked:
        lines.extend(textwrap.wrap(DEGENERATE_NOTE + (f" {DEGENERATE_NOISE_NOTE}" if privacy else ""), width=100))
    return lines


def _group_network_lines(net: dict) -> list[str]:
    """The network of a vertical group or of hybrid groups: the totals, the set-up, and what each peer sends a round
    (named by its group too when there are several)."""
    groups = len({p.get("group") for p in net["peers"]}) > 1  # hybrid: a block's peer in every group
    each = "; ".join((f"group {p['group']} " if groups else "") + f"block {p['block']} ({p['role']}) "
                     f"{p['bytes_per_round']:.0f}" for p in net["peers"])
    dropped = sum(p["rows_dropped"] or 0 for p in net["peers"])
    text = (f"network: {net['messages']} messages, {net['bytes']} bytes, rejected {net['rejected']}, missing "
            f"{net['missing']}; set-up (alignment of {net['instances']} instances, {dropped} rows dropped, and the start) "
            f"{net['setup_ms']:.0f} ms; a round p50 {net['round_ms_p50']:.1f} ms, p99 {net['round_ms_p99']:.1f} ms; "
            f"bytes sent a round: {each}")
    return textwrap.wrap(text, width=120)


def _feature_partition_head(cfg: dict, per_group: str, repeats: str) -> list[str]:
    """The first lines of a vertical or hybrid run: who holds which features of which instances."""
    blocks = cfg["block_features"]
    widths = ", ".join(str(len(block)) for block in blocks)
    if cfg["groups"] == 1 and len(blocks) == 1:  # vertical:1, a trial of the machinery: one peer holds everything
        head = (f"{cfg['data']}: {model_of(cfg)} over 1 feature block ({cfg['partition']}): 1 peer holds the "
                f"{per_group} training instances, {widths} features; {cfg['rounds']} rounds of centralized RC run by "
                f"the peer{repeats}")
    elif cfg["groups"] == 1:
        head = (f"{cfg['data']}: {model_of(cfg)} over {len(blocks)} feature blocks ({cfg['partition']}): {cfg['peers']} peers "
                f"hold the same {per_group} training instances, {widths} features each; {cfg['rounds']} rounds of "
                f"centralized RC run by the peers{repeats}")
    else:
        head = (f"{cfg['data']}: {model_of(cfg)} over {len(blocks)} feature blocks x {cfg['groups']} groups of {per_group} "
                f"instances ({cfg['partition']}): {cfg['peers']} peers, {widths} features per block; each block's "
                f"statistics averaged on {on_graph(cfg['topology'])} of the groups, {cfg['rounds']} rounds, m0 = {cfg['ess']:g}{repeats}")
    return textwrap.wrap(head, width=120)


def print_summary(results: dict) -> None:
    """Print the summary on standard output."""
    for line in summary_lines(results):
        click.echo(line)


def warn_tiny_test_set(results: dict) -> None:
    """Warn (standard error) when the run was tested on too few instances for its test error to mean much."""
    message = tiny_test_set_warning(results["evaluation"]["test_instances"], short="short_test_set" in results)
    if message:
        warn(message)


def short_test_set_note(data: str, short: dict, test_size: float) -> str:
    """What a run says (standard error) whose data set was too small for its test fraction; ``short`` as the
    results' ``short_test_set``."""
    return (f"{data} has {short['train'] + short['test']} instances for {short['train']} training instances: the test set "
            f"is the {short['test']} left, not the {short['wanted']} that --test-size {test_size:g} asks for")


def note_short_test_set(results: dict) -> None:
    """Note (standard error) that the data set was too small for the test fraction, if it was."""
    if "short_test_set" in results:
        note(short_test_set_note(results["config"]["data"], results["short_test_set"], results["config"]["test_size"]))


def warn_absent_classes(results: dict) -> None:
    """Warn (standard error) when a class had no training instance in some repeat: it is never predicted."""
    absent = results.get("absent_classes")
    if absent:
        named = ", ".join(map(repr, absent[:ABSENT_CLASSES_SHOWN]))
        more = f" and {len(absent) - ABSENT_CLASSES_SHOWN} more" if len(absent) > ABSENT_CLASSES_SHOWN else ""
        warn(f"class(es) {named}{more} had no training instance (in some repeat): they keep the "
             "count floor, are never predicted, and their test instances count as errors")


def warn_no_better_than_majority(results: dict) -> None:
    """Warn (standard error) when CRC's test error (under an attack, the honest peers') is no lower than always
    predicting the most frequent training class: a figure such as 0.07 looks small, but on a 95/5 data set it is worse
    than saying 'the common class' every time."""
    majority = results.get("majority")
    peers, whose = (results["honest"], "the honest peers'") if "honest" in results else (results["crc"], "CRC's")
    if majority and 0 < majority["test_error"] <= peers["test_error"]:
        warn(f"{whose} test error {peers['test_error']:.4f} is no lower than {majority['test_error']:.4f}, that of "
             "always predicting the training set's most frequent class (the 'majority class' row): features that say "
             "little of the class, classes too unbalanced for the error to tell much (--json gives test_f1), or peers "
             "not there yet (too few rounds, too much noise)")
