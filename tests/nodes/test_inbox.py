"""The inbox in-process: early statistics kept for their round, bounded; stale, far, duplicate and wrong-kind frames
refused by cause."""

from __future__ import annotations

import numpy as np
import pytest

from crc.nodes.inbox import Inbox
from crc.nodes.wire import Masked, Message, Rejected

A, B = "tcp://a:1", "tcp://b:1"
ROUNDS, WINDOW = 20, 3


def stats(sender: str, round_: int) -> Message:
    return Message(sender=sender, round=round_, stats=np.full(4, float(round_)))


def refusal(inbox: Inbox, message, awaited: int) -> str:
    with pytest.raises(Rejected) as rejected:
        inbox.put(message, awaited)
    assert rejected.value.sender == message.sender
    return rejected.value.cause


def test_early_statistics_are_kept_for_their_round_and_taken_with_it():
    inbox = Inbox(rounds=ROUNDS, window=WINDOW)
    inbox.put(stats(A, 5), 5)
    inbox.put(stats(A, 5 + WINDOW), 5)
    assert inbox.complete(5, [A]) and not inbox.complete(5, [A, B]) and not inbox.complete(6, [A])
    inbox.put(stats(B, 5), 5)
    assert inbox.complete(5, [A, B])
    taken = inbox.take(5)
    assert sorted(taken) == [A, B] and taken[A].round == 5
    assert inbox.take(5) == {} and inbox.take(5 + WINDOW)[A].round == 5 + WINDOW


def test_taking_a_round_drops_the_earlier_ones():
    inbox = Inbox(rounds=ROUNDS, window=WINDOW)
    for round_ in (1, 2, 3):
        inbox.put(stats(A, round_), 1)
    assert inbox.take(3)[A].round == 3 and inbox.take(1) == {} and inbox.take(2) == {}


@pytest.mark.parametrize("round_, cause", [(4, "stale"), (ROUNDS, "malformed"), (10**9, "malformed")])
def test_a_stale_frame_or_one_beyond_the_run_is_refused_by_cause(round_, cause):
    inbox = Inbox(rounds=ROUNDS, window=WINDOW)
    assert refusal(inbox, stats(A, round_), 5) == cause
    assert inbox.take(round_) == {} and inbox.earliest() is None


def test_beyond_the_window_only_a_neighbours_latest_frame_is_kept():
    inbox = Inbox(rounds=ROUNDS, window=WINDOW)
    far = 5 + WINDOW + 1
    assert inbox.put(stats(A, 5 + WINDOW), 5) is None  # the window's last round: kept as any early frame
    assert inbox.put(stats(A, far), 5) is None
    assert inbox.put(stats(B, far + 1), 5) is None  # one per neighbour
    replaced = inbox.put(stats(A, far + 3), 5)
    assert replaced.round == far and not inbox.holds(far) and inbox.holds(far + 3)
    assert inbox.earliest() == 5 + WINDOW
    taken = inbox.take(far + 3)
    assert sorted(taken) == [A] and taken[A].round == far + 3 and inbox.earliest() is None


def test_a_second_frame_for_a_slot_is_refused_and_the_first_kept():
    inbox = Inbox(rounds=ROUNDS, window=WINDOW)
    inbox.put(stats(A, 2), 2)
    assert refusal(inbox, Message(sender=A, round=2, stats=np.zeros(4)), 2) == "duplicate"
    assert inbox.take(2)[A].stats[0] == 2.0


def test_statistics_of_the_wrong_kind_are_refused():
    masked = Masked(sender=A, round=0, words=np.zeros(4, dtype=np.uint64), shares={})
    assert refusal(Inbox(rounds=ROUNDS, window=WINDOW), masked, 0) == "type"
    assert refusal(Inbox(rounds=ROUNDS, window=WINDOW, masked=True), stats(A, 0), 0) == "type"
    receiving_masked = Inbox(rounds=ROUNDS, window=WINDOW, masked=True)
    receiving_masked.put(masked, 0)
    assert receiving_masked.complete(0, [A])


def test_a_copy_of_a_frame_held_or_of_the_last_round_taken_is_told_apart_from_another_frame():
    """A neighbour re-sends the bytes it sent (``crc.nodes.resend``): a copy of a frame held, or of the last round
    taken, is a copy; other statistics for the same slot, and a frame of an older round taken, are not (``put``
    refuses them as duplicate and stale)."""
    inbox = Inbox(rounds=ROUNDS, window=WINDOW)
    inbox.put(stats(A, 5), 5)
    inbox.put(stats(A, 6), 5)
    other = Message(sender=A, round=6, stats=np.full(4, -1.0))
    assert inbox.is_copy(stats(A, 6)) and not inbox.is_copy(other) and not inbox.is_copy(stats(B, 6))
    assert refusal(inbox, other, 5) == "duplicate"
    inbox.take(5)
    assert inbox.is_copy(stats(A, 5)) and not inbox.is_copy(Message(sender=A, round=5, stats=np.zeros(4)))
    inbox.take(6)
    assert inbox.is_copy(stats(A, 6)) and not inbox.is_copy(stats(A, 5))
    assert refusal(inbox, stats(A, 5), 7) == "stale"


def test_a_copy_of_masked_statistics_needs_the_same_words_and_shares():
    words = np.arange(4, dtype=np.uint64)
    inbox = Inbox(rounds=ROUNDS, window=WINDOW, masked=True)
    inbox.put(Masked(A, 2, words, {B: b"sealed"}), 2)
    assert inbox.is_copy(Masked(A, 2, words.copy(), {B: b"sealed"}))
    assert not inbox.is_copy(Masked(A, 2, words, {B: b"other"})) and not inbox.is_copy(Masked(A, 2, words + 1, {B: b"sealed"}))


def test_statistics_equal_in_value_but_not_in_bits_are_no_copy():
    """A copy is the same bytes: statistics that compare equal with other bits (-0.0 for 0.0) are another frame for
    the slot, refused as a duplicate (counted), not dropped uncounted as a copy."""
    inbox = Inbox(rounds=ROUNDS, window=WINDOW)
    held = Message(sender=A, round=5, stats=np.array([0.0, 1.0, 2.0, 3.0]))
    signed = Message(sender=A, round=5, stats=np.array([-0.0, 1.0, 2.0, 3.0]))
    inbox.put(held, 5)
    assert inbox.is_copy(Message(sender=A, round=5, stats=held.stats.copy())) and not inbox.is_copy(signed)
    assert refusal(inbox, signed, 5) == "duplicate"
    inbox.take(5)
    assert not inbox.is_copy(signed)
