"""``crc simulate --partition vertical:K|hybrid…``: defaults that follow from the partition, clear refusals."""

import json

import pytest
from click.testing import CliRunner

from crc.cli.main import main


def run(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("partition, peers, groups", [("vertical:2", 2, 1), ("vertical:3", 3, 1), ("hybrid", 4, 2)])
def test_a_feature_partition_runs_on_wdbc_with_no_other_option(partition, peers, groups):
    result = run("-q", "simulate", "--data", "wdbc", "--partition", partition, "--no-rc-converged", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["config"]["peers"] == peers and out["config"]["groups"] == groups == out["config"]["nodes"]
    assert out["config"]["pooled_size"] == 427 and out["evaluation"]["test_instances"] == 142
    assert 1 - out["crc"]["test_error"] > 0.85


def test_the_summary_says_who_holds_what():
    result = run("-q", "simulate", "--data", "wdbc", "--partition", "vertical:3", "--no-rc-converged", "--rounds", "4")
    assert result.exit_code == 0, result.output
    assert "3 peers hold the same 427 training instances, 10, 10, 10 features each" in " ".join(result.stdout.split())
    alone = run("-q", "simulate", "--data", "wdbc", "--partition", "vertical:1", "--no-rc-converged", "--rounds", "4")
    assert ("over 1 feature block (vertical:1): 1 peer holds the 427 training instances, 30 features; 4 rounds of "
            "centralized RC run by the peer" in " ".join(alone.stdout.split()))


def test_a_blocks_file_names_the_features_of_each_peer(tmp_path):
    blocks = tmp_path / "blocks.json"
    blocks.write_text(json.dumps({"blocks": [["x1", "x2"], [f"x{j}" for j in range(3, 31)]]}))
    result = run("-q", "simulate", "--data", "wdbc", "--partition", "vertical:2", "--blocks", str(blocks),
                 "--no-rc-converged", "--rounds", "4", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["config"]["block_features"][0] == ["x1", "x2"]


@pytest.mark.parametrize("args, message", [
    (["--partition", "vertical:2", "--nodes", "4"], "--nodes: not with --partition vertical:2"),
    (["--partition", "hybrid", "--start", "uniform"], "--start: not with --partition hybrid"),
    (["--partition", "vertical:2x3"], "a vertical partition has one group"),
    (["--partition", "sideways"], "'sideways' is not one of"),
    (["--partition", "vertical:40"], "wdbc: cannot cut 30 features into 40 blocks"),
    (["--partition", "vertical:2", "--model", "pc", "--structure", "region-graph"], "products split by feature block"),
    (["--partition", "vertical:2", "--dp-epsilon", "4"], "--dp-epsilon is not available with a vertical or hybrid"),
    (["--partition", "hybrid", "--aggregate", "median"], "--aggregate median is not available with a vertical or hybrid"),
    (["--partition", "vertical:2", "--loss", "0.3"], "--loss is not simulated with --partition vertical:2: its one group"),
])
def test_options_that_do_not_fit_the_partition_are_one_clear_line(args, message):
    result = run("simulate", "--data", "wdbc", "--no-rc-converged", "--rounds", "2", *args)
    assert result.exit_code in (1, 2)
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


@pytest.mark.parametrize("content, message", [
    ("{}", "expected"), ('{"blocks": [["x1"], []]}', "expected"), ('{"blocks": [["x1", "zz"]]}', "unknown feature"),
    ("[1,", "not valid JSON"),
    ('{"blocks": [["x1"]], "block": [["x2"]]}', "unknown key(s) 'block': a blocks file holds \"blocks\" alone"),
])
def test_a_bad_blocks_file_is_refused_naming_the_file(tmp_path, content, message):
    blocks = tmp_path / "blocks.json"
    blocks.write_text(content)
    result = run("simulate", "--data", "wdbc", "--partition", "vertical:1", "--blocks", str(blocks), "--rounds", "2",
                 "--no-rc-converged")
    assert result.exit_code in (1, 2) and message in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("blocks, message", [
    ('[["x1", "x2"], ["x2"]]', "feature 'x2' is in block 0 and block 1: name each feature in exactly one block"),
    ('[["x1", "x2", "x1"], ["x3"]]', "feature 'x1' is twice in block 0: name each feature in exactly one block"),
    ('[["x1"], ["x2"]]', "feature(s) 'x3', 'x4', 'x5', 'x6', 'x7' are in no block: name each feature of the schema"),
])
def test_a_blocks_file_names_each_feature_once_by_name(tmp_path, blocks, message):
    """A repeated or forgotten feature is named (it was named by its index); one repeated within a block was 'in block 0
    and block 0'."""
    (tmp_path / "blocks.json").write_text(f'{{"blocks": {blocks}}}')
    result = run("simulate", "--data", "wdbc", "--partition", "vertical:2", "--blocks", str(tmp_path / "blocks.json"),
                 "--rounds", "2", "--no-rc-converged")
    assert result.exit_code == 1 and message in " ".join(result.output.split()), result.output


def test_qda_warns_when_a_class_has_no_more_instances_than_a_blocks_continuous_features():
    """A block's QDA covariance spans its continuous features: with 30 training instances a class of wdbc has at most
    15 of the 15 of each block of vertical:2 (the horizontal run warns of all the features alike)."""
    args = ["simulate", "--data", "wdbc", "--partition", "vertical:2", "--model", "qda", "--rounds", "2", "--no-rc-converged"]
    few, enough = run(*args, "--train-size", "30"), run(*args)
    assert few.exit_code == enough.exit_code == 0, few.output
    assert [line for line in few.stderr.splitlines() if line.startswith("Warning: QDA")] == [
        "Warning: QDA: every class has no more training instances than the 15 continuous features of the widest block, "
        "so every covariance is singular and QDA may do little better than chance: naive Bayes (--model nb), or more "
        "training instances"]
    assert "Warning: QDA" not in enough.stderr
