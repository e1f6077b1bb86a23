"""Liveness in-process on a fake clock: whom a round waits for, until when, and who is down."""

from __future__ import annotations

import logging

import pytest

from crc.nodes.liveness import Liveness
from crc.nodes.metrics import Metrics

PEERS = ("tcp://a:1", "tcp://b:1", "tcp://c:1")
A, B, C = PEERS
TIMEOUT_S, FIRST_ROUND_S, K = 1.0, 5.0, 3


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


def liveness(clock, **settings) -> Liveness:
    settings = {"timeout_s": TIMEOUT_S, "first_round_timeout_s": FIRST_ROUND_S, "down_after": K, **settings}
    return Liveness(PEERS, clock=clock, metrics=Metrics.for_neighbours(PEERS), log=logging.getLogger("test"), **settings)


def test_a_round_waits_the_timeout_once_the_first_rounds_window_is_over(clock):
    live = liveness(clock)
    assert live.deadline(2.0) == 2.0 + TIMEOUT_S  # a resumed peer: no start-up window
    live.start_fresh_run()
    assert live.deadline(0.0) == FIRST_ROUND_S
    assert live.deadline(FIRST_ROUND_S + 1.0) == FIRST_ROUND_S + 1.0 + TIMEOUT_S


def test_a_neighbour_missing_k_rounds_in_a_row_is_down_until_it_sends_again(clock, caplog):
    live = liveness(clock)
    for round_ in range(1, K + 1):
        assert A in live.awaited
        live.end_round({B, C}, TIMEOUT_S, round_)
        clock.now += TIMEOUT_S
    assert live.awaited == [B, C] and live.down == {A: K * TIMEOUT_S - TIMEOUT_S}
    live.end_round({B, C}, 0.0, K + 1)
    assert live.metrics.missing == {A: K + 1, B: 0, C: 0} and live.metrics.down_rounds == {A: 1, B: 0, C: 0}
    clock.now += 2.5
    with caplog.at_level(logging.INFO):
        live.heard_from(A, K + 2)
    assert live.awaited == list(PEERS) and live.metrics.downtime_s[A] == pytest.approx(2.5 + TIMEOUT_S)
    assert "sent again after 3.5 s down" in caplog.text


def test_misses_must_be_in_a_row(clock):
    live = liveness(clock)
    for round_ in range(1, 3 * K):
        live.end_round({B, C} if round_ % K else set(PEERS), TIMEOUT_S, round_)  # A arrives every K-th round
    assert not live.down and live.metrics.missing[A] == len([r for r in range(1, 3 * K) if r % K])


def test_with_every_neighbour_down_nobody_is_awaited_and_time_down_counts_to_the_end(clock):
    live = liveness(clock)
    for round_ in range(1, K + 1):
        live.end_round(set(), TIMEOUT_S, round_)
    assert live.all_down and live.awaited == []
    clock.now += 4.0
    live.close()
    assert live.metrics.downtime_s == dict.fromkeys(PEERS, 4.0)
