"""What a peer's checkpoint holds (its layout under each acceleration), what it must match, and its writing."""

from __future__ import annotations

import logging
import os
from dataclasses import replace

import numpy as np
import pytest

from crc.core.acceleration import MOMENTUM_PRESET, PAPER, PRESET, Acceleration, Memory
from crc.core.errors import CRCError
from crc.core.models import make_model
from crc.nodes.metrics import Metrics
from crc.nodes.peer_checkpoint import PeerCheckpoints, PeerState, identity, kept_links, layout, restore
from crc.nodes.settings import PeerSettings, SecureAggregationKeys
from support.blocking import fails_if_blocked
from support.tables import mixed_columns, prepared

SIZE = 5
RNG = np.random.default_rng(0)
STATS, AGGREGATE, PREVIOUS, AVERAGE = (RNG.normal(size=SIZE) for _ in range(4))
SPEEDUPS = {"paper": PAPER, "aggregate": Acceleration(classifier="aggregate"), "momentum": Acceleration(**MOMENTUM_PRESET),
            "exact diffusion": PRESET, "averaged": replace(PRESET, start="categorical", classifier="averaged"),
            "momentum averaged": Acceleration(**{**MOMENTUM_PRESET, "classifier": "averaged"})}


def state_for(speedup: Acceleration, round_: int = 4) -> PeerState:
    memory = None
    if speedup.has_momentum:
        memory = Memory(AGGREGATE, np.array(True))
    elif speedup.exact_diffusion:
        memory = Memory(PREVIOUS, np.array(False))
    return PeerState(round_, STATS, AGGREGATE if speedup.keeps_aggregate else None, memory,
                     average=AVERAGE if speedup.keeps_average else None)


@pytest.mark.parametrize("name", list(SPEEDUPS))
def test_the_layout_restores_what_it_holds(name):
    speedup = SPEEDUPS[name]
    state = state_for(speedup)
    vector = layout(state, speedup)
    assert len(vector) == (SIZE * (1 + speedup.keeps_aggregate + speedup.exact_diffusion + speedup.keeps_average)
                           + speedup.has_momentum)
    back = restore(state.round, vector, speedup, SIZE, source="here")
    np.testing.assert_array_equal(back.stats, STATS)
    for held, expected in [(back.aggregated, state.aggregated), (None if back.memory is None else back.memory.previous,
                                                                  None if state.memory is None else state.memory.previous),
                           (back.average, state.average)]:
        assert (held is None) == (expected is None)
        if held is not None:
            np.testing.assert_array_equal(held, expected)
    if speedup.has_momentum:
        assert bool(back.memory.reset) and back.memory.previous is back.aggregated


@pytest.mark.parametrize("name", list(SPEEDUPS))
def test_a_fresh_run_has_the_layout_of_every_round_and_restores_to_no_memory(name):
    speedup = SPEEDUPS[name]
    fresh = PeerState(0, STATS)
    assert len(layout(fresh, speedup)) == len(layout(state_for(speedup), speedup))
    back = restore(0, layout(fresh, speedup), speedup, SIZE, source="here")
    assert back.aggregated is None and back.memory is None and back.average is None


def test_a_reset_flag_other_than_0_or_1_names_the_checkpoint():
    speedup = SPEEDUPS["momentum"]
    vector = layout(state_for(speedup), speedup)
    vector[2 * SIZE] = 0.5
    with pytest.raises(CRCError, match="ckpt: damaged checkpoint: momentum reset flag 0.5"):
        restore(4, vector, speedup, SIZE, source="ckpt")


@pytest.mark.parametrize("name", ["paper", "exact diffusion"])
def test_a_network_sums_seal_of_the_last_total_is_restored_and_a_damaged_one_refused(name):
    speedup, sealed = SPEEDUPS[name], bytes(range(200, 232))
    state = replace(state_for(speedup), sealed=sealed)
    vector = layout(state, speedup, network=True)
    assert len(vector) == len(layout(state, speedup)) + 32
    back = restore(state.round, vector, speedup, SIZE, source="here", network=True)
    assert back.sealed == sealed
    np.testing.assert_array_equal(back.stats, STATS)
    assert restore(0, layout(PeerState(0, STATS), speedup, network=True), speedup, SIZE, source="here",
                   network=True).sealed is None
    for bad in (256.0, -1.0, 0.5):
        vector[-1] = bad
        with pytest.raises(CRCError, match="ckpt: damaged checkpoint: the seal of the last network total"):
            restore(state.round, vector, speedup, SIZE, source="ckpt", network=True)


LINKS = ("tcp://b:1", "tcp://c:1", "tcp://d:1")


def test_the_last_heard_on_each_link_is_restored_and_only_where_heard():
    speedup = SPEEDUPS["exact diffusion"]
    state = state_for(speedup)
    state.heard = {"tcp://b:1": AGGREGATE, "tcp://d:1": PREVIOUS}
    vector = layout(state, speedup, LINKS)
    assert len(vector) == len(layout(state, speedup)) + len(LINKS) * (SIZE + 1)
    assert len(layout(PeerState(0, STATS), speedup, LINKS)) == len(vector)
    back = restore(state.round, vector, speedup, SIZE, source="here", links=LINKS)
    assert back.heard.keys() == state.heard.keys()
    for link, stats in state.heard.items():
        np.testing.assert_array_equal(back.heard[link], stats)
    np.testing.assert_array_equal(back.memory.previous, PREVIOUS)
    assert restore(state.round, layout(state, speedup), speedup, SIZE, source="here").heard == {}


def test_a_heard_flag_other_than_0_or_1_names_the_checkpoint():
    speedup = SPEEDUPS["exact diffusion"]
    vector = layout(state_for(speedup), speedup, LINKS)
    vector[2 * SIZE + 1] = 2.0
    with pytest.raises(CRCError, match=r"ckpt: damaged checkpoint: last heard flags \[0.0, 2.0, 0.0\]"):
        restore(4, vector, speedup, SIZE, source="ckpt", links=LINKS)


def test_only_a_peer_that_uses_the_last_heard_keeps_it():
    model = make_model("nb", prepared(mixed_columns())[0])
    keeping = PeerSettings(bind="tcp://a:1", peers=("tcp://c:1", "tcp://b:1"), loss=0.3,
                           acceleration=replace(PRESET, start="categorical"))
    assert kept_links(keeping, model) == ("tcp://b:1", "tcp://c:1")
    for other in (replace(keeping, loss=0.0), replace(keeping, acceleration=PRESET),
                  replace(keeping, secure_aggregation=SecureAggregationKeys("secret", {}))):
        assert kept_links(other, model) == ()
    assert identity(keeping, schema_id="s", ess=10.0, instances=3, last_heard=True)["last_heard"] is True


def test_the_identity_names_what_a_resumed_peer_must_share():
    plain = PeerSettings(bind="tcp://a:1", peers=("tcp://c:1", "tcp://b:1"))
    found = identity(plain, schema_id="s", ess=10.0, instances=3)
    assert found == {"bind": "tcp://a:1", "peers": ["tcp://b:1", "tcp://c:1"], "rounds": 64, "iters": 1, "run": "crc",
                     "schema_id": "s", "ess": 10.0, "instances": 3}
    masked = PeerSettings(bind="tcp://a:1", peers=(), acceleration=PRESET,
                          secure_aggregation=SecureAggregationKeys("secret", {}))
    assert {"secure_aggregation", "acceleration"} <= set(identity(masked, schema_id="s", ess=10.0, instances=3))


def test_checkpoints_round_trip_and_a_failing_write_is_logged_once(tmp_path, monkeypatch, caplog):
    speedup = SPEEDUPS["exact diffusion"]
    log = logging.getLogger("test.checkpoints")
    checkpoints = PeerCheckpoints(str(tmp_path), {"bind": "x"}, speedup, log)
    metrics = Metrics.for_neighbours(["tcp://b:1"])
    metrics.rounds_done = 4
    checkpoints.save(state_for(speedup), metrics)
    state, written = checkpoints.load(PeerState(0, STATS))
    assert state.round == 4 and written["rounds_done"] == 4
    np.testing.assert_array_equal(state.memory.previous, PREVIOUS)
    assert PeerCheckpoints(None, {}, speedup, log).load(PeerState(0, STATS)) is None

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    from crc.nodes import checkpoint
    monkeypatch.setattr(checkpoint, "save", full_disk)
    with caplog.at_level(logging.DEBUG, logger="test.checkpoints"):
        for _ in range(3):
            checkpoints.save(state_for(speedup), metrics)
    assert metrics.checkpoint_failures == 3
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.DEBUG, logging.DEBUG]
    monkeypatch.undo()
    with caplog.at_level(logging.WARNING, logger="test.checkpoints"):
        checkpoints.save(state_for(speedup), metrics)
    assert "checkpoint written again" in caplog.text


def test_the_noise_key_is_fresh_for_a_fresh_run_and_kept_for_a_resumed_one(tmp_path):
    """A resumed peer sends its last round again with the same noise, so it needs the run's key; a fresh run gets a new
    one (os.urandom), written owner-only."""
    checkpoints = PeerCheckpoints(str(tmp_path), {}, PAPER, logging.getLogger("test"))
    first = checkpoints.noise_key(resumed=False)
    assert len(first) == 32 and (tmp_path / "noise.key").stat().st_mode & 0o777 == 0o600
    assert checkpoints.noise_key(resumed=True) == first
    fresh = checkpoints.noise_key(resumed=False)
    assert fresh != first and checkpoints.noise_key(resumed=True) == fresh
    without = PeerCheckpoints(None, {}, PAPER, logging.getLogger("test"))
    assert without.noise_key(resumed=True) != without.noise_key(resumed=True)


def test_a_private_checkpoint_resumes_only_beside_the_noise_key_it_was_written_with(tmp_path):
    """A valid key of another run swapped in would noise the round sent again afresh, releasing it twice."""
    def checkpoints() -> PeerCheckpoints:
        return PeerCheckpoints(str(tmp_path), {"bind": "x"}, PAPER, logging.getLogger("test"), private=True)

    metrics = Metrics.for_neighbours(["tcp://b:1"])
    metrics.rounds_done = 3
    first = checkpoints()
    assert first.load(PeerState(0, STATS)) is None
    key = first.noise_key(resumed=False)
    first.save(PeerState(3, STATS), metrics)
    again = checkpoints()
    assert again.load(PeerState(0, STATS))[0].round == 3 and again.noise_key(resumed=True) == key
    other = PeerCheckpoints(str(tmp_path / "other"), {"bind": "x"}, PAPER, logging.getLogger("test"), private=True)
    (tmp_path / "noise.key").write_bytes(other.noise_key(resumed=False))
    with pytest.raises(CRCError, match=r"checkpoint of a different configuration \(noise_key differ\)"):
        checkpoints().load(PeerState(0, STATS))
    (tmp_path / "noise.key").unlink()
    with pytest.raises(CRCError, match="the run's noise key is missing"):
        checkpoints().load(PeerState(0, STATS))


@pytest.mark.parametrize("masked", [False, True])
def test_a_checkpoint_of_another_configuration_tells_a_masking_peer_to_start_under_a_new_run_id(tmp_path, masked):
    """Told to delete its checkpoint, a peer under --secure-aggregation would mask its first rounds again under the
    same run id: a recipient that kept both learns the difference of its statistics."""
    def checkpoints(rounds: int) -> PeerCheckpoints:
        return PeerCheckpoints(str(tmp_path), {"bind": "x", "rounds": rounds}, PAPER, logging.getLogger("test"),
                               masked=masked)

    metrics = Metrics.for_neighbours(["tcp://b:1"])
    metrics.rounds_done = 3
    checkpoints(16).save(PeerState(3, STATS), metrics)
    with pytest.raises(CRCError, match=r"different configuration \(rounds differ\); ") as refused:
        checkpoints(4).load(PeerState(0, STATS))
    assert ("start every peer afresh under a new --run-id" in str(refused.value)) == masked
    assert ("delete it to start afresh" in str(refused.value)) != masked


@pytest.mark.parametrize("masked", [False, True])
def test_a_damaged_checkpoint_tells_a_masking_peer_to_start_under_a_new_run_id(tmp_path, masked):
    """Deleting a damaged (torn) checkpoint resumes a peer from the round before, which it may send again with other
    statistics: under --secure-aggregation with the same masks."""
    checkpoints = PeerCheckpoints(str(tmp_path), {"bind": "x", "rounds": 16}, PAPER, logging.getLogger("test"),
                                  masked=masked)
    metrics = Metrics.for_neighbours(["tcp://b:1"])
    metrics.rounds_done = 3
    checkpoints.save(PeerState(3, STATS), metrics)
    (newest,) = tmp_path.glob("checkpoint.3.*")
    newest.write_bytes(newest.read_bytes()[:-8])
    with pytest.raises(CRCError, match=r"damaged checkpoint \(truncated or altered") as refused:
        checkpoints.load(PeerState(0, STATS))
    assert ("start every peer afresh under a new --run-id" in str(refused.value)) == masked
    assert ("delete it to start afresh" in str(refused.value)) != masked


def test_a_fifo_in_the_noise_key_s_place_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "noise.key")
    checkpoints = PeerCheckpoints(str(tmp_path), {}, PAPER, logging.getLogger("test"))
    with fails_if_blocked(), pytest.raises(CRCError, match="noise key is not a regular file"):
        checkpoints.noise_key(resumed=True)


@pytest.mark.parametrize("case, message", [
    ("missing", "the run's noise key is missing: a resumed private peer would noise the round it sends again afresh"),
    ("empty", r"damaged noise key \(0 bytes, not 32\)"), ("short", r"damaged noise key \(31 bytes, not 32\)"),
    ("long", "noise key larger than 32 bytes"), ("open", r"noise key open to other users \(mode 0644\)")])
def test_a_resumed_run_refuses_a_noise_key_it_cannot_trust(tmp_path, case, message):
    """Fresh noise on the round sent again would release it twice; a key others can read lets them remove the noise."""
    checkpoints = PeerCheckpoints(str(tmp_path), {}, PAPER, logging.getLogger("test"))
    key = tmp_path / "noise.key"
    written = checkpoints.noise_key(resumed=False)
    if case == "missing":
        key.unlink()
    elif case == "open":
        key.chmod(0o644)
    else:
        key.write_bytes({"empty": b"", "short": written[:31], "long": written + b"x"}[case])
    with pytest.raises(CRCError, match=f"{key}: {message}"):
        checkpoints.noise_key(resumed=True)


def test_a_noise_key_that_cannot_be_written_is_one_line(tmp_path):
    """A directory in its place: the peer stopped on '[Errno 21] Is a directory: .../.noise.key.x.tmp -> noise.key'."""
    (tmp_path / "noise.key").mkdir()
    checkpoints = PeerCheckpoints(str(tmp_path), {}, PAPER, logging.getLogger("test"))
    with pytest.raises(CRCError, match=r"noise.key: cannot write the noise key \(Is a directory\)$"):
        checkpoints.noise_key(resumed=False)
    assert [path.name for path in tmp_path.iterdir()] == ["noise.key"]
