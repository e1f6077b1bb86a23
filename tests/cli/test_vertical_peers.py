"""`crc split`, `crc node` and `crc launch` with --partition vertical:K: the files, the options, and every bad input one
line with its exit status (1 for a problem, 2 for a command line that does not fit, 3 for a group that stopped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from crc.cli.peer import node as node_command
from crc.cli.split import written_ess
from crc.core.feature_partition import blocks_from_names, read_blocks_file
from crc.core.model_file import load_model
from crc.core.models.blocks import block_model
from crc.core.schema import Schema
from crc.nodes.block_steps import BlockSteps
from crc.nodes.keys import load_known_peers
from crc.nodes.launcher import free_ports
from crc.nodes.spawner import SINGLE_THREADED
from crc.nodes.vertical_launcher import vertical_node_command
from crc.nodes.vertical_node import load_block
from crc.protocol import SimulationConfig
from crc.protocol.repeat import ess_for, prepare_repeat
from crc.protocol.vertical import resolve_partition
from crc.tables.datasets import load_dataset
from crc.tables.reader import read_csv
from crc.topologies import Schedule
from support.cli import one_line, run
from support.network import kill_and_reap, shared_spawner
from support.vertical import reference

WAIT_S = 60.0


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    out = tmp_path_factory.mktemp("vertical")
    result = run("split", "--data", "wdbc", "--partition", "vertical:2", "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_split_writes_each_peers_block_with_ids_in_an_order_of_its_own(group):
    schema = Schema.load(group / "schema.json")
    blocks = json.loads((group / "blocks.json").read_text())["blocks"]
    assert sorted(name for block in blocks for name in block) == sorted(schema.feature_names)
    files = [read_csv(group / f"node-{b}.csv") for b in range(2)]
    assert list(files[0]) == ["id", *blocks[0], schema.label] and list(files[1]) == ["id", *blocks[1]]
    ids = [f["id"].cells() for f in files]
    assert sorted(ids[0]) == sorted(ids[1]) and ids[0] != ids[1] and len(ids[0]) == 427
    assert list(read_csv(group / "test.csv")) == [*schema.feature_names, schema.label]


def test_split_of_a_hybrid_partition_writes_each_groups_blocks(tmp_path):
    result = run("split", "--data", "wdbc", "--partition", "hybrid:2x3", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    files = [read_csv(tmp_path / f"node-{p}.csv") for p in range(6)]
    ids = [set(f["id"].cells()) for f in files]
    assert ids[0] == ids[1] == ids[2] and ids[3] == ids[4] == ids[5] and not ids[0] & ids[3]
    assert len(ids[0] | ids[3]) == 427 and ["class" in f for f in files] == [True, False, False] * 2
    assert ("6 peer files of 2 groups of 3 (an id column and 10, 10, 10 features; the label in block 0's; group g's "
            "block b in node-<gK+b>.csv), blocks.json" in " ".join(result.output.split()))


def test_split_can_leave_rows_out_for_a_trial_of_the_alignment(tmp_path):
    result = run("split", "--data", "wdbc", "--partition", "vertical:3", "--drop-ids", "0.1", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    sizes = [len(read_csv(tmp_path / f"node-{b}.csv")["id"]) for b in range(3)]
    common = set.intersection(*(set(read_csv(tmp_path / f"node-{b}.csv")["id"].cells()) for b in range(3)))
    assert sizes == [384] * 3 and f"every peer of a group holds {len(common)} of the group's 427 instances" in \
        " ".join(result.output.split())
    one_line(run("split", "--data", "wdbc", "--drop-ids", "0.1", "--out", tmp_path / "h"), 2,
             "--drop-ids is for a vertical or hybrid --partition")


def test_split_of_a_table_with_its_own_id_column_says_to_rename_it(tmp_path):
    rows = ["id,x,cls"] + [f"r{i % 7},{i / 10},{'pq'[i % 2]}" for i in range(40)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    one_line(run("split", "--data", tmp_path / "t.csv", "--label", "cls", "--partition", "vertical:2", "--out", tmp_path / "v"), 1,
             "the data set has a column named 'id', the name of the column into which a vertical deployment writes its "
             "instance ids: rename or drop that column")


def test_real_peers_refuse_what_a_group_of_blocks_does_not_take():
    for extra, message in [
        (["--secure-aggregation"], "--secure-aggregation: not with --partition vertical:2 on real peers (the label "
                                   "holder learns only the sum of its members' scores, which needs a vertical group of "
                                   "three peers or more)"),
        (["--dp-epsilon", "1"], "--dp-epsilon is not available with a vertical or hybrid partition"),
    ]:
        one_line(run("launch", "--data", "wdbc", "--partition", "vertical:2", *extra), 2, message)
    one_line(run("launch", "--data", "wdbc", "--partition", "hybrid", "--momentum", "0.5"), 2,
             "--momentum: not with --partition hybrid, whose 4 peers follow from the partition")
    one_line(run("launch", "--data", "wdbc", "--partition", "hybrid", "--aggregate", "clipped"), 2,
             "--aggregate: not with --partition hybrid on real peers")


@pytest.mark.parametrize("peers, extra, says", [
    (2, [], "2 peers hold the same 427 training instances"),
    (3, ["--secure-aggregation"], "secure aggregation: the label holder sees the members' sum of its 2 members' scores"),
])
def test_launch_of_a_vertical_group_prints_the_summary_and_writes_the_network_section(tmp_path, peers, extra, says):
    out = tmp_path / "r.json"
    result = run("-q", "launch", "--data", "wdbc", "--partition", f"vertical:{peers}", "--rounds", "3",
                 "--no-rc-converged", "--out", out, *extra)
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["config"]["partition"] == f"vertical:{peers}" and results["network"]["finished"] == peers
    assert says in " ".join(result.output.split())



def test_launch_takes_the_blocks_named_in_a_file_as_simulate_and_split_do(tmp_path):
    """`crc launch` had no --blocks: a group of real peers could not be launched on blocks of one's choosing (a party
    with one feature, or with only categorical ones), which `crc simulate` and `crc split` take."""
    names = [["x2"], ["x5", "x13"], [f"x{j}" for j in range(1, 21) if j not in (2, 5, 13)]]  # one feature; continuous; categorical
    blocks = tmp_path / "blocks.json"
    blocks.write_text(json.dumps({"blocks": names}))
    options = ["--data", "german", "--partition", "vertical:3", "--blocks", blocks, "--model", "qda", "--rounds", "3",
               "--no-rc-converged", "--json"]
    launched = run("-q", "launch", *options, "--workdir", tmp_path / "work")
    assert launched.exit_code == 0, launched.output
    simulated = json.loads(run("-q", "simulate", *options).output)
    results = json.loads(launched.output)
    assert results["config"]["block_features"] == names == simulated["config"]["block_features"]
    assert [load_model(tmp_path / "work" / f"model-{b}.json").schema.feature_names for b in range(3)] == names
    assert results["crc"]["test_error"] == simulated["crc"]["test_error"] == simulated["rc"]["test_error"]

def node(group, block, *extra, data=None, peers="tcp://127.0.0.1:2"):
    return run("node", "--partition", "vertical:2", "--blocks", group / "blocks.json", "--block", block,
               "--bind", "tcp://127.0.0.1:1", "--peers", peers, "--data", data or group / f"node-{block}.csv",
               "--schema", group / "schema.json", "--out", group / "m.json", "--insecure", *extra)


def edited(group, block, tmp_path, edit) -> str:
    lines = (group / f"node-{block}.csv").read_text().splitlines()
    path = tmp_path / "edited.csv"
    path.write_text("\n".join(edit(lines)) + "\n")
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines + [lines[1]], "appears twice"),
    (lambda lines: lines[:1] + [",".join(["", *lines[1].split(",")[1:]])] + lines[2:], "an instance id must be a non-empty text"),
    (lambda lines: [lines[0].replace("id", "key", 1)] + lines[1:], "no id column 'id'"),
    (lambda lines: [lines[0] + ",x99"] + [line + ",1" for line in lines[1:]], "'x99' are neither this block's features"),
    (lambda lines: lines[:1], "header but no data rows"),
])
def test_a_peers_file_is_checked_before_any_network_activity(group, tmp_path, edit, message):
    one_line(node(group, 1, data=edited(group, 1, tmp_path, edit)), 1, message)


def test_instance_ids_are_compared_as_written(group):
    """Ids that spell numbers are not read as numbers: ``007`` is not ``7`` (a join of other instances), and 20-digit
    ids that differ in their last digit are not one float (refused as a repeated id)."""
    shared = Schema.load(group / "schema.json")
    blocks = blocks_from_names([list(b) for b in read_blocks_file(group / "blocks.json")], shared.feature_names, "")
    steps = BlockSteps(block_model("nb", shared, blocks), 1)
    lines = (group / "node-1.csv").read_text().splitlines()
    written = ["007", "7", "1e3", "1000", *(str(10**19 + i) for i in range(len(lines) - 5))]
    (group / "numeric.csv").write_text("\n".join([lines[0], *(f"{i},{line.split(',', 1)[1]}"
                                                              for i, line in zip(written, lines[1:]))]) + "\n")
    assert load_block(group / "numeric.csv", steps, "id", shared.label).ids == written


@pytest.mark.parametrize("extra, status, message", [
    (["--peers", "tcp://127.0.0.1:2,tcp://127.0.0.1:3"], 1,
     "--peers lists 2 address(es): the other members of a group of vertical:2 are 1"),
    (["--block", "2"], 1, "--block 2: a vertical:2 group has blocks 0 to 1"),
    (["--dp-epsilon", "1"], 2, "--dp-epsilon: not with --partition vertical:2"),
    (["--via", "tcp://127.0.0.1:2=tcp://127.0.0.1:9"], 2, "--via: not with --partition vertical:2"),
    (["--secure-aggregation"], 2, "--secure-aggregation derives its masks from the peers' CURVE keys"),
    (["--partition", "hybrid:2x2"], 2, "--partition hybrid:2x2 needs --ess"),
    (["--block-peers", "tcp://127.0.0.1:5"], 2, "--block-peers is for a peer of a hybrid partition"),
    (["--model", "pc", "--structure", "region-graph"], 1, "a vertical partition needs a circuit whose products split by feature block"),
    (["--id-column", "class"], 1, "--id-column 'class' is the schema's label: name the column of instance ids"),
    (["--id-column", "x1"], 1, "--id-column 'x1' is a feature of the schema: name the column of instance ids"),
])
def test_options_that_do_not_fit_a_vertical_peer_are_one_line(group, extra, status, message):
    args = list(extra)
    if args[:1] == ["--peers"]:
        one_line(node(group, 0, peers=args[1]), status, message)
        return
    if args[:1] == ["--block"]:
        one_line(node(group, int(args[1])), status, message)
        return
    one_line(node(group, 0, *args), status, message)



def test_blocks_without_a_vertical_partition_are_refused(group):
    one_line(run("node", "--blocks", group / "blocks.json", "--bind", "tcp://127.0.0.1:1", "--data", group / "node-0.csv",
                 "--schema", group / "schema.json", "--out", group / "m.json", "--insecure"), 2,
             "--blocks, --block, --block-peers and --label-holder are for a peer of a group holding one block of features")


@pytest.mark.parametrize("block, holder, message", [
    (0, "tcp://127.0.0.1:2", "so this peer is the label holder, but --label-holder names tcp://127.0.0.1:2"),
    (1, "tcp://127.0.0.1:1", "--label-holder tcp://127.0.0.1:1 names this peer, whose data has no label column"),
    (1, "tcp://127.0.0.1:9", "--label-holder tcp://127.0.0.1:9 names no member of --peers"),
])
def test_a_label_holder_that_contradicts_the_data_or_the_group_is_one_line(group, block, holder, message):
    one_line(node(group, block, "--label-holder", holder), 1, message)


class Peers:
    """`crc node` processes of a vertical:2 group on the files of ``group`` (plaintext), always reaped."""

    def __init__(self, group, tmp_path):
        self.group, self.tmp_path = group, tmp_path
        self.addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(2)]
        self.spawner = shared_spawner()
        self.processes = {}

    def start(self, block: int, data) -> None:
        self.start_node(block, "--partition", "vertical:2", "--blocks", self.group / "blocks.json", "--block", block,
                        "--bind", self.addresses[block], "--peers", self.addresses[1 - block], "--data", data,
                        "--schema", self.group / "schema.json", "--out", self.tmp_path / f"m-{block}.json", "--insecure",
                        "--rounds", "3", "--timeout", "1", "--first-round-timeout", "3", "--down-after", "1")

    def start_node(self, block: int, *args) -> None:
        """Start ``crc node ARGS`` as block ``block``'s peer, its log in ``log_path(block)``."""
        command = [sys.executable, "-I", "-m", "crc", "node", *map(str, args)]
        with open(self.log_path(block), "ab") as log, open(os.devnull, "r+b") as devnull:
            if self.spawner is not None:
                self.processes[block] = self.spawner.start(command, stdin=devnull, stdout=devnull, stderr=log)
            else:
                self.processes[block] = subprocess.Popen(command, stdin=devnull, stdout=devnull, stderr=log,
                                                         env={**os.environ, **SINGLE_THREADED})

    def log_path(self, block: int):
        return self.tmp_path / f"node-{block}.log"

    def errors(self) -> dict[int, tuple[int, str]]:
        """Each peer's exit status and its last line (its error)."""
        codes = {block: process.wait(timeout=WAIT_S) for block, process in self.processes.items()}
        return {block: (code, self.log_path(block).read_text().strip().splitlines()[-1]) for block, code in codes.items()}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        kill_and_reap(self.processes.values())


def test_two_label_holders_are_one_line_and_exit_1(group, tmp_path):
    with_label = edited(group, 1, tmp_path, lambda lines: [lines[0] + ",class"] + [line + ",B" for line in lines[1:]])
    with Peers(group, tmp_path) as peers:
        peers.start(0, group / "node-0.csv")
        peers.start(1, with_label)
        errors = peers.errors()
    assert {code for code, _ in errors.values()} == {1}
    assert all(line.startswith("Error: two label holders in the group") for _, line in errors.values())


def test_no_label_holder_is_one_line_and_exit_1(group, tmp_path):
    without = edited(group, 0, tmp_path, lambda lines: [",".join(line.split(",")[:-1]) for line in lines])
    with Peers(group, tmp_path) as peers:
        peers.start(0, without)
        peers.start(1, group / "node-1.csv")
        errors = peers.errors()
    assert {code for code, _ in errors.values()} == {1}
    assert all(line.startswith("Error: no label holder: no peer of the group sent a PSI request within 3 s")
               for _, line in errors.values())


def test_no_overlap_is_one_line_and_exit_1_and_stops_the_group(group, tmp_path):
    renamed = edited(group, 1, tmp_path, lambda lines: lines[:1] + ["other-" + line for line in lines[1:]])
    with Peers(group, tmp_path) as peers:
        peers.start(0, group / "node-0.csv")
        peers.start(1, renamed)
        errors = peers.errors()
    assert errors[0][0] == 1 and errors[0][1].startswith("Error: no instance id is held by every member of the group")
    assert errors[1][0] == 3 and "the group stops" in errors[1][1]


@pytest.mark.parametrize("partition, topology, secure", [("vertical:3", "tree", False), ("vertical:3", "tree", True),
                                                         ("hybrid:4x2", "tree", False), ("hybrid:3x2", "ring", False)])
def test_split_writes_each_members_settings_as_the_launcher_gives_them(tmp_path, partition, topology, secure):
    """Each peer-<i>.toml, read back by `crc node --config`, holds every setting of the `crc node` command line that
    `crc launch` gives peer i on the same split and keys (its model, rounds and timeouts the defaults here) but the
    log level and, for a vertical group, whose peers take m / lr of the rows they align, the ESS."""
    config = SimulationConfig.from_settings(data="wdbc", partition=partition, topology=topology, secure_aggregation=secure)
    dataset = load_dataset("wdbc")
    config = resolve_partition(config, dataset)
    fp = config.feature_partition
    addresses = [f"tcp://127.0.0.1:{7200 + p}" for p in range(fp.peers)]
    topology_option = ["--topology", topology] if fp.kind == "hybrid" else []
    result = run("split", "--data", "wdbc", "--partition", partition, *topology_option, "--out", tmp_path,
                 "--keys-for", ",".join(addresses), *(["--secure-aggregation"] if secure else []))
    assert result.exit_code == 0, result.output
    assert "keys/, known-peers-<i>.json and peer-<i>.toml" in " ".join(result.output.split())
    assert not list(tmp_path.glob("neighbourhoods-*.json"))  # a group's peers read none (--neighbourhoods refused)
    graph = Schedule(topology, fp.groups, seed=prepare_repeat(dataset, config, 0).graph_seed).graph(1)
    for peer in range(fp.peers):
        g, b = divmod(peer, fp.blocks)
        members = [fp.peer(g, other) for other in range(fp.blocks) if other != b]
        block_peers = [fp.peer(h, b) for h in sorted(graph.neighbors(g))] if fp.kind == "hybrid" else []
        launched = vertical_node_command(peer, addresses, config, members=members, block_peers=block_peers,
                                         workdir=tmp_path, ess=ess_for(config), timeout=10.0, first_round_timeout=60.0,
                                         log_level="info")
        given = node_command.make_context("node", launched[5:]).params
        written = node_command.make_context("node", ["--config", str(tmp_path / f"peer-{peer}.toml")]).params
        own = {"log_level", "ess"}  # a launch's log level; the ESS, none (vertical) or to 12 significant digits
        assert {key for key in given if given[key] != written[key]} <= own
        assert written["block"] == b and written["peers"] == tuple(addresses[q] for q in members)
        assert written["data"] == str(tmp_path / f"node-{peer}.csv") and written["partition"] == partition
        assert written["checkpoint"] == str(tmp_path / f"checkpoint-{peer}") and written["secret_key"]
        assert written["secure_aggregation"] is secure
        known = load_known_peers(tmp_path / f"known-peers-{peer}.json")
        assert {addresses[q] for q in members + block_peers} <= set(known) and addresses[peer] not in known
        if fp.kind == "hybrid":
            assert written["ess"] == written_ess(config) == pytest.approx(ess_for(config), rel=1e-11)
            assert len(written["block_peers"]) == len(block_peers) > 0
        else:
            assert written["ess"] is None


def test_split_refuses_a_topology_without_groups_and_secure_aggregation_of_two_peers(tmp_path):
    keys = ["--keys-for", "tcp://127.0.0.1:7300,tcp://127.0.0.1:7301"]
    one_line(run("split", "--data", "wdbc", "--partition", "vertical:2", "--topology", "ring", "--out", tmp_path, *keys),
             2, "--topology is for a hybrid --partition (its graph over the groups)")
    one_line(run("split", "--data", "wdbc", "--partition", "vertical:2", "--secure-aggregation", "--out", tmp_path,
                 *keys), 2, "--secure-aggregation: not with --partition vertical:2 on real peers")


def test_a_group_started_from_the_files_split_writes_equals_the_simulator(tmp_path):
    """`crc node --config OUT/peer-<b>.toml` for each block (run from another directory: the paths are the file's),
    over CURVE with the split's keys: the join of the blocks' models is the simulator's RC of the block model."""
    out, rounds = tmp_path / "deploy", 8
    with Peers(out, tmp_path) as peers:
        result = run("split", "--data", "wdbc", "--partition", "vertical:2", "--out", out, "--keys-for",
                     ",".join(peers.addresses))
        assert result.exit_code == 0, result.output
        for block in range(2):
            peers.start_node(block, "--config", out / f"peer-{block}.toml", "--rounds", rounds, "--timeout", "1",
                             "--first-round-timeout", "10")
        assert {block: code for block, (code, _) in peers.errors().items()} == {0: 0, 1: 0}
    ref = reference("wdbc", "nb", 2, rounds=rounds)
    models = [load_model(out / f"model-{block}.json") for block in range(2)]
    joined = ref.model.join([model.stats for model in models])
    np.testing.assert_allclose(joined, ref.best, rtol=1e-9, atol=1e-9 * np.abs(ref.best).max())
    assert [model.metrics["role"] for model in models] == ["label holder", "member"]
    again = run("split", "--data", "wdbc", "--partition", "vertical:2", "--out", out, "--keys-for", ",".join(peers.addresses))
    assert again.exit_code == 0 and "removed checkpoint-0, checkpoint-1: checkpoints of an earlier run" in again.stderr
    assert not (out / "checkpoint-0").exists()  # new keys, a new run id: no member could resume from it
