"""A vertical group's classifier from its peers' model files (crc.core.group_model) is the block model's."""

import numpy as np
import pytest

from crc.core.errors import CRCError
from crc.core.group_model import check_group, group_posteriors, load_group
from crc.core.model_file import TrainedModel
from crc.core.models.blocks import block_schema
from crc.tables.datasets import load_dataset
from support.vertical import reference


def block_files(ref, partition: str, options: dict) -> list[TrainedModel]:
    """Each block's model file as its peer writes it: the block's features, the group's classes, its best statistics."""
    model = ref.model
    return [TrainedModel(block_schema(model.schema, model.blocks[b]), ref.config.model,
                         model.block_statistics(ref.best, b), {"partition": partition, "block": b}, **options)
            for b in range(len(model.parts))]


@pytest.mark.parametrize("kind, options", [("nb", {}), ("qda", {}), ("pc", {"structure": "mixture", "components": 2,
                                                                             "structure_seed": 0})])
def test_the_blocks_model_files_together_are_the_groups_classifier(kind, options):
    ref = reference("wdbc", kind, 3, rounds=4)
    files = block_files(ref, "vertical:3", options)
    check_group(files, ["a", "b", "c"])
    schema, split = ref.model.schema, ref.rep.split
    x = load_dataset("wdbc").x[split.test_rows]  # wdbc's features are all continuous: the values are the raw cells
    columns = {name: list(x[:, j]) for j, name in enumerate(schema.feature_names)}
    expected = ref.model.posteriors(ref.model.theta(ref.best), split.phi_test)
    got = group_posteriors(files, columns, source="test")
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_files_that_are_not_one_groups_blocks_are_refused():
    ref = reference("wdbc", "nb", 2, rounds=2)
    first, second = block_files(ref, "vertical:2", {})
    with pytest.raises(CRCError, match="b and a both hold block 0"):
        check_group([first, first], ["a", "b"])
    alone = TrainedModel(first.schema, "nb", first.stats, {})
    with pytest.raises(CRCError, match="a: not a block of a vertical or hybrid group"):
        check_group([alone, second], ["a", "b"])


def test_a_group_missing_a_block_or_mixing_partitions_is_refused():
    """Without the check, blocks 0 and 2 of a vertical:3 group predicted as a classifier nobody learned."""
    ref = reference("wdbc", "nb", 3, rounds=2)
    first, second, third = block_files(ref, "vertical:3", {})
    with pytest.raises(CRCError, match=r"no model file of block 1 of the vertical:3 group: give every block's"):
        check_group([first, third], ["a", "c"])
    with pytest.raises(CRCError, match=r"no model file of block 2 of the vertical:3 group"):
        check_group([first, second], ["a", "b"])
    other = TrainedModel(second.schema, "nb", second.stats, {"partition": "hybrid:2x3", "block": 1})
    with pytest.raises(CRCError, match=r"b: block 1 of a hybrid:2x3 partition, a: of vertical:3"):
        check_group([first, other, third], ["a", "b", "c"])


def test_load_group_reads_every_blocks_file_in_any_order_and_predicts_as_the_group(tmp_path):
    ref = reference("wdbc", "nb", 3, rounds=4)
    files = block_files(ref, "vertical:3", {})
    paths = []
    for b, trained in enumerate(files):
        trained.save(tmp_path / f"model-{b}.json")
        paths.append(tmp_path / f"model-{b}.json")
    schema, split = ref.model.schema, ref.rep.split
    x = load_dataset("wdbc").x[split.test_rows]
    columns = {name: list(x[:, j]) for j, name in enumerate(schema.feature_names)}
    group = load_group([paths[2], paths[0], paths[1]])
    assert [trained.group_block for trained in group.blocks] == [0, 1, 2]
    np.testing.assert_allclose(group.predict_proba(columns), ref.model.posteriors(ref.model.theta(ref.best), split.phi_test),
                               rtol=1e-9, atol=1e-12)
    assert list(group.predict(columns)) == list(group.classes[group.predict_proba(columns).argmax(axis=1)])
    with pytest.raises(CRCError, match="both hold block 0"):
        load_group([paths[0], paths[0]])
    with pytest.raises(CRCError, match="needs the model file of every block"):
        load_group([])


def test_one_blocks_model_warns_once_that_it_predicts_from_its_block_alone(caplog):
    ref = reference("wdbc", "nb", 2, rounds=2)
    first, _ = block_files(ref, "vertical:2", {})
    columns = {name: [0.0, 1.0] for name in first.schema.feature_names}
    with caplog.at_level("WARNING", logger="crc.model"):
        first.predict(columns)
        first.predict(columns)
    warned = [r.getMessage() for r in caplog.records if "predicts from that block's features alone" in r.getMessage()]
    assert len(warned) == 1 and "block 0 of a vertical:2 group" in warned[0]
    caplog.clear()
    alone = TrainedModel(first.schema, "nb", first.stats, {})
    with caplog.at_level("WARNING", logger="crc.model"):
        alone.predict(columns)
    assert not caplog.records


def test_a_qda_groups_refusal_of_a_missing_value_names_the_data():
    ref = reference("wdbc", "qda", 2, rounds=2)
    files = block_files(ref, "vertical:2", {})
    x = load_dataset("wdbc").x[ref.rep.split.test_rows]
    columns = {name: list(x[:, j]) for j, name in enumerate(ref.model.schema.feature_names)}
    columns[ref.model.schema.feature_names[0]][1] = ""
    with pytest.raises(CRCError, match="^holed.csv: QDA does not handle missing continuous values"):
        group_posteriors(files, columns, source="holed.csv")
