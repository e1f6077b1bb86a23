"""Damaged files given to the commands: one line naming the file and the problem, exit status 1, never a traceback."""

import json

import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.model_file import TrainedModel
from crc.core.models import MAX_STATISTICS, make_model
from crc.core.schema import Schema
from crc.nodes import checkpoint
from crc.nodes.launcher import free_ports


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, path, message: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"Error: {path}: "), result.stderr
    assert message in result.stderr, result.stderr


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    out = tmp_path_factory.mktemp("deployment")
    result = run("split", "--data", "mushroom", "--nodes", "2", "--local-size", "30", "--test-size", "50", "--out", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def model_json(deployment):
    schema = Schema.load(deployment / "schema.json")
    return TrainedModel(schema, "pc", make_model("pc", schema).uniform(100.0), components=2).to_json()


def damaged_models(obj):
    text = json.dumps(obj)
    yield "deep", "[" * 100_000 + "]" * 100_000, "nests arrays and objects more than 32 deep"
    yield "nan", text.replace(json.dumps(obj["statistics"][0]), "NaN", 1), "NaN is not allowed"
    yield "overflow", text.replace(json.dumps(obj["statistics"][0]), "1e999", 1), "overflows a float"
    yield "components", json.dumps(obj | {"options": {"components": 10**12}}), "model option 'components' must lie in [1, 64]"
    yield "booleans", json.dumps(obj | {"statistics": [True] * len(obj["statistics"])}), "'statistics' must be a list of finite numbers"
    yield "truncated", text[: len(text) // 2], "not valid JSON"
    yield "garbage", "\x00\x17binary", "not valid JSON"
    yield "format", json.dumps({"format": "crc-model/9"}), "not a crc model file"


@pytest.mark.parametrize("case", ["deep", "nan", "overflow", "components", "booleans", "truncated", "garbage", "format"])
def test_predict_refuses_a_damaged_model_file_in_one_line(deployment, model_json, tmp_path, case):
    name, text, message = next(c for c in damaged_models(model_json) if c[0] == case)
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    one_line_error(run("predict", "--model-file", path, "--data", deployment / "test.csv"), path, message)


def test_predict_names_a_missing_model_file(deployment, tmp_path):
    path = tmp_path / "none.json"
    one_line_error(run("predict", "--model-file", path, "--data", deployment / "test.csv"), path, "cannot read model file")


def node(deployment, directory, *, rounds=2, schema=None):
    """``crc node`` alone (no neighbours) on a port of its directory's own, so that a rerun has the same identity."""
    if not (directory / "port").exists():
        (directory / "port").write_text(str(free_ports(1)[0]))
    bind = f"tcp://127.0.0.1:{(directory / 'port').read_text()}"
    return run("node", "--bind", bind, "--data", deployment / "node-0.csv", "--schema", schema or deployment / "schema.json",
               "--out", directory / "model.json", "--rounds", rounds, "--checkpoint", directory / "ckpt", "--log-level", "error",
               "--insecure")


@pytest.fixture
def finished(deployment, tmp_path):
    """A peer that ran its 2 rounds alone: the checkpoint directory holds its final checkpoint."""
    result = node(deployment, tmp_path)
    assert result.exit_code == 0, result.output
    return tmp_path


def forge(directory, *, round_: int) -> None:
    """Rewrite the checkpoint as a well-formed one (right CRC) of ``round_``: a deliberate edit, not a torn write."""
    (path,) = (directory / "ckpt").iterdir()
    header, stats = checkpoint.decode(path.read_bytes(), source=path)
    path.unlink()
    (directory / "ckpt" / checkpoint.file_name(round_)).write_bytes(
        checkpoint.encode(identity=header["identity"], round_=round_, stats=stats, metrics=header["metrics"] | {"rounds_done": round_}))


def test_a_resumed_node_refuses_a_round_beyond_its_run(deployment, finished):
    forge(finished, round_=10**9)
    path = finished / "ckpt" / checkpoint.file_name(10**9)
    one_line_error(node(deployment, finished), path, "damaged checkpoint: round 1000000000 is beyond the run's 2 rounds")


def test_a_resumed_node_refuses_a_torn_checkpoint(deployment, finished):
    (path,) = (finished / "ckpt").iterdir()
    path.write_bytes(path.read_bytes()[:-5])
    one_line_error(node(deployment, finished), path, "damaged checkpoint (truncated or altered")


def test_a_resumed_node_refuses_the_checkpoint_of_another_configuration(deployment, finished):
    (path,) = (finished / "ckpt").iterdir()
    one_line_error(node(deployment, finished, rounds=3), path, "checkpoint of a different configuration (rounds differ)")


def test_a_resumed_node_refuses_an_old_json_checkpoint(deployment, tmp_path):
    (tmp_path / "ckpt").mkdir()
    path = tmp_path / "ckpt" / "checkpoint.json"
    path.write_text(json.dumps({"format": "crc-checkpoint/1", "round": True, "statistics": [True]}))
    one_line_error(node(deployment, tmp_path), path, "a checkpoint of an earlier crc version")


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["features"][0].update(kind="continuous", mean=0.0, std=True), "features[0].std must be a finite number, got true"),
    (lambda s: s.update(classes=["e", ["p"]]), "classes[1] must be a string"),
    (lambda s: s.update(features=json.loads("[" * 20 + "]" * 20)), "features[0] must be an object"),
    (lambda s: s.update(classes=[f"c{i}" for i in range(100_000)]), "the schema's model would hold 9,900,000 statistics or "
                                                                     f"more, more than {MAX_STATISTICS:,}: give the schema fewer"),
])
def test_a_node_refuses_a_damaged_schema_file(deployment, tmp_path, edit, message):
    schema = json.loads((deployment / "schema.json").read_text())
    edit(schema)
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    one_line_error(node(deployment, tmp_path, schema=path), path, message)
