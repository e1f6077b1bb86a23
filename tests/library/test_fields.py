import numpy as np
import pytest

from crc.core import fields
from crc.core.errors import CRCError


@pytest.mark.parametrize("check, value, message", [
    (lambda v: fields.integer(v, "round", low=0), True, "round must be an integer, got true"),
    (lambda v: fields.integer(v, "round", low=0), 1.0, "round must be an integer, got 1.0"),
    (lambda v: fields.integer(v, "round", low=0, high=10), 11, "round must be from 0 to 10, got 11"),
    (lambda v: fields.number(v, "std", positive=True), False, "std must be a finite number, got false"),
    (lambda v: fields.number(v, "std", positive=True), 0, "std must be a positive number, got 0"),
    (lambda v: fields.number(v, "mean"), float("inf"), "mean must be a finite number, got inf"),
    (lambda v: fields.number(v, "mean"), "1", "mean must be a finite number, got '1'"),
    (lambda v: fields.string(v, "name"), None, "name must be a string, got null"),
    (lambda v: fields.strings(v, "classes"), ["a", 1], r"classes\[1\] must be a string, got 1"),
    (lambda v: fields.mapping(v, "options"), [1, 2], "options must be an object, got a list of 2 entries"),
    (lambda v: fields.numbers(v, "s"), [1.0, True], r"s must be a list of finite numbers, got true at \[1\]"),
    (lambda v: fields.numbers(v, "s"), [1.0, None], r"got null at \[1\]"),
    (lambda v: fields.numbers(v, "s"), {"a": 1}, "got an object of 1 entries"),
    (lambda v: fields.numbers(v, "s"), [1.0, float("nan")], "s must be a list of finite numbers, got nan"),
    (lambda v: fields.numbers(v, "s", length=3), [1.0, 2.0], "s must hold 3 numbers, got 2"),
])
def test_each_check_names_the_field_and_shows_the_value_briefly(check, value, message):
    with pytest.raises(CRCError, match=message) as raised:
        check(value)
    assert len(str(raised.value)) < 120


def test_valid_values_come_back_typed():
    assert fields.integer(3, "n", low=0) == 3
    assert fields.number(2, "x") == 2.0 and isinstance(fields.number(2, "x"), float)
    array = fields.numbers([1, 2.5, -3], "s", length=3)
    assert array.dtype == np.float64 and array.tolist() == [1.0, 2.5, -3.0]
    assert fields.shown("z" * 100) == repr("z" * 100)[:fields.SHOWN_CHARS] + "..."
