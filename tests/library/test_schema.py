import json

import numpy as np
import pytest

from crc.core.data import encode
from crc.core.errors import CRCError
from crc.core.schema import CONTINUOUS, DISCRETE, Schema, infer_features, infer_schema


def table(**columns):
    return {name: list(cells) for name, cells in columns.items()}


def test_rule_numeric_with_many_values_is_continuous_else_discrete():
    cols = table(
        a=[str(i) for i in range(11)],            # 11 distinct numbers -> continuous
        b=[str(i % 10) for i in range(11)],       # 10 distinct numbers -> discrete
        c=["x", "y"] * 5 + ["x"],                 # non-numeric -> discrete
        y=["p", "q"] * 5 + ["p"],
    )
    schema = infer_schema(cols, "y")
    assert [f.kind for f in schema.features] == [CONTINUOUS, DISCRETE, DISCRETE]
    assert schema.features[1].categories == tuple(str(i) for i in range(10))
    assert schema.classes == ("p", "q")


def test_the_limit_of_the_rule_and_the_features_named_categorical():
    cols = table(a=[str(i % 10) for i in range(11)], b=[str(i) for i in range(11)], c=["x", "y"] * 5 + ["x"],
                 y=["p", "q"] * 5 + ["p"])
    kinds = [f.kind for f in infer_schema(cols, "y", max_discrete_distinct=0).features]
    assert kinds == [CONTINUOUS, CONTINUOUS, DISCRETE]  # numbers continuous, text discrete
    schema = infer_schema(cols, "y", max_discrete_distinct=0, categorical=["b"])
    assert [f.kind for f in schema.features] == [CONTINUOUS, DISCRETE, DISCRETE]
    assert schema.features[1].categories == tuple(str(i) for i in range(11))
    with pytest.raises(CRCError, match="categorical feature\\(s\\) 'z', 'w' not among the feature columns"):
        infer_schema(cols, "y", categorical=["a", "z", "w"])
    with pytest.raises(CRCError, match="^--categorical names 'y', the label column: the classes are categories already"):
        infer_schema(cols, "y", categorical=["a", "y", "z"])


def test_numeric_categories_are_canonical_and_sorted_numerically():
    schema = infer_schema(table(a=["10", "2", "2.0", " 1 "], y=["0", "1", "1", "0"]), "y")
    assert schema.features[0].categories == ("1", "2", "10")


def test_missing_cells_are_ignored_by_inference():
    schema = infer_schema(table(a=["1", "", "?", "2"], y=["a", "b", "a", "b"]), "y")
    assert schema.features[0].categories == ("1", "2")


def test_json_round_trip_and_stable_fingerprint(tmp_path):
    schema = infer_schema(table(a=[str(i) for i in range(20)], b=list("xyxy" * 5), y=list("ab" * 10)), "y")
    schema = schema.standardized(__import__("numpy").arange(20.0)[:, None])
    path = tmp_path / "schema.json"
    schema.save(path)
    loaded = Schema.load(path)
    assert loaded == schema
    assert loaded.fingerprint == schema.fingerprint
    assert len(schema.fingerprint) == 64


@pytest.mark.parametrize(
    "obj, message",
    [
        ({"format": "other"}, "not a schema"),
        ({"format": "crc-schema/1", "label": "y", "classes": ["a"], "features": []}, "two distinct classes"),
        ({"format": "crc-schema/1", "label": "y", "classes": ["a", "b"],
          "features": [{"name": "f", "kind": "continuous", "mean": 0, "std": 0}]}, "positive std"),
        ({"format": "crc-schema/1", "label": "y", "classes": ["a", "b"], "features": [{"name": "f", "kind": "weird"}]}, "feature kind"),
        ({"format": "crc-schema/1", "label": "y", "classes": ["a", "b"]}, "missing or invalid"),
        ({"format": "crc-schema/1", "label": "y", "classes": ["a", "b"], "features": []}, "no feature"),
    ],
)
def test_malformed_schema_rejected(obj, message):
    with pytest.raises(CRCError, match=message):
        Schema.from_json(obj)


def test_schema_file_not_json(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("{nope")
    with pytest.raises(CRCError, match="not valid JSON"):
        Schema.load(path)


@pytest.mark.parametrize("stray", ["n.a.", "-", "1,5"])  # an infinity: its own message, below
def test_many_numbers_with_a_stray_value_are_refused_not_made_categories(stray):
    numbers = [str(i / 7) for i in range(30)]
    cols = table(a=numbers + [stray, ""], y=list("pq" * 16))
    with pytest.raises(CRCError, match=f"column 'a' holds numbers but also '{stray}' in data row 31"):
        infer_schema(cols, "y")
    assert infer_schema(cols, "y", categorical=["a"]).features[0].kind == DISCRETE  # named categorical: kept
    three = table(a=numbers + ["n.a.", "x", "-"], y=list("pq" * 16) + ["p"])  # three other values: real categories
    assert infer_schema(three, "y").features[0].kind == DISCRETE
    few = table(a=[str(i) for i in range(10)] + ["x"], y=list("pq" * 5) + ["p"])  # ten numbers: discrete already
    assert infer_schema(few, "y").features[0].categories[-1] == "x"


@pytest.mark.parametrize("missing", ["NA", "N/A", "n/a", "null", "NULL", "?", "nan", ""])
def test_r_and_sql_spellings_of_a_missing_cell_are_missing(missing):
    numbers = [str(i / 7) for i in range(30)]
    cols = table(a=numbers + [missing, "1"], y=list("pq" * 16))
    schema = infer_schema(cols, "y")
    assert schema.features[0].kind == CONTINUOUS
    x, _ = encode(schema, cols)
    assert np.isnan(x[30, 0]) and not np.isnan(x[:30, 0]).any() and not np.isnan(x[31, 0])


def test_a_text_column_different_in_every_row_is_refused_as_an_identifier():
    ids = [f"P{i:04d}" for i in range(11)] + [""]
    cols = table(id=ids, a=[str(i) for i in range(12)], y=list("pq" * 6))
    with pytest.raises(CRCError, match="column 'id' holds a different value in each of its 11 rows: an identifier"):
        infer_schema(cols, "y")
    assert infer_schema(cols, "y", categorical=["id"]).features[0].kind == DISCRETE  # named categorical: kept
    assert infer_schema(table(id=ids[:10], y=list("pq" * 5)), "y").features[0].kind == DISCRETE  # ten rows: too few to tell
    repeated = table(id=ids[:11] + ["P0000"], y=list("pq" * 6))  # one value twice: categories, not an identifier
    assert len(infer_schema(repeated, "y").features[0].categories) == 11


def test_a_row_number_column_is_named_in_a_warning(caplog):
    """Consecutive integers, one per row (a shuffled file's too): a continuous feature that tells the class of a file
    sorted by class, so a warning names it; integers with a gap or a repeat, or ten rows, are not warned about."""
    order = [3, 0, 11, 5, 1, 2, 4, 6, 7, 8, 9, 10]
    cols = table(row=[str(i + 1001) for i in order] + [""], y=list("pq" * 6) + ["p"])
    with caplog.at_level("WARNING", logger="crc.data"):
        assert infer_schema(cols, "y").features[0].kind == CONTINUOUS
    assert caplog.messages == ["feature column 'row' holds the integers 1001 to 1012, one per row: a row number or an "
                               "identifier? It is a feature like any other (in a file sorted by class it gives the "
                               "class away); drop it"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        for cells in ([str(i) for i in range(11)] + ["12"], [str(i) for i in range(11)] + ["10"], [str(i) for i in range(10)],
                      [f"{i}.5" for i in range(12)]):
            infer_schema(table(a=cells, y=list("pq" * 6)[:len(cells)]), "y")
        infer_schema(cols, "y", categorical=["row"])  # 12 categories seen once: the rare-categories warning only
    assert [message for message in caplog.messages if "row number" in message] == []


def test_a_header_that_reads_as_a_data_row_is_named_in_a_warning(caplog):
    """iris without its header, run with --label setosa (the name its first row gave the class column): the first row
    was read as names and left out without a word; a file whose columns are named by numbers (wavelengths) and whose
    label's name is no class is not warned about."""
    cells = {"5.1": [f"{4.3 + 0.2 * i:.1f}" for i in range(12)], "3.5": ["3.0", "3.2", "3.3", "3.1"] * 3,
             "setosa": ["setosa", "versicolor", "virginica"] * 4}
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(cells, "setosa")
    assert caplog.messages == ["the label column's name 'setosa' is one of its classes and the other columns are named by "
                               "numbers (its first line looks like data, not column names: add a header row naming the "
                               "columns); crc took that line for the header, leaving its row out"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema({"400": cells["5.1"], "401": cells["3.5"], "class": cells["setosa"]}, "class")
        infer_schema({"sepal": cells["5.1"], "petal": cells["3.5"], "setosa": cells["setosa"]}, "setosa")
    assert caplog.messages == []


def test_an_identifier_given_in_class_order_is_named_in_a_warning(caplog):
    """Distinct integers with gaps (patient numbers), each class's in a range of its own: an identifier numbered class
    by class, which gives the class away (breast cancer with such a column: test error 0.014 against 0.035), so a
    warning names it; the same numbers not in class order, or repeating one, are not warned about."""
    numbers = [84300903 + 7919 * i + i * i for i in range(12)]
    cols = table(patient=[str(n) for n in numbers] + [""], y=list("p" * 5 + "q" * 7) + ["q"])
    with caplog.at_level("WARNING", logger="crc.data"):
        assert infer_schema(cols, "y").features[0].kind == CONTINUOUS
    assert caplog.messages == [f"feature column 'patient' holds a different integer in each of its 12 rows, those of each "
                               f"class in a range of its own ('p' {numbers[0]} to {numbers[4]}, 'q' {numbers[5]} to "
                               f"{numbers[11]}): an identifier given in class order? It gives the class away; drop it"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(patient=[str(n) for n in numbers], y=list("pq" * 6)), "y")  # classes interleaved
        infer_schema(table(patient=[str(n) for n in numbers[:11] + numbers[:1]], y=list("p" * 5 + "q" * 7)), "y")
        infer_features(table(patient=[str(n) for n in numbers]))  # no label to order by (a vertical party's columns)
    assert caplog.messages == []


def test_a_discrete_column_of_many_rare_categories_is_named_in_a_warning(caplog):
    """Eleven categories or more, seen fewer than ten times each on average (a city, a zip code): unsmoothed category
    frequencies let such a column outweigh the others (iris with a 60-level column of noise: test error 0.27 against
    0.04), so a warning names it; ten categories, or ten rows each, are not warned about."""
    rows = 109
    levels = table(city=[f"c{i % 11}" for i in range(rows)] + [""], y=list("pq" * 55))
    with caplog.at_level("WARNING", logger="crc.data"):
        assert infer_schema(levels, "y").features[0].kind == DISCRETE
    assert caplog.messages == [f"feature column 'city' has 11 categories for {rows} values ({rows / 11:.1f} each on "
                               "average): its frequencies, estimated per class from so few, can outweigh every other "
                               "feature; merge its rare categories or drop it"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(city=[f"c{i % 11}" for i in range(110)], y=list("pq" * 55)), "y")
        infer_schema(table(city=[f"c{i % 10}" for i in range(20)], y=list("pq" * 10)), "y")
    assert caplog.messages == []


def test_a_copy_of_the_label_among_the_features_is_named_in_a_warning(caplog):
    """A discrete column whose values match the classes one to one (the class again, as a code): it gives the class
    away (test error 0), so a warning names it; a column that fails to match in one row is not warned about."""
    species = ["setosa", "versicolor", "virginica"] * 4
    codes = [{"setosa": "1", "versicolor": "2", "virginica": "3"}[name] for name in species]
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(code=codes + [""], y=species + ["setosa"]), "y")
    assert caplog.messages == ["feature column 'code' matches the classes one to one (each of its values goes with "
                               "one class): a copy of the label column 'y'? It gives the class away; drop it"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(code=codes[:-1] + ["1"], y=species), "y")
        infer_schema(table(code=codes[:10], y=species[:10]), "y")  # ten rows: too few to tell
    assert caplog.messages == []


def test_numbers_written_with_a_comma_are_refused_not_made_categories():
    """A decimal comma (3,11) or a thousands separator (1,234): read as text, each value would be a category."""
    commas = [f"{i},{i % 7}5" for i in range(12)] + ["", "3", "1,234,5"]
    cols = table(a=commas, y=list("pq" * 7) + ["p"])
    with pytest.raises(CRCError, match="column 'a' holds numbers written with a comma, such as '0,05' in data row 1"):
        infer_schema(cols, "y")
    assert infer_schema(cols, "y", categorical=["a"]).features[0].kind == DISCRETE  # named categorical: kept
    few = table(a=[f"{i},5" for i in range(10)], y=list("pq" * 5))  # ten values: categories, as any ten
    assert infer_schema(few, "y").features[0].kind == DISCRETE
    words = table(a=[f"{i},5" for i in range(11)] + ["a,b", "a,b"], y=list("pq" * 6) + ["p"])  # not all numbers: text
    assert infer_schema(words, "y").features[0].kind == DISCRETE


def test_label_problems():
    with pytest.raises(CRCError, match="label column 'z' not found"):
        infer_schema(table(a=["1"], y=["a"]), "z")
    with pytest.raises(CRCError, match=r"columns are a;y \(the file looks separated by ';': crc reads comma-separated "
                                       r"files; save it with commas between cells and points in numbers\)$"):
        infer_schema({"a;y": ["1;p", "2;q"]}, "y")
    with pytest.raises(CRCError, match=r"columns are a, b$"):
        infer_schema(table(a=["1"], b=["x"]), "y")
    for given in ("Class ", "clas", " class"):
        with pytest.raises(CRCError, match=r"^label column .* not found \(did you mean 'class'\?\); columns are sepal, class$"):
            infer_schema(table(sepal=["1"], **{"class": ["x"]}), given)
    with pytest.raises(CRCError, match=r"columns are 5.1, 0 \(its first line looks like data, not column names: add a "
                                       r"header row naming the columns\)$"):
        infer_schema({"5.1": ["4.9"], "0": ["1"]}, "class")
    with pytest.raises(CRCError, match=r"columns are 5.1, 3.5, setosa \(its first line looks like data, not column names"):
        infer_schema({"5.1": ["4.9"], "3.5": ["3"], "setosa": ["setosa"]}, "species")  # the first row's class as a name
    with pytest.raises(CRCError, match=r"2 missing values \(first at data row 2; empty, \?, nan, NA, N/A and null cells are "
                                       r"missing values\): drop those rows, or write their class$"):
        infer_schema(table(a=["1", "2", "3"], y=["a", "", "nan"]), "y")
    with pytest.raises(CRCError, match=r"label column 'y' has 12 classes in 22 rows \(11 seen once\): a class column "
                                       r"repeats its classes \(a numeric target or an identifier is not one\); --label names "
                                       r"the class column, and a numeric target cut into ranges makes one$"):
        infer_schema(table(a=["1"] * 22, y=[str(i / 3) for i in range(12)] + ["0"] * 10), "y")
    with pytest.raises(CRCError, match=r"has 12 classes in 22 rows \(2 seen once\)"):  # 10 classes seen twice
        infer_schema(table(a=["1"] * 22, y=[str(i) for i in range(10)] * 2 + ["x", "z"]), "y")
    assert len(infer_schema(table(a=["1"] * 22, y=[str(i) for i in range(11)] * 2), "y").classes) == 11  # each twice
    with pytest.raises(CRCError, match="single class"):
        infer_schema(table(a=["1", "2"], y=["a", "a"]), "y")
    assert json.loads(infer_schema(table(a=["1", "2"], y=["a", "b"]), "y").dumps())["label"] == "y"


@pytest.mark.parametrize("infinite", [["inf"], ["inf", "-inf", "Infinity", "-Infinity"], ["-nan"]])
def test_many_numbers_with_infinities_are_refused_not_made_categories(infinite):
    """Infinities (however many spellings) among numbers: no model can use one. Three spellings or more passed the
    stray-value rule, and the column became discrete, every number a category (a 1e308 overflow in a spreadsheet)."""
    numbers = [str(i / 7) for i in range(30)]
    cols = table(a=numbers[:5] + infinite + numbers[5:], y=list("pq" * 20)[:30 + len(infinite)])
    with pytest.raises(CRCError, match=rf"column 'a' holds '{infinite[0]}' in data row 6, not a finite number: correct "
                                       r"the cell, or leave it missing \(empty, \?, nan"):
        infer_schema(cols, "y")
    assert infer_schema(cols, "y", categorical=["a"]).features[0].kind == DISCRETE  # named categorical: kept
    few = table(a=[str(i) for i in range(10)] + ["inf"], y=list("pq" * 5) + ["p"])  # ten numbers: discrete already
    assert infer_schema(few, "y").features[0].categories[-1] == "inf"


def test_values_that_differ_only_in_case_or_spaces_are_named_in_a_warning(caplog):
    """'Sick' and 'sick' (or 'no  pain' and 'no pain', or two Unicode forms of 'é'): one class or category written two
    ways, which crc reads as two; a warning names them. Distinct values are not warned about."""
    cols = table(a=["no pain", "no  pain", "pain"] * 4, y=["Sick", "sick", "well", "well"] * 3)
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(cols, "y")
    assert caplog.messages == [
        "label column 'y' has 'Sick' and 'sick', which differ only in letter case or spaces: one value written 2 ways? "
        "crc reads them as 2 classes; write it one way",
        "feature column 'a' has 'no  pain' and 'no pain', which differ only in letter case or spaces: one value written 2 "
        "ways? crc reads them as 2 categories; write it one way"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(a=["caf\u00e9", "cafe\u0301", "x"] * 4, y=["p", "q", "p"] * 4), "y")
    assert len(caplog.messages) == 1 and "'cafe\u0301' and 'caf\u00e9'" in caplog.messages[0]  # categories in sorted order
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(a=["mild", "severe", "none"] * 4, y=["sick", "well", "ill", "well"] * 3), "y")
    assert caplog.messages == []


def test_a_feature_missing_in_every_row_of_a_class_is_named_in_a_warning(caplog):
    """A test made only for one class (its cells empty in every row of the other): the models take a missing value as
    unknown, so they learn nothing of it for that class and lose what its absence tells (a simulation's ML test error
    0.61, worse than always predicting the larger class); a warning names it. A class of ten rows, or one value
    present, is not warned about."""
    y = ["sick"] * 11 + ["well"] * 12
    values = [""] * 11 + [str(40 + 1.5 * i) for i in range(12)]
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(age=values, y=y), "y")
    assert caplog.messages == [
        "feature column 'age' has no value in any of the 11 rows of class 'sick' (of the label column 'y'): crc takes a "
        "missing value as unknown, so it learns nothing of 'age' in that class, and loses what its absence tells (the "
        "class); a column saying whether 'age' was measured keeps that"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(age=values[1:], y=y[1:]), "y")  # ten rows of 'sick'
        infer_schema(table(age=["39"] + values[1:], y=y), "y")  # one 'sick' row has a value
    assert caplog.messages == []


def test_a_value_far_beyond_the_spread_of_its_column_is_refused(caplog):
    """1e308 among ages (an overflow, a unit error): standardized by a training set without it, its square overflowed
    (a test log-likelihood of -inf, NaN scores, 'invalid value' warnings); with it, every other age standardized to
    about 0. Refused naming the cell; large numbers of one scale, and tiny ones, are kept."""
    ages = [str(40 + 1.5 * i) for i in range(20)]
    y = list("pq" * 11)
    with pytest.raises(CRCError, match=r"column 'age' holds 1e\+308 in data row 4, more than 1e\+140 times the spread of "
                                       r"its values \(interquartile range 15\) from their median 55: an overflow or a "
                                       r"unit error\? Correct the cell, or leave it missing$"):
        infer_schema(table(age=ages[:3] + ["1e308"] + ages[3:] + [""], y=y), "y")
    assert infer_schema(table(age=[f"{a}e300" for a in ages] + ["", ""], y=y), "y").features[0].kind == CONTINUOUS
    assert infer_schema(table(age=ages + ["5e-324", "1e-300"], y=y), "y").features[0].kind == CONTINUOUS
    constant = table(age=["7"] * 20 + ["7.5", "1e200"], y=y)  # interquartile range 0: the smallest gap, 0.5
    with pytest.raises(CRCError, match=r"holds 1e\+200 in data row 22, .* \(interquartile range 0.5\)"):
        infer_schema(constant, "y", max_discrete_distinct=0)


def test_a_code_for_a_missing_value_among_numbers_is_named_in_a_warning(caplog):
    """-999 (or 99, 9999, ...) in two rows or more, beyond the other values by thrice their spread: an export's code
    for a missing value, read as a number (it was silent: ages of -999 dragged the class means). A code within reach of
    the other values, or in one row, is not warned about."""
    ages = [str(40 + 1.5 * i) for i in range(20)]
    y = list("pq" * 11)
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(age=ages + ["-999", "-999"], y=y), "y")
    assert caplog.messages == ["feature column 'age' holds -999 in 2 rows, far outside its other values (40 to 68.5): a "
                               "code for a missing value? crc reads it as a number; leave those cells empty"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema(table(age=ages + ["99", "99"], y=y), "y")  # 99 years: within reach of 40 to 68.5
        infer_schema(table(age=ages + ["999", "999", "1e6"], y=y + ["p"]), "y")  # 999 within reach of 40 to 1e6
        infer_schema(table(age=ages + ["-999", "1"], y=y), "y")  # once: an outlier, not a code
    assert caplog.messages == []


def test_numbers_written_with_a_unit_are_refused_not_made_categories():
    """'12%', '5 mg': read as text, a column of them became as many categories (under a rare-categories warning only).
    Values of several suffixes (ward codes 12A, 12B), or ten values, stay categories."""
    cols = table(sat=[f"{90 + i}%" for i in range(12)] + ["95", ""], y=list("pq" * 7))
    with pytest.raises(CRCError, match=r"column 'sat' holds numbers written with a unit, such as '90%' in data row 1: crc "
                                       r"reads plain numbers; write the column's numbers without '%' \(the unit in its "
                                       r"name\), else its 13 values would be as many categories \(or name it "
                                       r"categorical, --categorical, if they are\)$"):
        infer_schema(cols, "y")
    with pytest.raises(CRCError, match="such as '0.5 mg' in data row 1"):
        infer_schema(table(dose=[f"{i / 2} mg" for i in range(1, 13)], y=list("pq" * 6)), "y")
    assert infer_schema(cols, "y", categorical=["sat"]).features[0].kind == DISCRETE  # named categorical: kept
    wards = table(ward=[f"{i}{'AB'[i % 2]}" for i in range(12)] * 2, y=list("pq" * 12))
    assert infer_schema(wards, "y").features[0].kind == DISCRETE
    assert infer_schema(table(sat=[f"{90 + i}%" for i in range(10)], y=list("pq" * 5)), "y").features[0].kind == DISCRETE


def test_a_label_of_many_fractional_numbers_is_named_in_a_warning(caplog):
    """iris run with --label 'sepal length (cm)': 12 different lengths over 30 rows, fewer than half the rows, so
    not refused; each value became a class (test error 0.88 in a run). Whole numbers (class codes 1..12) and ten or
    fewer numbers are not warned about."""
    lengths = [f"{4.3 + 0.1 * (i % 12):.1f}" for i in range(30)]
    features = {"width": [f"{2.0 + 0.05 * i:.2f}" for i in range(30)]}
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema({**features, "length": lengths}, "length")
    assert caplog.messages == ["the label column 'length' holds 12 different numbers in 30 rows, such as '4.3': a quantity "
                               "rather than a class? crc reads every value as a class of its own; --label names the class "
                               "column (a quantity cut into ranges makes one)"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema({**features, "code": [str(1 + i % 12) for i in range(30)]}, "code")
        infer_schema({**features, "grade": [f"{0.5 * (i % 10):.1f}" for i in range(30)]}, "grade")
        infer_schema({**features, "reading": lengths[:-1] + ["inf"]}, "reading")  # was an OverflowError (round(inf))
    assert caplog.messages == []


def test_a_value_that_swamps_its_columns_standardization_is_named_in_a_warning(caplog):
    """1e12 among lengths of 4.3 to 5.4 (a unit error): standardized with it, every other length is about 0 and the
    class variances of the column sit at their floor (a run's log-likelihood turned positive). A long tail (1e4 among
    them) is not warned about, nor refused."""
    lengths = [f"{4.3 + 0.1 * (i % 12):.1f}" for i in range(30)]
    label = ["a", "b", "c"] * 10
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema({"length": lengths[:7] + ["1e12"] + lengths[8:], "class": label}, "class")
    assert caplog.messages == ["feature column 'length' holds 1e+12 in data row 8, 1.7e+12 times the spread of its values "
                               "(interquartile range 0.6) from their median 4.75: standardized with it, every other "
                               "value is about 0 and the column tells nothing of the classes; a unit error or a typo? "
                               "Correct the cell, or leave it missing"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crc.data"):
        infer_schema({"length": lengths[:7] + ["1e4"] + lengths[8:], "class": label}, "class")
    assert caplog.messages == []
