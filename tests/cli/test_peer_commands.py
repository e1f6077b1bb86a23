import json

import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.data import read_csv
from crc.core.model_file import TrainedModel
from crc.core.models import make_model
from crc.core.schema import Schema


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
    labels = [read_csv(deployment / f"node-{i}.csv")[schema.label] for i in range(4)]
    assert sum(len(set(node)) == 1 for node in labels) >= 3  # the label partition: nearly one class per node
    assert len(read_csv(deployment / "test.csv")[schema.label]) == 200


def test_schema_from_a_csv_file(tmp_path, deployment):
    out = tmp_path / "s.json"
    result = run("schema", "--data", deployment / "test.csv", "--label", "class", "--out", out)
    assert result.exit_code == 0, result.output
    assert Schema.load(out).label == "class"


def node_args(deployment, data):
    return ["node", "--bind", "tcp://127.0.0.1:1", "--peers", "tcp://127.0.0.1:2", "--data", data,
            "--schema", deployment / "schema.json", "--out", deployment / "m.json"]


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


def test_node_refuses_a_label_other_than_the_schemas(deployment):
    result = run(*node_args(deployment, deployment / "node-0.csv"), "--label", "other")
    assert result.exit_code == 1 and "differs from the schema's label 'class'" in result.output


def test_predict_writes_probabilities_and_reports_accuracy(deployment, tmp_path):
    schema = Schema.load(deployment / "schema.json")
    model = make_model("nb", schema)
    TrainedModel(schema, "nb", model.uniform(100.0)).save(tmp_path / "uniform.json")
    result = run("predict", "--model", tmp_path / "uniform.json", "--data", deployment / "test.csv")
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
    result = run("predict", "--model", tmp_path / "bad.json", "--data", deployment / "test.csv")
    assert result.exit_code == 1 and "statistics must be" in result.output
    obj["statistics"] = [float("nan")] * len(obj["statistics"])
    (tmp_path / "nan.json").write_text(json.dumps(obj).replace("NaN", "null"))
    result = run("predict", "--model", tmp_path / "nan.json", "--data", deployment / "test.csv")
    assert result.exit_code == 1 and "list of finite numbers" in result.output
