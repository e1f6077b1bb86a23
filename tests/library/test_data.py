import gzip

import numpy as np
import pytest

from crc.core.data import encode, encode_features, split_counts, split_indices
from crc.core.errors import CRCError
from crc.core.schema import infer_schema
from crc.tables.datasets import BUNDLED, load_bundled, load_dataset, synthetic_dataset
from crc.tables.reader import read_csv


def write(path, text, gz=False):
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_read_csv_plain_and_gzip(tmp_path, gz):
    path = write(tmp_path / ("t.csv.gz" if gz else "t.csv"), "a,b,cls\n1.5,x,yes\n,y,no\n", gz)
    cols = read_csv(path)
    assert {name: column.cells() for name, column in cols.items()} == {"a": ["1.5", ""], "b": ["x", "y"], "cls": ["yes", "no"]}


def test_encode_missing_values_as_nan_and_strings_as_codes(tmp_path):
    cols = {"a": [str(v) for v in range(12)] + [""], "b": ["x", "y"] * 6 + ["?"], "cls": ["p", "q"] * 6 + ["p"]}
    schema = infer_schema(cols, "cls")
    x, y = encode(schema, cols)
    assert np.isnan(x[12]).all()
    assert x[:2, 1].tolist() == [0.0, 1.0]
    assert y.tolist()[:3] == [0, 1, 0]


def test_encode_rejects_unknown_category_class_and_columns():
    cols = {"b": ["x", "y"], "cls": ["p", "q"]}
    schema = infer_schema(cols, "cls")
    with pytest.raises(CRCError, match="unknown category 'z'"):
        encode(schema, {"b": ["z", "x"], "cls": ["p", "q"]})
    with pytest.raises(CRCError, match="unknown class 'r'"):
        encode(schema, {"b": ["x", "x"], "cls": ["p", "r"]})
    with pytest.raises(CRCError, match=r"missing label in data row 2 \(empty, \?, nan, NA, N/A and null cells are missing"):
        encode(schema, {"b": ["x", "x"], "cls": ["p", "NA"]}, source="d.csv")
    with pytest.raises(CRCError, match="missing column"):
        encode(schema, {"cls": ["p", "q"]})
    with pytest.raises(CRCError, match="not in the schema: 'extra': drop them, or make the schema from a table that has them$"):
        encode(schema, {"b": ["x", "y"], "cls": ["p", "q"], "extra": ["1", "2"]})
    continuous = infer_schema({"a": [str(i) for i in range(11)], "cls": list("pq" * 5) + ["p"]}, "cls")
    with pytest.raises(CRCError, match=r"^d.csv: column 'a' is continuous but holds 'n\.a\.' \(not a finite number\) in data "
                                       r"row 2 \(empty, \?, nan, NA, N/A and null cells are missing values\)$"):
        encode(continuous, {"a": ["1", "n.a."], "cls": ["p", "q"]}, source="d.csv")


def test_an_unknown_category_says_what_to_do_and_lists_a_dozen_known_ones():
    """A category the training data never had (a new city at prediction time): one line that lists at most twelve known
    categories and says to leave the cell empty, which every model goes without."""
    cities = [f"c{k:02d}" for k in range(60)]
    schema = infer_schema({"city": cities * 2, "cls": list("pq" * 60)}, "cls")
    message = (r"^d.csv: column 'city' has unknown category 'atlantis' in data row 2; known: c00, c01, c02, c03, c04, c05, "
               r"c06, c07, c08, c09, c10, c11, \.\.\. \(60 in all\): correct the cell, or leave it empty \(a missing "
               r"value, which the model goes without\)$")
    for call in (lambda cells: encode(schema, {"city": cells, "cls": ["p", "q"]}, source="d.csv")[0],
                 lambda cells: encode_features(schema, {"city": cells}, source="d.csv")):
        with pytest.raises(CRCError, match=message):
            call(["c01", "atlantis"])
        assert np.isnan(call(["c01", ""])[1, 0])


def test_a_file_without_a_header_is_named_as_such():
    """Its first row read as names: every missing-column error says to add a header, and only then."""
    schema = infer_schema({"b": ["1.5", "2.5"], "cls": ["p", "q"]}, "cls")
    for columns, hinted in (({"0.5": ["1.5"], "3": ["2"]}, True), ({"0.5": ["1.5"], "p": ["q"]}, False)):
        for call in (encode, encode_features):
            with pytest.raises(CRCError, match="^d.csv: missing column") as raised:
                call(schema, columns, source="d.csv")
            assert ("first line looks like data, not column names: add a header row" in str(raised.value)) == hinted


def test_read_csv_errors(tmp_path):
    with pytest.raises(CRCError, match="no such file"):
        read_csv(tmp_path / "absent.csv")
    with pytest.raises(CRCError, match="line 3 has 1 cells, expected 2"):
        read_csv(write(tmp_path / "ragged.csv", "a,b\n1,2\n3\n"))
    with pytest.raises(CRCError, match="header but no data"):
        read_csv(write(tmp_path / "empty.csv", "a,b\n"))


def test_split_is_seeded_disjoint_and_checks_size():
    train, test = split_indices(100, 60, 0.25, seed=3)
    again, _ = split_indices(100, 60, 0.25, seed=3)
    assert len(train) == 60 and len(test) == 25
    assert not set(train) & set(test)
    assert np.array_equal(train, again)
    with pytest.raises(CRCError, match="fewer than the 80 training .* at most 75 training instances fit, so give fewer "
                                       "peers or fewer instances each, or a test size of at most 20 \\(it is a count\\)$"):
        split_indices(100, 80, 25, seed=0)  # a count is given in full or refused
    assert len(split_indices(100, 80, 20, seed=0)[1]) == 20  # the largest count that fits
    with pytest.raises(CRCError, match="fewer instances each$"):
        split_indices(100, 100, 5, seed=0)  # no count fits beside that training set


def test_a_test_fraction_too_large_for_the_data_gets_the_instances_the_training_set_leaves():
    assert split_counts(100, 60, 0.25) == (25, 25)
    assert split_counts(100, 80, 0.25) == (20, 25)
    train, test = split_indices(100, 80, 0.25, seed=0)
    assert len(train) == 80 and len(test) == 20 and not set(train) & set(test)
    assert sorted(np.concatenate([train, test])) == list(range(100))
    assert split_counts(3196, 2500, 0.25) == (696, 799)  # chess in the default setting
    with pytest.raises(CRCError, match=r"fewer than the 100 training .* plus at least 1 test instance needed: at most 99 "
                                       r"training instances fit, so give fewer peers or fewer instances each$"):
        split_indices(100, 100, 0.25, seed=0)
    with pytest.raises(CRCError, match=r"^data set has 12 instances, fewer than the 2500 training \(nodes x local size\) plus "
                                       r"at least 1 test instance needed: at most 11 training instances fit, so give fewer peers or "
                                       r"fewer instances each$"):
        split_counts(12, 2500, 0.25)
    with pytest.raises(CRCError, match=r"^tiny.csv: data set has 12 instances, fewer than the 2500 training"):
        split_indices(12, 2500, 0.25, source="tiny.csv")  # the file a command read, named
    with pytest.raises(CRCError, match="test size 0.001 leaves no test instance out of 100"):
        split_indices(100, 10, 0.001, seed=0)


def test_every_bundled_data_set_loads_with_documented_shape():
    expected = {"letter": (20000, 16, 26), "mushroom": (5644, 22, 2), "optdigits": (5620, 64, 10), "splice": (3190, 60, 3),
                "wdbc": (569, 30, 2), "german": (1000, 20, 2)}
    for name, (m, d, r) in expected.items():
        ds = load_bundled(name)
        assert ds.x.shape == (m, d) and ds.schema.n_classes == r
    assert len(BUNDLED) == 17


def test_load_dataset_errors(tmp_path):
    with pytest.raises(CRCError, match="no such file, and not a bundled"):
        load_dataset("nonexistent")
    with pytest.raises(CRCError, match=r"lettr: no such file, and not a bundled data set \(did you mean 'letter'\?\)"):
        load_dataset("lettr")
    path = write(tmp_path / "t.csv", "a,cls\n1,p\n2,q\n")
    with pytest.raises(CRCError, match="needs --label naming its class column, one of a, cls$"):
        load_dataset(str(path))
    with pytest.raises(CRCError) as wrong_label:  # named by the path given, as the error above: not 't.csv' alone
        load_dataset(str(path), label="y")
    assert str(wrong_label.value).startswith(f"{path}: label column 'y' not found")
    assert load_dataset(str(path), label="cls").name == "t.csv"  # the data set's name in a summary stays the file's
    wide = write(tmp_path / "w.csv", ",".join(f"f{j}" for j in range(20)) + "\n" + ",".join(["1"] * 20) + "\n")
    with pytest.raises(CRCError, match=r"one of f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, \.\.\. \(20 in all\)$"):
        load_dataset(str(wide))


def test_synthetic_is_seeded():
    a, b = synthetic_dataset(50, seed=4), synthetic_dataset(50, seed=4)
    assert np.array_equal(a.x, b.x) and a.x.shape == (50, 20) and a.schema.n_classes == 3


def test_a_value_whose_square_would_overflow_is_refused_not_a_nan_probability():
    """crc predict on a value of 1.7e308 printed p(a) = nan, p(b) = nan and a class, under numpy's overflow warnings."""
    cols = {"a": [str(i / 10) for i in range(12)], "cls": list("pq" * 6)}
    schema = infer_schema(cols, "cls").standardized(np.arange(12.0)[:, None] / 10)
    assert np.isfinite(encode_features(schema, {"a": ["1e100", "?"]})[0]).all()
    with pytest.raises(CRCError, match=r"^t.csv: instance 2 has a value too large for the schema's standardization "
                                       r"\(1.7e\+308 in column 'a'\): correct the cell, or leave it empty$"):
        encode_features(schema, {"a": ["0.5", "1.7e308"]}, source="t.csv")


@pytest.mark.parametrize("scale", [1e-200, 1e-300, 1e200, 1e300])
def test_numbers_of_any_finite_scale_standardize_as_the_same_numbers_at_scale_one(scale):
    """A column in units far from 1 (1e-200: squares underflow to 0; 1e200: they overflow) carries the same
    information: its standard deviation was 0 (the column dropped as constant) or infinite (the column refused)."""
    values = np.array([[5.1], [4.9], [6.3], [5.8], [7.1], [np.nan]])
    schema = infer_schema({"a": [str(i) for i in range(12)], "cls": list("pq" * 6)}, "cls")
    plain = schema.standardized(values).features[0]
    with np.errstate(all="raise"):
        scaled = schema.standardized(values * scale).features[0]
    assert scaled.mean == pytest.approx(plain.mean * scale, rel=1e-12) and scaled.std == pytest.approx(plain.std * scale, rel=1e-12)
    assert plain.std != 1.0


def test_numbers_too_large_to_standardize_are_refused_without_numpy_warnings():
    """crc simulate on a column of values near 1e308: numpy's overflow warnings, then a schema with std Infinity."""
    schema = infer_schema({"a": [str(i) for i in range(12)], "cls": list("pq" * 6)}, "cls")
    with np.errstate(all="raise"), pytest.raises(CRCError, match=r"'a' holds numbers too large to standardize \(up to 1.7e\+308"):
        schema.standardized(np.array([[1.7e308], [-1.7e308], [-1.7e308]]))  # 1.7e308 - mean overflows
