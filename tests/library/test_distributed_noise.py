"""Distributed noise: the exact discrete Gaussian sampler, the neighbourhood sums' shares and their accounting."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from crc.core.discrete_gaussian import KeyedRandom, bernoulli_exp, discrete_gaussian, discrete_gaussian_array
from crc.core.distributed_noise import FIXED_POINT_BITS, DistributedNoise, Neighbourhoods, exact_release, share_variance
from crc.core.errors import CRCError
from crc.core.models import make_model
from crc.protocol import SimulationConfig, simulate
from crc.protocol.accountant import epsilon_spent, plan_distributed
from crc.protocol.neighbourhoods import check_graph_protectable, fewest_survivors
from crc.topologies import averaging_matrix, chain_graph, complete_graph, network_factory
from support.tables import mixed_columns, prepared

SCHEMA = prepared(mixed_columns(50, seed=1))[0]


def test_the_keystream_is_reproducible_and_uniform_below_its_bound():
    a, b, c = KeyedRandom.from_seed(1, 2), KeyedRandom.from_seed(1, 2), KeyedRandom.from_seed(1, 3)
    draws = [a.randbelow(7) for _ in range(7000)]
    assert draws[:50] == [b.randbelow(7) for _ in range(50)]
    assert draws[:50] != [c.randbelow(7) for _ in range(50)]
    counts = np.bincount(draws, minlength=7)
    assert len(counts) == 7 and np.all(np.abs(counts - 1000) < 5 * math.sqrt(1000))
    with pytest.raises(ValueError):
        KeyedRandom(bytes(16))


@pytest.mark.parametrize("numerator, denominator", [(1, 3), (3, 2), (7, 2)])
def test_bernoulli_exp_is_true_with_probability_exp_minus_gamma(numerator, denominator):
    rng = KeyedRandom.from_seed("bernoulli", numerator)
    p = math.exp(-numerator / denominator)
    hits = sum(bernoulli_exp(rng, numerator, denominator) for _ in range(20000))
    assert abs(hits / 20000 - p) < 5 * math.sqrt(p * (1 - p) / 20000)


def test_randbelow_rejects_getrandbits_of_the_bit_length_until_below_n():
    """The keystream's uniform integers are a fixed function of its bits (the draws of a key must not change with the
    code or the Python release), here across the end of a keystream block too."""
    fast, spec = KeyedRandom.from_seed("randbelow"), KeyedRandom.from_seed("randbelow")
    for n in (1, 2, 3, 7, 8, 255, 256, 257, 10**20 + 3, 2**800 - 5):
        for _ in range(700 if n > 2**700 else 50):
            expected = spec.getrandbits(n.bit_length())
            while expected >= n:
                expected = spec.getrandbits(n.bit_length())
            assert fast.randbelow(n) == expected
    assert fast._counter > 1
    with pytest.raises(ValueError):
        fast.randbelow(0)


def test_the_sampler_follows_the_discrete_gaussian_mass_function():
    variance, count = 2, 20000
    draws = discrete_gaussian_array(KeyedRandom.from_seed("pmf"), variance, (count,))
    support = np.arange(-12, 13)
    mass = np.exp(-support**2 / (2 * variance))
    mass /= mass.sum()
    for value, p in zip(support, mass):
        observed = np.mean(draws == value)
        assert abs(observed - p) < 5 * math.sqrt(p * (1 - p) / count) + 1e-4, value


def test_a_large_variance_is_sampled_with_its_scale():
    draws = discrete_gaussian_array(KeyedRandom.from_seed("large"), 10**12, (4000,))
    assert draws.dtype == np.int64
    assert abs(draws.mean()) < 5e6 * 5 / math.sqrt(4000) * 2
    assert 0.9 < draws.var() / 1e12 < 1.1
    with pytest.raises(ValueError):
        discrete_gaussian(KeyedRandom.from_seed(0), 0)


def test_a_complete_graph_has_one_sum_and_a_chain_one_per_peer():
    complete = Neighbourhoods.of(averaging_matrix(complete_graph(6)))
    assert len(complete.members) == 1 and np.array_equal(complete.sums_per_peer(6), np.ones(6))
    chain = Neighbourhoods.of(averaging_matrix(chain_graph(4)))
    assert [m.tolist() for m in chain.members] == [[0, 1], [0, 1, 2], [1, 2, 3], [2, 3]]
    assert chain.sums_per_peer(4).tolist() == [2, 3, 3, 2]
    assert chain.recipient_set.tolist() == [0, 1, 2, 3]


def test_with_dropouts_tolerated_every_recipient_has_a_sum_of_its_own():
    """Two recipients of one closed neighbourhood may unmask different members once dropouts are tolerated: their sums
    cannot share shares, and each is a release of every member."""
    complete = Neighbourhoods.of(averaging_matrix(complete_graph(6)), 1)
    assert len(complete.members) == 6 and complete.recipient_set.tolist() == list(range(6))
    assert np.array_equal(complete.sums_per_peer(6), np.full(6, 6))
    chain = Neighbourhoods.of(averaging_matrix(chain_graph(4)), 2)
    assert chain.sums_per_peer(4).tolist() == [2, 3, 3, 2]  # distinct neighbourhoods already had their own


def test_shares_leave_the_full_noise_beyond_the_recipient_the_colluders_and_the_dropouts():
    v = share_variance(1000.0, members=5, colluders=1)
    assert (5 - 1 - 1) * v >= 1000.0**2 > (5 - 1 - 1) * (v - 1)
    v = share_variance(1000.0, members=5, colluders=1, dropouts=2)
    assert (5 - 1 - 1 - 2) * v >= 1000.0**2 > (5 - 1 - 1 - 2) * (v - 1)
    with pytest.raises(CRCError, match="at least 3 peers"):
        share_variance(1000.0, members=2, colluders=1)
    with pytest.raises(CRCError, match="at least 5 peers .*got one of 4: use a denser --topology, or fewer --colluders "
                                       "or --dp-dropouts$"):
        share_variance(1000.0, members=4, colluders=1, dropouts=2)


def test_every_recipient_gets_its_neighbourhood_sum_over_its_size_with_the_counts_centred():
    model = make_model("nb", SCHEMA)
    mixing = sp.csr_array(averaging_matrix(chain_graph(4)))
    neighbourhoods = Neighbourhoods.of(mixing)
    noise = DistributedNoise(model, neighbourhoods, sigma=3.0, colluders=0, rng=np.random.default_rng(7))
    rounds = np.stack([noise() for _ in range(300)])  # (300, 4, size)
    counts = model.table(rounds)[..., :, model.layout.columns("count")]
    assert np.allclose(counts.sum(axis=(-1, -2)), 0.0, atol=1e-9)
    # recipient 1 averages 3 members whose shares leave sigma^2 beyond its own: 3 shares of sigma^2 / 2 in all
    expected = 3 * share_variance(3.0 * 2**FIXED_POINT_BITS, 3, 0) / 2.0 ** (2 * FIXED_POINT_BITS) / 9
    free = np.setdiff1d(np.arange(model.size), np.ravel(model.table(np.arange(model.size))[:, model.layout.columns("count")]))
    assert 0.8 < rounds[:, 1, free].var() / expected < 1.2


def test_the_plan_composes_every_sum_that_holds_a_peer():
    model = make_model("nb", SCHEMA)
    chain = Neighbourhoods.of(averaging_matrix(chain_graph(4)))
    privacy = plan_distributed(model, epsilon=2.0, delta=1e-5, clip=1.0, rounds=8, neighbourhoods=chain, colluders=0)
    assert privacy.releases == 8 * 3 and privacy.sums_per_round == 3 and privacy.accountant == "zcdp"
    assert privacy.epsilon_spent <= 2.0
    assert epsilon_spent(privacy.noise_multiplier * 0.98, privacy.releases, 1e-5, "zcdp") > 2.0
    assert privacy.to_json()["noise"] == "distributed"


def _run(**settings) -> dict:
    config = SimulationConfig.from_settings(data="twonorm", nodes=6, local_size=20, rounds=4, topology="complete",
                                            algorithm="paper", classifier="aggregate", rc_iterations=2,
                                            rc_converged=False, test_size=200, **settings)
    return simulate(config, network_factory(config.topology))


def test_the_simulator_adds_the_distributed_noise_and_refuses_it_where_it_does_not_hold():
    plain = _run()
    noisy = _run(dp_epsilon=0.5, dp_noise="distributed", secure_aggregation=True)
    again = _run(dp_epsilon=0.5, dp_noise="distributed", secure_aggregation=True)
    assert noisy["privacy"]["noise"] == "distributed" and noisy["privacy"]["sums_per_round"] == 1
    assert noisy["crc"]["test_loglik"] != plain["crc"]["test_loglik"]
    assert noisy["crc"]["test_loglik"] == again["crc"]["test_loglik"]
    with pytest.raises(CRCError, match="--secure-aggregation"):
        _run(dp_epsilon=0.5, dp_noise="distributed")
    with pytest.raises(CRCError, match="--loss"):
        _run(dp_epsilon=0.5, dp_noise="distributed", secure_aggregation=True, loss=0.1)


def test_exact_release_of_a_batch_is_each_row_released_in_turn_with_its_own_ess():
    """A batch (the audit's trials) draws from the keystream row after row, as releases one at a time would, and
    centres each row's counts on that row's ESS."""
    model = make_model("nb", SCHEMA)
    stats = np.stack([model.uniform(50.0), model.uniform(80.0)])
    batch = exact_release(model, stats, 0.5, KeyedRandom.from_seed("batch"))
    rng = KeyedRandom.from_seed("batch")
    rows = np.stack([exact_release(model, row, 0.5, rng) for row in stats])
    np.testing.assert_array_equal(batch, rows)
    np.testing.assert_allclose(model.ess(batch), [50.0, 80.0], rtol=1e-12)
    assert not np.allclose(batch, stats)


def test_every_request_set_a_member_answers_carries_the_full_noise_beyond_the_colluders_and_the_claimed_dropouts():
    """The request rule (``fewest_survivors``) and the shares' size (``share_variance``) must agree: a deviating
    recipient that claims d honest members dropped every round, its t colluders kept in the set, still unmasks
    at least σ² of honest noise; one member fewer would be under σ², and that set is refused."""
    sigma = 1000.0
    for contributors in range(2, 13):
        for colluders in range(contributors):
            for dropouts in range(contributors):
                members = contributors + 1  # the closed neighbourhood: the recipient and its contributors
                if members - 1 - colluders - dropouts < 1:
                    with pytest.raises(CRCError, match=f"at least {colluders + dropouts + 2} peers"):
                        share_variance(sigma, members, colluders, dropouts)
                    continue
                v = share_variance(sigma, members, colluders, dropouts)
                fewest = fewest_survivors(contributors, dropouts)
                honest = fewest - colluders  # the smallest set answered, every colluder in it
                assert honest * v >= sigma**2, (contributors, colluders, dropouts)
                if fewest == contributors - dropouts:  # the rule, not the majority, binds: one fewer is short of σ²
                    assert (honest - 1) * v < sigma**2 or honest - 1 < 1



@pytest.mark.parametrize("graph, dropouts, colluders, usable", [(nx.cycle_graph(6), 1, 0, 0),
                                                                (nx.random_regular_graph(3, 6, seed=1), 2, 0, 1),
                                                                (nx.random_regular_graph(4, 6, seed=1), 2, 1, 1)],
                         ids=["ring", "regular:3", "regular:4 with a colluder"])
def test_dropouts_that_no_sum_of_the_graph_may_go_without_are_one_line(graph, dropouts, colluders, usable):
    """A request names a majority of a recipient's neighbours and at least two, so on a ring (two neighbours) a sum
    can never go without one: --dp-dropouts 1 there sized every share for one honest member instead of two (twice
    the noise) and bought no dropout tolerance. As many as some sum may go without are accepted."""
    with pytest.raises(CRCError, match=rf"^--dp-dropouts {dropouts}: no sum on this graph may go without more than "
                                       rf"{usable} member\(s\)"):
        check_graph_protectable(averaging_matrix(graph), colluders, dropouts)
    check_graph_protectable(averaging_matrix(graph), colluders, usable)


def test_the_simulator_refuses_dropouts_no_sum_may_go_without():
    config = SimulationConfig.from_settings(data="wdbc", nodes=6, rounds=1, topology="ring", classifier="aggregate",
                                            secure_aggregation=True, dp_epsilon=4.0, dp_noise="distributed",
                                            dp_dropouts=1)
    with pytest.raises(CRCError, match="^--dp-dropouts 1: no sum on this graph"):
        simulate(config, network_factory("ring", math.inf))
