"""Deviating members of a vertical group, in-process (tests/support/vertical.py): well-formed frames chosen to harm
or to learn. A deviation is refused, or stops the group in one line; it never leaves an honest peer with statistics
it would refuse from anyone else, nor gives the label holder one member's scores under secure aggregation."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from crc.core.errors import CRCError
from crc.core.plausibility import problem
from crc.nodes.alignment import AlignmentError
from crc.nodes.score_masks import unmasked_sum
from crc.nodes.vertical_peer import GroupStopped
from crc.nodes.vertical_wire import encode_group
from crc.nodes.wire import SECURE_AGGREGATION_TERM_LIMIT, encode_resumed
from support.vertical import Bus, FakeClock, addresses, group, reference


@pytest.fixture(scope="module")
def wdbc3():
    return reference("wdbc", "nb", 3, rounds=8)


def run(ref, tamper, **options):
    """The group on ``ref``'s split with ``tamper``; its ESS m (not m / lr), so that a few passes can walk a class count
    beyond -m0."""
    clock = FakeClock()
    options.setdefault("ess", float(len(ref.rep.split.y_train)))
    bus = Bus(group(ref, clock=clock, **options), clock, tamper=tamper)
    bus.start()
    bus.run()
    return bus


def rewritten(kind, change):
    """A tamper that rewrites every frame of ``kind`` with ``change(obj, address)`` (which returns the new map)."""
    def tamper(sender, address, each):
        obj = msgpack.unpackb(each)
        return [msgpack.packb(change(obj, address))] if obj["type"] == kind else [each]
    return tamper


def plausible(peer) -> bool:
    return all(problem(stats, peer.steps.part, peer.ess) is None for stats in (peer.stats, peer.best))


def test_weights_that_walk_a_members_class_counts_out_of_bounds_are_rejected(wdbc3):
    """Each pass's weights are valid Y - P rows (class 0 -1, class 1 +1), but together they take class 0's count
    below -m0: the members refuse the pass that would, keep what they had, and the group stops."""
    def down(obj, address):
        if obj["round"] >= 1 and obj["n"]:
            weights = np.tile([-1.0, 1.0], obj["n"] // 2)
            obj["data"] = weights.tobytes()
        return obj

    bus = run(wdbc3, rewritten("weights", down))
    members = addresses(3)[1:]
    for address in members:
        peer = bus.peers[address]
        assert isinstance(bus.errors[address], GroupStopped) and not peer.done
        assert peer.metrics.rejected["counts"] >= 1 and plausible(peer)


def test_scores_that_walk_the_label_holders_class_counts_out_of_bounds_stop_the_group(wdbc3):
    """The members' scores say class 0 for every instance, every pass: the label holder's own step would take class 1's
    count below -m0, so it stops in one line instead of sending such weights."""
    def class_0(obj, address):
        if address == addresses(3)[0] and obj["round"] >= 1:
            scores = np.tile([0.0, -1e90], obj["n"] // 2)
            obj["data"] = scores.tobytes()
        return obj

    bus = run(wdbc3, rewritten("scores", class_0))
    holder = bus.peers[addresses(3)[0]]
    error = bus.errors[addresses(3)[0]]
    assert isinstance(error, CRCError) and not isinstance(error, GroupStopped)
    assert "implausible" in str(error) and "scores" in str(error) and plausible(holder)
    assert all(plausible(bus.peers[address]) for address in addresses(3)[1:])


def test_an_empty_group_list_stops_the_member_in_one_line():
    ref = reference("wdbc", "nb", 3, rounds=2)

    def empty(obj, address):
        obj["ids"] = []
        return obj

    bus = run(ref, rewritten("psi-ids", empty), ess=None)
    for address in addresses(3)[1:]:
        assert isinstance(bus.errors[address], AlignmentError) and "no id" in str(bus.errors[address])


def test_a_label_holder_that_shows_members_different_weights_learns_no_members_scores():
    """Secure aggregation: the label holder decodes only the sum of its members' scores. Deviating, it sends the
    second member zero weights (valid Y - P rows) from pass 1 on, so that member's scores stay fixed and the change of
    the sum from one pass to the next would be the first member's change alone. The masks are keyed by what each
    member was sent, so they no longer cancel: the sum does not unmask, and the group stops."""
    ref = reference("wdbc", "nb", 3, rounds=4)
    holder, first, second = addresses(3)
    words, scores = {}, {}

    def deviate(sender, address, each):
        obj = msgpack.unpackb(each)
        if obj["type"] == "masked-scores":
            words.setdefault(obj["round"], {})[sender] = np.frombuffer(obj["data"], dtype="<u8")
        if obj["type"] == "weights" and address == second and obj["round"] >= 1 and obj["n"]:
            obj["data"] = bytes(len(obj["data"]))
            return [msgpack.packb(obj)]
        return [each]

    def scored(address, peer):
        if address == first:
            scores[peer.pass_ + 1] = peer.steps.scores(peer.stats, peer.phi).reshape(-1)

    clock = FakeClock()
    bus = Bus(group(ref, clock=clock, secure=True), clock, tamper=deviate, on_pass=scored)
    bus.start()
    bus.run()
    assert isinstance(bus.errors[holder], CRCError) and "do not unmask" in str(bus.errors[holder])
    sums = {t: unmasked_sum(list(each.values())) for t, each in words.items() if len(each) == 2}
    assert 1 in sums and 2 in sums  # pass 2's scores are the first after the deviating weights
    leaked, change = sums[2] - sums[1], scores[2] - scores[1]
    assert np.abs(change).max() > 1e-3 and not np.allclose(leaked, change, atol=1e-3)


def test_a_label_holder_that_shows_members_different_id_lists_decodes_nothing():
    """Secure aggregation: the label holder tells each member another group (the first member all ids but the first,
    the second all but the last, with the labels of those rows), so that each member's scores are of other
    instances. The ids are in every member's masks: the members' words of pass 1 do not unmask."""
    ref = reference("wdbc", "nb", 3, rounds=2)
    holder, first, second = addresses(3)
    words = {}

    def deviate(sender, address, each):
        obj = msgpack.unpackb(each)
        rows = slice(1, None) if address == first else slice(None, -1)
        if obj["type"] == "psi-ids":
            obj["ids"] = obj["ids"][rows]
        elif obj["type"] == "weights" and obj["round"] == 0:
            labels = np.frombuffer(obj["data"], dtype="<f8").reshape(-1, ref.model.n_classes)[rows]
            obj.update(data=labels.tobytes(), n=labels.size)
        elif obj["type"] == "masked-scores":
            words.setdefault(obj["round"], {})[sender] = np.frombuffer(obj["data"], dtype="<u8")
        return [msgpack.packb(obj)]

    clock = FakeClock()
    bus = Bus(group(ref, clock=clock, secure=True), clock, tamper=deviate)
    bus.start()
    bus.run()
    assert set(words[1]) == {first, second}
    total = unmasked_sum(list(words[1].values()))
    assert np.abs(total).max() > 2 * SECURE_AGGREGATION_TERM_LIMIT  # masks, not scores: nothing of either member's
    assert all(isinstance(bus.errors[address], GroupStopped) for address in addresses(3))


def test_a_member_that_only_asks_for_past_weights_again_is_marked_down(wdbc3):
    """From pass 3 on, the first member sends its scores of pass 2 again whenever it would send new ones (as a member
    restarted from its checkpoint of pass 1 would, once): the label holder sends pass 2's weights again each time, but
    a frame that only repeats is no sign of progress, so the member is marked down and the group stops, rather than
    wait for it forever."""
    holder, first, _ = addresses(3)
    sent = {}

    def replay(sender, address, each):
        obj = msgpack.unpackb(each)
        if sender == first and obj["type"] == "scores":
            sent.setdefault(obj["round"], each)
            return [sent[2]] if obj["round"] >= 3 else [each]
        return [each]

    clock = FakeClock()
    bus = Bus(group(wdbc3, clock=clock), clock, tamper=replay)
    bus.start()
    bus.run(until=lambda: clock.now > 60.0)
    assert isinstance(bus.errors.get(holder), GroupStopped) and first in str(bus.errors[holder])
    assert bus.peers[holder].pass_ == 2 and bus.peers[holder].metrics.weights_resent >= 1


@pytest.mark.parametrize("stuck", ["label holder", "member"])
def test_a_peer_that_only_tells_it_resumed_is_marked_down(wdbc3, stuck):
    """From pass 3 on, one peer sends nothing of the passes, only a resumed notice in every wait of the others: the
    label holder's asks its members for their scores again (each sent again once), a member's is one members never
    send (refused). A notice is no sign of progress, so the others stop within their waits, naming it, rather than
    wait for it forever."""
    holder, first, second = addresses(3)
    who, others = (holder, [first, second]) if stuck == "label holder" else (first, [holder])
    stopped = []

    def stop(sender, address, each):
        obj = msgpack.unpackb(each)
        if sender == who and obj["type"] in ("scores", "weights") and obj["round"] >= 3:
            stopped.append(obj["round"])
            return []
        return [each]

    clock = FakeClock()
    bus = Bus(group(wdbc3, clock=clock), clock, tamper=stop)
    told = []

    def tell():
        """A notice to each of the others whenever the clock moved on (a wait ran out) since the last."""
        if stopped and (not told or clock.now > told[-1]):
            told.append(clock.now)
            bus.queue.extend((who, other, encode_resumed(run="crc", sender=who, round_=1)) for other in others)
        return clock.now > 60.0

    bus.start()
    bus.run(until=tell)
    assert len(told) >= 2
    for other in others:
        assert isinstance(bus.errors.get(other), GroupStopped) and who in str(bus.errors[other])
        assert bus.stopped_at[other] < 10.0
    awaited = "weights of pass 3" if stuck == "label holder" else "scores of pass 3"  # not 'nothing': it sent notices
    assert all(awaited in str(bus.errors[other]) for other in others)
    if stuck == "member":
        assert bus.peers[holder].metrics.rejected["sender"] >= 1


class FullQueue:
    """A transport whose queue to ``full`` is full (that peer reads nothing) while ``open`` is False."""

    def __init__(self, full: str):
        self.full, self.open = full, False

    def send_to(self, address, frame) -> bool:
        return self.open or address != self.full


def test_a_member_that_floods_requests_and_reads_nothing_is_logged_once_while_its_queue_is_full(wdbc3, caplog):
    """Past pass 3 the first member sends its scores of pass 3 again and again (each asks for that pass's weights)
    and reads nothing: every answer is dropped and counted, and its full queue is logged once, not once a frame,
    until it takes frames again."""
    holder, first, _ = addresses(3)
    clock = FakeClock()
    bus = Bus(group(wdbc3, clock=clock), clock)
    bus.start()
    bus.run(until=lambda: bus.peers[holder].pass_ == 3)
    peer = bus.peers[holder]
    again = encode_group("scores", run="crc", sender=first, round_=3, schema_id=wdbc3.model.schema_id,
                         values=np.zeros((len(peer.rows), peer.steps.width)))
    transport = FullQueue(first)
    caplog.set_level("INFO", logger=peer.log.name)  # the level of the peer's own logger, whatever a test before set

    def flood(frames: int) -> list[str]:
        caplog.clear()
        for _ in range(frames):
            peer._deliver(transport, peer.receive(again, None))
        return [record.getMessage() for record in caplog.records if f"queue to {first}" in record.getMessage()]

    assert len(flood(1000)) == 1 and peer.metrics.send_dropped == 1000 and peer.metrics.weights_resent == 1000
    transport.open = True
    assert flood(10) == [f"queue to {first} takes frames again"]
    transport.open = False
    assert len(flood(1000)) == 1 and peer.metrics.send_dropped == 2000


def test_a_class_with_no_instance_in_the_group_is_warned_of(wdbc3, caplog):
    """The member that would hold class 1's instances holds none of them: the group learns without that class (never
    predicted, as in the simulator, which warns too), and the label holder says so."""
    y = wdbc3.rep.split.y_train
    datas = [wdbc3.block_data(b, drop=np.flatnonzero(y == 1).tolist() if b == 2 else ()) for b in range(3)]
    caplog.set_level("WARNING")
    bus = run(wdbc3, None, blocks_data=datas, ess=None)
    assert not bus.errors and all(peer.done for peer in bus.peers.values())
    label = wdbc3.model.schema.classes[1]
    assert any(f"class(es) {label!r} have no instance among the group's" in record.getMessage()
               for record in caplog.records)
