"""The peer's round logic in-process: a fake transport on a fake clock, no sockets, no processes.

The peer under test is node ME of a small graph; its neighbours are played by
the fake transport, which answers each statistics frame the peer sends with
the neighbours' frames of the same round, taken from the vectorized
simulator's run on the same local data and graph. Waiting costs no real time:
the fake clock jumps to the next arrival, the end of a poll slice or the
deadline.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from dataclasses import dataclass, replace

import msgpack
import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from crc.core import acceleration as crc_acceleration
from crc.core import plausibility
from crc.core.acceleration import ACCELERATED, MOMENTUM_PRESET, PRESET, Acceleration, acceleration_of, resolve
from crc.core.attacks import byzantine_messages, poison
from crc.core.calibration import lrc
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.errors import CRCError
from crc.core.models import make_model
from crc.core.models.base import labelled_weights
from crc.nodes import checkpoint, wire
from crc.nodes import peer as peer_module
from crc.nodes.keys import new_key_pair
from crc.nodes.peer import Peer
from crc.nodes.peer_checkpoint import layout
from crc.nodes.settings import PeerSettings, SecureAggregationKeys
from crc.nodes.wire import Decline, Rejected, Unmask, decode, encode
from crc.topologies import averaging_matrix
from support.blas import blas_threads_now
from support.tables import mixed_columns, prepared

GRAPH = nx.Graph([(0, 1), (1, 2), (1, 3), (2, 3)])
ME = 1
ADDRESS = [f"tcp://127.0.0.1:{7000 + v}" for v in GRAPH]
NEIGHBOURS = sorted(GRAPH.neighbors(ME))
ROUNDS = 8
TIMEOUT_S = 1.0
FIRST_ROUND_TIMEOUT_S = 5.0
MAX_RECEIVE_CALLS = 100_000
"""A peer that polls more often than this is stuck: the fake fails the test instead of spinning."""


class FakeClock:
    """Seconds that pass only when the fake transport waits."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeTransport:
    """A PeerTransport in memory on a FakeClock.

    ``answer(round_)`` gives the (delay_s, frame) pairs that arrive after the
    peer sends its statistics of ``round_``, the delay counted from the send;
    ``key_of(frame)`` is the key its connection authenticated with (None: no keys).
    ``receive`` returns the frames due by now; with none due it waits one poll
    slice: ``during_wait()`` runs (a stop request, an error), then the clock
    jumps to the next arrival, the slice's end or the deadline, whichever comes
    first, and the frames due by then are returned. Neighbours in ``full``
    have a full queue: ``send`` reports them and they get nothing. The peer's waiting notices are noted in
    ``notices``, its resumed notices in ``resumed`` (the round), not answered.
    """

    def __init__(self, clock: FakeClock, answer, *, poll_slice_s: float = PeerSettings.poll_slice_s,
                 full: frozenset = frozenset(), during_wait=lambda: None, key_of=lambda frame: None):
        self.clock, self.answer, self.poll_slice_s, self.full, self.during_wait = clock, answer, poll_slice_s, full, during_wait
        self.key_of = key_of
        self.sent: list[bytes] = []
        self.notices: list[tuple[float, int]] = []  # (when, round awaited) of the peer's waiting notices
        self.resumed: list[int] = []  # the rounds its resumed notices name
        self.closed_linger_ms: int | None = None
        self._pending: list[tuple[float, int, bytes]] = []
        self._order = itertools.count()
        self._receive_calls = 0

    def send(self, frame: bytes) -> list[str]:
        assert self.closed_linger_ms is None, "send after close"
        obj = msgpack.unpackb(frame)
        if obj["type"] == wire.WAITING:  # the peer says it still waits: the fake neighbours take note only
            self.notices.append((self.clock.now, obj["round"]))
            return sorted(self.full)
        if obj["type"] == wire.RESUMED:
            self.resumed.append(obj["round"])
            return sorted(self.full)
        self.sent.append(frame)
        for delay, reply in self.answer(obj["round"]):
            heapq.heappush(self._pending, (self.clock.now + delay, next(self._order), reply))
        return sorted(self.full)

    def receive(self, deadline: float) -> list[tuple[bytes, str | None]]:
        assert self.closed_linger_ms is None, "receive after close"
        self._receive_calls += 1
        assert self._receive_calls < MAX_RECEIVE_CALLS, "the peer keeps polling without progress"
        if not self._pending or self._pending[0][0] > self.clock.now:
            self.during_wait()
            next_arrival = self._pending[0][0] if self._pending else float("inf")
            self.clock.now = max(self.clock.now, min(next_arrival, self.clock.now + self.poll_slice_s, deadline))
        return self._due()

    def close(self, linger_ms: int) -> None:
        assert self.closed_linger_ms is None, "closed twice"
        self.closed_linger_ms = linger_ms

    def refused(self) -> dict[str, int]:
        return {"unknown-key": 2}

    def _due(self) -> list[tuple[bytes, str | None]]:
        frames = []
        while self._pending and self._pending[0][0] <= self.clock.now:
            frame = heapq.heappop(self._pending)[2]
            frames.append((frame, self.key_of(frame)))
        return frames

    def sent_stats(self) -> dict[int, np.ndarray]:
        """The statistics the peer sent, by round."""
        objects = [msgpack.unpackb(frame) for frame in self.sent]
        return {obj["round"]: np.frombuffer(obj["data"], dtype="<f8") for obj in objects}


@dataclass
class Setup:
    """Local data of every node, the model, and the simulator's statistics after each round (ROUNDS + 1, n, size)."""

    model: object
    phi: list
    y: list
    ess: float
    history: np.ndarray

    def frame(self, node: int, round_: int, stats=None) -> bytes:
        """Node's statistics frame of ``round_`` (the simulator's, unless ``stats`` is given)."""
        stats = self.history[round_][node] if stats is None else stats
        return encode(run="crc", sender=ADDRESS[node], round_=round_, schema_id=self.model.schema_id, ess=self.ess,
                      stats=stats)

    def neighbours_answer(self, round_: int, *, delay: float = 0.0, without=()) -> list[tuple[float, bytes]]:
        return [(delay, self.frame(u, round_)) for u in NEIGHBOURS if u not in without]

    def peer(self, clock: FakeClock, **settings) -> Peer:
        settings = {"rounds": ROUNDS, "timeout_s": TIMEOUT_S, "first_round_timeout_s": FIRST_ROUND_TIMEOUT_S, **settings}
        return Peer(self.model, self.phi[ME], self.y[ME], ess=self.ess, clock=clock,
                    settings=PeerSettings(bind=ADDRESS[ME], peers=tuple(ADDRESS[u] for u in NEIGHBOURS), **settings))

    def assert_follows_simulator(self, peer: Peer, transport: FakeTransport, rounds=range(1, ROUNDS + 1)) -> None:
        """The peer's statistics after each of ``rounds`` equal the simulator's, to 1e-12."""
        stats = {**transport.sent_stats(), peer.round: peer.stats}
        for t in rounds:
            expected = self.history[t][ME]
            np.testing.assert_allclose(stats[t], expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max(),
                                       err_msg=f"round {t}")


@pytest.fixture(scope="module")
def setup() -> Setup:
    schema, x, y = prepared(mixed_columns())
    model = make_model("nb", schema)
    phi = model.features(x)
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), GRAPH.number_of_nodes())
    ess = default_ess(len(y), len(parts))
    engine = CRCEngine(model, LocalData.from_parts(phi, y, parts), averaging_matrix(GRAPH), ess=ess)
    history = [engine.stats.copy()]
    engine.run(ROUNDS, callback=lambda _, stats: history.append(stats.copy()))
    return Setup(model, [phi[p] for p in parts], [y[p] for p in parts], ess, np.array(history))


def no_rejections(peer: Peer) -> bool:
    return not any(peer.metrics.rejected.values())


def test_with_every_neighbour_the_peer_follows_the_simulator_round_by_round(setup):
    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, setup.neighbours_answer)
    assert peer.run(transport) is True
    setup.assert_follows_simulator(peer, transport)
    degree, frame_bytes = len(NEIGHBOURS), len(transport.sent[0])
    assert sorted(transport.sent_stats()) == list(range(ROUNDS))  # round 0 on start, none after the last round
    assert peer.metrics.messages_sent == degree * ROUNDS and peer.metrics.bytes_sent == degree * ROUNDS * frame_bytes
    assert peer.metrics.messages_received == degree * ROUNDS and peer.metrics.send_dropped == 0
    assert peer.metrics.rounds_done == ROUNDS and len(peer.metrics.soft_loss) == ROUNDS
    assert set(peer.metrics.missing.values()) == {0} and no_rejections(peer)
    assert clock.now == 0.0  # nobody waited
    assert transport.closed_linger_ms == PeerSettings.final_linger_ms


def test_a_peer_runs_its_rounds_with_blas_on_one_thread(setup):
    """A round's products are short: a threaded BLAS on a busy machine stalled them (a peer of ``crc node`` runs
    without ``crc launch``'s single-threaded environment)."""
    clock = FakeClock()
    peer = setup.peer(clock)
    seen, calibrate = [], peer._calibrate
    peer._calibrate = lambda *args: (seen.append(blas_threads_now()), calibrate(*args))[1]
    with threadpool_limits(limits=2, user_api="blas"):
        assert peer.run(FakeTransport(clock, setup.neighbours_answer)) and blas_threads_now() == 2
    assert seen == [1] * ROUNDS


@pytest.mark.parametrize("settings", [{}, {"acceleration": replace(PRESET, start="categorical"), "loss": 0.5,
                                           "loss_seed": 3}], ids=["plain", "last-heard"])
def test_the_average_does_not_depend_on_the_order_the_neighbours_statistics_arrive_in(setup, settings):
    """A real network delivers the neighbours' statistics in any order: the peer adds them in its neighbours' order,
    so its statistics are the same bits whatever the order (float additions do not commute in the last bit)."""
    def reversed_answer(round_):
        return setup.neighbours_answer(round_)[::-1]

    runs = []
    for answer in (setup.neighbours_answer, reversed_answer):
        peer = setup.peer(FakeClock(), **settings)
        transport = FakeTransport(peer.clock, answer)
        assert peer.run(transport)
        runs.append((peer.stats, transport.sent))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


def test_a_peer_releasing_every_third_round_follows_the_simulator_and_only_averages_between(setup):
    """``release_every=3``: the local step in rounds 1, 4 and 7; in the others the peer sends the plain average of
    its own last statistics and its neighbours' (public values only), as the simulator's engine does."""
    sizes = [len(y) for y in setup.y]
    parts = np.split(np.arange(sum(sizes)), np.cumsum(sizes)[:-1])
    engine = CRCEngine(setup.model, LocalData.from_parts(np.concatenate(setup.phi), np.concatenate(setup.y), parts),
                       averaging_matrix(GRAPH), ess=setup.ess, release_every=3)
    history = [engine.stats.copy()]
    engine.run(ROUNDS, callback=lambda _, stats: history.append(stats.copy()))
    every_third = replace(setup, history=np.array(history))
    clock = FakeClock()
    peer = every_third.peer(clock, release_every=3)
    transport = FakeTransport(clock, every_third.neighbours_answer)
    assert peer.run(transport) is True
    every_third.assert_follows_simulator(peer, transport)
    sent = {**transport.sent_stats(), peer.round: peer.stats}
    for t in (2, 3, 5, 6, 8):
        np.testing.assert_allclose(sent[t], np.mean([sent[t - 1], *(history[t - 1][u] for u in NEIGHBOURS)], axis=0),
                                   rtol=1e-12)
    assert not np.allclose(sent[4], np.mean([sent[3], *(history[3][u] for u in NEIGHBOURS)], axis=0))


def test_a_stale_message_is_dropped_and_counted(setup):
    stale = setup.frame(NEIGHBOURS[0], 2, stats=setup.history[5][NEIGHBOURS[0]])  # valid, but not round 2's

    def answer(round_):
        return setup.neighbours_answer(round_) + ([(0.0, stale)] if round_ == 3 else [])

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    assert peer.metrics.rejected == {**dict.fromkeys(peer.metrics.rejected, 0), "stale": 1}
    assert peer.metrics.messages_received == len(NEIGHBOURS) * ROUNDS
    setup.assert_follows_simulator(peer, transport)


def test_an_early_message_is_kept_and_used_in_its_round(setup):
    early = NEIGHBOURS[0]

    def answer(round_):
        if round_ == 2:  # the neighbour's round-3 statistics come first, a round early
            return [(0.0, setup.frame(early, 3))] + setup.neighbours_answer(2)
        return setup.neighbours_answer(round_, without=[early] if round_ == 3 else [])

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    setup.assert_follows_simulator(peer, transport)
    assert set(peer.metrics.missing.values()) == {0} and no_rejections(peer)
    assert peer.metrics.messages_received == len(NEIGHBOURS) * ROUNDS and clock.now == 0.0


def test_a_duplicate_is_rejected_and_the_first_copy_used(setup):
    twice = NEIGHBOURS[-1]
    copy = setup.frame(twice, 2, stats=setup.history[5][twice])  # valid, but not round 2's

    def answer(round_):
        replies = setup.neighbours_answer(round_)
        return [replies[-1], (0.0, copy), *replies[:-1]] if round_ == 2 else replies

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    assert peer.metrics.rejected == {**dict.fromkeys(peer.metrics.rejected, 0), "duplicate": 1}
    setup.assert_follows_simulator(peer, transport)


def test_a_copy_of_a_frame_held_or_just_taken_is_dropped_uncounted(setup):
    """A neighbour that sends its statistics again (to a peer that restarted, ``crc.nodes.resend``) sends the same
    bytes: the copy, before or after its round is taken, changes nothing and is neither received nor rejected."""
    twice = NEIGHBOURS[-1]

    def answer(round_):
        replies = setup.neighbours_answer(round_)
        again = [(0.0, setup.frame(twice, round_))]
        return again + replies + again if round_ == 2 else replies

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    assert no_rejections(peer) and peer.metrics.messages_received == len(NEIGHBOURS) * ROUNDS
    setup.assert_follows_simulator(peer, transport)


def test_a_message_beyond_the_runs_rounds_is_rejected(setup):
    sender = NEIGHBOURS[0]
    beyond = [(0.0, setup.frame(sender, ROUNDS, stats=setup.history[0][sender])),
              (0.0, setup.frame(sender, 10 ** 9, stats=setup.history[0][sender]))]

    def answer(round_):
        return setup.neighbours_answer(round_) + (beyond if round_ == 0 else [])

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    assert peer.metrics.rejected == {**dict.fromkeys(peer.metrics.rejected, 0), "malformed": 2}
    setup.assert_follows_simulator(peer, transport)


def lrc_of(setup: Setup, own: np.ndarray, received: list) -> np.ndarray:
    """What the peer must compute from its own statistics and the ``received`` ones."""
    aggregated = (own + sum(received)) / (1 + len(received))
    return lrc(setup.model, aggregated, setup.phi[ME], labelled_weights(setup.y[ME], setup.model.n_classes))


def test_a_missing_neighbour_is_counted_after_the_timeout_and_the_round_proceeds(setup):
    startup_s, silent, late_round = 4.5, NEIGHBOURS[1], 3

    def answer(round_):  # round 0 arrives after the start-up; in round 3 one neighbour stays silent
        return setup.neighbours_answer(round_, delay=startup_s if round_ == 0 else 0.0,
                                       without=[silent] if round_ == late_round else [])

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    assert peer.metrics.missing == {**{ADDRESS[u]: 0 for u in NEIGHBOURS}, ADDRESS[silent]: 1}
    assert clock.now == startup_s + TIMEOUT_S  # the start-up allowance was over: one plain timeout
    assert peer.metrics.rounds_done == ROUNDS and no_rejections(peer)
    setup.assert_follows_simulator(peer, transport, rounds=range(1, late_round + 1))
    sent = transport.sent_stats()
    arrived = [setup.history[late_round][u] for u in NEIGHBOURS if u != silent]
    expected = lrc_of(setup, sent[late_round], arrived)
    np.testing.assert_allclose(sent[late_round + 1], expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_the_first_round_waits_its_own_timeout_for_the_start_up(setup):
    silent = NEIGHBOURS[0]
    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_, without=[silent] if round_ == 0 else []))
    assert peer.run(transport)
    assert clock.now == FIRST_ROUND_TIMEOUT_S
    assert peer.metrics.missing == {**{ADDRESS[u]: 0 for u in NEIGHBOURS}, ADDRESS[silent]: 1}
    arrived = [setup.history[0][u] for u in NEIGHBOURS if u != silent]
    expected = lrc_of(setup, setup.history[0][ME], arrived)
    np.testing.assert_allclose(transport.sent_stats()[1], expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_a_start_time_holds_the_first_statistics_back_and_keeps_what_arrives_meanwhile(setup, monkeypatch):
    wall = 1.8e9  # the wall clock stands still (at a whole second, so that the start is exactly 30 s ahead)
    monkeypatch.setattr(time, "time", lambda: wall)
    clock = FakeClock()
    peer = setup.peer(clock, start_at=wall + 30.0)
    transport = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_) if round_ > 0 else [])
    for u in NEIGHBOURS:  # neighbours that started earlier: their first statistics are there before ours leave
        heapq.heappush(transport._pending, (1.0, next(transport._order), setup.frame(u, 0)))
    first_send = []
    send = transport.send
    transport.send = lambda frame: first_send.append(clock.now) or send(frame)
    assert peer.run(transport)
    assert first_send[0] == 30.0  # at the start time, not before
    assert clock.now == first_send[0]  # and no wait after it: the early frames were kept
    setup.assert_follows_simulator(peer, transport)
    assert no_rejections(peer) and set(peer.metrics.missing.values()) == {0}


def test_a_stop_during_the_start_wait_sends_nothing(setup):
    clock = FakeClock()
    peer = setup.peer(clock, start_at=time.time() + 30.0)
    transport = FakeTransport(clock, setup.neighbours_answer, during_wait=peer.stop.set)
    assert peer.run(transport) is False
    assert transport.sent == [] and peer.round == 0 and clock.now < 30.0


def waiting_notices(setup: Setup, round_: int, until_s: float, *, every_s: float = TIMEOUT_S / 2) -> list:
    """(delay, frame) of every neighbour's notice that it still awaits round ``round_``, every ``every_s`` until
    ``until_s``."""
    times = np.arange(every_s, until_s, every_s)
    return [(t, wire.encode_waiting(run="crc", sender=ADDRESS[u], round_=round_)) for t in times for u in NEIGHBOURS]


def test_a_late_start_two_hops_away_is_waited_for_while_the_neighbours_say_they_wait(setup):
    """The neighbours' round-1 statistics wait for their own late neighbour: 3 s, more than the 1 s timeout. They
    say so every half timeout, and the peer waits for them."""
    delay_s = 3.0

    def answer(round_):
        notices = waiting_notices(setup, 0, delay_s) if round_ == 1 else []
        return notices + setup.neighbours_answer(round_, delay=delay_s if round_ == 1 else 0.0)

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    assert clock.now == delay_s and set(peer.metrics.missing.values()) == {0}
    assert peer.metrics.notices_received == len(NEIGHBOURS) * 5 and no_rejections(peer)
    setup.assert_follows_simulator(peer, transport)


def test_the_first_rounds_window_governs_the_first_round_only(setup):
    """Without notices a late round-1 frame is waited for one timeout: the first round's 5 s window is not a floor
    for later rounds."""
    late = NEIGHBOURS[0]

    def answer(round_):
        return [(3.0 if round_ == 1 and u == late else 0.0, setup.frame(u, round_)) for u in NEIGHBOURS]

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport)
    assert clock.now == TIMEOUT_S and peer.metrics.missing[ADDRESS[late]] == 1 and not peer.liveness.down
    setup.assert_follows_simulator(peer, transport, rounds=[1])


def test_a_stop_request_interrupts_the_wait(setup, tmp_path):
    silent, stop_after_s = NEIGHBOURS[0], 0.3
    clock = FakeClock()
    peer = setup.peer(clock, checkpoint_dir=str(tmp_path))

    def stop_later():
        if clock.now >= stop_after_s:
            peer.stop.set()

    transport = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_, without=[silent] if round_ == 2 else []),
                              during_wait=stop_later)
    assert peer.run(transport) is False
    # seen at the end of the poll slice it arrived in, long before the wait's deadline
    assert peer.round == 2 and clock.now == pytest.approx(stop_after_s + PeerSettings.poll_slice_s, abs=1e-9)
    assert sorted(transport.sent_stats()) == [0, 1, 2]
    assert set(peer.metrics.missing.values()) == {0}  # an interrupted round counts nobody missing
    assert transport.closed_linger_ms == 0
    assert setup.peer(FakeClock(), checkpoint_dir=str(tmp_path)).round == 2


def test_an_error_still_closes_the_transport_at_once(setup):
    def fail():
        raise RuntimeError("network gone")

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, lambda round_: [], during_wait=fail)
    with pytest.raises(RuntimeError, match="network gone"):
        peer.run(transport)
    assert transport.closed_linger_ms == 0


def test_a_resumed_peer_continues_from_its_checkpoint_and_ends_like_an_uninterrupted_run(setup, tmp_path):
    stopped_at = 3
    clock = FakeClock()
    first = setup.peer(clock, checkpoint_dir=str(tmp_path))
    answer_until_stop = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_) if round_ < stopped_at else [],
                                      during_wait=first.stop.set)
    assert first.run(answer_until_stop) is False and first.round == stopped_at

    resumed = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path))
    assert resumed.round == stopped_at
    np.testing.assert_array_equal(resumed.stats, first.stats)
    transport = FakeTransport(resumed.clock, setup.neighbours_answer)
    assert resumed.run(transport) is True
    assert sorted(transport.sent_stats()) == list(range(stopped_at, ROUNDS))
    assert transport.resumed == [stopped_at] and answer_until_stop.resumed == []  # told once, and only when resumed

    uninterrupted = setup.peer(FakeClock())
    assert uninterrupted.run(FakeTransport(uninterrupted.clock, setup.neighbours_answer))
    np.testing.assert_array_equal(resumed.stats, uninterrupted.stats)
    assert resumed.metrics.soft_loss == uninterrupted.metrics.soft_loss
    assert resumed.metrics.rounds_done == ROUNDS
    assert resumed.metrics.messages_received == uninterrupted.metrics.messages_received
    setup.assert_follows_simulator(resumed, transport, rounds=range(stopped_at, ROUNDS + 1))


@pytest.mark.parametrize("secure", [False, True], ids=["plain", "secure-aggregation"])
def test_a_peer_resumed_after_its_last_round_tells_its_neighbours_under_secure_aggregation(setup, tmp_path, secure):
    """Killed while it serves its neighbours' last unmasking (after its last round) and restarted, a peer resumes at
    the run's end. Under secure aggregation it says so: its notice counts as its decline of what they asked its last
    process (``SecureAggregationSession.take_resumed``), so their last unmasking stops waiting --timeout for its
    answer. Without it there is nothing to say (nothing to be sent again) and it sends nothing."""
    def peer():
        return secure_peer(setup, checkpoint_dir=str(tmp_path)) if secure else setup.peer(FakeClock(),
                                                                                            checkpoint_dir=str(tmp_path))

    done = peer()
    done.round = done.metrics.rounds_done = ROUNDS
    done.checkpoints.save(done.state, done.metrics)  # as after its last round
    resumed = peer()
    transport = FakeTransport(resumed.clock, setup.neighbours_answer)
    assert resumed.round == ROUNDS and resumed.run(transport) is True
    assert transport.resumed == ([ROUNDS] if secure else []) and transport.sent_stats() == {}


def test_the_aggregate_classifier_is_the_last_rounds_aggregate_and_survives_a_restart(setup, tmp_path):
    aggregate = Acceleration(classifier="aggregate")
    stopped_at = 3
    clock = FakeClock()
    first = setup.peer(clock, checkpoint_dir=str(tmp_path), acceleration=aggregate)
    answer_until_stop = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_) if round_ < stopped_at else [],
                                      during_wait=first.stop.set)
    assert first.run(answer_until_stop) is False
    resumed = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), acceleration=aggregate)
    np.testing.assert_array_equal(resumed.classifier_stats, first.classifier_stats)
    assert resumed.run(FakeTransport(resumed.clock, setup.neighbours_answer))
    np.testing.assert_allclose(resumed.stats, setup.history[ROUNDS][ME], rtol=1e-12)  # the statistics are the paper's
    mixing = averaging_matrix(GRAPH)
    expected = (mixing @ setup.history[ROUNDS - 1])[ME]  # the aggregate of the last round, before the local step
    np.testing.assert_allclose(resumed.classifier_stats, expected, rtol=1e-12)
    assert np.max(np.abs(resumed.classifier_stats - resumed.stats)) > 1e-6
    finished = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), acceleration=aggregate)  # from the last checkpoint
    assert finished.round == ROUNDS
    np.testing.assert_array_equal(finished.classifier_stats, resumed.classifier_stats)
    # a checkpoint of the other classifier is refused, not half-used
    with pytest.raises(CRCError, match=r"different configuration \(acceleration differ"):
        setup.peer(FakeClock(), checkpoint_dir=str(tmp_path))


def test_a_peer_sends_a_round_only_once_its_checkpoint_holds_it(setup, tmp_path):
    """What a peer killed at a send leaves: the checkpoint of the round it sends, so it resumes by sending that round
    again, not by computing it anew from what the neighbours send then (under privacy, a second release)."""
    held_at_send = {}

    class Watching(FakeTransport):
        def send(self, frame: bytes) -> list[str]:
            message = msgpack.unpackb(frame)
            if message["type"] not in (wire.WAITING, wire.RESUMED):
                held_at_send[message["round"]] = checkpoint.completed_round(tmp_path)
            return super().send(frame)

    peer = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path))
    assert peer.run(Watching(peer.clock, setup.neighbours_answer))
    assert held_at_send == {round_: round_ for round_ in range(ROUNDS)}


MOMENTUM = Acceleration(**MOMENTUM_PRESET)


@pytest.mark.parametrize("stopped_at", [1, 3])
def test_a_resumed_peer_with_momentum_continues_exactly_like_an_uninterrupted_one(setup, tmp_path, stopped_at):
    """The checkpoint holds the momentum's memory (the last aggregate) and the safeguard's reset flag."""
    preset = MOMENTUM
    clock = FakeClock()
    first = setup.peer(clock, checkpoint_dir=str(tmp_path), acceleration=preset)
    answer_until_stop = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_) if round_ < stopped_at else [],
                                      during_wait=first.stop.set)
    assert first.run(answer_until_stop) is False and first.round == stopped_at
    resumed = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), acceleration=preset)
    assert resumed.memory.previous is resumed.aggregated
    np.testing.assert_array_equal(resumed.memory.previous, first.memory.previous)
    assert bool(resumed.memory.reset) == bool(first.memory.reset)
    assert resumed.run(FakeTransport(resumed.clock, setup.neighbours_answer))
    uninterrupted = setup.peer(FakeClock(), acceleration=preset)
    assert uninterrupted.run(FakeTransport(uninterrupted.clock, setup.neighbours_answer))
    np.testing.assert_array_equal(resumed.stats, uninterrupted.stats)
    np.testing.assert_array_equal(resumed.classifier_stats, uninterrupted.classifier_stats)
    assert resumed.metrics.soft_loss == uninterrupted.metrics.soft_loss
    plain = setup.peer(FakeClock(), acceleration=Acceleration(classifier="aggregate"))  # no memory: another trajectory
    assert plain.run(FakeTransport(plain.clock, setup.neighbours_answer))
    assert np.max(np.abs(plain.stats - uninterrupted.stats)) > 1e-6


@pytest.mark.parametrize("stopped_at", [2, 4])
def test_a_resumed_peer_releasing_every_third_round_continues_exactly_with_its_momentum(setup, tmp_path, stopped_at):
    """After round 2 (an averaging round) the momentum's memory is round 1's aggregate, not the last one: the
    checkpoint keeps both, so the peer resumed there ends as an uninterrupted one."""
    settings = {"acceleration": MOMENTUM, "release_every": 3}
    clock = FakeClock()
    first = setup.peer(clock, checkpoint_dir=str(tmp_path), **settings)
    answer_until_stop = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_) if round_ < stopped_at else [],
                                      during_wait=first.stop.set)
    assert first.run(answer_until_stop) is False and first.round == stopped_at
    assert (first.memory.previous is first.aggregated) == (stopped_at == 4)
    resumed = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), **settings)
    np.testing.assert_array_equal(resumed.memory.previous, first.memory.previous)
    np.testing.assert_array_equal(resumed.aggregated, first.aggregated)
    assert resumed.run(FakeTransport(resumed.clock, setup.neighbours_answer))
    uninterrupted = setup.peer(FakeClock(), **settings)
    assert uninterrupted.run(FakeTransport(uninterrupted.clock, setup.neighbours_answer))
    np.testing.assert_array_equal(resumed.classifier_stats, uninterrupted.classifier_stats)
    with pytest.raises(CRCError, match="checkpoint"):
        setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), acceleration=MOMENTUM, release_every=2)


def test_a_checkpoint_with_a_reset_flag_other_than_0_or_1_is_refused(setup, tmp_path):
    preset = MOMENTUM
    peer = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), acceleration=preset)
    assert peer.run(FakeTransport(peer.clock, setup.neighbours_answer))
    state = layout(peer.state, preset)
    assert len(state) == 2 * setup.model.size + 1 and state[-1] in (0.0, 1.0)
    state[-1] = 0.5
    checkpoint.save(tmp_path, identity=peer.identity, round_=ROUNDS, stats=state, metrics=peer.metrics.to_json())
    with pytest.raises(CRCError, match="momentum reset flag 0.5"):
        setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), acceleration=preset)


def test_a_peer_with_momentum_keeps_two_statistics_vectors(setup):
    """Its memory (the previous aggregate) is its classifier's aggregate: statistics and aggregate, nothing more."""
    peer = setup.peer(FakeClock(), acceleration=MOMENTUM)
    assert peer.run(FakeTransport(peer.clock, setup.neighbours_answer))
    assert peer.memory.previous is peer.aggregated is peer.classifier_stats
    assert peer.stats is not peer.aggregated


def _under(setup: Setup, acceleration: Acceleration, iters: int) -> tuple[Setup, np.ndarray]:
    """``setup`` with the simulator's history under ``acceleration`` with ``iters`` local steps, and the simulator's
    classifiers (n, size) after the last round."""
    bounds = np.cumsum([0] + [len(y) for y in setup.y])
    parts = [np.arange(bounds[v], bounds[v + 1]) for v in range(len(setup.y))]
    local = LocalData.from_parts(np.concatenate(setup.phi), np.concatenate(setup.y), parts)
    engine = CRCEngine(setup.model, local, averaging_matrix(GRAPH), ess=setup.ess, iterations=iters,
                       acceleration=acceleration)
    history = [engine.stats.copy()]
    engine.run(ROUNDS, callback=lambda _, stats: history.append(engine.stats.copy()))
    return Setup(setup.model, setup.phi, setup.y, setup.ess, np.array(history)), engine.classifiers


@pytest.fixture(scope="module")
def exact(setup) -> Setup:
    """``setup`` with the simulator's history under the preset (exact diffusion, ACCELERATED['iters'] local steps)."""
    return _under(setup, PRESET, ACCELERATED["iters"])[0]


NB_DEFAULT = resolve({"model": "nb"})
"""Naive Bayes' settings under the accelerated algorithm: the categorical start, three local steps, the averaged
classifier."""


@pytest.fixture(scope="module")
def nb_default(setup) -> tuple[Setup, np.ndarray]:
    """``setup`` with the simulator's history under ``NB_DEFAULT``, and its classifiers after the last round."""
    return _under(setup, acceleration_of(NB_DEFAULT), NB_DEFAULT["iters"])


def test_an_exact_diffusion_peer_sends_what_the_simulator_computes(exact):
    peer = exact.peer(FakeClock(), acceleration=PRESET, iters=ACCELERATED["iters"])
    transport = FakeTransport(peer.clock, exact.neighbours_answer)
    assert peer.run(transport)
    exact.assert_follows_simulator(peer, transport)
    np.testing.assert_array_equal(peer.classifier_stats, peer.stats)  # what it sends is its classifier
    assert peer.aggregated is None and peer.memory.previous is not peer.stats  # two statistics vectors: sent and ψ


def test_a_naive_bayes_peer_under_the_default_sends_and_classifies_as_the_simulator(nb_default):
    """The averaged classifier: the peer's category counts averaged over its rounds, as the simulator's."""
    simulated, classifiers = nb_default
    peer = simulated.peer(FakeClock(), acceleration=acceleration_of(NB_DEFAULT), iters=NB_DEFAULT["iters"])
    transport = FakeTransport(peer.clock, simulated.neighbours_answer)
    assert peer.run(transport)
    simulated.assert_follows_simulator(peer, transport)
    np.testing.assert_allclose(peer.classifier_stats, classifiers[ME], rtol=1e-12, atol=1e-12 * np.abs(classifiers).max())
    assert np.max(np.abs(peer.classifier_stats - peer.stats)) > 1e-6


@pytest.mark.parametrize("stopped_at", [1, 3])
@pytest.mark.parametrize("name, settings", [("exact", {"acceleration": PRESET, "iters": ACCELERATED["iters"]}),
                                            ("nb_default", {"acceleration": acceleration_of(NB_DEFAULT),
                                                            "iters": NB_DEFAULT["iters"]})])
def test_a_resumed_exact_diffusion_peer_continues_exactly_like_an_uninterrupted_one(request, tmp_path, stopped_at, name,
                                                                                    settings):
    """The checkpoint holds ψ, the statistics after the last local steps, and under naive Bayes' default the running
    average of its statistics (its classifier's category counts)."""
    simulated = request.getfixturevalue(name)
    simulated = simulated[0] if isinstance(simulated, tuple) else simulated
    clock = FakeClock()
    first = simulated.peer(clock, checkpoint_dir=str(tmp_path), **settings)
    answer_until_stop = FakeTransport(clock, lambda round_: simulated.neighbours_answer(round_) if round_ < stopped_at
                                      else [], during_wait=first.stop.set)
    assert first.run(answer_until_stop) is False and first.round == stopped_at
    resumed = simulated.peer(FakeClock(), checkpoint_dir=str(tmp_path), **settings)
    np.testing.assert_array_equal(resumed.memory.previous, first.memory.previous)
    np.testing.assert_array_equal(resumed.classifier_stats, first.classifier_stats)
    transport = FakeTransport(resumed.clock, simulated.neighbours_answer)
    assert resumed.run(transport)
    simulated.assert_follows_simulator(resumed, transport, rounds=range(stopped_at + 1, ROUNDS + 1))
    uninterrupted = simulated.peer(FakeClock(), **settings)
    assert uninterrupted.run(FakeTransport(uninterrupted.clock, simulated.neighbours_answer))
    np.testing.assert_array_equal(resumed.stats, uninterrupted.stats)
    np.testing.assert_array_equal(resumed.classifier_stats, uninterrupted.classifier_stats)


def test_a_resumed_peer_under_loss_keeps_the_last_heard_and_continues_exactly_like_an_uninterrupted_one(setup, tmp_path):
    """The categorical start keeps the last heard on each link for a lost message (``keeps_last_heard``): the
    checkpoint holds it, so a resumed peer averages what an uninterrupted one does."""
    settings = {"acceleration": replace(PRESET, start="categorical"), "iters": ACCELERATED["iters"], "loss": 0.5,
                "loss_seed": 3}
    stopped_at = 3
    clock = FakeClock()
    first = setup.peer(clock, checkpoint_dir=str(tmp_path), **settings)
    assert first.links == tuple(ADDRESS[u] for u in NEIGHBOURS)
    answer_until_stop = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_) if round_ < stopped_at else [],
                                      during_wait=first.stop.set)
    assert first.run(answer_until_stop) is False and first.round == stopped_at and first.heard
    resumed = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), **settings)
    assert resumed.heard.keys() == first.heard.keys()
    for link, stats in first.heard.items():
        np.testing.assert_array_equal(resumed.heard[link], stats)
    assert resumed.run(FakeTransport(resumed.clock, setup.neighbours_answer))
    uninterrupted = setup.peer(FakeClock(), **settings)
    assert uninterrupted.run(FakeTransport(uninterrupted.clock, setup.neighbours_answer))
    assert sum(uninterrupted.metrics.missing.values()) > 0
    np.testing.assert_array_equal(resumed.stats, uninterrupted.stats)
    assert resumed.metrics.soft_loss == uninterrupted.metrics.soft_loss


def test_a_checkpoint_whose_last_heard_would_be_rejected_is_refused(setup, tmp_path):
    settings = {"acceleration": replace(PRESET, start="categorical"), "loss": 0.5, "loss_seed": 3}
    peer = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), **settings)
    assert peer.run(FakeTransport(peer.clock, setup.neighbours_answer))
    state = layout(peer.state, settings["acceleration"], peer.links)
    state[-setup.model.size:] *= 2  # the last link's last heard: class counts that total twice the ESS
    checkpoint.save(tmp_path, identity=peer.identity, round_=ROUNDS, stats=state, metrics=peer.metrics.to_json())
    with pytest.raises(CRCError, match="damaged checkpoint: its statistics would be rejected"):
        setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), **settings)
    with pytest.raises(CRCError, match=r"different configuration \(last_heard differ"):  # written without it
        setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), **{**settings, "loss": 0.0})


def test_a_resumed_peer_waits_the_plain_timeout(setup, tmp_path):
    """A resumed peer joins running peers: no start-up allowance for its first wait."""
    first = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path))
    only_round_0 = FakeTransport(first.clock, lambda round_: setup.neighbours_answer(round_) if round_ == 0 else [],
                                 during_wait=first.stop.set)
    assert first.run(only_round_0) is False

    silent, clock = NEIGHBOURS[0], FakeClock()
    resumed = setup.peer(clock, checkpoint_dir=str(tmp_path))
    assert resumed.round == 1
    transport = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_, without=[silent] if round_ == 1 else []))
    assert resumed.run(transport)
    assert clock.now == TIMEOUT_S and resumed.metrics.missing[ADDRESS[silent]] == 1


def test_a_full_queue_drops_that_neighbours_copy_and_counts_it_and_logs_it_once_while_it_lasts(setup, caplog):
    """A dead neighbour's queue fills up (ZeroMQ holds ``queue_messages`` frames for it) and stays full for the rest
    of the run: every dropped copy is counted, but the log says so once, not once a round for ever."""
    full = ADDRESS[NEIGHBOURS[0]]
    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, setup.neighbours_answer, full=frozenset({full}))
    with caplog.at_level(logging.WARNING, logger="crc.node"):
        assert peer.run(transport)
    assert [r.getMessage() for r in caplog.records if "queue" in r.getMessage()] == [
        f"round 0: queue to {full} full, statistics not sent (logged again once it takes frames again)"]
    assert peer.metrics.send_dropped == ROUNDS
    assert peer.metrics.messages_sent == (len(NEIGHBOURS) - 1) * ROUNDS
    assert peer.metrics.bytes_sent == peer.metrics.messages_sent * len(transport.sent[0])


def test_hostile_frames_are_rejected_by_cause_logged_once_per_cause_and_harmless(setup, caplog):
    friend = NEIGHBOURS[0]
    size, good = setup.model.size, dict(run="crc", sender=ADDRESS[friend], round_=1, schema_id=setup.model.schema_id,
                                       ess=setup.ess)
    hostile = {
        "malformed": [b"random bytes \x00\xff", encode(**good, stats=np.zeros(size))[:-9],
                      b"\xc6\xff\xff\xff\xf0" + b"x" * 32, msgpack.packb({"v": 1})],
        "schema": [encode(**{**good, "schema_id": "0" * 64}, stats=np.zeros(size))],
        "ess": [encode(**{**good, "ess": setup.ess * 2}, stats=np.zeros(size))],
        "non-finite": [encode(**good, stats=np.full(size, np.nan))],
        "length": [encode(**good, stats=np.zeros(size + 3))],
        "sender": [encode(**{**good, "sender": "tcp://127.0.0.1:1"}, stats=np.zeros(size))],
        "oversized": [b"\x00" * (16 * size + 4096)],
        "run": [encode(**{**good, "run": "other"}, stats=np.zeros(size))],
    }
    frames = [(0.0, frame) for group in hostile.values() for frame in group]

    def answer(round_):  # twice: before the real round-1 statistics and after them
        return frames + setup.neighbours_answer(round_) + frames if round_ == 1 else setup.neighbours_answer(round_)

    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, answer)
    with caplog.at_level(logging.DEBUG, logger="crc.node"):
        assert peer.run(transport)
    assert peer.metrics.rejected == {**dict.fromkeys(peer.metrics.rejected, 0),
                                     **{cause: 2 * len(group) for cause, group in hostile.items()}}
    setup.assert_follows_simulator(peer, transport)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(hostile)  # once per cause; repeats go to debug
    assert any("rejected message (ess)" in w and "give every peer the same --ess" in w for w in warnings)


def test_a_dead_neighbour_is_marked_down_after_k_rounds_and_costs_k_timeouts_in_all(setup, caplog):
    """Dead from round 1 (it sent its round-0 statistics only): the run takes down_after x timeout, not a timeout
    per round; its missing rounds and down time are in the metrics; both transitions are logged."""
    dead = NEIGHBOURS[0]
    k = PeerSettings.down_after
    clock = FakeClock()
    peer = setup.peer(clock, first_round_timeout_s=TIMEOUT_S)
    transport = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_, without=[dead] if round_ >= 1 else []))
    with caplog.at_level(logging.INFO, logger="crc.node"):
        assert peer.run(transport)
    assert clock.now == k * TIMEOUT_S  # clean run: 0 s on the fake clock
    address = ADDRESS[dead]
    assert peer.metrics.missing[address] == ROUNDS - 1
    assert peer.metrics.down_rounds[address] == ROUNDS - 1 - k
    assert peer.metrics.downtime_s[address] == 0.0 and address in peer.liveness.down  # down since t = k s, the end
    assert sum(f"nothing from {address} in {k} rounds in a row: marked down" in r.getMessage() for r in caplog.records) == 1


def test_a_down_neighbour_that_sends_again_is_waited_for_again(setup, caplog):
    away, back_at = NEIGHBOURS[0], 5
    k = PeerSettings.down_after
    clock = FakeClock()
    peer = setup.peer(clock, first_round_timeout_s=TIMEOUT_S)

    def answer(round_):  # silent in rounds 1..back_at-1
        return setup.neighbours_answer(round_, without=[away] if 1 <= round_ < back_at else [])

    transport = FakeTransport(clock, answer)
    with caplog.at_level(logging.INFO, logger="crc.node"):
        assert peer.run(transport)
    address = ADDRESS[away]
    # rounds 2..4 wait for it (the third miss marks it down), round 5 does not; its round-5 frame, read in round 6,
    # marks it up: waited for again
    assert peer.metrics.missing[address] == back_at - 1 and peer.metrics.down_rounds[address] == back_at - 1 - k
    assert any(f"{address} sent again" in r.getMessage() for r in caplog.records)
    assert address not in peer.liveness.down and peer.metrics.downtime_s[address] == 0.0  # no fake time passed while down
    assert clock.now == k * TIMEOUT_S


def test_frames_far_ahead_are_refused_so_buffered_rounds_stay_bounded(setup):
    sender = NEIGHBOURS[0]
    window = PeerSettings.window_rounds
    ahead = [(0.0, setup.frame(sender, r, stats=setup.history[0][sender])) for r in range(1 + window, ROUNDS)]

    def answer(round_):
        return setup.neighbours_answer(round_) + (ahead if round_ == 0 else [])

    clock = FakeClock()
    peer = setup.peer(clock)
    assert peer.run(FakeTransport(clock, answer))
    # round r > window is more than `window` rounds after the awaited round 0; within the window they are early
    assert peer.metrics.rejected["ahead"] == len([r for r in range(1 + window, ROUNDS) if r > window])


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)
extremes = st.sampled_from([0.0, -0.0, 1e-308, 5e-324, -1e300, 1e300, 1.7e308, -1.7e308, np.nan, np.inf, -np.inf, 1e15])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.one_of(finite_or_not, extremes), min_size=1, max_size=8), scale=extremes, data=st.data())
def test_no_message_makes_a_peer_raise_and_its_statistics_stay_sound(setup, values, scale, data):
    """Hostile statistics in a neighbour's own slot, before its genuine frame: whatever the values, the peer runs
    to the end, its statistics are finite with ESS m0 (hostile frames are rejected or, if valid, averaged)."""
    size = setup.model.size
    pattern = np.resize(np.array(values, dtype=np.float64), size)
    base = setup.history[1][NEIGHBOURS[0]]
    with np.errstate(over="ignore", invalid="ignore"):
        candidates = [pattern, base + pattern, base * scale, np.full(size, scale)]
    hostile = [setup.frame(NEIGHBOURS[i % len(NEIGHBOURS)], 1, stats=s) for i, s in enumerate(candidates)]
    order = data.draw(st.permutations(range(len(hostile))))

    def answer(round_):
        extra = [(0.0, hostile[i]) for i in order] if round_ == 1 else []
        return extra + setup.neighbours_answer(round_)

    clock = FakeClock()
    peer = setup.peer(clock, aggregate=data.draw(st.sampled_from(["mean", "clipped"])))
    # numpy's own floating-point flags (an exp that underflows to 0) depend on the CPU's vector code: what matters
    # is that the peer raises nothing and its statistics stay sound.
    assert peer.run(FakeTransport(clock, answer))
    assert np.all(np.isfinite(peer.stats))
    assert abs(setup.model.ess(peer.stats) - setup.ess) <= 1e-9 * setup.ess


KEYS = {ADDRESS[v]: f"key-of-node-{v}" for v in GRAPH}


def test_with_known_keys_a_frame_must_come_with_the_key_of_its_sender(setup):
    """A neighbour's key on another neighbour's frames (a forgery) is rejected before its slot is taken."""
    forger, victim = NEIGHBOURS[0], NEIGHBOURS[1]
    forged = setup.frame(victim, 2, stats=5 * setup.history[2][victim])
    unkeyed = setup.frame(victim, 3, stats=7 * setup.history[3][victim])

    def answer(round_):
        extra = {2: [(0.0, forged)], 3: [(0.0, unkeyed)]}.get(round_, [])
        return extra + setup.neighbours_answer(round_)

    def key_of(frame):
        return {forged: KEYS[ADDRESS[forger]], unkeyed: None}.get(frame, KEYS[msgpack.unpackb(frame)["from"]])

    clock = FakeClock()
    peer = setup.peer(clock, known_keys={ADDRESS[u]: KEYS[ADDRESS[u]] for u in NEIGHBOURS})
    transport = FakeTransport(clock, answer, key_of=key_of)
    assert peer.run(transport)
    assert peer.metrics.rejected == {**dict.fromkeys(peer.metrics.rejected, 0), "forged": 2}
    assert peer.metrics.refused == {"unknown-key": 2}  # the transport's count, copied into the metrics
    setup.assert_follows_simulator(peer, transport)


def test_known_keys_must_cover_every_neighbour():
    with pytest.raises(ValueError, match="known key"):
        PeerSettings(bind=ADDRESS[ME], peers=(ADDRESS[0], ADDRESS[2]), known_keys={ADDRESS[0]: KEYS[ADDRESS[0]]})


def cancelling_counts(setup: Setup, size: float) -> np.ndarray:
    """Statistics whose class counts are +size, -size and m0 (total m0 exactly, added in that order), every other
    value 0."""
    stats = np.zeros(setup.model.size)
    setup.model.table(stats)[:, setup.model.layout.columns("count")] = np.array([[size], [-size], [setup.ess]])
    return stats


@pytest.mark.parametrize("acceleration", [Acceleration(), PRESET], ids=["paper", "accelerated"])
def test_an_aggregate_the_neighbours_would_reject_is_not_kept_the_round_starts_from_the_peers_own(
        setup, acceleration, monkeypatch, caplog):
    """Frames with class counts of ±2^57 m0 and ±2^109 m0 that total m0 (a hostile-input pass: they crashed a peer,
    its own counts rounded away). With the wire's count bounds lifted they are accepted, and the peer still runs to
    the end: the rounds whose aggregate would be rejected start from its own statistics, and all it sends passes."""
    monkeypatch.setattr(plausibility, "MAX_COUNT_MAGNITUDE", 1e300)  # the rule the wire applies
    monkeypatch.setattr(plausibility, "NEGATIVE_COUNT_MASS", 1e300)
    hostile = {0: setup.frame(NEIGHBOURS[0], 0, stats=cancelling_counts(setup, 1.02 * 2.0**57)),
               1: setup.frame(NEIGHBOURS[0], 1, stats=cancelling_counts(setup, 2.0**109))}

    def answer(round_):
        return ([(0.0, hostile[round_])] if round_ in hostile else []) + setup.neighbours_answer(round_)

    clock = FakeClock()
    peer = setup.peer(clock, acceleration=acceleration)
    transport = FakeTransport(clock, answer)
    with caplog.at_level(logging.WARNING, logger="crc.node"):
        assert peer.run(transport) is True
    assert peer.metrics.aggregate_fallbacks >= 1 and "starts from this peer's own" in caplog.text
    monkeypatch.undo()
    expect = peer.expect
    for frame in transport.sent:  # every neighbour takes every frame the peer sent
        decode(frame, expect.__class__(**{**expect.__dict__, "neighbours": frozenset({ADDRESS[ME]})}))
    assert abs(setup.model.ess(peer.stats) - setup.ess) <= 1e-9 * setup.ess


def test_the_fallback_of_a_round_is_its_own_statistics_local_step(setup):
    peer = setup.peer(FakeClock())
    own = peer.stats.copy()
    broken = own.copy()
    setup.model.table(broken)[0, setup.model.layout.columns("count")] += 0.5 * setup.ess  # ESS off by half
    aggregated, stats, _ = peer._calibrate(broken, 0)
    assert np.array_equal(aggregated, own) and peer.metrics.aggregate_fallbacks == 1
    np.testing.assert_array_equal(stats, lrc_of(setup, own, []))


def test_a_checkpoint_with_statistics_the_neighbours_would_reject_is_refused(setup, tmp_path):
    peer = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), rounds=2)
    assert peer.run(FakeTransport(peer.clock, setup.neighbours_answer))
    checkpoint.save(tmp_path, identity=peer.identity, round_=2, stats=peer.stats * 1e300, metrics=peer.metrics.to_json())
    with pytest.raises(CRCError, match="damaged checkpoint: its statistics would be rejected"):
        setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), rounds=2)


@pytest.mark.parametrize("metric, value", [("rejected", []), ("rejected", {"stale": "x"}), ("soft_loss", {}),
                                           ("round_ms", "x"), ("missing", []), ("messages_received", "many"),
                                           ("messages_sent", True), ("downtime_s", {"a": -1.0})])
def test_a_checkpoint_whose_metrics_are_not_what_a_peer_writes_is_refused_in_one_line(setup, tmp_path, metric, value):
    peer = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), rounds=2)
    assert peer.run(FakeTransport(peer.clock, setup.neighbours_answer))
    metrics = {**peer.metrics.to_json(), metric: value}
    checkpoint.save(tmp_path, identity=peer.identity, round_=2, stats=peer.stats, metrics=metrics)
    with pytest.raises(CRCError, match=rf"damaged checkpoint: metric(s\.| '){metric}"):
        setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), rounds=2)


def test_a_checkpoint_that_cannot_be_written_is_logged_and_the_run_goes_on(setup, tmp_path, monkeypatch, caplog):
    def no_descriptor_left(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(checkpoint, "save", no_descriptor_left)
    peer = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path))
    with caplog.at_level(logging.ERROR, logger="crc.node"):
        assert peer.run(FakeTransport(peer.clock, setup.neighbours_answer)) is True
    assert peer.metrics.checkpoint_failures == ROUNDS + 1  # every round, and the final write
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == ["round 1: checkpoint not written ([Errno 24] Too many open files); the previous one is kept"]


def test_refused_unmasking_requests_are_counted_each_and_logged_once_per_neighbour(setup, caplog):
    """A neighbour flooding requests that would reveal more than a sum fills neither the log nor anything else: each
    request gets one small decline, the same each time (nothing kept for it)."""
    keys = {address: new_key_pair() for address in ADDRESS}
    neighbourhoods = {ADDRESS[u]: {ADDRESS[w]: keys[ADDRESS[w]].public for w in [u, *GRAPH.neighbors(u)]}
                      for u in NEIGHBOURS}
    peer = setup.peer(FakeClock(), secure_aggregation=SecureAggregationKeys(keys[ADDRESS[ME]].secret, neighbourhoods))
    transport = FakeTransport(peer.clock, setup.neighbours_answer)
    stranger = "tcp://127.0.0.1:9999"
    request = Unmask(sender=ADDRESS[NEIGHBOURS[0]], round=0, survivors=(ADDRESS[ME], stranger), shares={})
    with caplog.at_level(logging.WARNING, logger="crc.node"):
        replies = [peer.session.answer(request) for _ in range(50)]
    assert len(set(replies)) == 1 and len(replies[0]) < 200
    as_u = replace(peer.expect, neighbours=frozenset(ADDRESS))
    assert decode(replies[0], as_u) == Decline(ADDRESS[ME], 0, ADDRESS[NEIGHBOURS[0]], "request")
    assert peer.metrics.reveals_refused == 50 and not transport.sent
    assert [r.levelno for r in caplog.records] == [logging.WARNING] and "refused" in caplog.records[0].getMessage()


def secure_peer(setup, dropouts: int | None = None, **settings) -> Peer:
    """This peer with secure aggregation, under distributed noise with ``dropouts`` (and no colluder) unless None;
    ``settings``: more of its PeerSettings."""
    from crc.core.distributed_noise import Neighbourhoods
    from crc.protocol.accountant import plan_distributed

    keys = {address: new_key_pair() for address in ADDRESS}
    neighbourhoods = {ADDRESS[u]: {ADDRESS[w]: keys[ADDRESS[w]].public for w in [u, *GRAPH.neighbors(u)]}
                      for u in NEIGHBOURS}
    privacy = None if dropouts is None else plan_distributed(
        setup.model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=ROUNDS, colluders=0, dropouts=dropouts,
        neighbourhoods=Neighbourhoods.of(averaging_matrix(GRAPH)))
    return setup.peer(FakeClock(), secure_aggregation=SecureAggregationKeys(keys[ADDRESS[ME]].secret, neighbourhoods),
                      privacy=privacy, **settings)


@pytest.mark.parametrize("dropouts, fewest", [(None, 2), (0, 3)])
def test_a_peer_under_distributed_noise_asks_for_every_member_the_shares_are_sized_for(setup, dropouts, fewest):
    """This peer's three neighbours: a request set of a majority (two) without distributed noise; under it, all but
    ``--dp-dropouts`` (here none: node 0 has a neighbour of one neighbour) of them, as a member's refusal requires."""
    assert secure_peer(setup, dropouts).session.neighbourhoods.own.fewest == fewest


def test_under_distributed_noise_no_decision_looks_at_the_statistics_of_the_local_step(setup, monkeypatch, caplog):
    """Under distributed noise a peer's statistics are released only inside sums carrying everyone's shares. A check
    that would reject every local step's statistics (before: the peer fell back and then kept its last statistics,
    a choice taken on them without noise) changes nothing: the step's statistics are contributed as they are, and
    the log stays silent. Only the aggregate, a sum released to this peer, is checked."""
    peer = secure_peer(setup, dropouts=0)
    start = peer.stats.copy()
    checked = []

    def check(stats, *args, **kwargs):
        checked.append(stats.copy())
        if not np.array_equal(stats, start):
            raise Rejected("magnitude", "a value of magnitude 1.234e+07, more than 1e+06 x the ESS")

    monkeypatch.setattr(peer_module, "check_statistics", check)
    with caplog.at_level(logging.WARNING, logger="crc.node"):
        aggregated, stats, _ = peer._calibrate(start, 0)
    assert peer.metrics.aggregate_fallbacks == peer.metrics.rounds_kept == 0 and not caplog.records
    np.testing.assert_array_equal(aggregated, start)
    np.testing.assert_array_equal(stats, lrc_of(setup, start, []))
    assert len(checked) == 1 and np.array_equal(checked[0], start)


def test_under_distributed_noise_an_implausible_aggregate_is_the_reason_for_a_fallback(setup):
    """The decision taken on the aggregate (released to this peer): an aggregate whose class counts miss the ESS is
    not stepped from; the round starts from the peer's last aggregate (here none yet: its start)."""
    peer = secure_peer(setup, dropouts=0)
    own = peer.stats.copy()
    broken = own.copy()
    setup.model.table(broken)[0, setup.model.layout.columns("count")] += 0.5 * setup.ess
    aggregated, stats, _ = peer._calibrate(broken, 0)
    assert peer.metrics.aggregate_fallbacks == 1 and peer.metrics.rounds_kept == 0
    np.testing.assert_array_equal(aggregated, own)
    np.testing.assert_array_equal(stats, lrc_of(setup, own, []))


def test_under_distributed_noise_a_local_step_beyond_the_encoding_is_held_within_it(setup, monkeypatch):
    """Statistics beyond what secure aggregation encodes (before: the check on them made the peer fall back) are
    clipped into it, coordinate by coordinate, and go into the masked sums; the values within it are unchanged."""
    peer = secure_peer(setup, dropouts=0)
    start = peer.stats.copy()
    huge = start.copy()
    huge[-1] = 1e40

    monkeypatch.setattr(crc_acceleration, "step", lambda *args, **kwargs: (huge.copy(), None))
    _, stats, _ = peer._calibrate(start, 0)
    assert peer.metrics.aggregate_fallbacks == 0
    assert 0 < plausibility.SECURE_AGGREGATION_TERM_LIMIT - stats[-1] < 1e-4
    np.testing.assert_array_equal(stats[:-1], start[:-1])
    peer.stats = stats
    assert len(peer.session.frames(stats, 1, schema_id=setup.model.schema_id, ess=setup.ess,
                                   shares=peer.release.shares(1), plain=lambda address: b"")) == len(NEIGHBOURS)


class Recorder:
    """A transport that only records what the peer sends to whom (the peer's replies to a neighbour's frames)."""

    def __init__(self):
        self.to: list[tuple[str, bytes]] = []

    def send_to(self, address: str, frame: bytes) -> bool:
        self.to.append((address, frame))
        return True


class Everyone(Recorder):
    """A Recorder that takes a frame for every neighbour too (``send``)."""

    def send(self, frame: bytes) -> list[str]:
        self.to += [(ADDRESS[u], frame) for u in NEIGHBOURS]
        return []


@pytest.mark.parametrize("privacy", [None, "secure", "distributed"])
def test_a_neighbour_that_resumed_gets_the_very_frames_sent_again_once(setup, privacy, caplog):
    """A neighbour that resumed at round 0 gets this peer's frames of its last KEEP_ROUNDS rounds (1 and 2) again:
    the bytes sent then (under secure aggregation the same masked words and sealed shares, with distributed noise the
    same share: nothing masked or drawn anew), once; a flood of notices sends nothing more and is logged
    LOGGED_RESUMES times."""
    from crc.nodes.resend import KEEP_ROUNDS, LOGGED_RESUMES

    peer = {None: lambda: setup.peer(FakeClock()), "secure": lambda: secure_peer(setup),
            "distributed": lambda: secure_peer(setup, dropouts=0)}[privacy]()
    transport = Everyone()
    for round_ in range(3):
        peer.round = round_
        peer._send(transport)
    u = ADDRESS[3]  # its neighbourhood (nodes 1 and 2) hides this peer's statistics under secure aggregation
    first = [frame for address, frame in transport.to if address == u]
    assert len(first) == 3 and {msgpack.unpackb(frame)["type"] for frame in first} == {"stats" if privacy is None else "masked"}
    sent = len(transport.to)
    with caplog.at_level(logging.DEBUG, logger="crc.node"):
        for _ in range(50):
            peer._accept(wire.encode_resumed(run="crc", sender=u, round_=0), None, 2, transport)
    assert transport.to[sent:] == [(u, frame) for frame in first[-KEEP_ROUNDS:]]
    assert peer.metrics.frames_resent == KEEP_ROUNDS and no_rejections(peer)
    logged = [r for r in caplog.records if r.levelno >= logging.INFO and "resumed at round" in r.getMessage()]
    assert len(logged) == LOGGED_RESUMES


def test_rounds_that_cannot_be_unmasked_are_counted_each_and_logged_once_while_they_last(setup, caplog):
    """A dead neighbour on a ring (one contributor left) or under distributed noise (every member needed) makes every
    round fall back to the peer's own statistics for the rest of the run: each round is counted, but the log says so
    once, not once a round for ever."""
    peer = secure_peer(setup)
    with caplog.at_level(logging.DEBUG, logger="crc.node"):
        for round_ in range(5):
            peer._secure_average(Recorder(), {}, round_)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert peer.metrics.unmask_fallbacks == 5 and len(warnings) == 1 and "could not be unmasked" in warnings[0]


def test_a_confirmation_without_every_co_members_vouch_gets_no_reveal_and_the_deviation_is_reported(setup, caplog):
    """The peer's round logic as a contributor towards its neighbour u = node 2 (N(u) = nodes 1 and 3): it agrees to
    u's request set {1, 3}; a confirmation that withholds node 3's vouch, or relays one for another set, is a
    deviation: no reveal is sent, it is counted and logged as an error (once); the honest confirmation gets the
    reveal."""
    from crc.nodes.secure_aggregation import Contributor, Neighbourhood
    from crc.nodes.wire import Agree, Reveal, encode_secure_aggregation

    keys = {address: new_key_pair() for address in ADDRESS}
    neighbourhoods = {ADDRESS[u]: {ADDRESS[w]: keys[ADDRESS[w]].public for w in GRAPH.neighbors(u)} for u in NEIGHBOURS}
    peer = setup.peer(FakeClock(), secure_aggregation=SecureAggregationKeys(keys[ADDRESS[ME]].secret, neighbourhoods))
    u, me, other = ADDRESS[2], ADDRESS[ME], ADDRESS[3]
    as_u = replace(peer.expect, neighbours=frozenset(ADDRESS), secure_aggregation=True)
    mine = decode(peer.session.frames(peer.stats, 0, schema_id=setup.model.schema_id, ess=setup.ess, plain=lambda address: b"")[u], as_u)
    co_member = Contributor(other, Neighbourhood("crc", u, [me, other]), keys[other].secret, {me: keys[me].public})
    _, sealed = co_member.masked(setup.history[0][3], 0)
    transport = Recorder()
    request = encode_secure_aggregation("unmask", run="crc", sender=u, round_=0, survivors=[me, other], shares={other: sealed[me]})
    peer._accept(request, None, 0, transport)
    assert [type(decode(frame, as_u)) for _, frame in transport.to] == [Agree]
    honest = {other: co_member.agree(0, [me, other], {me: mine.shares[other]})[me]}  # relayed: voucher -> its vouch
    elsewhere = Contributor(other, Neighbourhood("crc", u, [me, other]), keys[other].secret, {me: keys[me].public})
    elsewhere.masked(setup.history[0][3], 1)
    for_another_round = {other: elsewhere.agree(1, [me, other], {me: peer.session.neighbourhoods.contributors[u].masked(
        peer.stats, 1)[1][other]})[me]}
    with caplog.at_level(logging.DEBUG, logger="crc.node"):
        for vouches in ({}, for_another_round, {other: bytes(32)}):
            peer._accept(encode_secure_aggregation("confirm", run="crc", sender=u, round_=0, vouches=vouches), None, 0, transport)
    assert [decode(frame, as_u) for _, frame in transport.to[1:]] == [Decline(me, 0, u, "deviation")] * 3
    assert peer.metrics.deviations == peer.metrics.reveals_refused == 3
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "deviation detected" in errors[0] and u in errors[0]
    peer._accept(encode_secure_aggregation("confirm", run="crc", sender=u, round_=0, vouches=honest), None, 0, transport)
    assert isinstance(decode(transport.to[-1][1], as_u), Reveal) and peer.metrics.deviations == 3


def test_a_resumed_peer_reseals_its_last_rounds_shares_under_fresh_nonces(setup, tmp_path):
    """Restarted from its checkpoint, a peer masks the same round for the same neighbours again: the sealing key is
    the same (pair, recipient, round), so each bundle must come with a nonce never used before (it was all zeros)."""
    from crc.nodes.wire import NONCE_BYTES

    keys = {address: new_key_pair() for address in ADDRESS}
    neighbourhoods = {ADDRESS[u]: {ADDRESS[w]: keys[ADDRESS[w]].public for w in GRAPH.neighbors(u)} for u in NEIGHBOURS}
    secure = SecureAggregationKeys(keys[ADDRESS[ME]].secret, neighbourhoods)
    as_neighbour = replace(setup.peer(FakeClock()).expect, neighbours=frozenset(ADDRESS), secure_aggregation=True)
    nonces = []
    for _start in ("fresh", "resumed from the checkpoint of the first"):
        peer = setup.peer(FakeClock(), secure_aggregation=secure, checkpoint_dir=str(tmp_path))
        assert peer.round == 0
        transport = Recorder()
        peer._send(transport)
        peer.checkpoints.save(peer.state, peer.metrics)
        masked = [decode(frame, as_neighbour) for _, frame in transport.to if msgpack.unpackb(frame)["type"] == "masked"]
        assert masked and all(m.round == 0 for m in masked)
        nonces += [sealed[:NONCE_BYTES] for m in masked for sealed in m.shares.values()]
    assert len(set(nonces)) == len(nonces) and bytes(NONCE_BYTES) not in nonces


def test_a_resumed_peer_answers_no_unmasking_request_for_the_round_it_masks_again(setup, tmp_path):
    """A peer resumed from its checkpoint may have committed to a request set for the round it resumes at before it
    stopped, and masks that round again with the same pairwise seeds: it declines every request for it (a second set
    would give the recipient two answers for one round), where the same peer fresh agrees."""
    from crc.nodes.secure_aggregation import Contributor, Neighbourhood
    from crc.nodes.wire import Agree, encode_secure_aggregation

    keys = {address: new_key_pair() for address in ADDRESS}
    neighbourhoods = {ADDRESS[u]: {ADDRESS[w]: keys[ADDRESS[w]].public for w in GRAPH.neighbors(u)} for u in NEIGHBOURS}
    secure = SecureAggregationKeys(keys[ADDRESS[ME]].secret, neighbourhoods)
    u, me, other = ADDRESS[2], ADDRESS[ME], ADDRESS[3]
    as_u = replace(setup.peer(FakeClock()).expect, neighbours=frozenset(ADDRESS), secure_aggregation=True)
    co_member = Contributor(other, Neighbourhood("crc", u, [me, other]), keys[other].secret, {me: keys[me].public})
    _, sealed = co_member.masked(setup.history[0][3], 0)
    request = encode_secure_aggregation("unmask", run="crc", sender=u, round_=0, survivors=[me, other],
                                        shares={other: sealed[me]})
    replies = []
    for _start in ("fresh", "resumed from the checkpoint of the first"):
        peer = setup.peer(FakeClock(), secure_aggregation=secure, checkpoint_dir=str(tmp_path))
        transport = Recorder()
        peer._send(transport)
        peer.checkpoints.save(peer.state, peer.metrics)
        sent = len(transport.to)
        peer._accept(request, None, 0, transport)
        replies.append([decode(frame, as_u) for _, frame in transport.to[sent:]])
    assert [type(reply) for reply in replies[0]] == [Agree] and peer.metrics.reveals_refused == 1
    assert replies[1] == [Decline(me, 0, u, "resumed")]


class Killed(BaseException):
    """The process dies here (SIGKILL): nothing after it runs, the peer's final checkpoint included."""


def test_a_guarded_peer_holds_the_checkpoint_of_round_0_before_its_first_send(setup, tmp_path):
    """A secure-aggregation peer killed after its first send (during the first round's wait, up to the start-up's
    minute) must resume at round 0, not start afresh: afresh it would agree to a second request set for round 0
    and, under distributed noise, draw that round's shares again. So its first send comes after a checkpoint."""
    peer = secure_peer(setup)
    peer.checkpoints.directory = str(tmp_path)
    held = []

    class Dying(Recorder):
        def send_to(self, address: str, frame: bytes) -> bool:
            held.append(checkpoint.exists(tmp_path))
            raise Killed

        def refused(self) -> dict:
            return {}

        def close(self, linger_ms: int) -> None:
            pass

    with pytest.raises(Killed):
        peer.run(Dying())
    assert held == [True]


def test_a_peer_resumed_at_round_0_sends_it_with_the_same_shares_and_answers_no_request_for_it(setup, tmp_path):
    """Resumed from the checkpoint of round 0 (killed after its first send), a distributed-noise peer keeps its noise
    key, so its round-0 shares are those it sent, and refuses round 0's unmasking requests as any resumed peer does."""
    from crc.core.distributed_noise import Neighbourhoods
    from crc.protocol.accountant import plan_distributed

    keys = {address: new_key_pair() for address in ADDRESS}
    neighbourhoods = {ADDRESS[u]: {ADDRESS[w]: keys[ADDRESS[w]].public for w in [u, *GRAPH.neighbors(u)]}
                      for u in NEIGHBOURS}
    privacy = plan_distributed(setup.model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=ROUNDS, colluders=0,
                               neighbourhoods=Neighbourhoods.of(averaging_matrix(GRAPH)))
    secure = SecureAggregationKeys(keys[ADDRESS[ME]].secret, neighbourhoods)
    shares = []
    for _start in ("fresh", "resumed from the checkpoint of round 0"):
        peer = setup.peer(FakeClock(), secure_aggregation=secure, privacy=privacy, checkpoint_dir=str(tmp_path))
        shares.append(peer.release.shares(0))
        peer.checkpoints.save(peer.state, peer.metrics)
    assert peer.round == 0 and {c.resumed for c in peer.session.neighbourhoods.contributors.values()} == {0}
    assert all(np.array_equal(shares[0][u], shares[1][u]) for u in shares[0])


def test_a_peer_whose_every_local_step_would_be_rejected_keeps_its_statistics_and_runs_to_the_end(setup, monkeypatch):
    """A neighbour can walk a peer's statistics to the edge of a bound, where the peer's own local step crosses it
    (a second hostile-input pass: the peer then exited at every restart). It keeps its last statistics instead."""
    peer = setup.peer(FakeClock(), acceleration=MOMENTUM)
    start = peer.stats.copy()
    monkeypatch.setattr(peer, "_own_problem", lambda stats, detail=True: None if np.array_equal(stats, start) else "magnitude: edge")
    transport = FakeTransport(peer.clock, setup.neighbours_answer)
    assert peer.run(transport) is True
    assert np.array_equal(peer.stats, start) and peer.memory is None
    assert peer.metrics.rounds_kept == peer.metrics.aggregate_fallbacks == ROUNDS
    assert all(np.array_equal(sent, start) for sent in transport.sent_stats().values())


K = PeerSettings.down_after


def test_a_dead_neighbour_costs_k_timeouts_whatever_the_first_rounds_window(setup):
    """Dead after its round-0 statistics, with the 5 s start-up window: 3 timeouts in all (the window used to be a
    floor for every later round: 5 s + 2 timeouts)."""
    dead = NEIGHBOURS[0]
    clock = FakeClock()
    peer = setup.peer(clock)
    assert peer.run(FakeTransport(clock, lambda round_: setup.neighbours_answer(round_, without=[dead] if round_ else [])))
    assert clock.now == K * TIMEOUT_S and ADDRESS[dead] in peer.liveness.down


def slowed_answer(setup: Setup, slow: int, rounds, *, late_s: float, notices: bool):
    """Neighbour ``slow``'s statistics of ``rounds`` come ``late_s`` after the peer's (it waits a timeout for a dead
    neighbour of its own), with its waiting notices every half timeout if ``notices``."""

    def answer(round_):
        replies = [(late_s if round_ in rounds and u == slow else 0.0, setup.frame(u, round_)) for u in NEIGHBOURS]
        if notices and round_ in rounds:
            times = np.arange(TIMEOUT_S / 2, late_s, TIMEOUT_S / 2)
            replies += [(t, wire.encode_waiting(run="crc", sender=ADDRESS[slow], round_=round_ - 1)) for t in times]
        return replies

    return answer


def test_a_neighbour_slowed_by_a_dead_one_is_waited_for_and_nothing_is_lost(setup):
    """Its statistics of K rounds come a little after a timeout; it says it waits, so they are all used."""
    slow, late_s = NEIGHBOURS[0], TIMEOUT_S + 0.05
    clock = FakeClock()
    peer = setup.peer(clock)
    transport = FakeTransport(clock, slowed_answer(setup, slow, range(2, 2 + K), late_s=late_s, notices=True))
    assert peer.run(transport)
    assert clock.now == pytest.approx(K * late_s)
    assert set(peer.metrics.missing.values()) == {0} and no_rejections(peer) and not peer.liveness.down
    assert peer.metrics.notices_received == 2 * K
    setup.assert_follows_simulator(peer, transport)


def test_without_notices_a_slowed_neighbour_is_missed_but_never_marked_down(setup):
    slow = NEIGHBOURS[0]
    clock = FakeClock()
    peer = setup.peer(clock)
    assert peer.run(FakeTransport(clock, slowed_answer(setup, slow, range(2, 2 + K), late_s=TIMEOUT_S + 0.05,
                                                       notices=False)))
    assert peer.metrics.missing[ADDRESS[slow]] == K and not peer.liveness.down
    assert peer.metrics.down_rounds[ADDRESS[slow]] == 0 and peer.metrics.rejected["stale"] >= K - 1


def test_a_peer_waiting_for_a_silent_neighbour_says_so_every_half_timeout(setup):
    dead = NEIGHBOURS[0]
    clock = FakeClock()
    peer = setup.peer(clock, first_round_timeout_s=TIMEOUT_S)
    transport = FakeTransport(clock, lambda round_: setup.neighbours_answer(round_, without=[dead] if round_ else []))
    assert peer.run(transport)
    assert [round_ for _, round_ in transport.notices] == [1, 2, 3]
    np.testing.assert_allclose([when for when, _ in transport.notices], [0.5, 1.5, 2.5])
    assert peer.metrics.notices_sent == K * len(NEIGHBOURS)


def test_frames_queued_for_a_restarted_peer_are_used_round_by_round(setup):
    """Every round of its neighbours arrives at once (ZeroMQ queued them while it was away), far beyond a window of
    one round: the peer handles them as its rounds need them and refuses none."""
    queued = [(0.0, setup.frame(u, r)) for r in range(ROUNDS) for u in NEIGHBOURS]  # fair-queued: round by round

    clock = FakeClock()
    peer = setup.peer(clock, window_rounds=1)
    transport = FakeTransport(clock, lambda round_: queued if round_ == 0 else [])
    assert peer.run(transport)
    assert clock.now == 0.0 and no_rejections(peer) and set(peer.metrics.missing.values()) == {0}
    setup.assert_follows_simulator(peer, transport)


def left_behind(setup, front: int, **options):
    """(a peer, its transport, its clock) whose neighbours answer its first round from round ``front`` and nothing
    for its rounds before; ``options`` for ``setup.peer``."""

    def answer(round_):
        if round_ == 0:
            return [(0.0, setup.frame(u, front)) for u in NEIGHBOURS]
        return setup.neighbours_answer(round_) if round_ > front else []

    clock = FakeClock()
    peer = setup.peer(clock, window_rounds=2, **options)
    return peer, FakeTransport(clock, answer), clock


def test_a_peer_left_behind_skips_ahead_to_its_neighbours_round(setup):
    """Its neighbours are at round 5 (they went on while it was away); nothing more will come for its rounds 0-4.
    It skips to round 5 at once, sends its statistics as its own of round 5, and goes on with them."""
    front = 5
    peer, transport, clock = left_behind(setup, front)
    assert peer.run(transport)
    assert clock.now == 0.0 and peer.metrics.rounds_skipped == front and peer.metrics.rounds_done == ROUNDS
    sent = transport.sent_stats()
    assert sorted(sent) == [0, *range(front, ROUNDS)] and np.array_equal(sent[front], sent[0])
    assert no_rejections(peer) and len(peer.metrics.soft_loss) == ROUNDS - front


def test_a_late_joiner_costs_its_neighbours_k_timeouts_and_then_rejoins(setup):
    """A neighbour that starts five rounds late: the first-round window (here one timeout) and two more rounds wait
    for it, then it is down; its first frame (round 0, stale) brings it back, and its rounds are used again."""
    joiner, joins = NEIGHBOURS[0], 5

    def answer(round_):
        joiner_frames = {joins: [0, joins]}.get(round_, [round_] if round_ > joins else [])
        return [(0.0, setup.frame(joiner, r)) for r in joiner_frames] + setup.neighbours_answer(round_, without=[joiner])

    clock = FakeClock()
    peer = setup.peer(clock, first_round_timeout_s=TIMEOUT_S)
    assert peer.run(FakeTransport(clock, answer))
    address = ADDRESS[joiner]
    assert clock.now == K * TIMEOUT_S and not peer.liveness.down
    assert peer.metrics.missing[address] == joins and peer.metrics.down_rounds[address] == joins - K
    assert peer.metrics.rejected["stale"] == 1 and peer.metrics.messages_received == len(NEIGHBOURS) * ROUNDS - joins


def test_a_neighbour_that_only_ever_says_it_waits_costs_at_most_the_extension_per_round(setup):
    """A keyed neighbour that sends notices and never statistics is alive, so never down; each round waits for it
    at most max(timeout, first-round window) beyond its timeout: a bounded cost."""
    stuck, first_s = NEIGHBOURS[0], 2.0

    def answer(round_):
        notices = [(t, wire.encode_waiting(run="crc", sender=ADDRESS[stuck], round_=round_ - 1))
                   for t in np.arange(0.5, 10.0, 0.5)]
        return setup.neighbours_answer(round_, without=[stuck]) + (notices if round_ else [])

    clock = FakeClock()
    peer = setup.peer(clock, first_round_timeout_s=first_s)
    assert peer.run(FakeTransport(clock, answer))
    assert clock.now == pytest.approx(first_s + (ROUNDS - 1) * (TIMEOUT_S + first_s))
    assert peer.metrics.missing[ADDRESS[stuck]] == ROUNDS and not peer.liveness.down


@pytest.mark.parametrize("attack, closer", [("extreme", 1e-20), ("permute", 0.5)])
def test_a_robust_peer_leaves_out_a_poisoned_neighbour_as_the_simulator_does(attack, closer):
    """Neighbour 0 sends poisoned statistics every round (``extreme``: the most extreme the wire accepts; ``permute``:
    every class's statistics claimed for the next); with --aggregate robust (screened: left out by distance, or by
    the test on this peer's data) the peer accepts them, follows the simulator's robust run round by round under the
    default algorithm, and stays nearer the clean run than the mean does."""
    schema, x, y = prepared(mixed_columns())
    model = make_model("nb", schema)
    phi = model.features(x)
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), GRAPH.number_of_nodes())
    ess = default_ess(len(y), len(parts))
    local = LocalData.from_parts(phi, y, parts)

    def history(aggregation, attack):
        engine = CRCEngine(model, local, averaging_matrix(GRAPH), ess=ess, aggregation=aggregation, acceleration=PRESET,
                           iterations=ACCELERATED["iters"],
                           messages=None if attack is None else byzantine_messages(model, np.array([0]), attack, None))
        stats = [engine.stats.copy()]
        engine.run(ROUNDS, callback=lambda _, s: stats.append(s.copy()))
        return np.array(stats)

    robust, clean, mean = history("robust", attack), history("mean", None), history("mean", attack)

    def answer(round_):
        frames = [(0.0, encode(run="crc", sender=ADDRESS[u], round_=round_, schema_id=model.schema_id, ess=ess,
                               stats=poison(model, robust[round_][u], attack, None) if u == 0 else robust[round_][u]))
                  for u in NEIGHBOURS]
        return frames

    clock = FakeClock()
    peer = Peer(model, phi[parts[ME]], y[parts[ME]], ess=ess, clock=clock,
                settings=PeerSettings(bind=ADDRESS[ME], peers=tuple(ADDRESS[u] for u in NEIGHBOURS), rounds=ROUNDS,
                                      timeout_s=TIMEOUT_S, first_round_timeout_s=FIRST_ROUND_TIMEOUT_S, aggregate="robust",
                                      acceleration=PRESET, iters=ACCELERATED["iters"]))
    transport = FakeTransport(clock, answer)
    assert peer.run(transport) is True and no_rejections(peer)
    np.testing.assert_allclose(peer.stats, robust[ROUNDS][ME], rtol=1e-9, atol=1e-9 * np.abs(robust[ROUNDS][ME]).max())
    off = [np.linalg.norm(run[ROUNDS][ME] - clean[ROUNDS][ME]) for run in (robust, mean)]
    assert off[0] < closer * off[1]


@pytest.mark.parametrize("settle", [1, 2])
def test_exact_diffusion_restarts_while_the_neighbourhood_is_unsettled(setup, monkeypatch, settle):
    """A neighbour's statistics missing in a round (lost, or the neighbour down) make that round and the next
    ``SETTLE_ROUNDS`` - 1 restart the correction; then exact diffusion resumes. Before that the peer is the
    simulator's."""
    silent, missing_round = NEIGHBOURS[1], 2  # its statistics of round 2, used in round 3
    restarts = []
    step = crc_acceleration.step

    def spy(*args, restart=None, **kwargs):
        restarts.append(None if restart is None else bool(restart))
        return step(*args, restart=restart, **kwargs)

    monkeypatch.setattr(crc_acceleration, "step", spy)
    monkeypatch.setattr(crc_acceleration, "SETTLE_ROUNDS", settle)
    clock = FakeClock()
    peer = setup.peer(clock, acceleration=PRESET, iters=ACCELERATED["iters"])
    transport = FakeTransport(clock, lambda round_: setup.neighbours_answer(
        round_, without=[silent] if round_ == missing_round else []))
    assert peer.run(transport)
    restarted = [t for t, restart in enumerate(restarts, start=1) if restart]
    assert restarted == list(range(missing_round + 1, missing_round + 1 + settle))
    assert all(restart is None for t, restart in enumerate(restarts, start=1) if t not in restarted)


def test_a_peer_without_memory_that_skips_ahead_joins_exact_diffusion_with_its_correction_at_zero(setup, monkeypatch):
    """A late joiner's first round is exact diffusion's, from ψ = its statistics (``acceleration.joining_memory``):
    not a restart, which would zero its s - ψ without its neighbours'."""
    front, memories = 5, []
    step = crc_acceleration.step

    def spy(model, acceleration, aggregated, memory, *args, **kwargs):
        memories.append(None if memory is None else memory.previous.copy())
        return step(model, acceleration, aggregated, memory, *args, **kwargs)

    def answer(round_):
        if round_ == 0:
            return [(0.0, setup.frame(u, front)) for u in NEIGHBOURS]
        return setup.neighbours_answer(round_) if round_ > front else []

    monkeypatch.setattr(crc_acceleration, "step", spy)
    clock = FakeClock()
    peer = setup.peer(clock, acceleration=PRESET, iters=ACCELERATED["iters"], window_rounds=2)
    transport = FakeTransport(clock, answer)
    assert peer.run(transport) and peer.metrics.rounds_skipped == front
    start = transport.sent_stats()[0]
    assert len(memories) == ROUNDS - front and np.array_equal(memories[0], start)


def test_a_peer_that_skips_ahead_starts_its_running_average_at_the_round_it_joins(setup):
    """Under naive Bayes' default a peer left behind takes its statistics as its running average of the round it
    skips to (as after a first round), so that a checkpoint written then resumes the same; its classifier's category
    counts then average its rounds from there."""
    front = 5
    peer, transport, _ = left_behind(setup, front, acceleration=acceleration_of(NB_DEFAULT), iters=NB_DEFAULT["iters"])
    assert peer.run(transport) and peer.metrics.rounds_skipped == front
    sent = {**transport.sent_stats(), ROUNDS: peer.stats}
    average = sent[front]
    for t in range(front + 1, ROUNDS + 1):
        average = crc_acceleration.running_average(average, sent[t], t)
    np.testing.assert_array_equal(peer.average, average)


def test_an_injected_loss_does_not_restart_exact_diffusion(setup, monkeypatch):
    restarts = []
    step = crc_acceleration.step

    def spy(*args, restart=None, **kwargs):
        restarts.append(restart)
        return step(*args, restart=restart, **kwargs)

    monkeypatch.setattr(crc_acceleration, "step", spy)
    clock = FakeClock()
    peer = setup.peer(clock, acceleration=PRESET, iters=ACCELERATED["iters"], loss=0.5, loss_seed=3)
    assert peer.run(FakeTransport(clock, setup.neighbours_answer))
    assert sum(peer.metrics.missing.values()) > 0 and restarts == [None] * ROUNDS


@pytest.mark.parametrize("kind, options", [("qda", {}), ("pc", {"structure": "region-graph", "depth": 1, "repetitions": 2, "sums": 2})],
                         ids=["qda", "region-graph"])
def test_a_peer_under_the_models_default_algorithm_follows_the_simulator(kind, options):
    """Issue 32: QDA's covariance rule under exact diffusion and the region graph's local start (the accelerated
    algorithm's default for it, ``MODEL_SETTINGS``), resolved from the model as ``crc node`` resolves them."""
    schema, x, y = prepared(mixed_columns())
    model = make_model(kind, schema, **options)
    chosen = resolve({"model": kind, "structure": options.get("structure")})
    acceleration = acceleration_of(chosen)
    assert acceleration.exact_diffusion and acceleration.start == ("local" if options else "uniform")
    phi = model.features(x)
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), GRAPH.number_of_nodes())
    ess = default_ess(len(y), len(parts))
    engine = CRCEngine(model, LocalData.from_parts(phi, y, parts), averaging_matrix(GRAPH), ess=ess,
                       iterations=chosen["iters"], acceleration=acceleration)
    history = [engine.stats.copy()]
    engine.run(ROUNDS, callback=lambda _, stats: history.append(stats.copy()))
    run = Setup(model, [phi[p] for p in parts], [y[p] for p in parts], ess, np.array(history))
    peer = run.peer(FakeClock(), acceleration=acceleration, iters=chosen["iters"])
    transport = FakeTransport(peer.clock, run.neighbours_answer)
    assert peer.run(transport)
    run.assert_follows_simulator(peer, transport)


def test_a_private_peer_stops_before_sending_a_round_its_checkpoint_does_not_hold(setup, tmp_path, monkeypatch):
    """A private peer whose checkpoint cannot be written stops before the send: restarted from the previous checkpoint
    after sending, it would send the round again from other inputs, a second release under fresh noise. A
    secure-aggregation peer is guarded the same way (a second masking under the same pairwise seeds); a plain one
    goes on (``test_a_checkpoint_that_cannot_be_written_is_logged_and_the_run_goes_on``)."""
    from crc.protocol.accountant import plan

    privacy = plan(setup.model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=ROUNDS)
    peer = setup.peer(FakeClock(), checkpoint_dir=str(tmp_path), privacy=privacy)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "save", full_disk)
    transport = FakeTransport(peer.clock, setup.neighbours_answer)
    with pytest.raises(CRCError, match="round 0: checkpoint not written .*stops rather than send a round its checkpoint"):
        peer.run(transport)
    assert list(transport.sent_stats()) == [] and peer.metrics.checkpoint_failures >= 1
    assert secure_peer(setup).checkpoints.guarded and not setup.peer(FakeClock()).checkpoints.guarded
