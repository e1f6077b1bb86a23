"""``crc node --start-at``: the accepted forms of the start time and the refusals."""

import time

import pytest

from crc.cli.peer import MAX_START_DELAY_S, _start_time
from crc.core.errors import CRCError


def test_a_start_time_is_iso_8601_with_a_zone_or_seconds_since_the_epoch():
    assert _start_time(None) is None
    assert _start_time("2026-11-24T09:00:00Z") == 1795510800.0
    assert _start_time("2026-11-24T10:00:00+01:00") == 1795510800.0
    assert _start_time("1795510800.25") == 1795510800.25
    assert _start_time("0") == 0.0  # long past: the peer starts at once


@pytest.mark.parametrize("text, message", [
    ("2026-11-24T09:00:00", "no time zone"),
    ("tomorrow", "neither an ISO 8601 time nor seconds"),
    ("nan", "more than 7 days ahead"),
    ("inf", "more than 7 days ahead"),
])
def test_a_start_time_without_a_zone_or_unreadable_is_refused(text, message):
    with pytest.raises(CRCError, match=message):
        _start_time(text)


def test_a_start_time_more_than_a_week_ahead_is_refused():
    assert _start_time(repr(time.time() + MAX_START_DELAY_S - 60)) is not None
    with pytest.raises(CRCError, match="more than 7 days ahead"):
        _start_time(repr(time.time() + MAX_START_DELAY_S + 60))
