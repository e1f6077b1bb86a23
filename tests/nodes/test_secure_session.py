"""The secure-aggregation session in-process: four peers of a complete graph run its stages on each other's frames."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from crc.core.models import make_model
from crc.nodes.keys import new_key_pair
from crc.nodes.metrics import Metrics
from crc.nodes.secure_session import LOGGED_DECLINE_SPELLS, SecureAggregationSession
from crc.nodes.settings import SecureAggregationKeys
from crc.nodes.wire import Agree, Confirm, Decline, Expectation, Masked, Rejected, Resumed, Reveal, Unmask, decode, encode
from support.tables import mixed_columns, prepared

PEERS = [f"tcp://127.0.0.1:{7200 + i}" for i in range(4)]
RECIPIENT, CONTRIBUTORS = PEERS[0], PEERS[1:]
KEYS = {address: new_key_pair() for address in PEERS}
ROUNDS, ESS = 5, 300.0
SCHEMA, X, Y = prepared(mixed_columns(90, seed=2))
MODEL = make_model("nb", SCHEMA)


def others(me: str) -> tuple[str, ...]:
    return tuple(p for p in PEERS if p != me)


def session(me: str, dropouts: int | None = None, resumed: int | None = None) -> SecureAggregationSession:
    hoods = {u: {w: KEYS[w].public for w in others(u)} for u in others(me)}  # complete graph: N(u) = the others
    return SecureAggregationSession(me, "run", others(me), SecureAggregationKeys(KEYS[me].secret, hoods), rounds=ROUNDS,
                                    metrics=Metrics.for_neighbours(others(me)), log=logging.getLogger("test.session"),
                                    dropouts=dropouts, resumed=resumed)


def expect(me: str) -> Expectation:
    return Expectation(run="run", schema_id=MODEL.schema_id, ess=ESS, size=MODEL.size, neighbours=frozenset(others(me)),
                       secure_aggregation=True)


def statistics(i: int) -> np.ndarray:
    stats = MODEL.fit_ml(MODEL.features(X[i::4]), Y[i::4])
    return stats * (ESS / MODEL.ess(stats))


@pytest.fixture
def sessions():
    return {p: session(p) for p in PEERS}


def masked_for_recipient(sessions, round_: int, senders=CONTRIBUTORS) -> dict[str, Masked]:
    """Stage 0: what each sender's session sends the recipient, decoded by the recipient."""
    received = {}
    for i, sender in enumerate(PEERS):
        if sender not in senders:
            continue
        plain = encode(run="run", sender=sender, round_=round_, schema_id=MODEL.schema_id, ess=ESS, stats=statistics(i))
        frames = sessions[sender].frames(statistics(i), round_, schema_id=MODEL.schema_id, ess=ESS, plain=plain)
        assert set(frames) == set(others(sender))
        received[sender] = decode(frames[RECIPIENT], expect(RECIPIENT))
    return received


def unmask_round(sessions, round_: int, received: dict, answering=CONTRIBUTORS, agreeing=CONTRIBUTORS) -> np.ndarray | None:
    """Stages 1-5 at the recipient: its requests agreed to by the ``agreeing`` contributors, its confirmations
    answered by the ``answering`` ones."""
    recipient = sessions[RECIPIENT]
    requests = recipient.open(received, round_)
    assert set(requests) == set(CONTRIBUTORS)
    for contributor in agreeing:
        request = decode(requests[contributor], expect(contributor))
        assert isinstance(request, Unmask)
        reply = sessions[contributor].answer(request)
        if reply is not None:
            agreement = decode(reply, expect(RECIPIENT))
            assert isinstance(agreement, Agree)
            recipient.take_agreement(agreement)
    for contributor, frame in recipient.confirm().items():
        if contributor not in answering:
            continue
        confirmation = decode(frame, expect(contributor))
        assert isinstance(confirmation, Confirm)
        reveal = decode(sessions[contributor].answer_confirmation(confirmation), expect(RECIPIENT))
        assert isinstance(reveal, Reveal)
        recipient.take_reveal(reveal)
    return recipient.close(MODEL, ESS)


def test_the_recipient_learns_the_sum_of_its_neighbours_statistics(sessions):
    received = masked_for_recipient(sessions, 0)
    assert all(isinstance(m, Masked) for m in received.values()) and sessions[RECIPIENT].receives_masked
    total = unmask_round(sessions, 0, received)
    expected = sum(statistics(i) for i in range(1, 4))
    np.testing.assert_allclose(total, expected, rtol=0, atol=1e-5)
    assert MODEL.ess(total) == pytest.approx(3 * ESS, rel=1e-12)
    assert not sessions[RECIPIENT].unmasking and sessions[RECIPIENT].reveals == 3


def test_a_contributor_lost_after_sending_is_covered_by_the_others_shares(sessions):
    received = masked_for_recipient(sessions, 1)
    total = unmask_round(sessions, 1, received, answering=CONTRIBUTORS[:2])
    np.testing.assert_allclose(total, sum(statistics(i) for i in range(1, 4)), rtol=0, atol=1e-5)


def test_with_one_contributor_nothing_is_unmasked_and_the_others_get_a_notice(sessions):
    received = masked_for_recipient(sessions, 2, senders=CONTRIBUTORS[:1])
    assert unmask_round(sessions, 2, received) is None
    assert sum(session.metrics.reveals_refused for session in sessions.values()) == 0


def test_with_distributed_noise_and_no_dropout_allowed_for_a_member_missing_of_three_costs_the_round():
    """Distributed noise with ``--dp-dropouts 0`` sizes the shares for all members but the colluders: the sum of two
    of three would carry 2/3 of the noise, so a request must name all three."""
    sessions = {p: session(p, dropouts=0) for p in PEERS}
    received = masked_for_recipient(sessions, 1, senders=CONTRIBUTORS[:2])
    assert unmask_round(sessions, 1, received) is None and sessions[RECIPIENT].agreements == 0


def test_with_one_dropout_allowed_for_the_two_members_left_are_unmasked_and_a_third_missing_costs_the_round():
    """``--dp-dropouts 1``: the shares are sized so that two of three still carry the full noise, so a dead member
    no longer stops its neighbourhood's sums; two missing are one more than the shares allow for."""
    sessions = {p: session(p, dropouts=1) for p in PEERS}
    total = unmask_round(sessions, 1, masked_for_recipient(sessions, 1, senders=CONTRIBUTORS[:2]))
    np.testing.assert_allclose(total, statistics(1) + statistics(2), rtol=0, atol=1e-5)
    assert unmask_round(sessions, 2, masked_for_recipient(sessions, 2, senders=CONTRIBUTORS[:1])) is None


def test_a_contributor_that_does_not_agree_costs_the_round_and_reveals_nothing_of_the_others(sessions):
    """Lost between its masked statistics and its agreement: the others agreed to a set it did not vouch for, so
    the recipient has nothing to confirm; nobody reveals and the round is not unmasked."""
    received = masked_for_recipient(sessions, 1)
    assert unmask_round(sessions, 1, received, agreeing=CONTRIBUTORS[:2]) is None
    assert sessions[RECIPIENT].agreements == 2 and sessions[RECIPIENT].reveals == 0


def test_stages_out_of_order_are_refused(sessions):
    recipient = sessions[RECIPIENT]
    assert recipient.close(MODEL, ESS) is None and not recipient.settled() and recipient.confirm() == {}
    received = masked_for_recipient(sessions, 3)
    requests = recipient.open(received, 3)
    agreements = {w: decode(sessions[w].answer(decode(requests[w], expect(w))), expect(RECIPIENT)) for w in CONTRIBUTORS}
    first = agreements[CONTRIBUTORS[0]]
    recipient.take_agreement(first)
    with pytest.raises(Rejected) as duplicate:
        recipient.take_agreement(first)
    assert duplicate.value.cause == "duplicate" and recipient.confirm() == {}  # not every member agreed yet
    for w in CONTRIBUTORS[1:]:
        recipient.take_agreement(agreements[w])
    confirmations = recipient.confirm()
    assert set(confirmations) == set(CONTRIBUTORS) and recipient.confirm() == {}  # confirmed once
    reply = decode(sessions[CONTRIBUTORS[0]].answer_confirmation(decode(confirmations[CONTRIBUTORS[0]],
                                                                        expect(CONTRIBUTORS[0]))), expect(RECIPIENT))
    recipient.take_reveal(reply)
    with pytest.raises(Rejected) as duplicate:
        recipient.take_reveal(reply)
    assert duplicate.value.cause == "duplicate"
    recipient.close(MODEL, ESS)
    with pytest.raises(Rejected) as stale:  # the unmasking is closed: a late reveal is not taken
        recipient.take_reveal(reply)
    assert stale.value.cause == "stale"


def test_the_inconsistent_request_attack_recovers_nothing_and_is_detected_counted_and_logged(caplog):
    """A deviating recipient with three neighbours a, b, c (a complete graph of four) asks a and b for {a, b} and c
    for {a, c}: before the consistency round, a's answer (its pairwise seed with c) and c's (its self-mask seed and
    pairwise seed with b) stripped every mask from c's words, giving c's statistics alone. Now c reveals only with
    a's vouch for {a, c}, which a never made: it reveals nothing, and logs and counts the deviation. What the
    recipient can unmask is the sum a and b agreed to, and c's words stay masked by its secret self-mask."""
    sessions = {p: session(p) for p in PEERS}
    a, b, c = CONTRIBUTORS
    attacker = sessions[RECIPIENT].neighbourhoods
    received = masked_for_recipient(sessions, 0)
    requests = {a: attacker.unmask_frame(a, {w: received[w] for w in (a, b)}, 0),
                b: attacker.unmask_frame(b, {w: received[w] for w in (a, b)}, 0),
                c: attacker.unmask_frame(c, {w: received[w] for w in (a, c)}, 0)}
    agreements = {w: decode(sessions[w].answer(decode(requests[w], expect(w))), expect(RECIPIENT)) for w in CONTRIBUTORS}
    assert all(isinstance(agreement, Agree) for agreement in agreements.values())
    reveals, declines = {}, []
    with caplog.at_level(logging.DEBUG, logger="test.session"):
        for w, group in [(a, (a, b)), (b, (a, b)), (c, (a, c))]:
            for relayed in ({o: agreements[o] for o in group}, {o: agreements[o] for o in CONTRIBUTORS}):
                confirmation = decode(attacker.confirm_frame(w, relayed, 0), expect(w))
                reply = decode(sessions[w].answer_confirmation(confirmation), expect(RECIPIENT))
                if isinstance(reply, Reveal):
                    reveals.setdefault(w, reply)
                else:
                    declines.append(reply)
    assert set(reveals) == {a, b}
    assert declines == [Decline(c, 0, RECIPIENT, "deviation")] * 2  # the reason code, nothing else
    victim = sessions[c]
    assert victim.metrics.deviations == victim.metrics.reveals_refused == 2
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "deviation detected" in errors[0].getMessage() and RECIPIENT in errors[0].getMessage()
    assert all(sessions[w].metrics.deviations == 0 for w in (a, b))
    # the sum a and b agreed to unmasks; c's words, stripped of every mask the recipient can remove, look uniform
    total = attacker.unmask({w: received[w].words for w in (a, b)}, reveals, MODEL, ESS)
    np.testing.assert_allclose(total, statistics(1) + statistics(2), rtol=0, atol=1e-5)
    from crc.nodes.secure_aggregation import from_fixed, mask

    words = received[c].words.copy()
    pair_ac = reveals[a].pairs[c]  # a dropped c from its set: its pairwise seed with c
    words = words + mask(pair_ac, len(words))  # c's term -sign: a < c, so c subtracted it
    guess = from_fixed(words)
    assert np.median(np.abs(guess - statistics(3))) > 1e9  # nothing of c's statistics is left to read


def noticed_by_the_other_recipients(sessions, member: str, round_: int) -> None:
    """``member`` answers the notices (nothing asked) of its neighbours other than the recipient for ``round_``."""
    for peer in others(member):
        if peer != RECIPIENT:
            sessions[member].answer(decode(sessions[peer].open({}, round_)[member], expect(member)))


def test_a_request_for_more_than_a_sum_is_refused_counted_and_logged_once(sessions, caplog):
    masked_for_recipient(sessions, 0)
    contributor = sessions[CONTRIBUTORS[0]]
    greedy = Unmask(sender=RECIPIENT, round=0, survivors=(CONTRIBUTORS[0], "tcp://127.0.0.1:9"), shares={})  # a stranger
    with caplog.at_level(logging.DEBUG, logger="test.session"):
        replies = [decode(contributor.answer(greedy), expect(RECIPIENT)) for _ in range(2)]
    assert replies == [Decline(CONTRIBUTORS[0], 0, RECIPIENT, "request")] * 2
    assert contributor.metrics.reveals_refused == 2
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.DEBUG]


def test_after_the_last_round_a_peer_knows_when_every_protected_neighbour_is_done(sessions):
    """Done: a notice (this peer left out) from the neighbours that received nothing from it, the confirmation from
    the one that unmasks it."""
    last = ROUNDS - 1
    received = masked_for_recipient(sessions, last)
    contributor = sessions[CONTRIBUTORS[0]]
    noticed_by_the_other_recipients(sessions, CONTRIBUTORS[0], last)
    assert not contributor.final_answered()
    np.testing.assert_allclose(unmask_round(sessions, last, received), sum(statistics(i) for i in range(1, 4)),
                               rtol=0, atol=1e-5)
    assert contributor.final_answered()


def test_a_resumed_member_declines_and_the_recipient_gives_the_round_up_at_once_unmasking_nothing(sessions):
    """Resumed at the last round, a member declines its request (reason ``resumed``) and is done with that round; the
    recipient's wait ends on the decline, nothing is confirmed and nothing unmasked, as after its timeout."""
    last, a = ROUNDS - 1, CONTRIBUTORS[0]
    sessions[a] = session(a, resumed=last)
    received = masked_for_recipient(sessions, last)
    noticed_by_the_other_recipients(sessions, a, last)
    recipient = sessions[RECIPIENT]
    requests = recipient.open(received, last)
    decline = decode(sessions[a].answer(decode(requests[a], expect(a))), expect(RECIPIENT))
    assert decline == Decline(a, last, RECIPIENT, "resumed") and sessions[a].final_answered()
    assert sessions[a].metrics.reveals_refused == 1 and not recipient.settled()
    recipient.take_decline(decline)
    assert recipient.settled() and recipient.declines == 1
    for w in CONTRIBUTORS[1:]:  # the others' agreements, late: still nothing to confirm
        recipient.take_agreement(decode(sessions[w].answer(decode(requests[w], expect(w))), expect(RECIPIENT)))
    assert recipient.confirm() == {} and recipient.close(MODEL, ESS) is None and recipient.reveals == 0


def test_a_decline_the_recipient_does_not_await_is_rejected_and_changes_nothing(sessions):
    """Only a member of the open request set that owes an answer can end the wait: a decline from a neighbour left
    out of the set, for another round, addressed to another peer, from a member that agreed, or a second one, is
    rejected by cause; after the unmasking is closed every decline is stale."""
    a, b, c = CONTRIBUTORS
    recipient = sessions[RECIPIENT]
    received = masked_for_recipient(sessions, 2, senders=(a, b))
    requests = recipient.open(received, 2)
    recipient.take_agreement(decode(sessions[b].answer(decode(requests[b], expect(b))), expect(RECIPIENT)))
    for decline, cause in [(Decline(c, 2, RECIPIENT, "unsent"), "stale"),  # c's statistics did not arrive
                           (Decline(a, 3, RECIPIENT, "resumed"), "stale"),
                           (Decline(a, 2, c, "resumed"), "stale"),
                           (Decline(b, 2, RECIPIENT, "resumed"), "duplicate")]:  # b agreed already
        with pytest.raises(Rejected) as rejected:
            recipient.take_decline(decline)
        assert rejected.value.cause == cause, decline
        assert not recipient.settled() and recipient.declines == 0
    recipient.take_decline(Decline(a, 2, RECIPIENT, "resumed"))
    with pytest.raises(Rejected) as second:
        recipient.take_decline(Decline(a, 2, RECIPIENT, "changed"))
    assert second.value.cause == "duplicate" and recipient.declines == 1
    assert recipient.close(MODEL, ESS) is None
    with pytest.raises(Rejected) as late:
        recipient.take_decline(Decline(b, 2, RECIPIENT, "unagreed"))
    assert late.value.cause == "stale"
    recipient.open(received, 3)
    assert recipient.declines == 0 and not recipient.settled()


def test_a_decline_after_the_confirmations_ends_the_wait_and_the_others_reveals_unmask_the_sum(sessions):
    """A member that refuses its confirmation (here: a vouch withheld, a deviation) declines; once the others
    revealed the wait is over, and their shares cover the decliner's masks, as they would after the timeout."""
    a = CONTRIBUTORS[0]
    recipient = sessions[RECIPIENT]
    received = masked_for_recipient(sessions, 1)
    requests = recipient.open(received, 1)
    for w in CONTRIBUTORS:
        recipient.take_agreement(decode(sessions[w].answer(decode(requests[w], expect(w))), expect(RECIPIENT)))
    confirmations = recipient.confirm()
    withheld = recipient.neighbourhoods.confirm_frame(a, {}, 1)
    decline = decode(sessions[a].answer_confirmation(decode(withheld, expect(a))), expect(RECIPIENT))
    assert decline == Decline(a, 1, RECIPIENT, "deviation")
    recipient.take_decline(decline)
    late = decode(sessions[a].answer_confirmation(decode(confirmations[a], expect(a))), expect(RECIPIENT))
    with pytest.raises(Rejected) as second:  # a member that declined has answered: its reveal is not taken
        recipient.take_reveal(late)
    assert second.value.cause == "duplicate" and isinstance(late, Reveal)
    assert not recipient.settled()  # the others' reveals are still awaited
    for w in CONTRIBUTORS[1:]:
        recipient.take_reveal(decode(sessions[w].answer_confirmation(decode(confirmations[w], expect(w))), expect(RECIPIENT)))
    assert recipient.settled()
    np.testing.assert_allclose(recipient.close(MODEL, ESS), sum(statistics(i) for i in range(1, 4)), rtol=0, atol=1e-5)


def test_a_member_that_resumed_at_or_after_the_round_is_taken_as_declining_it(sessions):
    """A member's resumed notice for the round being unmasked or a later one ends its wait as its decline would (it
    refuses that round, and what was sent to it died with it): before the confirmations the round is given up, after
    them the others' reveals unmask the sum. A notice of an earlier round, from a neighbour outside the set or from a
    member that answered this stage changes nothing."""
    a, b, c = CONTRIBUTORS
    recipient = sessions[RECIPIENT]
    received = masked_for_recipient(sessions, 2, senders=(a, b))
    requests = recipient.open(received, 2)
    recipient.take_agreement(decode(sessions[b].answer(decode(requests[b], expect(b))), expect(RECIPIENT)))
    for unheeded in (Resumed(a, 1), Resumed(c, 2), Resumed(b, 2)):
        recipient.take_resumed(unheeded)
        assert not recipient.settled() and recipient.declines == 0, unheeded
    recipient.take_resumed(Resumed(a, 3))
    assert recipient.settled() and recipient.declines == 1 and recipient.confirm() == {}
    assert recipient.close(MODEL, ESS) is None

    received = masked_for_recipient(sessions, 3)
    requests = recipient.open(received, 3)
    for w in CONTRIBUTORS:
        recipient.take_agreement(decode(sessions[w].answer(decode(requests[w], expect(w))), expect(RECIPIENT)))
    confirmations = recipient.confirm()
    recipient.take_resumed(Resumed(a, 3))  # restarted after agreeing: its confirmation died with it
    for w in (b, c):
        recipient.take_reveal(decode(sessions[w].answer_confirmation(decode(confirmations[w], expect(w))), expect(RECIPIENT)))
    assert recipient.settled()
    np.testing.assert_allclose(recipient.close(MODEL, ESS), sum(statistics(i) for i in range(1, 4)), rtol=0, atol=1e-5)


@pytest.mark.parametrize("dropouts", [None, 1])
def test_a_recipient_that_says_it_resumed_gets_no_second_request_set_answered(dropouts):
    """A recipient that unmasked {a, b, c} and then says it resumed at that round (its neighbours send it the same
    masked words again) cannot have the members answer {a, b} too: that would give it the pairwise seeds with c, and
    c's statistics alone. The notice leaves the members' commitments as they are; each declines the other set."""
    sessions = {p: session(p, dropouts=dropouts) for p in PEERS}
    a, b, _ = CONTRIBUTORS
    received = masked_for_recipient(sessions, 2)
    assert unmask_round(sessions, 2, received) is not None
    for w in CONTRIBUTORS:
        for round_ in (0, 2):
            sessions[w].take_resumed(Resumed(RECIPIENT, round_))
    requests = sessions[RECIPIENT].open({w: received[w] for w in (a, b)}, 2)
    for w in (a, b):
        assert decode(sessions[w].answer(decode(requests[w], expect(w))), expect(RECIPIENT)) == Decline(w, 2, RECIPIENT,
                                                                                                      "changed")


def test_a_neighbours_declines_are_logged_once_while_they_last(sessions, caplog):
    """A warning for the first decline, debug for the next ones, a note once the neighbour agrees again, then a
    warning for a new decline."""
    a = CONTRIBUTORS[0]
    recipient = sessions[RECIPIENT]
    received = masked_for_recipient(sessions, 0)
    with caplog.at_level(logging.DEBUG, logger="test.session"):
        for round_, answer in enumerate([Decline(a, 0, RECIPIENT, "resumed"), Decline(a, 1, RECIPIENT, "unsent"),
                                         Agree(a, 2, {}), Decline(a, 3, RECIPIENT, "changed")]):
            recipient.open(received, round_)
            (recipient.take_decline if isinstance(answer, Decline) else recipient.take_agreement)(answer)
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in records] == [logging.WARNING, logging.DEBUG, logging.INFO, logging.WARNING]
    assert "declined" in records[0][1] and "resumed" in records[0][1] and a in records[0][1]
    assert "again" in records[2][1] and "changed" in records[3][1]


def test_a_neighbour_that_declines_every_other_round_logs_a_bounded_number_of_lines(sessions, caplog):
    """Declining and agreeing in turn began a new spell of declines each time, two log lines (a warning and 'agrees
    again') every two rounds for the whole run; after LOGGED_DECLINE_SPELLS spells the rest goes to debug level."""
    a = CONTRIBUTORS[0]
    recipient = sessions[RECIPIENT]
    received = masked_for_recipient(sessions, 0)
    with caplog.at_level(logging.INFO, logger="test.session"):
        for round_ in range(40):
            recipient.open(received, round_)
            if round_ % 2:
                recipient.take_agreement(Agree(a, round_, {}))
            else:
                recipient.take_decline(Decline(a, round_, RECIPIENT, "changed"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(caplog.records) == 2 * LOGGED_DECLINE_SPELLS and len(warnings) == LOGGED_DECLINE_SPELLS
    assert "debug level only" in warnings[-1]


def test_a_request_given_up_is_withdrawn_so_a_member_that_agreed_stops_waiting_after_its_last_round(sessions):
    """A member declined before the confirmations: the recipient cannot confirm the set, and tells the members that
    did not decline (a notice that asks nothing); one that agreed is then done with the last round instead of waiting
    its timeout for a confirmation."""
    last, (a, b, c) = ROUNDS - 1, CONTRIBUTORS
    received = masked_for_recipient(sessions, last)
    noticed_by_the_other_recipients(sessions, b, last)
    recipient = sessions[RECIPIENT]
    requests = recipient.open(received, last)
    recipient.take_agreement(decode(sessions[b].answer(decode(requests[b], expect(b))), expect(RECIPIENT)))
    recipient.take_decline(Decline(a, last, RECIPIENT, "resumed"))
    assert recipient.settled() and recipient.confirm() == {} and not sessions[b].final_answered()
    notices = recipient.withdraw()
    assert set(notices) == {b, c}  # not a, which declined
    for member, frame in notices.items():
        notice = decode(frame, expect(member))
        assert isinstance(notice, Unmask) and notice.round == last and notice.survivors == ()
        assert sessions[member].answer(notice) is None  # asks nothing, commits to nothing
    assert sessions[b].final_answered() and sessions[b].metrics.reveals_refused == 0
    assert recipient.close(MODEL, ESS) is None and recipient.withdraw() == {}
