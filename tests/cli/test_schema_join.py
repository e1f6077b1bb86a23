"""`crc schema` for a vertical group whose parties hold their own columns: members' features files (--features-only)
joined by the label holder (--join, --blocks-out) into the schema and blocks file every member is given."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crc.core.feature_partition import read_blocks_file
from crc.core.schema import Schema
from support.cli import one_line, run


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    out = tmp_path_factory.mktemp("own")
    assert run("split", "--data", "wdbc", "--partition", "vertical:3", "--out", out).exit_code == 0
    for block in (1, 2):
        result = run("schema", "--data", out / f"node-{block}.csv", "--id-column", "id", "--features-only",
                     "--out", out / f"features-{block}.json")
        assert result.exit_code == 0, result.output
    return out


def test_the_joined_schema_is_the_pooled_one_in_block_order(split):
    result = run("schema", "--data", split / "node-0.csv", "--label", "class", "--id-column", "id",
                 "--join", split / "features-1.json", "--join", split / "features-2.json",
                 "--out", split / "joined.json", "--blocks-out", split / "joined-blocks.json")
    assert result.exit_code == 0, result.output
    joined, pooled = Schema.load(split / "joined.json"), Schema.load(split / "schema.json")
    blocks = read_blocks_file(split / "joined-blocks.json")
    assert blocks == read_blocks_file(split / "blocks.json")
    assert joined.feature_names == [name for block in blocks for name in block]
    assert (joined.label, joined.classes) == (pooled.label, pooled.classes)
    by_name = {f.name: f for f in pooled.features}
    for feature in joined.features:
        expected = by_name[feature.name]
        assert (feature.kind, feature.categories) == (expected.kind, expected.categories)
        assert np.isclose(feature.mean, expected.mean, rtol=1e-12) and np.isclose(feature.std, expected.std, rtol=1e-12)


def test_a_features_file_holds_the_members_columns_only(split):
    obj = json.loads((split / "features-1.json").read_text())
    assert obj["format"] == "crc-features/1" and set(obj) == {"format", "features"}
    names = [f["name"] for f in obj["features"]]
    assert names == list(read_blocks_file(split / "blocks.json")[1]) and "id" not in names


def test_a_column_of_two_parties_or_the_labels_name_is_refused_naming_the_file(split, tmp_path):
    twice = tmp_path / "twice.json"
    twice.write_text((split / "features-1.json").read_text())
    one_line(run("schema", "--data", split / "node-0.csv", "--label", "class", "--id-column", "id",
                 "--join", split / "features-1.json", "--join", twice, "--out", tmp_path / "s.json",
                 "--blocks-out", tmp_path / "b.json"), 1, "is also in")
    obj = json.loads((split / "features-1.json").read_text())
    obj["features"][0]["name"] = "class"
    labelled = tmp_path / "labelled.json"
    labelled.write_text(json.dumps(obj))
    one_line(run("schema", "--data", split / "node-0.csv", "--label", "class", "--id-column", "id",
                 "--join", labelled, "--out", tmp_path / "s.json", "--blocks-out", tmp_path / "b.json"), 1,
             "feature 'class' is the label column's name")
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("extra, status, message", [
    (["--features-only", "--label", "class"], 2, "--features-only writes a member's own columns"),
    (["--join", "{split}/features-1.json"], 2, "--join and --blocks-out go together"),
    (["--label", "class", "--id-column", "ident"], 1, "no id column 'ident'"),
    (["--id-column", "id"], 1, "a CSV file needs --label naming its class column"),
])
def test_options_that_do_not_fit_are_one_line(split, tmp_path, extra, status, message):
    extra = [word.format(split=split) for word in extra]
    one_line(run("schema", "--data", split / "node-0.csv", *extra, "--out", tmp_path / "s.json"), status, message)


def test_a_file_that_is_no_features_file_is_refused(split, tmp_path):
    one_line(run("schema", "--data", split / "node-0.csv", "--label", "class", "--id-column", "id",
                 "--join", split / "schema.json", "--out", tmp_path / "s.json", "--blocks-out", tmp_path / "b.json"), 1,
             "not a features file")


def test_a_members_column_it_cannot_use_is_refused_naming_its_file(tmp_path):
    """A member's features file is inferred from its CSV alone: an unusable column was named without the file."""
    member = tmp_path / "member.csv"
    member.write_text("id,lab,notes\n" + "".join(f"{i},{i * 1.5},\n" for i in range(12)))
    one_line(run("schema", "--data", member, "--id-column", "id", "--features-only", "--out", tmp_path / "f.json"), 1,
             f"{member}: feature column 'notes' has no values: drop it")
