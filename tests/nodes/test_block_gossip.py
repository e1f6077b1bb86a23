"""A hybrid peer's exchange of its block's statistics with the same block in the neighbouring groups
(crc.nodes.block_gossip): statistics a round early are kept however many rounds have passed, stale and far ones
refused, a silent neighbour marked down, the average that of the closed neighbourhood."""

import logging

import numpy as np
import pytest

from crc.core.models import make_model
from crc.nodes.block_gossip import BlockGossip
from crc.nodes.metrics import Metrics
from crc.nodes.settings import PeerSettings
from crc.nodes.wire import Rejected, Resumed
from support.tables import mixed_columns, prepared

ME, LEFT, RIGHT = (f"tcp://127.0.0.1:{7200 + i}" for i in range(3))
ROUNDS = 20


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture(scope="module")
def block():
    schema, x, y = prepared(mixed_columns())
    model = make_model("nb", schema)
    phi = model.features(x)
    return model, [model.fit_ml(phi[i::3], y[i::3]) * (100.0 / model.ess(model.fit_ml(phi[i::3], y[i::3]))) for i in range(3)]


def gossip(model, clock, **settings) -> BlockGossip:
    settings = PeerSettings(bind=ME, peers=(), rounds=ROUNDS, timeout_s=1.0, first_round_timeout_s=1.0, **settings)
    return BlockGossip(model, (LEFT, RIGHT), ess=100.0, settings=settings, rounds=ROUNDS, clock=clock,
                       metrics=Metrics.for_neighbours((LEFT, RIGHT)), log=logging.getLogger("test"))


def sent(model, stats, sender, round_) -> bytes:
    return BlockGossip(model, (ME,), ess=100.0, settings=PeerSettings(bind=sender, peers=(), rounds=ROUNDS), rounds=ROUNDS,
                       clock=Clock(), metrics=Metrics(), log=logging.getLogger("test")).send(stats, round_)[0][1]


def test_neighbours_a_round_ahead_are_kept_every_round_and_the_average_is_the_closed_neighbourhoods(block):
    model, (mine, left, right) = block
    clock = Clock()
    room = gossip(model, clock)
    for t in range(ROUNDS):
        room.take(room.decode(sent(model, right, RIGHT, t), None))  # before this peer awaits round t: kept
        room.await_round(t)
        assert not room.complete
        room.take(room.decode(sent(model, left, LEFT, t), None))
        assert room.complete
        np.testing.assert_allclose(room.average(mine), (mine + left + right) / 3, rtol=1e-12)
        assert not room.awaiting and room.round == t + 1


def test_stale_statistics_are_refused_far_ones_kept_apart_and_a_silent_neighbour_is_marked_down(block):
    model, (mine, left, right) = block
    clock = Clock()
    room = gossip(model, clock, down_after=2)
    room.await_round(3)
    with pytest.raises(Rejected, match="stale"):
        room.take(room.decode(sent(model, left, LEFT, 2), None))
    far = 3 + PeerSettings.window_rounds + 1
    for round_ in (far, far + 1):  # beyond the window only the latest is kept: it counts for no nearer round
        room.take(room.decode(sent(model, left, LEFT, round_), None))
    assert not room.inbox.holds(far) and room.inbox.holds(far + 1) and not room.complete
    for t in (3, 4):
        room.await_round(t)
        room.take(room.decode(sent(model, left, LEFT, t), None))
        clock.now = room.deadline
        np.testing.assert_allclose(room.average(mine), (mine + left) / 2, rtol=1e-12)
    assert RIGHT in room.liveness.down
    room.await_round(5)
    room.take(room.decode(sent(model, left, LEFT, 5), None))
    assert room.complete  # the one down is no longer waited for


def test_a_copy_sent_again_is_dropped_and_a_restarted_neighbour_gets_the_same_frames_again_once(block):
    """A block neighbour's statistics sent again (this peer restarted) are dropped whether held or taken; this peer's
    own frames of the round a neighbour resumed at and later go to it again, the very bytes, once."""
    model, (mine, left, right) = block
    room = gossip(model, Clock())
    room.await_round(0)
    copy = sent(model, left, LEFT, 0)
    room.take(room.decode(copy, None))
    room.take(room.decode(copy, None))  # held already: no duplicate
    room.take(room.decode(sent(model, right, RIGHT, 0), None))
    room.average(mine)
    room.take(room.decode(copy, None))  # taken already: not stale
    first = [room.send(mine, t) for t in (1, 2, 3)][-2:]
    again = room.resends.answer(Resumed(LEFT, 2))
    assert again == [frames[0][1] for frames in first] and room.resends.answer(Resumed(LEFT, 2)) == []
    with pytest.raises(Rejected, match="stale"):
        room.take(room.decode(sent(model, right, LEFT, 0), None))  # not a copy: other statistics
