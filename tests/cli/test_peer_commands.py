import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.acceleration import algorithm_settings
from crc.core.model_file import TrainedModel
from crc.core.models import make_model
from crc.core.schema import Schema
from crc.nodes import checkpoint
from crc.nodes.launcher import free_ports
from crc.tables.reader import read_csv


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def deployment(tmp_path):
    result = run("split", "--data", "mushroom", "--nodes", "4", "--local-size", "30", "--partition", "label",
                 "--test-size", "200", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    return tmp_path


def test_split_writes_original_columns_for_every_node(deployment):
    schema = Schema.load(deployment / "schema.json")
    for i in range(4):
        columns = read_csv(deployment / f"node-{i}.csv")
        assert list(columns) == schema.feature_names + [schema.label] and len(columns[schema.label]) == 30
    labels = [read_csv(deployment / f"node-{i}.csv")[schema.label].cells() for i in range(4)]
    assert sum(len(set(node)) == 1 for node in labels) >= 3  # the label partition: nearly one class per node
    assert len(read_csv(deployment / "test.csv")[schema.label]) == 200


def test_schema_from_a_csv_file(tmp_path, deployment):
    out = tmp_path / "s.json"
    result = run("schema", "--data", deployment / "test.csv", "--label", "class", "--out", out)
    assert result.exit_code == 0, result.output
    assert Schema.load(out).label == "class"


def test_split_of_a_data_set_too_small_for_the_test_fraction_writes_the_instances_left_as_its_test_set(tmp_path):
    result = run("split", "--data", "chess", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert len(read_csv(tmp_path / "test.csv")["class"]) == 3196 - 2500
    assert "chess has 3196 instances for 2500 training instances: the test set is the 696 left" in result.stderr


def node_args(deployment, data):
    return ["node", "--bind", "tcp://127.0.0.1:1", "--peers", "tcp://127.0.0.1:2", "--data", data,
            "--schema", deployment / "schema.json", "--out", deployment / "m.json", "--insecure"]


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:1] + [lines[1].rsplit(",", 1)[0] + ",martian"], "unknown class 'martian'"),
    (lambda lines: [lines[0].replace("class", "kind")] + lines[1:], "no label column 'class'"),
    (lambda lines: [",".join(lines[0].split(",")[1:])] + [",".join(line.split(",")[1:]) for line in lines[1:]], "missing column"),
])
def test_node_checks_its_data_before_any_network_activity(deployment, edit, message):
    lines = (deployment / "node-0.csv").read_text().splitlines()
    bad = deployment / "bad.csv"
    bad.write_text("\n".join(edit(lines)) + "\n")
    result = run(*node_args(deployment, bad))
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output
    assert not (deployment / "m.json").exists()


def test_node_refuses_a_value_whose_features_overflow_naming_the_file_and_instance(tmp_path):
    result = run("split", "--data", "twonorm", "--nodes", "2", "--local-size", "30", "--test-size", "100",
                 "--out", tmp_path)
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "node-0.csv").read_text().splitlines()
    cells = lines[2].split(",")
    cells[0] = "1e200"  # finite, but its square (naive Bayes' second moment) is not
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines[:2] + [",".join(cells)] + lines[3:]) + "\n")
    result = run(*node_args(tmp_path, bad))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{bad}: instance 2 has a value too large" in result.output


def split_with_a_hole(tmp_path, name: str):
    """``crc split`` of twonorm into ``tmp_path``, and a copy of its ``name`` file whose first data row lacks its first
    (continuous) value: the copy's path."""
    result = run("split", "--data", "twonorm", "--nodes", "2", "--local-size", "30", "--test-size", "100",
                 "--out", tmp_path)
    assert result.exit_code == 0, result.output
    lines = (tmp_path / name).read_text().splitlines()
    holed = tmp_path / "holed.csv"
    holed.write_text("\n".join(lines[:2] + ["," + lines[2].split(",", 1)[1]] + lines[3:]) + "\n")
    return holed


def test_a_qda_peer_refuses_missing_continuous_values_naming_its_file(tmp_path):
    holed = split_with_a_hole(tmp_path, "node-0.csv")
    result = run(*node_args(tmp_path, holed), "--model", "qda")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{holed}: QDA does not handle missing continuous values (1 missing (NaN) cells" in result.output


def test_predict_with_a_qda_model_refuses_missing_continuous_values_naming_the_file(tmp_path):
    holed = split_with_a_hole(tmp_path, "test.csv")
    schema = Schema.load(tmp_path / "schema.json")
    TrainedModel(schema, "qda", make_model("qda", schema).uniform(100.0)).save(tmp_path / "qda.json")
    result = run("predict", "--model-file", tmp_path / "qda.json", "--data", holed)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{holed}: QDA does not handle missing continuous values (1 missing (NaN) cells" in result.output


def test_node_refuses_a_label_other_than_the_schemas(deployment):
    result = run(*node_args(deployment, deployment / "node-0.csv"), "--label", "other")
    assert result.exit_code == 1 and "differs from the schema's label 'class'" in result.output


def test_predict_writes_probabilities_and_reports_accuracy(deployment, tmp_path):
    schema = Schema.load(deployment / "schema.json")
    model = make_model("nb", schema)
    TrainedModel(schema, "nb", model.uniform(100.0)).save(tmp_path / "uniform.json")
    result = run("predict", "--model-file", tmp_path / "uniform.json", "--data", deployment / "test.csv")
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split(",") == ["prediction"] + [f"p({c})" for c in schema.classes] and len(rows) == 200
    assert all(float(p) == pytest.approx(1 / len(schema.classes)) for p in rows[0].split(",")[1:])
    assert "accuracy" in result.stderr


def test_predict_rejects_a_damaged_model_file(deployment, tmp_path):
    schema = Schema.load(deployment / "schema.json")
    obj = TrainedModel(schema, "nb", make_model("nb", schema).uniform(100.0)).to_json()
    obj["statistics"] = obj["statistics"][:-1]
    (tmp_path / "bad.json").write_text(json.dumps(obj))
    result = run("predict", "--model-file", tmp_path / "bad.json", "--data", deployment / "test.csv")
    assert result.exit_code == 1 and "'statistics' must hold 198 numbers, got 197" in result.output
    obj["statistics"] = [float("nan")] * len(obj["statistics"])
    (tmp_path / "nan.json").write_text(json.dumps(obj).replace("NaN", "null"))
    result = run("predict", "--model-file", tmp_path / "nan.json", "--data", deployment / "test.csv")
    assert result.exit_code == 1 and "list of finite numbers" in result.output


@pytest.fixture
def uniform_model(deployment, tmp_path):
    schema = Schema.load(deployment / "schema.json")
    path = tmp_path / "uniform.json"
    TrainedModel(schema, "nb", make_model("nb", schema).uniform(100.0)).save(path)
    return path


def test_predict_refuses_labels_that_are_not_the_models_classes(deployment, uniform_model):
    lines = (deployment / "test.csv").read_text().splitlines()
    lines[3] = lines[3].rsplit(",", 1)[0] + ",martian"
    (deployment / "odd.csv").write_text("\n".join(lines) + "\n")
    result = run("predict", "--model-file", uniform_model, "--data", deployment / "odd.csv")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert (f"{deployment / 'odd.csv'}: data row 3: label 'martian' in column 'class' is not a class of the model (") in result.output
    assert result.output.rstrip().endswith("): the model never saw that class and cannot predict it; drop those rows, or "
                                           "the column 'class' to predict without scoring")
    assert "accuracy" not in result.output


def test_predict_leaves_missing_labels_out_of_the_accuracy_and_checks_an_explicit_label_column(deployment, uniform_model):
    lines = (deployment / "test.csv").read_text().splitlines()
    lines[1] = lines[1].rsplit(",", 1)[0] + ","
    (deployment / "gap.csv").write_text("\n".join(lines) + "\n")
    result = run("predict", "--model-file", uniform_model, "--data", deployment / "gap.csv")
    assert result.exit_code == 0, result.output
    assert "on 199 instances" in result.stderr and "(1 without a label left out)" in result.stderr
    missing = run("predict", "--model-file", uniform_model, "--data", deployment / "test.csv", "--label", "kind")
    assert missing.exit_code == 1 and "no label column 'kind'" in missing.output


def test_predict_reports_a_missing_feature_column_before_any_label_problem(deployment, uniform_model):
    lines = (deployment / "test.csv").read_text().splitlines()
    header = lines[0].split(",")
    dropped = [",".join(line.split(",")[1:]) for line in lines]
    dropped[3] = dropped[3].rsplit(",", 1)[0] + ",martian"  # and a label that is not a class
    (deployment / "lacking.csv").write_text("\n".join(dropped) + "\n")
    for label in ([], ["--label", "kind"]):  # the schema's label, and a label column the file lacks
        result = run("predict", "--model-file", uniform_model, "--data", deployment / "lacking.csv", *label)
        assert result.exit_code == 1 and "Traceback" not in result.output
        errors = [line for line in result.output.splitlines() if line.startswith("Error")]
        assert errors == [f"Error: {deployment / 'lacking.csv'}: missing column(s) {header[0]!r}"]


def test_a_numeric_label_that_is_not_a_class_is_shown_as_a_plain_number(tmp_path):
    rows = ["x,grade"] + [f"{i / 10},{i % 2}" for i in range(40)]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    assert run("schema", "--data", tmp_path / "train.csv", "--label", "grade", "--out", tmp_path / "s.json").exit_code == 0
    schema = Schema.load(tmp_path / "s.json")
    TrainedModel(schema, "nb", make_model("nb", schema).uniform(100.0)).save(tmp_path / "m.json")
    (tmp_path / "new.csv").write_text("x,grade\n0.5,1\n0.25,2.5\n")
    result = run("predict", "--model-file", tmp_path / "m.json", "--data", tmp_path / "new.csv")
    assert result.exit_code == 1 and "np." not in result.output
    assert f"{tmp_path / 'new.csv'}: data row 2: label 2.5 in column 'grade' is not a class of the model (0, 1)" in result.output


def test_predict_model_is_a_deprecated_hidden_alias_of_model_file(deployment, uniform_model):
    result = run("predict", "--model", uniform_model, "--data", deployment / "test.csv")
    assert result.exit_code == 0, result.output
    assert "--model is deprecated: use --model-file" in result.stderr
    assert "--model-file" in run("predict", "--help").stdout and "--model " not in run("predict", "--help").stdout
    assert "Missing option '--model-file'" in run("predict", "--data", deployment / "test.csv").output


@pytest.mark.parametrize("flag, address, message", [
    ("--peers", "tcp://127.0.0.1:99999", "the port must be a number from 1 to 65535, got '99999'"),
    ("--peers", "tcp://127.0.0.1:0", "the port must be a number from 1 to 65535"),
    ("--peers", "127.0.0.1:7001", "must start with tcp://"),
    ("--peers", "udp://127.0.0.1:7001", "must start with tcp:// (got udp://)"),
    ("--peers", "tcp://127.0.0.1", "give a host and a port"),
    ("--bind", "127.0.0.1:7000", "must start with tcp://"),
    ("--bind", "tcp://*:7000", "a peer is named by its bind address, which its neighbours list in --peers; bind the "
                               "address they connect to, not a wildcard"),
    ("--bind", "tcp://0.0.0.0:7000", "a peer is named by its bind address"),
    ("--bind", "tcp://[::1]:7000", "IPv6 addresses are not supported"),
    ("--bind", "tcp://127.0.0.1:http", "the port must be a number"),
])
def test_a_malformed_address_is_a_malformed_option_refused_before_anything_else(deployment, flag, address, message):
    args = [str(a) for a in node_args(deployment, deployment / "node-0.csv")]
    args[args.index(flag) + 1] = address
    result = run(*args)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.startswith("Usage: main node [OPTIONS]")
    assert f"Error: Invalid value for '{flag}': {address!r}: {message}" in result.output
    assert not (deployment / "m.json").exists()


@pytest.mark.parametrize("extra, message", [
    (["--start-at", "yesterday"], "--start-at 'yesterday' is neither an ISO 8601 time nor seconds since the epoch"),
    (["--start-at", "2026-11-24T09:00:00"], "--start-at '2026-11-24T09:00:00' has no time zone"),
    (["--metrics-port", "1"], "--metrics-port 1 is the port of --bind tcp://127.0.0.1:1: give another"),
])
def test_an_unreadable_start_time_or_the_peers_own_port_for_metrics_is_a_usage_error(deployment, extra, message):
    """They ended with exit status 1, as bad data does: the command line reference gives 2 for a malformed command line."""
    result = run(*node_args(deployment, deployment / "node-0.csv"), *extra)
    assert result.exit_code == 2 and f"Error: {message}" in result.output, result.output


def test_a_host_that_does_not_resolve_is_an_error_not_a_malformed_option(deployment):
    args = [str(a) for a in node_args(deployment, deployment / "node-0.csv")]
    args[args.index("--peers") + 1] = "tcp://no.such.host.invalid:7000"
    result = run(*args)
    assert result.exit_code == 1 and "Usage:" not in result.output, result.output
    assert "Error: --peers 'tcp://no.such.host.invalid:7000': cannot resolve host 'no.such.host.invalid'" in result.output


def test_split_refuses_a_wildcard_in_keys_for_as_a_malformed_option(tmp_path):
    result = run("split", "--data", "mushroom", "--nodes", "2", "--local-size", "10", "--out", tmp_path,
                 "--keys-for", "tcp://127.0.0.1:7000,tcp://*:7001")
    assert result.exit_code == 2 and "Usage:" in result.output
    assert "Error: Invalid value for '--keys-for': 'tcp://*:7001': a peer is named by its bind address" in result.output


def test_split_into_a_directory_with_an_earlier_runs_checkpoints_and_models_warns(tmp_path):
    args = ("split", "--data", "mushroom", "--nodes", "2", "--local-size", "10", "--out", tmp_path)
    assert "Warning" not in run(*args).output
    (tmp_path / "checkpoint-0").mkdir()
    (tmp_path / "model-1.json").write_text("{}")
    result = run(*args)
    assert result.exit_code == 0 and (f"Warning: {tmp_path} holds checkpoint-0, model-1.json from an earlier run: a "
                                      "peer resumes from its checkpoint") in " ".join(result.output.split())
    (tmp_path / "checkpoint-0").rmdir()
    assert (f"Warning: {tmp_path} holds model-1.json from an earlier run: a peer replaces its model file only when it "
            "finishes its rounds (until then, or if it fails, crc predict reads the old one, which may not fit the new "
            "data)") in " ".join(
        run(*args).output.split())


def test_split_with_new_keys_removes_the_checkpoints_of_the_earlier_run_its_peers_could_not_resume_from(tmp_path):
    """Running the README's "Real peers" block twice: the second split's new keys make a new run id, every peer
    refused its old checkpoint ('checkpoint of a different configuration (run differ)'), and crc predict scored the
    old model file."""
    args = ("split", "--data", "mushroom", "--nodes", "2", "--local-size", "10", "--out", tmp_path,
            "--keys-for", "tcp://127.0.0.1:7000,tcp://127.0.0.1:7001")
    assert run(*args).exit_code == 0
    for index in (0, 1):
        checkpoint.save(tmp_path / f"checkpoint-{index}", identity={"run": "old"}, round_=3, stats=np.zeros(2), metrics={})
    (tmp_path / "checkpoint-1" / "notes.txt").write_text("mine")  # not a checkpoint: kept, and its directory
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert ("removed checkpoint-0, checkpoint-1: checkpoints of an earlier run, which the peers of these new keys (a "
            "new run id) could not resume from") in result.stderr
    assert not (tmp_path / "checkpoint-0").exists() and sorted(p.name for p in (tmp_path / "checkpoint-1").iterdir()) == [
        "notes.txt"]


def test_a_peer_that_never_hears_from_a_neighbour_writes_its_model_but_fails(deployment):
    bind, silent = (f"tcp://127.0.0.1:{port}" for port in free_ports(2))
    result = run("node", "--bind", bind, "--peers", silent, "--data", deployment / "node-0.csv",
                 "--schema", deployment / "schema.json", "--out", deployment / "alone.json", "--rounds", "2",
                 "--timeout", "0.1", "--first-round-timeout", "0.1", "--log-level", "warning", "--insecure")
    assert result.exit_code == 3, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert errors == [f"Error: no statistics from any of the 1 neighbour(s) in 2 rounds (0 message(s) rejected): this "
                      f"peer trained alone; its model is written to {deployment / 'alone.json'} all the same"]
    assert (deployment / "alone.json").exists()
    alone = run("node", "--bind", bind, "--data", deployment / "node-0.csv", "--schema", deployment / "schema.json",
                "--out", deployment / "solo.json", "--rounds", "2", "--insecure")  # no neighbours configured: nothing to miss
    assert alone.exit_code == 0, alone.output
    assert "no --peers: this peer has no neighbours and trains alone, on its own data only" in alone.stderr
    assert "no --peers" not in result.stderr


@pytest.mark.parametrize("args, logged", [
    ([], "algorithm accelerated: exact diffusion, categorical start, averaged category counts, 3 local steps per round"),
    (["--algorithm", "paper"], "algorithm paper: 1 local step per round"),
    (["--momentum", "0.5"], "algorithm paper: momentum 0.5, 1 local step per round"),
    (["--dp-epsilon", "4"], "algorithm paper: 1 local step per round"),
])
def test_a_peer_runs_the_accelerated_algorithm_unless_told_otherwise_and_logs_which(deployment, tmp_path, args, logged):
    (bind,) = (f"tcp://127.0.0.1:{port}" for port in free_ports(1))
    result = run("node", "--bind", bind, "--data", deployment / "node-0.csv", "--schema", deployment / "schema.json",
                 "--out", tmp_path / "solo.json", "--rounds", "1", "--insecure", *args)
    assert result.exit_code == 0, result.output
    assert any(line.endswith(f" {logged}") for line in result.stderr.splitlines()), result.stderr


def test_a_peer_refuses_exact_diffusion_with_privacy(deployment, tmp_path):
    result = run("node", "--bind", "tcp://127.0.0.1:1", "--data", deployment / "node-0.csv", "--schema",
                 deployment / "schema.json", "--out", tmp_path / "m.json", "--insecure", "--algorithm", "accelerated",
                 "--dp-epsilon", "4")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"--dp-epsilon needs --iters 1 (got {algorithm_settings('accelerated', 'nb')['iters']})" in result.output


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_stopped_peer_says_whether_it_wrote_a_checkpoint(deployment, tmp_path, checkpoint):
    bind, silent = (f"tcp://127.0.0.1:{port}" for port in free_ports(2))
    command = [sys.executable, "-m", "crc", "node", "--bind", bind, "--peers", silent, "--data", str(deployment / "node-0.csv"),
               "--schema", str(deployment / "schema.json"), "--out", str(tmp_path / "m.json"), "--first-round-timeout", "60",
               "--insecure"]
    if checkpoint:
        command += ["--checkpoint", str(tmp_path / "ckpt")]
    with subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, text=True) as peer:
        try:
            deadline = time.monotonic() + 30
            line = ""
            while "listening on" not in line:  # the peer is in its first round's wait
                assert time.monotonic() < deadline
                line = peer.stderr.readline()
            assert "the first round waits up to 60 s for the neighbours' statistics (--first-round-timeout)" in line
            peer.send_signal(signal.SIGINT)
            log = peer.stderr.read()
            assert peer.wait(timeout=30) == 130
        finally:
            if peer.poll() is None:
                peer.kill()
    if checkpoint:
        assert f"stopped at round 0; checkpoint written to {tmp_path / 'ckpt'}" in log
    else:
        assert "stopped at round 0; no checkpoint (no checkpoint directory): a restart begins at round 0" in log
        assert "checkpoint written" not in log
