"""The files of a network sum's deployment (``--sum-over network``): ``crc split --keys-for ... --secure-aggregation
--sum-over network`` writes roster.json and peer configs naming it, which ``crc node --config`` turns into a peer
with ``PeerSettings.network``; ``crc launch --sum-over network`` writes the roster and gives every peer
``--sum-over network --roster FILE`` (checked in process: the peers' round protocol is not here)."""

import json

import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.model_file import load_model
from crc.nodes import launcher
from crc.nodes.keys import load_key_pair, load_public_key
from crc.nodes.launcher import free_ports
from crc.nodes.roster import ROSTER_FILE, load_roster
from crc.protocol import SimulationConfig
from crc.protocol.repeat import prepare_repeat, repeat_seeds
from crc.protocol.simulator import make_engine
from crc.tables.datasets import load_bundled
from crc.topologies import Schedule, network_factory
from support.toml import tomllib

SIZES = ["--nodes", "4", "--local-size", "20"]
SPLIT = ["split", "--data", "twonorm", *SIZES, "--test-size", "100"]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def error_lines(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error")]


def chain_edges(addresses: list[str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(tuple(sorted((addresses[i], addresses[i + 1]))) for i in range(len(addresses) - 1)))


@pytest.fixture(scope="module")
def network_split(tmp_path_factory):
    """`crc split` of 4 peers on a chain, with keys, secure aggregation and a network sum."""
    directory = tmp_path_factory.mktemp("network-split")
    addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(4)]
    result = run(*SPLIT, "--out", directory, "--keys-for", ",".join(addresses), "--secure-aggregation",
                 "--sum-over", "network", "--topology", "chain")
    assert result.exit_code == 0, result.output
    assert f"{ROSTER_FILE} and peer-<i>.toml" in result.output
    return directory, addresses


def test_split_writes_one_roster_of_every_peer_and_its_key_and_the_graph(network_split):
    directory, addresses = network_split
    roster = load_roster(directory / ROSTER_FILE)
    assert dict(roster.keys) == {a: load_public_key(directory / "keys" / f"node-{i}.key") for i, a in enumerate(addresses)}
    assert roster.edges == chain_edges(addresses)
    assert not list(directory.glob("neighbourhoods-*.json"))
    for index, address in enumerate(addresses):  # every other peer's key known out of band: the masks need them all
        known = json.loads((directory / f"known-peers-{index}.json").read_text())
        assert known == {a: roster.keys[a] for a in addresses if a != address}


def test_split_peer_configs_name_the_roster_and_the_graphs_neighbours(network_split):
    directory, addresses = network_split
    for index in range(len(addresses)):
        file = tomllib.loads((directory / f"peer-{index}.toml").read_text())
        assert (file["sum-over"], file["roster"], file["secure-aggregation"]) == ("network", ROSTER_FILE, True)
        assert "neighbourhoods" not in file
        assert file["peers"] == [addresses[j] for j in (index - 1, index + 1) if 0 <= j < len(addresses)]


@pytest.mark.parametrize("index", [0, 2])
def test_a_peer_config_written_by_split_loads_into_settings_with_the_network_set(network_split, recorded_peers, index):
    directory, addresses = network_split
    result = run("node", "--config", directory / f"peer-{index}.toml")
    assert result.exit_code == 0, result.output
    (peer,) = recorded_peers
    settings = peer.settings
    assert settings.network == load_roster(directory / ROSTER_FILE) and settings.bind == addresses[index]
    assert set(settings.peers) == settings.network.neighbours(addresses[index]) == set(settings.known_keys)
    assert settings.secure_aggregation.secret_key == load_key_pair(directory / "keys" / f"node-{index}.key_secret").secret


def test_split_draws_the_network_sums_graph_as_the_simulator_does(tmp_path):
    """Without --topology, the peers' graph is the default topology drawn from --seed, the simulator's first repeat's."""
    addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(4)]
    result = run(*SPLIT, "--seed", "3", "--out", tmp_path, "--keys-for", ",".join(addresses), "--secure-aggregation",
                 "--sum-over", "network")
    assert result.exit_code == 0, result.output
    graph = Schedule(SimulationConfig().topology, 4, seed=repeat_seeds(3, 0)[1]).graph(1)
    drawn = tuple(sorted(tuple(sorted((addresses[a], addresses[b]))) for a, b in graph.edges()))
    assert load_roster(tmp_path / ROSTER_FILE).edges == drawn


def test_a_network_sum_peer_whose_others_never_start_writes_its_model_but_fails_naming_the_likely_causes(
        network_split, tmp_path):
    """Peer 0 of the chain alone: no round's sum is complete, so it trains alone (exit 3), and its one error line says
    what to look for: a peer not running, or one given another roster file (whose words its neighbours reject), and
    which peer was missing most (its parent, silent: no failed total came to name the peers further away)."""
    directory, addresses = network_split
    result = run("node", "--config", directory / "peer-0.toml", "--rounds", "2", "--timeout", "0.1",
                 "--first-round-timeout", "0.1", "--checkpoint", tmp_path / "checkpoint", "--out", tmp_path / "m.json",
                 "--log-level", "warning")
    assert result.exit_code == 3, result.output
    assert error_lines(result) == [
        "Error: no network sum released in 2 rounds (every round a peer of the roster missing or its words rejected: a "
        f"peer not running, or given another roster file; missing most: {addresses[1]} (2 rounds)) (0 message(s) "
        "rejected): this peer trained alone; its model "
        f"is written to {tmp_path / 'm.json'} all the same"]
    assert (tmp_path / "m.json").exists()
    (done,) = [line for line in result.stderr.splitlines() if " done: " in line]
    assert " WARNING " in done, done  # shown under -q too
    assert f" done: 2 rounds (2 without a sum; missing most: {addresses[1]} (2 rounds)), " in done, done


def test_a_network_sum_peer_with_distributed_noise_logs_that_the_shares_add_up_in_the_network_sum(network_split,
                                                                                                   tmp_path):
    directory, _ = network_split
    result = run("node", "--config", directory / "peer-0.toml", "--rounds", "1", "--timeout", "0.1",
                 "--first-round-timeout", "0.1", "--checkpoint", tmp_path / "checkpoint", "--out", tmp_path / "m.json",
                 "--dp-epsilon", "4", "--dp-noise", "distributed", "--classifier", "aggregate")
    assert result.exit_code == 3, result.output
    (line,) = [line for line in result.stderr.splitlines() if "differential privacy" in line]
    assert line.endswith(", distributed: every member's share adds up to it in the network sum (--colluders 0, "
                         "--dp-dropouts 0)"), line


@pytest.mark.parametrize("extra, message", [
    ([*SIZES, "--sum-over", "network"], "Error: --sum-over network needs --secure-aggregation"),
    (["--secure-aggregation", "--sum-over", "network", "--partition", "vertical:4"],
     "Error: --sum-over network: not with --partition vertical:4"),
    ([*SIZES, "--secure-aggregation", "--topology", "chain"], "Error: --topology is for a hybrid --partition (its "
                                                              "graph over the groups) or --sum-over network"),
])
def test_split_refuses_a_network_sum_it_cannot_write(tmp_path, extra, message):
    addresses = ",".join(f"tcp://127.0.0.1:{7200 + i}" for i in range(4))
    result = run("split", "--data", "twonorm", "--test-size", "100", "--out", tmp_path, "--keys-for", addresses, *extra)
    assert result.exit_code == 2, result.output
    assert error_lines(result)[0].startswith(message)


def test_launch_writes_the_roster_and_gives_every_peer_the_network_sum(tmp_path, monkeypatch, recorded_peers):
    """In process: the peers' command lines are recorded, not run, and one of them is run as `crc node` up to the
    settings it builds."""
    commands = []

    class NotStarted:
        """A peer process that never ran."""

        returncode, exited = 1, True

        def wait(self, timeout=None):
            return self.returncode

    class Recording(launcher.PeerProcesses):
        def __init__(self, *, ready_timeout):
            self.spawner, self.started = None, []

        def start(self, command, log):
            commands.append(command)
            self.started.append(NotStarted())
            return self.started[-1]

    monkeypatch.setattr(launcher, "PeerProcesses", Recording)
    result = run("launch", "--data", "twonorm", "--nodes", "4", "--local-size", "20", "--rounds", "3", "--test-size",
                 "300", "--topology", "chain", "--secure-aggregation", "--dp-epsilon", "4", "--dp-noise", "distributed",
                 "--classifier", "aggregate", "--algorithm", "paper", "--sum-over", "network", "--workdir", tmp_path)
    assert result.exit_code == 1 and "no peer finished" in result.output, result.output
    roster = load_roster(tmp_path / ROSTER_FILE)
    assert len(commands) == 4 and len(roster.members) == 4
    for command in commands:
        bind, peers = command[command.index("--bind") + 1], command[command.index("--peers") + 1].split(",")
        assert command[command.index("--sum-over") + 1] == "network"
        assert command[command.index("--roster") + 1] == str(tmp_path / ROSTER_FILE)
        assert "--neighbourhoods" not in command and "--dp-sums-per-round" not in command
        assert set(peers) == roster.neighbours(bind)
    node = run(*commands[1][4:])  # `crc node ...` as the spawner would run it
    assert node.exit_code == 0, node.output
    (peer,) = recorded_peers
    assert peer.settings.network == roster and peer.settings.privacy.sums_per_round == 1
    assert peer.settings.privacy.releases == 3


@pytest.mark.parametrize("extra, message", [
    ([*SIZES, "--sum-over", "network"], "--sum-over network needs --secure-aggregation"),
    ([*SIZES, "--secure-aggregation", "--sum-over", "network", "--loss", "0.1"], "--sum-over network takes no --loss"),
    ([*SIZES, "--secure-aggregation", "--sum-over", "network", "--dp-epsilon", "4", "--dp-noise", "distributed",
      "--dp-dropouts", "1", "--classifier", "aggregate", "--algorithm", "paper"], "--sum-over network takes no --dp-dropouts"),
    (["--secure-aggregation", "--sum-over", "network", "--partition", "vertical:3"],
     "--sum-over network is not available with a vertical or hybrid partition"),
])
def test_launch_refuses_a_network_sum_before_any_peer_starts(tmp_path, extra, message):
    result = run("launch", "--data", "twonorm", "--rounds", "3", *extra, "--workdir", tmp_path / "work")
    assert result.exit_code == 2, result.output
    assert message in error_lines(result)[0]
    assert not list((tmp_path / "work").glob("node-*.log"))



@pytest.mark.parametrize("algorithm", ["paper", "accelerated"])
def test_real_peers_summing_over_the_network_equal_the_simulator(tmp_path, algorithm):
    """`crc launch` and `crc simulate` with --sum-over network on the same tree: every peer's statistics agree to
    fixed point, and every round released the whole network's sum."""
    settings = {"data": "twonorm", "nodes": 6, "local_size": 30, "rounds": 6, "topology": "tree", "test_size": 300,
                "algorithm": algorithm}
    arguments = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    result = run("launch", *arguments, "--secure-aggregation", "--sum-over", "network", "--no-rc-converged", "--json",
                 "--workdir", tmp_path)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["secure_aggregation"]
    assert summary["sum_over"] == "network" and summary["unmask_fallbacks"] == 0
    assert summary["messages_per_round"] == 2 * (settings["nodes"] - 1)
    roster = load_roster(tmp_path / ROSTER_FILE)  # the height of the tree the peers relayed along
    assert summary["tree_height"] == roster.position(roster.members[0]).tree_height == nx.radius(nx.Graph(roster.edges))
    config = SimulationConfig.from_settings(**settings, secure_aggregation=True, sum_over="network")
    rep = prepare_repeat(load_bundled(config.data), config, 0)
    engine, _ = make_engine(rep, config, network_factory(config.topology))
    expected = engine.run(config.rounds)
    for index in range(settings["nodes"]):
        stats = load_model(tmp_path / f"model-{index}.json").stats
        assert np.max(np.abs(stats - expected[index])) <= 1e-6 * np.max(np.abs(expected[index]))
