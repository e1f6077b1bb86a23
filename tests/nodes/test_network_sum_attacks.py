"""The network sum (``--sum-over network``) against peers that deviate: each attack run in-process, each test asserting
that it fails (nothing learnt beyond the total of all peers, nothing crashed, every wait bounded)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from crc.nodes.peer import Peer
from crc.nodes.secure_aggregation import from_fixed, to_fixed
from support.network_sum import ADDRESS, STAR, network_data, run_peers


@pytest.fixture(scope="module")
def data():
    return network_data()


class Recording(Peer):
    """A peer that keeps its statistics of each round (those its words of the round carry)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history: dict[int, np.ndarray] = {}

    def step(self, transport):
        self.history[self.round] = self.stats.copy()
        return super().step(transport)


class InconsistentRoot(Recording):
    """A root that sends its first child (``ADDRESS[1]``) the total of round 1 again in round 2, the others the real
    one, then everyone round 2's total again in round 3: the sums of rounds 3 and 4 then differ by that child's
    response to two aggregates, a function of its data alone (a model-inconsistency attack, Pasquini et al. 2022)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.totals: dict[int, bytes] = {}

    def _send_to(self, transport, address, frame):
        body = msgpack.unpackb(frame)
        if body["type"] == "total" and body["data"]:
            round_ = body["round"]
            self.totals.setdefault(round_, body["data"])
            forged = self.totals[1] if (round_, address) == (2, ADDRESS[1]) else self.totals[2] if round_ == 3 else None
            if forged is not None:
                frame = self._sum_frame("total", round_, np.frombuffer(forged, dtype="<u8"), body["contributors"])
        return super()._send_to(transport, address, frame)


def test_a_root_that_sends_one_child_another_total_learns_nothing_of_that_child(data):
    peers = run_peers(data, STAR, kinds={0: InconsistentRoot, 1: Recording})
    root, target = peers[0], peers[1]
    sums = {r: np.frombuffer(root.totals[r], dtype="<u8") - to_fixed(root.history[r]) for r in (3, 4)}
    estimate = from_fixed(sums[3] - sums[4])  # what the root takes for the target's statistics of round 3 less 4
    truth = target.history[3] - target.history[4]
    assert np.abs(truth).max() > 1e-3  # there is something to learn
    assert not np.allclose(estimate, truth, atol=1e-3), "the root isolated one peer's response"
    for v in (1, 2, 3, 4):  # the sum of round 3 did not unmask: every honest peer rejected it and kept its own
        assert peers[v].metrics.rejected["stats-ess"] >= 1 and peers[v].metrics.unmask_fallbacks >= 1, v
