"""A ``crc node`` process as a library: options checked and turned into a ready peer, run until its model file is
written; the start time's accepted forms and refusals."""

import json
import logging
import socket
import time
from dataclasses import replace

import numpy as np
import pytest

from crc.core.acceleration import algorithm_settings
from crc.core.errors import CRCError, OptionConflict
from crc.core.model_file import load_model
from crc.nodes.keys import new_key_pair, write_peer_keys
from crc.nodes.launcher import free_ports
from crc.nodes.node import MAX_START_DELAY_S, NodeOptions, prepare, privacy_spent, start_time
from crc.nodes.settings import PeerSettings

LOG = logging.getLogger("test.node")


def options(deployment, **given) -> NodeOptions:
    bind, neighbour = (f"tcp://127.0.0.1:{port}" for port in free_ports(2))
    return NodeOptions(**{"bind": bind, "peers": (neighbour,), "data": str(deployment / "node-0.csv"),
                          "schema": str(deployment / "schema.json"), "out": str(deployment / "model.json"),
                          "plaintext": True, **given})


def test_the_options_become_the_peers_settings(deployment):
    given = options(deployment, rounds=7, timeout_s=2.5, first_round_timeout_s=9.0, down_after=4, algorithm="accelerated",
                    run="trial", aggregate="clipped", ess=123.0)
    settings = prepare(given, LOG).peer.settings
    assert (settings.bind, settings.peers, settings.rounds, settings.run) == (given.bind, given.peers, 7, "trial")
    assert (settings.timeout_s, settings.first_round_timeout_s, settings.down_after) == (2.5, 9.0, 4)
    nb_accelerated = algorithm_settings("accelerated", "nb")  # the deployment's model is naive Bayes
    assert settings.acceleration.exact_diffusion and settings.iters == nb_accelerated["iters"] and settings.aggregate == "clipped"
    assert settings.acceleration.start == nb_accelerated["start"]
    assert settings.known_keys is None and settings.secure_aggregation is None
    assert prepare(given, LOG).peer.ess == 123.0
    default = prepare(options(deployment), LOG).peer
    assert default.settings.acceleration.exact_diffusion and default.settings.iters == nb_accelerated["iters"]  # the recommended one
    paper = prepare(options(deployment, algorithm="paper"), LOG).peer.settings
    assert not paper.acceleration.exact_diffusion and paper.iters == 1
    assert default.settings.timeout_s == PeerSettings.timeout_s and default.ess == pytest.approx(len(default.y) / 0.05)


@pytest.mark.parametrize("given, message", [
    ({"secure_aggregation": True}, "so it needs the encrypted transport: drop --insecure"),
    ({"secret_key": "k"}, "--insecure runs without keys"),
    ({"neighbourhoods": "n.json"}, "--neighbourhoods is for --secure-aggregation"),
    ({"plaintext": False, "secret_key": "k"}, "--secret-key and --known-peers go together"),
])
def test_options_that_cannot_go_together_are_a_conflict(deployment, given, message):
    with pytest.raises(OptionConflict, match=message):
        prepare(options(deployment, **given), LOG)


def test_secure_aggregation_needs_the_mean_neighbourhoods_a_run_id_of_its_own_and_a_checkpoint(tmp_path, deployment):
    """The pairwise masks derive from the run id and the peers' keys: under the default id, two runs of the same peers
    would mask alike, and so would a peer restarted without its checkpoint (at round 0): a recipient that kept both
    would learn the difference of a member's statistics."""
    given = options(deployment, plaintext=False, secure_aggregation=True, run="trial-2",
                    checkpoint=str(tmp_path / "checkpoint"))
    write_peer_keys(tmp_path, [given.bind, given.peers[0]], [[1], [0]])
    keyed = replace(given, secret_key=str(tmp_path / "keys" / "node-0.key_secret"),
                    known_peers=str(tmp_path / "known-peers-0.json"))
    with pytest.raises(OptionConflict, match="needs --aggregate mean"):
        prepare(replace(keyed, aggregate="clipped"), LOG)
    with pytest.raises(OptionConflict, match="needs --neighbourhoods"):
        prepare(keyed, LOG)
    hoods = str(tmp_path / "neighbourhoods-0.json")
    with pytest.raises(OptionConflict, match="--secure-aggregation needs --run-id NAME, a name no earlier run"):
        prepare(replace(keyed, neighbourhoods=hoods, run=PeerSettings.run), LOG)
    with pytest.raises(OptionConflict, match="--secure-aggregation needs --checkpoint DIR: a peer restarted without"):
        prepare(replace(keyed, neighbourhoods=hoods, checkpoint=None), LOG)
    masked = prepare(replace(keyed, neighbourhoods=hoods), LOG).peer.settings
    assert masked.secure_aggregation is not None and set(masked.known_keys) == {given.peers[0]}


@pytest.mark.parametrize("graph, alone", [([[1], [0]], True), ([[1], [0, 2], [1]], False)], ids=["pair", "chain"])
def test_a_masking_peer_says_which_neighbours_get_its_statistics_as_they_are(tmp_path, deployment, caplog, graph, alone):
    """A recipient with a single neighbour unmasks that neighbour's statistics: the peer said nothing about it."""
    given = options(deployment, plaintext=False, secure_aggregation=True, run="trial-3",
                    checkpoint=str(tmp_path / "checkpoint"), neighbourhoods=str(tmp_path / "neighbourhoods-0.json"),
                    secret_key=str(tmp_path / "keys" / "node-0.key_secret"),
                    known_peers=str(tmp_path / "known-peers-0.json"))
    addresses = [given.bind, given.peers[0], *(f"tcp://127.0.0.1:{port}" for port in free_ports(len(graph) - 2))]
    write_peer_keys(tmp_path, addresses, graph)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        prepare(given, LOG)
    warned = (f"secure aggregation: this peer's statistics go as they are to {given.peers[0]}, whose only neighbour "
              "it is")
    assert (warned in caplog.text) == alone
    assert f"secure aggregation: {0 if alone else 1} of 1 neighbours get this peer's statistics only within a sum" in caplog.text


def test_a_neighbourhood_padded_with_identities_the_recipient_controls_is_refused(tmp_path, deployment):
    """The padded-membership attack: the recipient u (peer 1, whose real neighbourhood is peers 0 and 2) hands peer 0
    a neighbourhoods file listing members whose secret keys it holds, to subtract their values from the sum and
    isolate peer 0's. Peer 0 takes only members whose keys its known-peers file holds (known out of band), so it
    refuses the file, whether the sybils come under new addresses or under the real peer 2's address."""
    given = options(deployment, plaintext=False, secure_aggregation=True, run="trial-2",
                    checkpoint=str(tmp_path / "checkpoint"))
    third = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    write_peer_keys(tmp_path, [given.bind, given.peers[0], third], [[1], [0, 2], [1]])
    keyed = replace(given, secret_key=str(tmp_path / "keys" / "node-0.key_secret"),
                    known_peers=str(tmp_path / "known-peers-0.json"))
    honest = json.loads((tmp_path / "neighbourhoods-0.json").read_text())
    u = given.peers[0]
    assert set(honest[u]) == {given.bind, third}
    masked = prepare(replace(keyed, neighbourhoods=str(tmp_path / "neighbourhoods-0.json")), LOG).peer.settings
    assert set(masked.known_keys) == {u}  # the transport admits the neighbour only; the key of peer 2 vouches its membership
    assert masked.secure_aggregation.neighbourhoods[u] == honest[u]
    sybils = {f"tcp://127.0.0.1:{port}": new_key_pair().public for port in free_ports(2)}
    for padded, message in [({given.bind: honest[u][given.bind], **sybils}, "is not in the known-peers file"),
                            ({**honest[u], **sybils}, "is not in the known-peers file"),
                            ({given.bind: honest[u][given.bind], third: new_key_pair().public}, "differs from the known-peers")]:
        path = tmp_path / "padded.json"
        path.write_text(json.dumps({u: padded}))
        with pytest.raises(CRCError, match=message):
            prepare(replace(keyed, neighbourhoods=str(path)), LOG)


def test_addresses_are_checked_first(deployment):
    with pytest.raises(CRCError, match="'--peers': 'tcp://127.0.0.1:0': the port"):
        prepare(options(deployment, peers=("tcp://127.0.0.1:0",), data="missing.csv"), LOG)
    with pytest.raises(CRCError, match="--peers lists a neighbour twice"):
        prepare(options(deployment, peers=("tcp://127.0.0.1:7", "tcp://127.0.0.1:7")), LOG)


def test_a_peer_without_neighbours_runs_and_writes_its_model_file(tmp_path, deployment):
    given = options(deployment, peers=(), rounds=3, out=str(tmp_path / "alone.json"))
    outcome = prepare(given, LOG).run()
    assert outcome.finished and not outcome.alone and outcome.rounds_done == 3 and outcome.neighbours == 0
    model = load_model(tmp_path / "alone.json")
    assert model.metrics["rounds_done"] == 3 and model.metrics["peers"] == [] and np.all(np.isfinite(model.stats))


def test_a_stopped_node_writes_no_model_file(tmp_path, deployment):
    node = prepare(options(deployment, out=str(tmp_path / "never.json"), first_round_timeout_s=30.0), LOG)
    node.stop.set()
    outcome = node.run()
    assert not outcome.finished and outcome.rounds_done == 0 and not (tmp_path / "never.json").exists()


def test_the_metrics_endpoint_is_checked_before_the_run(deployment):
    given = options(deployment)
    with pytest.raises(CRCError, match=r"--metrics-port \d+ is the port of --bind"):
        prepare(replace(given, metrics_port=int(given.bind.rpartition(":")[2])), LOG)
    with pytest.raises(CRCError, match="--metrics-host 'no-such-host.invalid': cannot resolve"):
        prepare(replace(given, metrics_port=9100, metrics_host="no-such-host.invalid"), LOG)


def test_a_metrics_port_in_use_stops_the_node_before_its_transport(tmp_path, deployment):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = prepare(options(deployment, peers=(), rounds=2, out=str(tmp_path / "m.json"), metrics_port=port), LOG)
        with pytest.raises(CRCError, match=f"--metrics-port {port}: cannot serve metrics on 127.0.0.1:{port}"):
            node.run()
    assert not (tmp_path / "m.json").exists()


def test_a_reading_names_the_peer_and_the_privacy_spent(deployment):
    node = prepare(options(deployment, rounds=8, dp_epsilon=4.0, aggregate="mean"), LOG)
    reading = node.reading()
    assert (reading.bind, reading.neighbours, reading.rounds, reading.down) == (node.options.bind, node.options.peers, 8,
                                                                                frozenset())
    assert reading.epsilon == 4.0 and reading.epsilon_spent == 0.0 and reading.metrics is not node.peer.metrics
    spent = [privacy_spent(node.privacy, releases) for releases in range(9)]
    assert spent[0] == 0.0 and all(a < b for a, b in zip(spent, spent[1:]))
    assert spent[8] == pytest.approx(node.privacy.epsilon_spent) and spent[8] <= 4.0
    assert prepare(options(deployment), LOG).reading().epsilon is None


def test_a_peer_releasing_every_fourth_round_plans_and_counts_one_release_in_four(deployment):
    """The model file's and the metrics' ε: 8 rounds releasing every 4th are 2 releases (rounds 1 and 5), so the ε
    spent rises only after rounds 1 and 5, to the plan's; refused with exact diffusion and for a vertical group."""
    node = prepare(options(deployment, rounds=8, dp_epsilon=4.0, release_every=4), LOG)
    assert node.peer.settings.release_every == 4
    assert (node.privacy.releases, node.privacy.to_json()["release_every"]) == (2, 4)
    spent = [privacy_spent(node.privacy, rounds) for rounds in range(9)]
    assert spent[0] == 0.0 and len(set(spent[1:5])) == 1 and len(set(spent[5:])) == 1 and spent[1] < spent[5]
    assert spent[8] == node.privacy.epsilon_spent <= 4.0
    without_noise = prepare(options(deployment, rounds=8, release_every=4), LOG).peer.settings  # chooses the paper's
    assert without_noise.release_every == 4 and not without_noise.acceleration.exact_diffusion
    with pytest.raises(OptionConflict, match="--release-every needs --no-exact-diffusion"):
        prepare(options(deployment, release_every=4, algorithm="accelerated"), LOG)
    with pytest.raises(OptionConflict, match="--release-every is not available to a peer of a vertical"):
        prepare(options(deployment, release_every=4, partition="vertical:2"), LOG)
    with pytest.raises(OptionConflict, match="--release-every 100000000000000000000 is more than --rounds 8"):
        prepare(options(deployment, rounds=8, release_every=10**20, algorithm="paper"), LOG)  # its checkpoint could not be read back


def test_a_start_time_is_iso_8601_with_a_zone_or_seconds_since_the_epoch():
    assert start_time(None) is None
    assert start_time("2026-11-24T09:00:00Z") == 1795510800.0
    assert start_time("2026-11-24T10:00:00+01:00") == 1795510800.0
    assert start_time("1795510800.25") == 1795510800.25
    assert start_time("0") == 0.0  # long past: the peer starts at once


@pytest.mark.parametrize("text, message", [
    ("2026-11-24T09:00:00", "no time zone"),
    ("tomorrow", "neither an ISO 8601 time nor seconds"),
    ("nan", "more than 7 days ahead"),
    ("inf", "more than 7 days ahead"),
])
def test_a_start_time_without_a_zone_or_unreadable_is_refused(text, message):
    with pytest.raises(CRCError, match=message):
        start_time(text)


def test_a_start_time_more_than_a_week_ahead_is_refused():
    assert start_time(repr(time.time() + MAX_START_DELAY_S - 60)) is not None
    with pytest.raises(CRCError, match="more than 7 days ahead"):
        start_time(repr(time.time() + MAX_START_DELAY_S + 60))


def test_via_routes_a_neighbour_to_another_address_and_refuses_strangers():
    from crc.core.errors import CRCError, MalformedOption
    from crc.nodes.node import routes

    peers = ("tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002")
    assert routes(("tcp://127.0.0.1:7001=tcp://127.0.0.1:9001",), peers) == {"tcp://127.0.0.1:7001": "tcp://127.0.0.1:9001"}
    assert routes((), peers) == {}
    for wrong in ("tcp://127.0.0.1:7001", "tcp://127.0.0.1:7003=tcp://127.0.0.1:9001", "tcp://127.0.0.1:7001=udp://x:1"):
        with pytest.raises(MalformedOption):
            routes((wrong,), peers)
    with pytest.raises(CRCError, match="twice"):
        routes(("tcp://127.0.0.1:7001=tcp://127.0.0.1:9001", "tcp://127.0.0.1:7001=tcp://127.0.0.1:9002"), peers)


@pytest.mark.parametrize("dropouts, warned", [(0, False), (1, True)])
def test_a_peer_whose_own_sum_cannot_go_without_a_member_warns_that_dp_dropouts_only_adds_noise(
        tmp_path, deployment, caplog, dropouts, warned):
    """A triangle: a request for a peer's sum names both of its neighbours (a majority, at least two), so
    --dp-dropouts 1 sizes every share for one honest member instead of two and no sum can go without one. A real
    peer sees only its own neighbourhoods: it warns (crc simulate and crc launch refuse the graph)."""
    bind, first, second = (f"tcp://127.0.0.1:{port}" for port in free_ports(3))
    write_peer_keys(tmp_path, [bind, first, second], [[1, 2], [0, 2], [0, 1]])
    given = options(deployment, plaintext=False, secure_aggregation=True, run="trial-4", bind=bind, peers=(first, second),
                    checkpoint=str(tmp_path / "checkpoint"), neighbourhoods=str(tmp_path / "neighbourhoods-0.json"),
                    secret_key=str(tmp_path / "keys" / "node-0.key_secret"),
                    known_peers=str(tmp_path / "known-peers-0.json"), algorithm="paper", classifier="aggregate",
                    dp_epsilon=4.0, dp_noise="distributed", dp_dropouts=dropouts)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        prepare(given, LOG)
    assert ("--dp-dropouts 1: a request for this peer's sum names 2 of its 2 neighbours" in caplog.text) == warned
