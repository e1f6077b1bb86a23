"""``crc node --sum-over network --roster FILE`` as a library: the options and files a network sum's peer is given,
checked and turned into its settings (``PeerSettings.network``, the roster; secure aggregation's secret key), and
every refusal. The round protocol is not here: the peer itself is recorded, not run."""

import json
import logging

import pytest

from crc.core.errors import CRCError, OptionConflict
from crc.nodes.keys import load_key_pair, new_key_pair, write_peer_keys
from crc.nodes.launcher import free_ports
from crc.nodes.node import NodeOptions, prepare
from crc.nodes.roster import ROSTER_FILE, load_roster, write_network_keys, write_roster
from crc.nodes.wire import DEFAULT_RUN
from crc.protocol.accountant import plan_shares

LOG = logging.getLogger("test.node.network")


@pytest.fixture
def chain(tmp_path):
    """Peer 0 of the chain 0 - 1 - 2, with the keys and the roster ``write_network_keys`` writes."""
    addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(3)]
    write_network_keys(tmp_path, addresses, [(0, 1), (1, 2)])
    return tmp_path, addresses


def network_options(deployment, chain, **given) -> NodeOptions:
    directory, addresses = chain
    return NodeOptions(**{"bind": addresses[0], "peers": (addresses[1],), "data": str(deployment / "node-0.csv"),
                          "schema": str(deployment / "schema.json"), "out": str(directory / "model.json"),
                          "secret_key": str(directory / "keys" / "node-0.key_secret"),
                          "known_peers": str(directory / "known-peers-0.json"), "secure_aggregation": True,
                          "sum_over": "network", "roster": str(directory / ROSTER_FILE), "run": "network-trial",
                          "checkpoint": str(directory / "checkpoint-0"), **given})


def test_a_network_peer_is_set_from_the_files_write_network_keys_wrote(deployment, chain, recorded_peers):
    directory, addresses = chain
    settings = prepare(network_options(deployment, chain), LOG).peer.settings
    assert settings.network == load_roster(directory / ROSTER_FILE)
    assert set(settings.network.members) == set(addresses) and settings.network.neighbours(addresses[0]) == {addresses[1]}
    own = load_key_pair(directory / "keys" / "node-0.key_secret")
    assert settings.network.keys[addresses[0]] == own.public
    assert settings.secure_aggregation.secret_key == own.secret and dict(settings.secure_aggregation.neighbourhoods) == {}
    # Every roster peer's key is known out of band, but the transport admits the neighbour only.
    known = json.loads((directory / "known-peers-0.json").read_text())
    assert set(known) == {addresses[1], addresses[2]} and set(settings.known_keys) == {addresses[1]}
    assert not list(directory.glob("neighbourhoods-*.json"))


def test_a_network_peer_plans_distributed_noise_as_one_sum_of_the_roster_a_round(deployment, chain, recorded_peers):
    """Peer 0 of the chain is in two neighbourhood sums a round (its own and its neighbour's); a network sum is one,
    of the 3 peers of the roster."""
    private = {"algorithm": "paper", "classifier": "aggregate", "dp_epsilon": 4.0, "dp_noise": "distributed", "rounds": 8}
    prepared = prepare(network_options(deployment, chain, **private), LOG)
    assert prepared.privacy.sums_per_round == 1 and prepared.privacy.releases == 8
    assert prepared.privacy == plan_shares(prepared.peer.model, epsilon=4.0, delta=prepared.options.dp_delta,
                                           clip=prepared.options.clip, rounds=8, sums_per_round=1, sizes=[3], colluders=0)
    directory, addresses = chain
    write_peer_keys(directory / "hoods", addresses, [[1], [0, 2], [1]])
    hoods = prepare(network_options(deployment, chain, **private, sum_over="neighbourhood", roster=None,
                                    secret_key=str(directory / "hoods" / "keys" / "node-0.key_secret"),
                                    known_peers=str(directory / "hoods" / "known-peers-0.json"),
                                    neighbourhoods=str(directory / "hoods" / "neighbourhoods-0.json")), LOG)
    assert hoods.privacy.sums_per_round == 2 and hoods.privacy.releases == 16


def test_a_network_peer_is_built_with_the_roster_and_its_sum(deployment, chain):
    prepared = prepare(network_options(deployment, chain), LOG)
    network = prepared.peer.network
    assert network is not None and network.members == tuple(sorted(chain[1]))
    assert prepared.peer.session is None  # no neighbourhood masking beside it


@pytest.mark.parametrize("given, message", [
    ({"secure_aggregation": False, "roster": None}, "--sum-over network needs --secure-aggregation"),
    ({"dp_epsilon": 4.0, "dp_noise": "distributed", "dp_dropouts": 1, "classifier": "aggregate", "algorithm": "paper"},
     "--sum-over network takes no --dp-dropouts"),
    ({"loss": 0.1}, "--sum-over network takes no --loss"),
    ({"roster": None}, "--sum-over network needs --roster FILE"),
    ({"sum_over": "neighbourhood", "neighbourhoods": "n.json"}, "--roster is for --sum-over network"),
    ({"neighbourhoods": "n.json"}, "--neighbourhoods is for --sum-over neighbourhood"),
    ({"dp_epsilon": 4.0, "dp_noise": "distributed", "dp_sums_per_round": 2, "classifier": "aggregate",
      "algorithm": "paper"}, "--dp-sums-per-round is for --sum-over neighbourhood: a network sum is one sum a round"),
    ({"run": DEFAULT_RUN}, "--secure-aggregation needs --run-id NAME"),
    ({"checkpoint": None}, "--secure-aggregation needs --checkpoint DIR"),
    ({"partition": "vertical:2"}, "--sum-over network and --roster are for a horizontal peer"),
])
def test_options_a_network_sum_cannot_take_are_a_conflict(deployment, chain, recorded_peers, given, message):
    with pytest.raises(OptionConflict, match=message):
        prepare(network_options(deployment, chain, **given), LOG)


def test_a_roster_that_does_not_match_what_this_peer_knows_is_refused(tmp_path, deployment, chain, recorded_peers):
    """The roster comes with the deployment, unverified: this peer must be in it under its own key, with --peers as
    its neighbours, and every other peer's key must be the one known out of band (the known-peers file), or a
    roster could slip identities its author controls into the sum."""
    directory, (this, neighbour, far) = chain
    keys = json.loads((directory / ROSTER_FILE).read_text())["peers"]
    edges = [(this, neighbour), (neighbour, far)]
    stranger = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    cases = [
        ({neighbour: keys[neighbour], far: keys[far], stranger: new_key_pair().public},
         [(stranger, neighbour), (neighbour, far)], f"this peer \\({this}\\) is not in the roster"),
        (keys, [(this, neighbour), (neighbour, far), (this, far)], f"other neighbours than --peers \\({far} is only"),
        ({**keys, this: new_key_pair().public}, edges, "the key it gives this peer in the roster is not this peer's"),
        ({**keys, far: new_key_pair().public}, edges, f"the key of {far} in the roster differs from the known-peers"),
        ({**keys, stranger: new_key_pair().public}, [*edges, (far, stranger)],
         f"{stranger} in the roster is not in the known-peers file"),
    ]
    for index, (peers, links, message) in enumerate(cases):
        path = tmp_path / f"roster-{index}.json"
        write_roster(path, peers, links)
        with pytest.raises(CRCError, match=message):
            prepare(network_options(deployment, chain, roster=str(path)), LOG)
    broken = tmp_path / "broken.json"
    broken.write_text('{"peers": {}, "edges": [}')
    with pytest.raises(CRCError, match=f"{broken}"):
        prepare(network_options(deployment, chain, roster=str(broken)), LOG)


def test_write_network_keys_refuses_a_graph_that_is_not_connected_before_writing(tmp_path):
    addresses = [f"tcp://127.0.0.1:{9100 + i}" for i in range(4)]
    with pytest.raises(CRCError, match="not connected"):
        write_network_keys(tmp_path, addresses, [(0, 1), (2, 3)])
    assert not list(tmp_path.iterdir())

