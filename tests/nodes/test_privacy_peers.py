"""Differential privacy on a peer: its releases carry noise of the planned scale, and real peers spend the simulator's ε."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import chi2

from crc.cli.main import main
from crc.core.distributed_noise import FIXED_POINT_BITS, share_variance
from crc.core.errors import CRCError
from crc.core.model_file import load_model
from crc.core.models import make_model
from crc.core.privacy import clip_standardized
from crc.nodes.peer import Peer
from crc.nodes.settings import PeerSettings
from crc.protocol.accountant import plan_exact
from support.liveness import kill_runs_together
from support.tables import mixed_columns, prepared

SCHEMA, X, Y = prepared(mixed_columns(60, seed=4))


class Silent:
    """A PeerTransport of a peer without neighbours: sends go nowhere, nothing arrives."""

    def send(self, frame: bytes) -> list[str]:
        return []

    def receive(self, deadline: float) -> list:
        return []

    def refused(self) -> dict:
        return {}

    def close(self, linger_ms: int) -> None:
        pass


def _peer(privacy=None, **settings) -> Peer:
    model = make_model("nb", SCHEMA)
    phi = model.features(clip_standardized(SCHEMA, X, 1.0))
    settings = PeerSettings(bind="tcp://127.0.0.1:7100", peers=(), **{"rounds": 1, **settings}, privacy=privacy)
    return Peer(model, phi, Y, ess=1200.0, settings=settings)


def test_a_private_peer_releases_its_step_plus_exact_noise_of_the_planned_scale():
    """The noise on the coordinates that are not counts is on the fixed-point grid (the discrete Gaussian, exact)
    and of the plan's scale; each run's noise key is fresh, so two runs release different noise."""
    model = make_model("nb", SCHEMA)
    privacy = plan_exact(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=1)
    plain, noisy, other = _peer(), _peer(privacy), _peer(privacy)
    for peer in (plain, noisy, other):
        assert peer.run(Silent())
    np.testing.assert_allclose(model.ess(noisy.stats), 1200.0, rtol=1e-12)
    released = np.delete(model.table(noisy.stats), model.layout.columns("count"), axis=-1).reshape(-1) * 2.0**FIXED_POINT_BITS
    np.testing.assert_array_equal(released, np.rint(released))
    noise = np.delete(model.table(noisy.stats - plain.stats), model.layout.columns("count"), axis=-1).reshape(-1)
    # sum of squares / sigma^2 is chi-square with noise.size degrees of freedom: within 6 standard deviations
    ratio = np.sum(noise**2) / privacy.sigma**2
    assert abs(ratio - noise.size) < 6 * math.sqrt(2 * noise.size)
    assert not np.array_equal(other.stats, noisy.stats)


def test_a_private_peer_resumes_beside_its_own_noise_key_only(tmp_path):
    """Another run's valid key swapped in beside the checkpoint would noise the round sent again afresh (released
    twice): the checkpoint names its key, and the peer refuses to resume."""
    privacy = plan_exact(make_model("nb", SCHEMA), epsilon=4.0, delta=1e-5, clip=1.0, rounds=3)
    first = _peer(privacy, rounds=3, checkpoint_dir=str(tmp_path))
    assert first.run(Silent())
    resumed = _peer(privacy, rounds=3, checkpoint_dir=str(tmp_path))
    assert resumed.round == 3
    np.testing.assert_array_equal(resumed.stats, first.stats)
    _peer(privacy, rounds=3, checkpoint_dir=str(tmp_path / "other"))
    (tmp_path / "noise.key").write_bytes((tmp_path / "other" / "noise.key").read_bytes())
    with pytest.raises(CRCError, match=r"different configuration \(noise_key differ\)"):
        _peer(privacy, rounds=3, checkpoint_dir=str(tmp_path))


def test_a_release_the_neighbours_would_reject_is_not_followed_by_a_second_release_of_the_round(monkeypatch):
    """A neighbour can walk a peer's statistics to where its noisy release crosses a bound the wire checks. The
    peer then used to take a second local step, from its own statistics, under fresh noise (the keystream is keyed
    by the statistics): two releases of the round, of which the accountant counts one, the first one's rejection
    public (``aggregate_fallbacks``, the log). Under local noise it keeps its last statistics instead (released)."""
    model = make_model("nb", SCHEMA)
    privacy = plan_exact(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=3)
    peer = _peer(privacy, rounds=3)
    start = peer.stats.copy()
    released = []
    private = peer.release.private
    monkeypatch.setattr(peer.release, "private", lambda stats, round_: released.append(round_) or private(stats, round_))
    monkeypatch.setattr(peer, "_own_problem", lambda stats, detail=True: None if np.array_equal(stats, start) else "magnitude: edge")
    assert peer.run(Silent())
    assert released == [0, 1, 2]  # one release a round
    assert np.array_equal(peer.stats, start) and peer.metrics.rounds_kept == peer.metrics.aggregate_fallbacks == 3


def test_a_private_peer_neither_records_nor_logs_its_loss_on_the_raw_data(caplog):
    """The local soft 0-1 loss is computed on the raw private data without noise: under --dp-epsilon it is left out
    of the metrics (so of the model file, the checkpoint and the metrics endpoint) and of the log."""
    model = make_model("nb", SCHEMA)
    privacy = plan_exact(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=1)
    with caplog.at_level(logging.INFO, logger="crc.node"):
        plain, private = _peer(), _peer(privacy)
        caplog.clear()
        assert plain.run(Silent())
        plain_log = caplog.text
        caplog.clear()
        assert private.run(Silent())
        private_log = caplog.text
    assert len(plain.metrics.soft_loss) == 1 and "soft 0-1 loss" in plain_log
    assert private.metrics.soft_loss == [] and "loss" not in private_log and "round 1: 0/0 neighbours" in private_log


@pytest.mark.parametrize("every", [1, 2])
def test_real_peers_spend_the_simulators_epsilon_with_exact_noise(tmp_path, every):
    """Both spend at most the target over the same releases (with ``--release-every 2``, 2 in 3 rounds); real
    peers' discrete Gaussian is accounted by zCDP on the integer sensitivity (``plan_exact``), a little more noise
    than the simulator's floating-point Gaussian accounted by the PLD."""
    common = ["--data", "twonorm", "--nodes", "3", "--local-size", "20", "--rounds", "3", "--test-size", "300",
              "--dp-epsilon", "8", "--clip", "1.5", "--release-every", str(every), "--no-rc-converged", "--json"]
    simulated = CliRunner().invoke(main, ["simulate", *common])
    assert simulated.exit_code == 0, simulated.output
    launched = CliRunner().invoke(main, ["launch", *common, "--insecure", "--workdir", str(tmp_path)])
    assert launched.exit_code == 0, launched.output
    floating = json.loads(simulated.stdout)["privacy"]
    expected = json.loads(launched.stdout)["privacy"]
    model = load_model(tmp_path / "model-0.json").model
    assert expected == plan_exact(model, epsilon=8.0, delta=floating["delta"], clip=1.5, rounds=3,
                                 release_every=every).to_json()
    assert floating["accountant"] == "pld" and expected["accountant"] == "zcdp"
    assert 1.0 < expected["sigma"] / floating["sigma"] < 1.15
    assert expected["epsilon_spent"] <= 8.0 and expected["rounds"] == floating["rounds"] == -(-3 // every) and expected["clip"] == 1.5
    for index in range(3):
        model_file = json.loads((tmp_path / f"model-{index}.json").read_text())
        assert model_file["metrics"]["privacy"] == expected
        assert model_file["metrics"]["soft_loss"] == []  # computed on the raw data: not released under DP


def test_real_peers_release_sums_carrying_the_distributed_noise_of_the_plan(tmp_path):
    """``crc launch --dp-noise distributed`` on a tree (masked sums and a leaf's plain frame): after one round every
    peer's classifier is its closed neighbourhood's sum of the uniform start, the same public statistics for all,
    plus the members' shares, so the noise is known to be the classifier minus the uniform start; its scale must be
    the plan's (each of |N| shares of variance ``share_variance``, divided by |N|), and the plan the simulator's."""
    common = ["--data", "twonorm", "--nodes", "5", "--local-size", "20", "--rounds", "1", "--test-size", "300",
              "--dp-epsilon", "4", "--dp-noise", "distributed", "--classifier", "aggregate", "--secure-aggregation",
              "--no-rc-converged", "--json"]
    simulated = CliRunner().invoke(main, ["simulate", *common])
    assert simulated.exit_code == 0, simulated.output
    launched = CliRunner().invoke(main, ["launch", *common, "--workdir", str(tmp_path)])
    assert launched.exit_code == 0, launched.output
    expected = json.loads(simulated.stdout)["privacy"]
    assert json.loads(launched.stdout)["privacy"] == expected
    assert expected["noise"] == "distributed" and expected["epsilon_spent"] <= 4.0 and expected["sums_per_round"] >= 2
    statistic, degrees = 0.0, 0
    for index in range(5):
        trained = load_model(tmp_path / f"model-{index}.json")
        assert trained.metrics["privacy"] == expected and trained.metrics["unmask_fallbacks"] == 0
        model, members = trained.model, len(trained.metrics["peers"]) + 1
        noise = trained.stats - model.uniform(trained.metrics["ess"])
        np.testing.assert_allclose(model.ess(trained.stats), trained.metrics["ess"], rtol=1e-12)
        noise = np.delete(model.table(noise), model.layout.columns("count"), axis=-1).reshape(-1)
        variance = share_variance(expected["sigma"] * 2.0**FIXED_POINT_BITS, members, 0) / members / 4.0**FIXED_POINT_BITS
        statistic, degrees = statistic + np.sum(noise**2) / variance, degrees + noise.size
    assert chi2.ppf(1e-9, degrees) < statistic < chi2.ppf(1 - 1e-9, degrees)


def test_with_one_dropout_allowed_for_a_dead_member_no_longer_stops_its_neighbourhoods_sums(tmp_path):
    """kill -9 of one of 4 real peers on a complete graph under distributed noise: with ``--dp-dropouts 0`` every
    later round of every survivor falls back to its last aggregate (a sum needs every member's share); with
    ``--dp-dropouts 1`` the sums of the three left are unmasked (bar, at most, the round it died in after sending).
    Both networks run at once: most of either run is its survivors waiting out timeouts for the dead member."""
    rounds, kill_at = 10, 3
    private = {"dp_epsilon": 8.0, "dp_noise": "distributed", "classifier": "aggregate", "secure_aggregation": True,
               "iters": 1}
    runs = kill_runs_together([tmp_path / f"dropouts-{dropouts}" for dropouts in (0, 1)], topology="complete", nodes=4,
                              rounds=rounds, kill_at=kill_at, timeout=1.0,
                              settings=[{**private, "dp_dropouts": dropouts} for dropouts in (0, 1)])
    fallbacks = {}
    for dropouts, run in zip((0, 1), runs):
        assert set(run["codes"].values()) == {0}, run["codes"]
        after = rounds - run["killed_at"]
        for metrics in run["metrics"].values():
            assert metrics["rounds_done"] == rounds and metrics["privacy"]["dropouts"] == dropouts
        fallbacks[dropouts] = [(m["unmask_fallbacks"], after) for m in run["metrics"].values()]
    assert all(fell >= after - 2 for fell, after in fallbacks[0]), fallbacks
    assert all(fell <= 1 for fell, _ in fallbacks[1]), fallbacks  # the kill's round: words sent, no agreement


def test_a_launch_whose_distributed_noise_cannot_be_planned_stops_before_any_peer_starts(tmp_path):
    """A tree has leaves, whose closed neighbourhoods of 2 cannot hide a share from the recipient and 1 colluder."""
    launched = CliRunner().invoke(main, ["launch", "--data", "twonorm", "--nodes", "5", "--local-size", "20", "--rounds",
                                         "2", "--dp-epsilon", "4", "--dp-noise", "distributed", "--dp-colluders", "1",
                                         "--classifier", "aggregate", "--secure-aggregation", "--workdir", str(tmp_path)])
    assert launched.exit_code != 0
    assert "at least 3 peers (the recipient, 1 colluder(s), 0 dropout(s) and one honest member)" in launched.output
    assert not list(tmp_path.glob("node-*.log"))


def test_a_real_peer_tolerating_dropouts_plans_for_every_recipients_sum_of_its_statistics():
    """A peer of a complete graph of four is in one distinct closed neighbourhood; with ``--dp-dropouts 1`` each of
    the four recipients' sums has its own shares (``crc.nodes.release``) and is a release: k = 4, and a smaller
    ``--dp-sums-per-round`` is refused."""
    from crc.core.acceleration import acceleration_of, resolve
    from crc.nodes.node import NodeOptions, _privacy
    from crc.nodes.settings import SecureAggregationKeys

    peers = [f"tcp://127.0.0.1:{7000 + i}" for i in range(4)]
    model = make_model("nb", SCHEMA)
    chosen = resolve({"algorithm": "paper", "classifier": "aggregate", "dp_epsilon": 4.0})
    masking = SecureAggregationKeys("", {u: {w: "" for w in peers if w != u} for u in peers[1:]})

    def plan(**options):
        node = NodeOptions(bind=peers[0], data="", schema="", out="", peers=tuple(peers[1:]), rounds=8, dp_epsilon=4.0,
                           dp_noise="distributed", **options)
        return _privacy(model, node, chosen["iters"], acceleration_of(chosen), masking, None)

    assert plan().sums_per_round == 1
    assert plan(dp_dropouts=1).sums_per_round == 4
    with pytest.raises(CRCError, match="is in 4 neighbourhood sums"):
        plan(dp_dropouts=1, dp_sums_per_round=3)
