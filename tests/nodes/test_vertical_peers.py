"""A vertical group's peers in-process (crc.nodes.vertical_peer, label_holder, group_member): the whole group in one
thread on a fake clock (tests/support/vertical.py), against the simulator's vertical run. No sockets, no sleeping."""

from __future__ import annotations

import collections
import copy
import logging

import msgpack
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from crc.core.calibration import rc
from crc.core.errors import CRCError
from crc.core.models.base import one_hot
from crc.core.models.circuit import EM_ITERATIONS
from crc.nodes.alignment import AlignmentError
from crc.nodes.block_steps import BlockSteps
from crc.nodes.score_masks import TRANSCRIPT_BYTES, unmasked_sum
from crc.nodes.secure_aggregation import from_fixed
from crc.nodes.vertical_peer import GroupStopped
from crc.nodes.vertical_wire import encode_group
from crc.nodes.wire import encode_resumed
from support.blas import blas_threads_now
from support.vertical import Bus, FakeClock, addresses, group, hybrid_group, hybrid_reference, make_peer, reference

ROUNDS = 8


def assert_same_statistics(actual, desired, what=""):
    """Equal to 1e-9 of the largest statistic (an entry that nearly cancels is compared on the vector's scale)."""
    np.testing.assert_allclose(actual, desired, rtol=1e-9, atol=1e-9 * np.abs(desired).max(), err_msg=what)


@pytest.fixture(scope="module")
def wdbc3():
    return reference("wdbc", "nb", 3, rounds=ROUNDS)


@pytest.fixture(scope="module")
def wdbc3_mixture():
    return reference("wdbc", "pc", 3, rounds=ROUNDS)


def run_group(ref, **options):
    clock = FakeClock()
    bus = Bus(group(ref, clock=clock, **options.pop("group", {})), clock, **options)
    bus.start()
    bus.run()
    return bus


def no_rejections(peer) -> bool:
    return not any(peer.metrics.rejected.values())


@pytest.mark.parametrize("data, model, blocks", [("wdbc", "nb", 3), ("wdbc", "qda", 2), ("german", "nb", 2),
                                                 ("german", "qda", 3), ("penbased", "nb", 4), ("wdbc", "pc", 2),
                                                 ("german", "pc", 3)])
def test_a_vertical_group_equals_the_simulator_pass_by_pass(data, model, blocks):
    """A mixture of block products (pc) first runs its EM passes: RC's round t is its pass E + t. Penbased (10
    classes, 4 blocks) trains on 2,000 of its instances: the alignment's private set intersection of all 8,244 was
    nine tenths of the case's time."""
    ref = reference(data, model, blocks, rounds=ROUNDS, **({"pooled_size": 2000} if data == "penbased" else {}))
    passes = {}
    bus = run_group(ref, on_pass=lambda address, peer: passes.setdefault(peer.pass_, {}).update({peer.block: peer.stats.copy()}))
    assert not bus.errors and all(peer.done for peer in bus.peers.values())
    em = BlockSteps(ref.model, 0).em_passes
    assert em == (EM_ITERATIONS if model == "pc" else 0)
    for t in range(ROUNDS + 1):
        assert_same_statistics(ref.model.join([passes[em + t][b] for b in range(blocks)]), ref.history[t], f"round {t}")
    assert_same_statistics(bus.joined(), ref.best, "the best iterate")
    holder = bus.peers[addresses(blocks)[0]]
    assert len({peer.best_iterate for peer in bus.peers.values()}) == 1
    assert len(holder.metrics.soft_loss) == ROUNDS + 1 and all(0 <= loss <= 1 for loss in holder.metrics.soft_loss)
    passes = em + ROUNDS + 1
    for address, member in list(bus.peers.items())[1:]:  # a PSI answer, then the scores of every pass
        assert bus.sent[address] == 1 + passes and member.metrics.messages_received == 1 + 1 + passes + 1
    assert bus.sent[addresses(blocks)[0]] == (blocks - 1) * (1 + 1 + passes + 1)  # request, ids, weights 0 .. E + T + 1
    assert all(no_rejections(peer) and peer.metrics.rows_dropped == 0 for peer in bus.peers.values())
    assert bus.clock.now == 0.0  # nobody waited


def test_rows_not_held_by_every_member_are_dropped_and_counted(wdbc3):
    drops = [set(range(10)), set(range(5, 25)), {100, 200}]
    datas = [wdbc3.block_data(b, seed=7, drop=drops[b]) for b in range(3)]
    bus = run_group(wdbc3, group={"blocks_data": datas, "ess": None})
    kept = np.setdiff1d(np.arange(len(wdbc3.rep.split.y_train)), sorted(set().union(*drops)))
    m = len(kept)
    for peer, data in zip(bus.peers.values(), datas):
        assert peer.metrics.instances == m and peer.metrics.rows_dropped == len(data.ids) - m
        assert peer.ess == pytest.approx(m / wdbc3.config.lr)
    split, model = wdbc3.rep.split, wdbc3.model
    central = rc(model, split.phi_train[kept], split.y_train[kept], lr=wdbc3.config.lr, iterations=ROUNDS).stats
    joined = bus.joined()
    assert_same_statistics(joined / model.ess(joined), central / model.ess(central))


def frame(kind, sender, round_, model, **fields):
    return encode_group(kind, run="crc", sender=sender, round_=round_, schema_id=model.schema_id, **fields)


def test_hostile_frames_are_rejected_and_counted_and_change_nothing(wdbc3):
    holder, first, second = addresses(3)
    model = wdbc3.model
    m, r = len(wdbc3.rep.split.y_train), model.n_classes
    good_scores = np.zeros((m, r))
    hostile = {  # (to, frame, the cause it is rejected for), sent when pass 3 begins
        "nan scores": (holder, frame("scores", first, 4, model, values=np.full((m, r), np.nan)), "non-finite"),
        "short scores": (holder, frame("scores", first, 4, model, values=good_scores[:-1]), "length"),
        "short scores asking again for the pass answered": (holder, frame("scores", first, 3, model, values=np.zeros(0)),
                                                            "length"),
        "huge scores": (holder, frame("scores", first, 4, model, values=good_scores + 1e200), "magnitude"),
        "scores of a far round": (holder, frame("scores", first, 7, model, values=good_scores), "ahead"),
        "scores of a past round": (holder, frame("scores", first, 1, model, values=good_scores), "stale"),
        "scores from a stranger": (holder, frame("scores", "tcp://127.0.0.1:9", 4, model, values=good_scores), "sender"),
        "weights to the holder": (holder, frame("weights", first, 4, model, best=True, values=good_scores), "type"),
        "weights of an unknown round": (first, frame("weights", holder, 99, model, best=False, values=good_scores), "ahead"),
        "weights from a member": (first, frame("weights", second, 4, model, best=False, values=good_scores), "sender"),
        "weights that are not Y - P": (first, frame("weights", holder, 4, model, best=False, values=good_scores + 0.5),
                                       "malformed"),
        "another schema": (first, encode_group("weights", run="crc", sender=holder, round_=4, schema_id="0" * 64,
                                                best=False, values=good_scores), "schema"),
        "another run": (first, encode_group("weights", run="other", sender=holder, round_=4, schema_id=model.schema_id,
                                             best=False, values=good_scores), "run"),
        "a member's resumed notice to the holder": (holder, encode_resumed(run="crc", sender=first, round_=1), "sender"),
        "a member's resumed notice to a member": (second, encode_resumed(run="crc", sender=first, round_=1), "sender"),
        "garbage": (second, b"\xc1\x00garbage", "malformed"),
        "a map of the wrong fields": (second, msgpack.packb({"type": "scores", "from": holder}), "malformed"),
        "oversized": (second, b"\x00" * (10 * 2**20), "oversized"),
    }
    clock = FakeClock()
    bus = Bus(group(wdbc3, clock=clock), clock)
    injected = []

    def inject(sender, address, each):
        """With the label holder's weights of pass 3 to the last member: every hostile frame, once."""
        obj = msgpack.unpackb(each)
        if not injected and sender == holder and address == second and obj["type"] == "weights" and obj["round"] == 3:
            injected.append(True)
            bus.queue.extend(("hostile", to, bad) for to, bad, _ in hostile.values())
        return [each]

    bus.tamper = inject
    bus.start()
    bus.run()
    assert injected and not bus.errors
    assert_same_statistics(bus.joined(), wdbc3.best)
    expected = {}
    for to, _, cause in hostile.values():
        expected.setdefault(to, {}).setdefault(cause, 0)
        expected[to][cause] += 1
    for address, peer in bus.peers.items():
        assert {cause: n for cause, n in peer.metrics.rejected.items() if n} == expected.get(address, {})
    assert bus.peers[holder].metrics.weights_resent == 0  # a frame of a few bytes never gets a pass's weights


def test_a_group_list_naming_an_id_the_member_does_not_hold_stops_it(wdbc3):
    holder, first, _ = addresses(3)

    def lie(sender, address, each):
        obj = msgpack.unpackb(each)
        if obj["type"] == "psi-ids" and address == first:
            obj["ids"] = [*obj["ids"][:-1], "zz-nobody"]  # still sorted, as long as the member's own list
            return [msgpack.packb(obj)]
        return [each]

    bus = run_group(wdbc3, tamper=lie)
    assert isinstance(bus.errors[first], AlignmentError) and "does not hold" in str(bus.errors[first])


def test_a_member_that_never_answers_the_alignment_stops_the_group_after_down_after_first_round_waits(wdbc3):
    """The waits before the alignment are the first round's (--first-round-timeout), and the error says so: it said
    '3 wait(s) of 10 s' (--timeout) after three waits of 60 s."""
    holder, _, second = addresses(3)
    clock = FakeClock()
    bus = Bus(group(wdbc3, clock=clock, down_after=3, timeout_s=1.0, first_round_timeout_s=5.0), clock)
    bus.dead.add(second)
    bus.start()
    bus.run()
    assert f"{second} sent no answer to the PSI request in 3 wait(s) (15 s in all)" in str(bus.errors[holder])
    assert bus.stopped_at[holder] == pytest.approx(3 * 5.0)


def test_a_dead_member_stops_the_group_after_down_after_waits(wdbc3):
    holder, first, second = addresses(3)
    clock = FakeClock()
    bus = Bus(group(wdbc3, clock=clock, down_after=3, timeout_s=1.0, first_round_timeout_s=5.0), clock)
    # killed once it completed pass 3 (and sent its scores of pass 4)
    bus.on_pass = lambda address, peer: bus.dead.add(second) if address == second and peer.pass_ == 3 else None
    bus.start()
    bus.run()
    assert isinstance(bus.errors[holder], GroupStopped) and second in str(bus.errors[holder])
    assert "sent no scores of pass 5 in 3 wait(s) (3 s in all): a vertical group" in str(bus.errors[holder])
    assert isinstance(bus.errors[first], GroupStopped) and holder in str(bus.errors[first])
    # down after 3 waits in a row with nothing from it (the wait in which its last scores arrived is missing too,
    # not silent); the first-round window does not stretch later waits: 4 waits of 1 s
    assert bus.peers[holder].pass_ == 4 and bus.peers[holder].metrics.missing[second] == 4
    assert bus.stopped_at[holder] == pytest.approx(4 * 1.0)
    assert bus.stopped_at[first] <= 5.0 + 3 * 1.0


def test_a_silent_member_is_waited_for_and_a_slow_one_is_not_held_against_it(wdbc3):
    """A member whose scores are late by less than down_after waits only delays its pass."""
    holder, first, second = addresses(3)
    clock = FakeClock()
    late = []

    def delay(sender, address, each):
        obj = msgpack.unpackb(each)
        if sender == second and obj["type"] == "scores" and obj["round"] == 2 and not late:
            late.append(each)
            return []
        return [each]

    bus = Bus(group(wdbc3, clock=clock, timeout_s=1.0, first_round_timeout_s=1.0, down_after=3), clock, tamper=delay)
    bus.start()
    bus.run(until=lambda: clock.now >= 1.5)
    bus.queue.append((second, holder, late[0]))  # arrives after one wait ran out
    bus.run()
    assert not bus.errors
    assert_same_statistics(bus.joined(), wdbc3.best)
    assert bus.peers[holder].metrics.missing[second] == 1
    assert bus.peers[second].metrics.scores_resent >= 1  # its own wait for the weights ran out too


@pytest.mark.parametrize("secure", [False, True])
@pytest.mark.parametrize("lost", [False, True])
def test_a_restarted_member_resumes_from_its_checkpoint(wdbc3, tmp_path, lost, secure):
    """Killed after its checkpoint of pass 4, before its scores of pass 5 left: it sends them when it restarts. With
    ``lost``, killed after they left, before it took the weights of pass 5: the label holder sends those again. With
    ``secure``, its masks are keyed by the transcript of what it took, which its checkpoint holds."""
    holder, first, second = addresses(3)
    clock = FakeClock()
    bus = Bus(group(wdbc3, tmp_path, clock=clock, secure=secure), clock)
    restarted = []

    def kill(sender, address, each):
        obj = msgpack.unpackb(each)
        dies = (address == first and obj["type"] == "weights") if lost else (sender == first and obj["type"].endswith("scores"))
        if dies and obj["round"] == 5 and not restarted:
            bus.dead.add(first)
            return []
        return [each]

    bus.tamper = kill
    bus.start()
    bus.run(until=lambda: first in bus.dead and not bus.queue)
    clock.now += 0.5
    masks = None
    if secure:  # the same keys, and nothing in memory of what it took
        masks = copy.copy(bus.peers[first].masks)
        masks.transcript = bytes(TRANSCRIPT_BYTES)
    restarted.append(make_peer(wdbc3, 1, wdbc3.block_data(1), tmp_path, clock=clock, masks=masks))
    assert restarted[0].resumed and restarted[0].pass_ == 4
    bus.replace(first, restarted[0])
    bus.run()
    assert not bus.errors
    if secure:
        np.testing.assert_allclose(bus.joined(), wdbc3.best, rtol=1e-6, atol=1e-6 * np.abs(wdbc3.best).max())
    else:
        assert_same_statistics(bus.joined(), wdbc3.best)
    assert bus.peers[holder].metrics.weights_resent == (1 if lost else 0)
    assert all(not any(peer.metrics.rejected.values()) for peer in bus.peers.values())


@pytest.mark.parametrize("when", ["before its weights left", "before the scores came"])
@pytest.mark.parametrize("fixture, secure", [("wdbc3", False), ("wdbc3_mixture", False), ("wdbc3", True)],
                         ids=["nb", "mixture", "nb-secure"])
def test_a_restarted_label_holder_resumes_and_the_group_goes_on(fixture, secure, request, tmp_path, when):
    """Killed after its checkpoint of pass 3: before its weights of pass 3 left (it sends them again when it
    restarts), or after, before the members' scores of pass 4 reached it: it tells the members the pass it awaits
    (a resumed notice), and each sends it again, at once, the very frame of its scores (with ``secure``, the same
    masked words); no member's wait runs out. For the mixture, pass 3 is an EM pass."""
    wdbc3 = request.getfixturevalue(fixture)
    holder, first, second = addresses(3)
    clock = FakeClock()
    bus = Bus(group(wdbc3, tmp_path, clock=clock, secure=secure), clock)
    restarted, scores = [], collections.defaultdict(list)

    def kill(sender, address, each):
        obj = msgpack.unpackb(each)
        if address == holder and obj["type"].endswith("scores") and obj["round"] == 4:
            scores[sender].append(each)
        dies = (sender == holder and obj["round"] == 3) if when == "before its weights left" else \
            (address == holder and obj["type"].endswith("scores") and obj["round"] == 4)
        if dies and not restarted:
            bus.dead.add(holder)
            return []
        return [each]

    bus.tamper = kill
    bus.start()
    bus.run(until=lambda: holder in bus.dead and not bus.queue)
    clock.now += 0.5
    masks = copy.copy(bus.peers[holder].masks)
    restarted.append(make_peer(wdbc3, 0, wdbc3.block_data(0), tmp_path, clock=clock, masks=masks))
    assert restarted[0].resumed and restarted[0].pass_ == 3
    bus.replace(holder, restarted[0])
    bus.run()
    assert not bus.errors
    if secure:
        np.testing.assert_allclose(bus.joined(), wdbc3.best, rtol=1e-6, atol=1e-6 * np.abs(wdbc3.best).max())
    else:
        assert_same_statistics(bus.joined(), wdbc3.best)
    assert bus.peers[holder].metrics.weights_resent == 2  # it sends the weights of pass 3 again to both members
    resent = [bus.peers[a].metrics.frames_resent for a in (first, second)]
    assert resent == ([0, 0] if when == "before its weights left" else [1, 1])
    assert [bus.peers[a].metrics.scores_resent for a in (first, second)] == [0, 0]  # no wait ran out
    assert all(len(set(frames)) == 1 and len(frames) == 1 + resent[0] for frames in scores.values())  # the same bytes


@pytest.mark.parametrize("named", [False, True], ids=["first-come", "--label-holder"])
def test_a_member_answers_a_member_posing_as_the_label_holder_only_without_label_holder(wdbc3, named):
    """Block 1's peer has labels of its own and asks the others for their ids first, as a label holder would: a member
    that takes the first request as the label holder's answers it (the poser would learn which of its guessed ids the
    member holds); one whose --label-holder names block 0's peer refuses it (counted) and answers block 0 alone."""
    datas = [wdbc3.block_data(b) for b in range(3)]
    datas[1].y = wdbc3.rep.split.y_train.copy()
    holder, poser, member = addresses(3)
    clock = FakeClock()
    peers = group(wdbc3, clock=clock, blocks_data=datas, label_holder=holder if named else None)
    answered = []

    def record(sender, address, frame):
        answered.append((sender, address))
        return [frame]

    bus = Bus(peers, clock, tamper=record)
    bus.start(poser)
    bus.start(holder, member)
    bus.run()
    assert ((member, poser) in answered) is not named
    assert ((member, holder) in answered) is named
    assert (bus.peers[member].metrics.rejected["sender"] == 1) is named


def test_two_label_holders_no_label_holder_and_no_overlap_are_one_line_each(wdbc3):
    split = wdbc3.rep.split
    two = [wdbc3.block_data(b) for b in range(3)]
    two[1].y = split.y_train[np.random.default_rng([0, 1]).permutation(len(split.y_train))]
    bus = run_group(wdbc3, group={"blocks_data": two})
    assert all("two label holders" in str(error) for error in bus.errors.values()) and len(bus.errors) == 3

    none = [wdbc3.block_data(b) for b in range(3)]
    none[0].y = None
    bus = run_group(wdbc3, group={"blocks_data": none, "first_round_timeout_s": 5.0})
    assert len(bus.errors) == 3 and all("no label holder" in str(error) for error in bus.errors.values())
    assert set(bus.stopped_at.values()) == {5.0}

    disjoint = [wdbc3.block_data(b) for b in range(3)]
    disjoint[2].ids = [f"other-{value}" for value in disjoint[2].ids]
    bus = run_group(wdbc3, group={"blocks_data": disjoint})
    assert "no instance id is held by every member" in str(bus.errors[addresses(3)[0]])


def test_two_peers_holding_the_same_block_are_refused(wdbc3):
    clock = FakeClock()
    peers = group(wdbc3, clock=clock)
    holder, first, second = addresses(3)
    peers[second].block = 1  # what it announces in its PSI answer
    bus = Bus(peers, clock)
    bus.start()
    bus.run()
    assert isinstance(bus.errors[holder], CRCError) and "two peers hold block 1" in str(bus.errors[holder])


class QuietTransport:
    """A PeerTransport with nobody on the other side."""

    def __init__(self):
        self.sent, self.closed = [], None

    def send(self, frame):
        return []

    def send_to(self, address, frame):
        self.sent.append((address, frame))
        return True

    def receive(self, deadline):
        return []

    def refused(self):
        return {}

    def close(self, linger_ms):
        self.closed = linger_ms


def test_a_group_of_one_runs_centralized_rc_alone_through_the_driver(tmp_path):
    ref = reference("wdbc", "qda", 1, rounds=ROUNDS)
    clock = FakeClock()
    peer = make_peer(ref, 0, ref.block_data(0), tmp_path, clock=clock)
    transport = QuietTransport()
    assert peer.run(transport) is True and transport.closed == peer.settings.final_linger_ms and not transport.sent
    assert_same_statistics(peer.best, ref.best)
    again = make_peer(ref, 0, ref.block_data(0), tmp_path, clock=clock)  # from its checkpoint: nothing left to do
    assert again.resumed and again.done and again.pass_ == ROUNDS + 1
    assert_same_statistics(again.best, ref.best)


def group_of(address: str, blocks: int) -> int:
    return (int(address.rsplit(":", 1)[1]) - 7100) // blocks


@pytest.mark.parametrize("data, model, groups, blocks, topology, rounds", [
    ("wdbc", "nb", 2, 2, "tree", 20), ("wdbc", "qda", 3, 2, "complete", ROUNDS), ("german", "nb", 3, 3, "ring", ROUNDS),
    ("german", "qda", 4, 2, "tree", ROUNDS), ("wdbc", "pc", 3, 2, "ring", ROUNDS)])
def test_hybrid_groups_equal_the_simulator_round_by_round(data, model, groups, blocks, topology, rounds):
    """Rounds beyond the window of early statistics (8) included: a group a round ahead of its neighbours is fine.
    A mixture's groups first run their EM passes, within the group: its round t is its pass E + t."""
    ref = hybrid_reference(data, model, groups, blocks, rounds=rounds, topology=topology)
    clock = FakeClock()
    passes = {}
    bus = Bus(hybrid_group(ref, clock=clock), clock, on_pass=lambda address, peer: passes.setdefault(
        (group_of(address, blocks), peer.pass_), {}).update({peer.block: peer.stats.copy()}))
    bus.start()
    bus.run()
    assert not bus.errors and bus.clock.now == 0.0
    em = BlockSteps(ref.model, 0).em_passes
    for g in range(groups):
        for t in range(rounds + 1):
            joined = ref.model.join([passes[g, em + t][b] for b in range(blocks)])
            assert_same_statistics(joined, ref.history[t][g], f"group {g}, round {t}")
    assert all(no_rejections(peer) and peer.pass_ == em + rounds for peer in bus.peers.values())
    for address, peer in bus.peers.items():  # its scores or weights, and its statistics to each block neighbour
        group_frames = 1 if peer.role == "member" else blocks - 1
        setup = 1 if peer.role == "member" else 3 * (blocks - 1)
        assert bus.sent[address] == setup + (em + rounds) * group_frames + rounds * len(peer.gossip.neighbours)


@pytest.mark.parametrize("model", ["nb", "pc"])
def test_the_label_holder_logs_the_rounds_it_was_given_not_its_passes(model, caplog):
    """T rounds are E + T + 1 passes (a mixture's EM passes, then the T steps and a pass that only scores): the label
    holder logs the losses of iterates 0 .. T "of T", and the iterate it keeps is counted in rounds too."""
    caplog.set_level(logging.INFO, logger="crc.node")
    bus = run_group(reference("wdbc", model, 2, rounds=ROUNDS))
    holder = bus.peers[addresses(2)[0]]
    logged = [r.getMessage().split(":")[0] for r in caplog.records if "soft 0-1 loss" in r.getMessage()]
    assert logged == [f"iterate {i} of {ROUNDS}" for i in range(ROUNDS + 1)]
    assert holder.chosen_iterate == int(np.argmin(holder.metrics.soft_loss))
    assert holder.reached(holder.pass_) == f"round {ROUNDS} of {ROUNDS} and the last pass, which only scores"


def test_a_hybrid_label_holder_logs_rounds_and_keeps_no_best_iterate(caplog):
    caplog.set_level(logging.INFO, logger="crc.node")
    ref = hybrid_reference("wdbc", "nb", 2, 2, rounds=ROUNDS)
    clock = FakeClock()
    bus = Bus(hybrid_group(ref, clock=clock), clock)
    bus.start()
    bus.run()
    holder = bus.peers[addresses(2, 0)[0]]
    logged = [r.getMessage() for r in caplog.records if r.name == holder.log.name and "soft 0-1 loss" in r.getMessage()]
    assert [line.split(":")[0] for line in logged] == [f"round {r} of {ROUNDS}" for r in range(1, ROUNDS + 1)]
    assert not any("best" in line for line in logged)
    assert holder.chosen_iterate is None and holder.reached(holder.pass_) == f"round {ROUNDS} of {ROUNDS}"


def test_in_a_hybrid_partition_a_dead_peer_stops_its_group_and_the_others_go_on(tmp_path):
    ref = hybrid_reference("wdbc", "nb", 3, 2, rounds=ROUNDS, topology="complete")
    clock = FakeClock()
    bus = Bus(hybrid_group(ref, clock=clock, down_after=2), clock)
    dead = addresses(2, 1)[1]  # block 1 of group 1
    bus.on_pass = lambda address, peer: bus.dead.add(dead) if address == dead and peer.pass_ == 2 else None
    bus.start()
    bus.run()
    holder_1 = addresses(2, 1)[0]
    assert set(bus.errors) == {holder_1} and isinstance(bus.errors[holder_1], GroupStopped)
    for g in (0, 2):  # their block-1 peers waited for the dead one, marked it down and went on without it
        for address in addresses(2, g):
            assert bus.peers[address].done and bus.peers[address].pass_ == ROUNDS
        assert bus.peers[addresses(2, g)[1]].gossip.liveness.down.keys() == {dead}


def test_in_a_hybrid_partition_a_block_neighbour_that_only_tells_it_resumed_is_marked_down():
    """From round 2 on, group 1's label holder sends group 0's nothing but a resumed notice in each of its waits: a
    notice is no sign of progress, so it is marked down after down_after rounds and no longer waited for, rather than
    waited for a whole timeout every round."""
    ref = hybrid_reference("wdbc", "nb", 2, 2, rounds=ROUNDS)
    clock = FakeClock()
    watcher, stuck = addresses(2, 0)[0], addresses(2, 1)[0]

    def stop(sender, address, each):
        obj = msgpack.unpackb(each)
        return [] if (sender, address, obj["type"]) == (stuck, watcher, "stats") and obj["round"] >= 2 else [each]

    bus = Bus(hybrid_group(ref, clock=clock), clock, tamper=stop)
    told = []

    def tell():
        if (bus.peers[watcher].pass_ or 0) >= 2 and not bus.peers[watcher].done and (not told or clock.now > told[-1]):
            told.append(clock.now)
            bus.queue.append((stuck, watcher, encode_resumed(run="crc", sender=stuck, round_=0)))
        return False

    bus.start()
    bus.run(until=tell)
    peer = bus.peers[watcher]
    assert len(told) >= 2 and peer.done and not bus.errors
    assert stuck in peer.gossip.liveness.down  # after 3 rounds of waits (down_after), and then no longer waited for
    assert clock.now == 3 * peer.settings.timeout_s


@pytest.mark.parametrize("data, model, blocks", [("wdbc", "nb", 3), ("wdbc", "qda", 4)])
def test_with_secure_aggregation_the_label_holder_sees_only_masked_scores_and_the_group_follows_the_plain_run(
        data, model, blocks):
    ref = reference(data, model, blocks, rounds=ROUNDS)
    holder = addresses(blocks)[0]
    clock = FakeClock()
    seen = []

    def watch(sender, address, each):
        if address == holder:
            seen.append(msgpack.unpackb(each))
        return [each]

    bus = Bus(group(ref, clock=clock, secure=True), clock, tamper=watch)
    bus.start()
    bus.run()
    assert not bus.errors
    # fixed point (2^-20) on the scores: 1e-9 of the largest statistic measured, 1e-6 asserted
    np.testing.assert_allclose(bus.joined(), ref.best, rtol=1e-6, atol=1e-6 * np.abs(ref.best).max())
    scores = [obj for obj in seen if obj["type"].endswith("scores")]
    assert scores and {obj["type"] for obj in scores} == {"masked-scores"}
    labels = one_hot(bus.peers[holder].y, ref.model.n_classes)
    first = {obj["from"]: np.frombuffer(obj["data"], dtype="<u8") for obj in scores if obj["round"] == 1}
    start = {address: peer.steps.scores(peer.steps.start(peer.phi, labels, peer.ess), peer.phi).ravel()
             for address, peer in bus.peers.items() if address != holder}
    for address, words in first.items():  # one member's words alone say nothing of its scores ...
        assert np.abs(from_fixed(words) - start[address]).min() > 1.0
    # ... their sum is the members' sum, to the fixed point
    np.testing.assert_allclose(unmasked_sum(list(first.values())), sum(start.values()), rtol=0,
                               atol=(blocks - 1) * 2.0**-21)


def test_a_member_that_sends_plain_scores_to_a_secure_group_is_rejected_and_the_group_stops():
    ref = reference("wdbc", "nb", 3, rounds=ROUNDS)
    clock = FakeClock()
    peers = group(ref, clock=clock, secure=True)
    last = addresses(3)[2]
    peers[last].masks = None  # it sends its scores in the clear
    bus = Bus(peers, clock)
    bus.start()
    bus.run()
    holder = bus.peers[addresses(3)[0]]
    assert holder.metrics.rejected["type"] >= 1 and isinstance(bus.errors[addresses(3)[0]], GroupStopped)


def test_secure_aggregation_of_one_members_scores_is_refused():
    with pytest.raises(CRCError, match="two members or more"):
        group(reference("wdbc", "nb", 2, rounds=2), clock=FakeClock(), secure=True)


def test_a_member_resumed_from_a_checkpoint_of_another_label_holder_than_its_label_holder_stops_in_one_line(
        wdbc3, tmp_path):
    """A member whose checkpoint holds one label holder, restarted with --label-holder naming another, stops naming
    both (before, it went on taking the checkpoint's peer's weights: a member that took a poser's request first-come
    and was then given --label-holder kept answering the poser). The one it holds, named, resumes."""
    holder, poser, _ = addresses(3)
    clock = FakeClock()
    bus = Bus(group(wdbc3, tmp_path, clock=clock), clock)
    bus.start()
    bus.run(until=lambda: bus.peers[addresses(3)[2]].pass_ == 2)
    member = make_peer(wdbc3, 2, wdbc3.block_data(2), tmp_path, clock=clock, label_holder=holder)
    assert member.resumed and member.holder == holder  # the checkpoint's label holder is the one named: it goes on
    with pytest.raises(CRCError, match=f"label holder {holder}.*--label-holder names {poser}"):
        make_peer(wdbc3, 2, wdbc3.block_data(2), tmp_path, clock=clock, label_holder=poser)


@pytest.mark.parametrize("secure", [False, True])
def test_a_member_restarted_with_other_settings_is_told_how_to_start_afresh(wdbc3, tmp_path, secure):
    """Deleting the checkpoint of a member that masks its scores would have it mask its first passes again under the
    run's masks: it is told to start the group under a new --run-id instead."""
    member = addresses(3)[1]
    clock = FakeClock()
    bus = Bus(group(wdbc3, tmp_path, clock=clock, secure=secure), clock)
    bus.start()
    bus.run(until=lambda: bus.peers[member].pass_ == 2)
    advice = "start every peer afresh under a new --run-id" if secure else "delete it to start afresh"
    with pytest.raises(CRCError, match=rf"different configuration \(rounds differ\); .*{advice}"):
        make_peer(wdbc3, 1, wdbc3.block_data(1), tmp_path, clock=clock, masks=bus.peers[member].masks,
                  rounds=wdbc3.config.rounds + 1)


def test_a_member_given_the_wrong_label_holder_stops_naming_the_request_it_refused(wdbc3):
    """Block 2's peer is told that block 1's peer (a member without labels) is the label holder: it refuses block 0's
    request and, at the first round's timeout, says so (it was 'no peer of the group sent a PSI request')."""
    holder, other, member = addresses(3)
    clock = FakeClock()
    peers = group(wdbc3, clock=clock, label_holder=holder)
    peers[member] = make_peer(wdbc3, 2, wdbc3.block_data(2), clock=clock, label_holder=other)
    bus = Bus(peers, clock)
    bus.start()
    bus.run()
    assert str(bus.errors[member]).startswith(f"no PSI request from {other}, the label holder --label-holder names, "
                                              f"within 5 s; this peer refused the request of {holder} ")


def test_a_peer_runs_its_passes_with_blas_on_one_thread():
    """A pass's products are of all the group's instances: a threaded BLAS on a busy machine stalled each for tens of
    milliseconds (a peer of ``crc node`` runs without ``crc launch``'s single-threaded environment)."""
    ref = reference("wdbc", "nb", 1, rounds=2)
    peer = make_peer(ref, 0, ref.block_data(0), clock=FakeClock())
    seen = []
    step = peer.steps.step
    peer.steps.step = lambda *args: (seen.append(blas_threads_now()), step(*args))[1]
    with threadpool_limits(limits=2, user_api="blas"):
        assert peer.run(QuietTransport()) and blas_threads_now() == 2  # a group of one peer (vertical:1)
    assert seen == [1, 1]
    assert_same_statistics(peer.best, ref.best)
