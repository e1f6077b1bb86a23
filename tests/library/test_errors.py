"""How messages show values (crc.core.errors.plain): numpy scalars as plain numbers."""

import numpy as np
import pytest

from crc.core.data import encode
from crc.core.errors import CRCError, plain
from crc.core.fields import shown
from crc.core.models import model_options
from crc.core.schema import infer_schema


@pytest.mark.parametrize("value, text", [
    (np.float64(0.35), "0.35"), (np.int64(3), "3"), (np.bool_(True), "True"), (np.str_("a"), "'a'"),
    ("a", "'a'"), (0.1, "0.1"), ([np.float64(0.5), "x"], "[0.5, 'x']"), ((np.int64(2),), "(2,)"),
    ((np.int64(2), 3), "(2, 3)"), (None, "None"),
])
def test_plain_shows_numpy_scalars_as_the_python_values_they_hold(value, text):
    assert plain(value) == text


def test_shown_untrusted_values_are_plain_too():
    assert shown(np.float64(1.5)) == "1.5" and shown(True) == "true" and shown(None) == "null"


def test_an_unknown_category_of_a_numeric_column_is_a_plain_number():
    schema = infer_schema({"x": [0.1, 0.2, 0.3, 0.1], "y": ["a", "b", "a", "b"]}, "y")  # x: 3 values, discrete
    with pytest.raises(CRCError, match=r"^data: column 'x' has unknown category 0\.35 in data row 2; known: ") as caught:
        encode(schema, {"x": [0.1, 0.35], "y": ["a", "b"]})
    assert "np." not in str(caught.value)


def test_a_model_option_of_the_wrong_type_is_shown_as_a_plain_number():
    with pytest.raises(CRCError, match=r"^model option 'components' must be of type int, got 2\.5$"):
        model_options("pc", {"components": np.float64(2.5)})
