"""Fixtures shared by the tests, and the property tests' profile."""

import os

import numpy as np
import pytest
from hypothesis import settings

from support.tables import mixed_columns, prepared

settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("CRC_HYPOTHESIS_PROFILE", "deterministic"))
"""The property tests draw the same examples on every run and machine, so a test suite that passed passes again
(CI does not land on luck); ``CRC_HYPOTHESIS_PROFILE=explore pytest`` searches afresh on each run."""


@pytest.fixture(scope="session", autouse=True)
def peer_spawner():
    """The real peers' shared spawner (support.network.shared_spawner), if a test started it, ends with the session."""
    yield
    from support.network import close_shared_spawner

    close_shared_spawner()


@pytest.fixture
def recorded_peers(monkeypatch):
    """The peers ``crc.nodes.node.prepare`` builds in the test, recorded instead of built (each keeps its ``model``
    and ``settings``), and a ``Node.run`` that runs nothing and reports every round done: what a peer is given, from
    the library or the ``crc node`` command, where the peer could not run it (a network sum's, until its driver
    lands)."""
    from crc.nodes.node import Node, NodeOutcome

    built = []

    class Recorded:
        session = None

        def __init__(self, model, phi, y, *, ess, settings, log):
            self.model, self.settings = model, settings
            built.append(self)

    def run(node):
        settings = node.peer.settings
        return NodeOutcome(finished=True, alone=False, rounds_done=settings.rounds, neighbours=len(settings.peers),
                           rejected=0)

    monkeypatch.setattr("crc.nodes.node.Peer", Recorded)
    monkeypatch.setattr(Node, "run", run)
    return built


@pytest.fixture
def mixed():
    return prepared(mixed_columns())


@pytest.fixture
def continuous():
    """4 continuous features, 3 well-separated Gaussian classes with distinct covariances."""
    rng = np.random.default_rng(1)
    m = 600
    y = rng.integers(3, size=m)
    scales = np.array([[1.0, 0.5, 2.0, 1.0], [0.7, 1.5, 1.0, 0.4], [1.2, 1.0, 0.6, 1.8]])
    mix = rng.normal(size=(3, 4, 4)) * 0.3 + np.eye(4)
    z = rng.normal(size=(m, 4)) * scales[y]
    x = np.einsum("mij,mj->mi", mix[y], z) + y[:, None] * np.array([1.0, 0.0, -1.0, 0.5])
    columns = {f"x{j}": [repr(float(v)) for v in x[:, j]] for j in range(4)}
    columns["label"] = [str(v) for v in y]
    return prepared(columns)
