"""The frames a peer keeps to send again to a neighbour that resumed: which, how many, how often."""

from __future__ import annotations

import logging

from crc.nodes.resend import KEEP_ROUNDS, LOGGED_RESUMES, Resends
from crc.nodes.wire import Resumed

A, B = "tcp://a:1", "tcp://b:1"
LOG = logging.getLogger("test.resend")


def frames(round_: int, *to: str) -> dict[str, bytes]:
    return {address: f"{address} {round_}".encode() for address in to}


def test_the_frames_of_the_notices_round_and_later_go_again_once_oldest_first():
    resends = Resends(LOG)
    for round_ in range(5):
        resends.record(round_, frames(round_, A, B))
    assert resends.answer(Resumed(A, 0)) == [frames(r, A)[A] for r in range(5 - KEEP_ROUNDS, 5)]
    assert resends.answer(Resumed(A, 0)) == [] and resends.answer(Resumed(A, 4)) == []
    assert resends.answer(Resumed(B, 4)) == [frames(4, B)[B]]
    assert resends.answer(Resumed(B, 9)) == []


def test_only_frames_that_were_queued_go_again():
    resends = Resends(LOG)
    resends.record(3, frames(3, B))  # A's queue was full: it never got round 3
    assert resends.answer(Resumed(A, 3)) == [] and resends.answer(Resumed(B, 3)) == [frames(3, B)[B]]


def test_a_round_sent_again_replaces_the_first_and_may_go_again_once():
    resends = Resends(LOG)
    resends.record(3, frames(3, A))
    assert len(resends.answer(Resumed(A, 3))) == 1
    resends.record(3, {A: b"masked anew"})  # this peer resumed and sent round 3 again
    assert resends.answer(Resumed(A, 3)) == [b"masked anew"] and resends.answer(Resumed(A, 3)) == []


def test_a_flood_of_notices_is_logged_a_few_times_then_at_debug_level(caplog):
    resends = Resends(LOG)
    with caplog.at_level(logging.DEBUG, logger=LOG.name):
        for _ in range(100):
            resends.answer(Resumed(A, 0))
    levels = [record.levelno for record in caplog.records]
    assert levels == [logging.INFO] * LOGGED_RESUMES + [logging.DEBUG] * (100 - LOGGED_RESUMES)
    assert "debug level only" in caplog.records[LOGGED_RESUMES - 1].getMessage()
