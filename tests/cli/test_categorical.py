"""--categorical: a CSV file's code column of more than ten distinct numbers (a ward, a postcode) read as categorical,
which the paper's rule would take for a continuous feature."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crc.core.schema import CONTINUOUS, DISCRETE, Schema
from support.cli import one_line, run


@pytest.fixture(scope="module")
def wards(tmp_path_factory):
    """400 patients: a ward of 15 (its code says nothing as a number; wards 3, 7 and 11 are where the sick are), an age
    and a score that carry nothing."""
    rng = np.random.default_rng(0)
    ward = rng.integers(1, 16, size=400)
    sick = np.where(np.isin(ward, (3, 7, 11)), rng.random(400) < 0.85, rng.random(400) < 0.1)
    path = tmp_path_factory.mktemp("wards") / "wards.csv"
    rows = [f"{w},{a:.1f},{s:.3f},{'yes' if y else 'no'}"
            for w, a, s, y in zip(ward, rng.normal(50, 10, 400), rng.normal(0, 1, 400), sick)]
    path.write_text("\n".join(["ward,age,score,sick", *rows]) + "\n")
    return path


def kinds(schema: Schema) -> dict:
    return {f.name: f.kind for f in schema.features}


def test_the_schema_reads_a_named_column_as_categorical(wards, tmp_path):
    assert run("schema", "--data", wards, "--label", "sick", "--out", tmp_path / "rule.json").exit_code == 0
    result = run("schema", "--data", wards, "--label", "sick", "--categorical", "ward", "--out", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    assert kinds(Schema.load(tmp_path / "rule.json"))["ward"] == CONTINUOUS  # 15 distinct numbers: the paper's rule
    named = Schema.load(tmp_path / "s.json")
    assert kinds(named) == {"ward": DISCRETE, "age": CONTINUOUS, "score": CONTINUOUS}
    assert named.features[0].categories == tuple(str(w) for w in range(1, 16))  # in numeric order


def test_a_simulation_learns_the_wards_as_categories_and_records_them(wards, tmp_path):
    common = ["-q", "simulate", "--data", wards, "--label", "sick", "--nodes", "4", "--local-size", "60", "--rounds", "16",
              "--no-rc-converged"]
    as_numbers = run(*common, "--out", tmp_path / "numbers.json")
    as_codes = run(*common, "--categorical", "ward", "--out", tmp_path / "codes.json")
    assert as_numbers.exit_code == as_codes.exit_code == 0, as_codes.output
    numbers, codes = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("numbers", "codes"))
    assert codes["config"]["categorical"] == ["ward"] and numbers["config"]["categorical"] == []
    assert codes["crc"]["test_error"] < numbers["crc"]["test_error"] - 0.03  # the wards, not a slope over their codes


def test_a_member_of_a_vertical_group_names_its_code_columns_too(wards, tmp_path):
    member = tmp_path / "member.csv"
    lines = wards.read_text().splitlines()
    member.write_text("\n".join(["id,ward", *(f"{i},{line.split(',')[0]}" for i, line in enumerate(lines[1:]))]) + "\n")
    result = run("schema", "--data", member, "--id-column", "id", "--features-only", "--categorical", "ward",
                 "--out", tmp_path / "features.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "features.json").read_text())["features"][0]["kind"] == DISCRETE


@pytest.mark.parametrize("args, message", [
    (["--categorical", "wrd"], "categorical feature(s) 'wrd' not among the feature columns (ward, age, score)"),
    (["--categorical", "sick"], "--categorical names 'sick', the label column: the classes are categories already"),
    (["--categorical", "ward,ward"], "names a column twice: ward,ward"),
])
def test_a_name_that_is_no_feature_column_is_one_line(wards, args, message):
    one_line(run("simulate", "--data", wards, "--label", "sick", *args), 2 if "twice" in message else 1, message)


def test_a_bundled_data_set_keeps_its_kinds():
    one_line(run("simulate", "--data", "letter", "--categorical", "x-box"), 1,
             "letter: a bundled data set, whose feature kinds are fixed: --categorical is for CSV files")
