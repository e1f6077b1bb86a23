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


def liveness(clock, *, fresh: bool = True, **settings) -> Liveness:
    settings = {"timeout_s": TIMEOUT_S, "first_round_timeout_s": FIRST_ROUND_S, "down_after": K, **settings}
    live = Liveness(PEERS, clock=clock, metrics=Metrics.for_neighbours(PEERS), log=logging.getLogger("test"), **settings)
    live.start_run(fresh=fresh)
    return live


def test_the_first_rounds_window_governs_the_first_round_of_a_fresh_run_only(clock):
    live = liveness(clock)
    live.begin_round(0)
    assert live.deadline() == FIRST_ROUND_S
    clock.now = 0.5
    live.begin_round(1)  # soon after: no later round waits out the first one's window
    assert live.deadline() == 0.5 + TIMEOUT_S
    resumed = liveness(clock, fresh=False)
    resumed.begin_round(0)
    assert resumed.deadline() == 0.5 + TIMEOUT_S


def round_without(live: Liveness, clock: Clock, round_: int, *, heard=(), received=()) -> None:
    """Round ``round_``: statistics from ``received``, anything else from ``heard``; it ends at its deadline."""
    live.begin_round(round_)
    for peer in received:
        live.statistics_from(peer, round_)
    for peer in heard:
        live.heard(peer)
    clock.now = live.deadline()
    live.end_round(set(received))


def test_a_neighbour_silent_k_rounds_in_a_row_is_down_until_anything_arrives_from_it(clock, caplog):
    live = liveness(clock, fresh=False)
    for round_ in range(K):
        assert A in live.awaited(round_)
        round_without(live, clock, round_, received=(B, C))
    assert live.awaited(K) == [B, C] and live.down == {A: K * TIMEOUT_S}
    round_without(live, clock, K, received=(B, C))  # down: not waited for
    assert live.metrics.missing == {A: K + 1, B: 0, C: 0} and live.metrics.down_rounds == {A: 1, B: 0, C: 0}
    clock.now += 2.5
    with caplog.at_level(logging.INFO):
        live.waiting(A, K)  # a notice is enough: it is alive
    assert not live.down and live.metrics.downtime_s[A] == pytest.approx(2.5 + TIMEOUT_S)
    assert "sent again after 3.5 s down" in caplog.text


def test_the_seconds_a_neighbour_was_silent_are_those_its_waits_took_extended_or_not(clock):
    """What a stop message names ('3 wait(s) (7 s in all)'): the waits as they were, the first round's window and a
    notice's extension included, counted again from 0 once anything arrives."""
    live = liveness(clock)
    round_without(live, clock, 0, received=(B, C))  # the first round's window
    live.begin_round(1)
    clock.now += 0.5
    live.waiting(B, 0)  # B's notice extends the round for B's statistics
    live.statistics_from(C, 1)
    clock.now = live.deadline()
    live.end_round({C})
    assert live.silent_s([A]) == pytest.approx(FIRST_ROUND_S + 0.5 + TIMEOUT_S)
    assert live.silent_s([B]) == 0.0 and live.silent_s([A, B]) == live.silent_s([A])
    round_without(live, clock, 2, heard=(A,))
    assert live.silent_s([A]) == 0.0 and live.silent_s([B, C]) == pytest.approx(TIMEOUT_S)


def test_a_living_neighbour_is_never_marked_down_however_late_its_statistics(clock):
    live = liveness(clock, fresh=False)
    for round_ in range(3 * K):
        round_without(live, clock, round_, received=(B, C), heard=(A,))  # A's frames come, but stale
    assert not live.down and live.metrics.missing[A] == 3 * K and live.metrics.down_rounds[A] == 0


def test_silence_must_be_in_a_row(clock):
    live = liveness(clock, fresh=False)
    for round_ in range(3 * K - 1):
        round_without(live, clock, round_, received=(B, C) if (round_ + 1) % K else PEERS)  # A every K-th round
    assert not live.down


def test_a_neighbour_past_the_awaited_round_is_not_waited_for(clock):
    live = liveness(clock, fresh=False)
    live.statistics_from(A, 7)
    assert live.awaited(5) == [B, C] and live.awaited(8) == list(PEERS)
    live.statistics_from(A, 2)  # restarted from an older checkpoint: it will send round 5 again
    assert A in live.awaited(5)


def test_a_notice_extends_the_wait_for_the_next_statistics_of_its_sender_only(clock):
    live = liveness(clock, fresh=False)
    live.begin_round(4)
    clock.now = 0.6
    live.waiting(A, 2)  # two rounds behind: its round-4 statistics are not next
    assert live.deadline() == TIMEOUT_S
    live.waiting(A, 3)  # its next statistics are those of round 4
    assert live.deadline() == pytest.approx(0.6 + TIMEOUT_S)
    clock.now = 1.5
    live.waiting(A, 3)
    assert live.deadline() == pytest.approx(2.5)
    live.statistics_from(A, 4)  # they came: no longer a reason to wait
    assert live.deadline() == TIMEOUT_S


def test_notices_extend_a_round_at_most_the_longer_of_the_two_windows(clock):
    live = liveness(clock, fresh=False)
    live.begin_round(1)
    for step in range(200):
        clock.now = 0.5 * step
        if clock.now < live.deadline():
            live.waiting(A, 0)
    assert live.deadline() == TIMEOUT_S + FIRST_ROUND_S


def test_notices_are_due_every_half_timeout_of_a_wait(clock):
    live = liveness(clock, fresh=False)
    live.begin_round(3)
    due = []
    for step in range(25):
        clock.now = 0.1 * step
        if live.notice_due():
            due.append(round(clock.now, 1))
    assert due == [0.5, 1.0, 1.5, 2.0]


def test_with_every_neighbour_down_nobody_is_awaited_and_time_down_counts_to_the_end(clock):
    live = liveness(clock, fresh=False)
    for round_ in range(K):
        round_without(live, clock, round_)
    assert live.all_down and live.awaited(K) == []
    clock.now += 4.0
    live.close()
    assert live.metrics.downtime_s == dict.fromkeys(PEERS, 4.0)


def test_complete_rounds_count_the_rounds_in_a_row_with_every_neighbours_statistics(clock):
    live = liveness(clock, fresh=False)
    assert live.complete_rounds == float("inf")  # a run starts settled
    counts = []
    for round_, received in enumerate([PEERS, (B, C), PEERS, PEERS, (A,), PEERS]):
        round_without(live, clock, round_, received=received)
        counts.append(live.complete_rounds)
    assert counts == [float("inf"), 0, 1, 2, 0, 1]
