"""Accelerated CRC (crc.core.acceleration): Theorem 1 with memory, the paper bit for bit at β = 0, the safeguard,
what exact diffusion keeps and where it restarts."""

import networkx as nx
import numpy as np
import pytest

from crc.core import acceleration as accel
from crc.core.calibration import lrc, rc
from crc.core.engine import CRCEngine, LocalData, changed_neighbourhoods, default_ess
from crc.core.errors import CRCError
from crc.core.models import MODELS, make_model
from crc.core.models.base import labelled_weights
from crc.topologies import averaging_matrix, complete_graph, random_tree_graph

KINDS = sorted(MODELS)


def _label_sorted(y, n):
    return np.array_split(np.argsort(y, kind="stable"), n)


def _equal_parts(y, n):
    """n non-i.i.d. parts of equal size (instances sorted by class), dropping the remainder."""
    order = np.argsort(y, kind="stable")[: len(y) // n * n]
    return np.split(order, n)


@pytest.mark.parametrize("kind, start", [(kind, "uniform") for kind in KINDS]
                         # A circuit's ML statistics contain an E-step at the peer's own start, so they do not add up
                         # over peers to the pooled ML statistics: the identity from the ML start needs additive ones.
                         + [(kind, "local") for kind in KINDS if kind != "pc"])
def test_theorem_1_with_memory_complete_graph_equals_rc_with_momentum(kind, start, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema)
    n, lr, rounds, beta = 6, 0.05, 30, 0.6
    parts = _equal_parts(y, n)
    used = np.concatenate(parts)
    phi, y = model.features(x)[used], y[used]
    parts = np.split(np.arange(len(y)), n)
    local = LocalData.from_parts(phi, y, parts)
    engine = CRCEngine(model, local, averaging_matrix(complete_graph(n)), ess=default_ess(len(y), n, lr),
                       acceleration=accel.Acceleration(momentum=beta, start=start))
    init = model.uniform(len(y)) if start == "uniform" else None  # None: RC's own start, the pooled ML statistics
    rc_stats = []
    rc(model, phi, y, lr=lr, iterations=rounds, init=init, select_best=False, momentum=beta,
       callback=lambda i, s: rc_stats.append(s))
    for t in range(1, rounds + 1):
        aggregated = engine.step()
        expected = model.posteriors(model.theta(rc_stats[t - 1]), phi)
        got = model.posteriors(model.theta(aggregated), phi[None])
        assert np.max(np.abs(got - expected[None])) < 1e-9, f"round {t}"
    plain = []
    rc(model, phi, y, lr=lr, iterations=rounds, init=init, select_best=False, callback=lambda i, s: plain.append(s))
    moved = model.posteriors(model.theta(plain[-1]), phi) - expected
    assert np.max(np.abs(moved)) > 1e-3  # the memory changed the trajectory


@pytest.mark.parametrize("kind", KINDS)
def test_aggregate_classifier_on_a_complete_graph_is_rcs_previous_iterate(kind, mixed, monkeypatch):
    """With ``classifier="aggregate"`` the engine reports every round's aggregate (RC's iterate t - 1 on a complete
    graph), whether its rounds run as one block or several, and its statistics are those of the paper's run."""
    schema, x, y = mixed
    model = make_model(kind, schema)
    n, lr, rounds = 6, 0.05, 12
    parts = _equal_parts(y, n)
    used = np.concatenate(parts)
    phi, y = model.features(x)[used], y[used]
    local = LocalData.from_parts(phi, y, np.split(np.arange(len(y)), n))
    mixing, ess = averaging_matrix(complete_graph(n)), default_ess(len(y), n, lr)
    rc_stats = []
    rc(model, phi, y, lr=lr, iterations=rounds, init=model.uniform(len(y)), select_best=False,
       callback=lambda i, s: rc_stats.append(s))
    paper = CRCEngine(model, local, mixing, ess=ess)
    paper_stats = []
    paper.run(rounds, lambda t, stats: paper_stats.append(stats))
    reported = {}
    for block_bytes in (None, 1):  # one block, then a block per node
        if block_bytes is not None:
            monkeypatch.setattr("crc.core.engine.BLOCK_BYTES", block_bytes)
        engine = CRCEngine(model, local, mixing, ess=ess, acceleration=accel.Acceleration(classifier="aggregate"))
        np.testing.assert_array_equal(engine.classifiers, engine.stats)  # before any round: the start
        classifiers = reported[block_bytes] = []
        final = engine.run(rounds, lambda t, stats, kept=classifiers: kept.append(stats))
        assert final is engine.classifiers and final is engine.aggregated
        np.testing.assert_array_equal(engine.stats, paper.stats)
        for t in range(1, rounds + 1):
            expected = model.posteriors(model.theta(rc_stats[t - 1]), phi)
            got = model.posteriors(model.theta(classifiers[t - 1]), phi[None])
            assert np.max(np.abs(got - expected[None])) < 1e-9, f"round {t}"
            assert np.max(np.abs(classifiers[t - 1] - paper_stats[t - 1])) > 1e-6  # not the local statistics
    for a, b in zip(reported[None], reported[1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_zero_momentum_is_the_papers_algorithm_bit_for_bit(kind, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema)
    phi = model.features(x)
    parts = np.split(np.random.default_rng(0).permutation(len(y)), [30, 100, 130, 200, 260])
    mixing = averaging_matrix(random_tree_graph(len(parts), seed=1))
    local = LocalData.from_parts(phi, y, parts)
    engine = CRCEngine(model, local, mixing, ess=800.0, iterations=2,
                       acceleration=accel.Acceleration(momentum=0.0, safeguard=True))
    stats = np.tile(model.uniform(800.0), (len(parts), 1))
    weights = labelled_weights(local.y, model.n_classes, local.mask)
    for _ in range(8):
        stats = lrc(model, np.asarray(mixing @ stats), local.phi, weights, local.mask, iterations=2)
        engine.step()
        assert np.array_equal(engine.stats, stats)
    assert engine.memory is None


def test_local_start_is_each_peers_ml_statistics_at_ess_m0(mixed):
    schema, x, y = mixed
    model = make_model("nb", schema)
    phi = model.features(x)
    parts = np.split(np.arange(len(y)), [40, 200])
    local = LocalData.from_parts(phi, y, parts)
    engine = CRCEngine(model, local, averaging_matrix(complete_graph(3)), ess=500.0,
                       acceleration=accel.Acceleration(start="local"))
    np.testing.assert_allclose(model.ess(engine.stats), 500.0, rtol=1e-12)
    for v, part in enumerate(parts):
        ml = model.fit_ml(phi[part], y[part])
        np.testing.assert_allclose(engine.stats[v], ml * 500.0 / len(part), rtol=1e-12)


def test_categorical_start_takes_each_peers_category_counts_and_the_rest_uniform(mixed):
    """The ``categorical`` start: the ``cat`` block of every class row is the peer's ML category counts at ESS m0, every
    other statistic (class counts, Gaussian moments) is ``uniform(m0)``'s."""
    schema, x, y = mixed
    model = make_model("nb", schema)
    phi = model.features(x)
    parts = np.split(np.arange(len(y)), [40, 200])
    engine = CRCEngine(model, LocalData.from_parts(phi, y, parts), averaging_matrix(complete_graph(3)), ess=500.0,
                       acceleration=accel.Acceleration(start="categorical"))
    cat = model.layout.columns("cat")
    assert cat.stop > cat.start
    uniform = model.table(model.uniform(500.0))
    for v, part in enumerate(parts):
        table, ml = model.table(engine.stats[v]), model.table(model.fit_ml(phi[part], y[part]) * 500.0 / len(part))
        np.testing.assert_allclose(table[:, cat], ml[:, cat], rtol=1e-12)
        rest = np.ones(table.shape[1], dtype=bool)
        rest[cat] = False
        np.testing.assert_array_equal(table[:, rest], uniform[:, rest])


def test_the_running_average_weighs_each_round_by_its_number():
    rounds = np.random.default_rng(1).normal(size=(6, 2, 4))  # six rounds of two peers' statistics
    average = None
    for t, stats in enumerate(rounds, start=1):
        average = accel.running_average(average, stats, t)
    weights = np.arange(1, 7)
    np.testing.assert_allclose(average, np.tensordot(weights, rounds, axes=1) / weights.sum(), rtol=1e-12)
    assert not np.shares_memory(accel.running_average(None, rounds[0], 1), rounds[0])


def test_the_averaged_classifier_takes_only_the_category_counts_from_the_running_average(mixed):
    """Under ``classifier="averaged"`` the engine's classifiers are its statistics with the ``cat`` block of their
    running average over the rounds; what the peers send is the same as with the local classifier."""
    schema, x, y = mixed
    model = make_model("nb", schema)
    local = LocalData.from_parts(model.features(x), y, _label_sorted(y, 6))
    mixing = averaging_matrix(random_tree_graph(6, seed=1))
    runs = {name: CRCEngine(model, local, mixing, ess=300.0, iterations=3, acceleration=accel.Acceleration(
        start="categorical", exact_diffusion=True, classifier=name)) for name in ("local", "averaged")}
    history = {name: [] for name in runs}
    for name, engine in runs.items():
        engine.run(5, lambda _, classifiers, name=name: history[name].append(classifiers))
    np.testing.assert_array_equal(runs["averaged"].stats, runs["local"].stats)
    cat = model.layout.columns("cat")
    weights = np.arange(1, 6)
    counts = np.tensordot(weights, model.table(np.array(history["local"]))[..., cat], axes=1) / weights.sum()
    classifier = model.table(history["averaged"][-1])
    np.testing.assert_allclose(classifier[..., cat], counts, rtol=1e-12)
    rest = np.ones(classifier.shape[-1], dtype=bool)
    rest[cat] = False
    np.testing.assert_array_equal(classifier[..., rest], model.table(runs["local"].stats)[..., rest])
    assert np.max(np.abs(classifier[..., cat] - model.table(runs["local"].stats)[..., cat])) > 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_safeguard_keeps_the_plain_step_where_momentum_raises_the_local_loss(kind, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema)
    phi = model.features(x)
    parts = np.array_split(np.arange(len(y)), 5)
    local = LocalData.from_parts(phi, y, parts)
    weights = labelled_weights(local.y, model.n_classes, local.mask)
    uniform = model.uniform(1000.0)
    previous = np.tile(uniform, (len(parts), 1))
    aggregated = np.stack([model.fit_ml(phi[p], y[p]) * 1000.0 / len(p) for p in parts])
    setting = accel.Acceleration(momentum=0.9, safeguard=True)
    memory = accel.Memory(previous, np.array([False, False, False, False, True]))
    stats, memory_next = accel.step(model, setting, aggregated, memory, local.phi, weights, local.mask)
    plain = lrc(model, aggregated, local.phi, weights, local.mask)
    pushed = lrc(model, aggregated + 0.9 * (aggregated - previous), local.phi, weights, local.mask)
    loss_plain = accel.local_soft_loss(model, plain, local.phi, weights)
    loss_pushed = accel.local_soft_loss(model, pushed, local.phi, weights)
    for v in range(4):  # the first four use their memory unless the safeguard rejects it
        expected = plain[v] if loss_pushed[v] > loss_plain[v] else pushed[v]
        assert np.array_equal(stats[v], expected)
        assert memory_next.reset[v] == (loss_pushed[v] > loss_plain[v])
    assert np.array_equal(stats[4], plain[4])  # its memory was reset: a plain step
    assert np.all(accel.local_soft_loss(model, stats, local.phi, weights) <= loss_plain + 1e-15)
    assert np.array_equal(memory_next.previous, aggregated)


def test_one_peer_and_the_batch_take_the_same_step(mixed):
    """A real peer runs ``step`` on its single row: the same as its row of the batched step."""
    schema, x, y = mixed
    model = make_model("nb", schema)
    phi = model.features(x)
    parts = np.array_split(np.arange(len(y)), 4)
    local = LocalData.from_parts(phi, y, parts)
    weights = labelled_weights(local.y, model.n_classes, local.mask)
    setting = accel.Acceleration(momentum=0.8, safeguard=True)
    aggregated = np.stack([model.fit_ml(phi[p], y[p]) * 300.0 / len(p) for p in parts])
    memory = accel.Memory(np.tile(model.uniform(300.0), (4, 1)), np.array([False, True, False, False]))
    batch, batch_memory = accel.step(model, setting, aggregated, memory, local.phi, weights)
    for v, part in enumerate(parts):
        one, one_memory = accel.step(model, setting, aggregated[v], accel.Memory(memory.previous[v], memory.reset[v]),
                                     phi[part], labelled_weights(y[part], model.n_classes))
        np.testing.assert_allclose(one, batch[v], rtol=1e-12, atol=1e-9)
        assert bool(one_memory.reset) == bool(batch_memory.reset[v])


def test_settings_are_checked_and_the_algorithm_fills_what_is_not_given():
    with pytest.raises(CRCError, match="--momentum must be in"):
        accel.Acceleration(momentum=1.0)
    with pytest.raises(CRCError, match="--start must be one of"):
        accel.Acceleration(start="ml")
    with pytest.raises(CRCError, match="--classifier must be one of"):
        accel.Acceleration(classifier="mean")
    for clash, option in (({"momentum": 0.5}, "--momentum"), ({"safeguard": True}, "--safeguard"),
                          ({"classifier": "aggregate"}, "--classifier aggregate")):
        with pytest.raises(CRCError, match=rf"--exact-diffusion \(part of --algorithm accelerated\) cannot be combined with "
                                           rf"{option}: .*; for {option} use --algorithm paper"):
            accel.Acceleration(exact_diffusion=True, **clash)
    with pytest.raises(CRCError, match="--algorithm must be one of accelerated, paper, got 'fast'"):
        accel.resolve({"algorithm": "fast"})
    assert accel.DEFAULT_ALGORITHM == "accelerated"
    assert accel.resolve({}) == {**accel.PAPER_SETTINGS, **accel.ACCELERATED, "algorithm": "accelerated"}
    assert accel.resolve({"iters": 3, "exact_diffusion": None}) == {**accel.PAPER_SETTINGS, **accel.ACCELERATED, "iters": 3,
                                                                     "algorithm": "accelerated"}
    assert accel.resolve({"algorithm": "paper", "momentum": None, "start": None, "iters": None}) == {
        **accel.PAPER_SETTINGS, "algorithm": "paper"}
    assert accel.acceleration_of(accel.resolve({})) == accel.PRESET == accel.Acceleration(exact_diffusion=True)
    assert accel.acceleration_of(accel.resolve({"algorithm": "paper"})) == accel.PAPER


def test_the_accelerated_algorithm_changes_the_start_of_naive_bayes_and_the_region_graph_circuit_only():
    """``MODEL_SETTINGS``: under the accelerated algorithm the region-graph circuit starts local, naive Bayes starts
    from its local category counts with three local steps and the averaged classifier, every other model as
    ``ACCELERATED``; the paper's algorithm and an explicit --start, --iters or --classifier are not changed by the
    model."""
    region = {"model": "pc", "structure": "region-graph"}
    assert accel.resolve(region) == {**accel.PAPER_SETTINGS, **accel.ACCELERATED, "start": "local", "algorithm": "accelerated"}
    assert accel.resolve({**region, "start": "uniform"})["start"] == "uniform"
    assert accel.resolve({**region, "algorithm": "paper"}) == {**accel.PAPER_SETTINGS, "algorithm": "paper"}
    assert accel.resolve({"model": "nb"}) == {**accel.resolve({}), "start": "categorical", "iters": 3,
                                              "classifier": "averaged"}
    assert accel.resolve({"model": "nb", "start": "uniform", "iters": 2, "classifier": "local"}) == accel.resolve({})
    assert accel.resolve({"model": "nb", "algorithm": "paper"}) == {**accel.PAPER_SETTINGS, "algorithm": "paper"}
    for model in ({"model": "qda"}, {"model": "pc", "structure": "mixture"}, {"model": "pc"}):
        assert accel.resolve(model) == accel.resolve({}), model
    assert accel.describe(accel.resolve(region)) == "accelerated: exact diffusion, local start, 2 local steps per round"
    assert accel.describe(accel.resolve({"model": "nb"})) == ("accelerated: exact diffusion, categorical start, averaged "
                                                              "category counts, 3 local steps per round")


@pytest.mark.parametrize("given, option", [({"momentum": 0.5}, "--momentum"), ({"safeguard": True}, "--safeguard"),
                                           ({"classifier": "aggregate"}, "--classifier aggregate"),
                                           ({"dp_epsilon": 1.0}, "--dp-epsilon"),
                                           ({"release_every": 4}, "--release-every"),
                                           ({"aggregate": "geomedian"}, "--aggregate geomedian"),
                                           ({"aggregate": "median"}, "--aggregate median")])
def test_an_option_only_the_papers_averaging_supports_chooses_it_unless_an_algorithm_is_named(given, option):
    assert accel.paper_only(given) == option
    assert accel.resolve(given)["algorithm"] == "paper" and accel.resolve(given)["exact_diffusion"] is False
    named = accel.resolve({**given, "algorithm": "accelerated"})
    assert named["algorithm"] == "accelerated" and named["exact_diffusion"] is True and named["iters"] == 2
    assert accel.paper_only({"momentum": 0.0, "safeguard": False, "classifier": "local", "dp_epsilon": None,
                             "release_every": 1}) is None
    assert all(accel.paper_only({"aggregate": rule}) is None for rule in ("mean", "clipped", "screened", "robust"))


def test_the_description_names_the_algorithm_and_what_it_runs():
    assert accel.describe(accel.resolve({})) == "accelerated: exact diffusion, 2 local steps per round"
    assert accel.describe(accel.resolve({"algorithm": "paper"})) == "paper: 1 local step per round"
    assert accel.describe(accel.resolve({**accel.MOMENTUM_PRESET, "start": "local"})) == (
        "paper: momentum 0.7 with safeguard, local start, classifier from the last aggregate, 1 local step per round")


def _tree_run(kind, mixed, n=8):
    """(model, local data, mixing of a random tree) over ``n`` peers holding sorted-label parts."""
    schema, x, y = mixed
    model = make_model(kind, schema)
    parts = _equal_parts(y, n)
    used = np.concatenate(parts)
    phi, y = model.features(x)[used], y[used]
    return model, LocalData.from_parts(phi, y, np.split(np.arange(len(y)), n)), averaging_matrix(random_tree_graph(n, seed=2))


@pytest.mark.parametrize("kind", ["qda", "pc"])
def test_exact_diffusion_keeps_the_weighted_means_of_sent_and_calibrated_statistics_equal(kind, mixed, monkeypatch):
    """On a static graph, Σ_v π_v s_v(t) = Σ_v π_v ψ_v(t) every round (π: the mixing's stationary weights, here
    proportional to the closed-neighbourhood sizes); so at a fixed point the π-weighted local steps cancel. It holds
    exactly where ``keep_variances`` changes nothing: here QDA's rule never acts, the circuit's leaf rule does (a
    category count of this small run goes below 0.8 of the last calibrated one), so the circuit runs without it."""
    model, local, mixing = _tree_run(kind, mixed)
    if kind == "pc":
        monkeypatch.setattr(type(model), "keep_variances", lambda self, stats, reference, fraction: stats)
    pi = np.asarray((mixing != 0).sum(axis=1)).ravel().astype(float)
    pi /= pi.sum()
    np.testing.assert_allclose(pi @ mixing, pi, atol=1e-15)
    engine = CRCEngine(model, local, mixing, ess=400.0, iterations=2, acceleration=accel.PRESET)
    for round_ in range(1, 13):
        engine.step()
        sent, calibrated = pi @ engine.stats, pi @ engine.memory.previous
        np.testing.assert_allclose(sent, calibrated, rtol=0, atol=1e-9 * np.abs(calibrated).max(), err_msg=f"round {round_}")
        if round_ > 1:
            assert np.max(np.abs(engine.stats - engine.memory.previous)) > 1e-6  # the correction is not zero per peer


def test_exact_diffusion_on_a_graph_that_changes_every_round_is_the_papers_algorithm(mixed):
    """Every peer restarts (a new neighbourhood every round) and takes the paper's round: plain averaging, one local
    step, no correction (for models whose ``keep_variances`` changes nothing)."""
    model, local, _ = _tree_run("qda", mixed)
    chains = [averaging_matrix(nx.path_graph(order)) for order in ([0, 1, 2, 3, 4, 5, 6, 7], [0, 2, 4, 6, 1, 3, 5, 7])]

    def alternating(round_):  # no peer has the same neighbours in two rounds in a row
        return chains[round_ % 2]

    paper = CRCEngine(model, local, alternating, ess=400.0)
    exact = CRCEngine(model, local, alternating, ess=400.0, iterations=2, acceleration=accel.PRESET)
    assert all(changed_neighbourhoods(alternating(round_ - 1), alternating(round_)).all() for round_ in range(2, 7))
    np.testing.assert_array_equal(exact.run(6), paper.run(6))
    static_paper = CRCEngine(model, local, chains[0], ess=400.0).run(6)
    static = CRCEngine(model, local, chains[0], ess=400.0, iterations=2, acceleration=accel.PRESET)
    assert changed_neighbourhoods(chains[0], chains[0]) is None
    assert not changed_neighbourhoods(chains[0], chains[0].copy()).any()
    assert np.max(np.abs(static.run(6) - static_paper)) > 1e-6


def test_exact_diffusion_leaves_less_disagreement_between_peers_than_the_papers_algorithm(mixed):
    """Label-sorted parts on a tree: after 150 rounds the paper's peers still disagree (each pulled to its own
    classes), exact diffusion's far less."""
    model, local, mixing = _tree_run("nb", mixed)

    def spread(acceleration):
        stats = CRCEngine(model, local, mixing, ess=400.0, iterations=2, acceleration=acceleration).run(150)
        posteriors = model.posteriors(model.theta(stats), local.phi.reshape(1, -1, local.phi.shape[-1]))
        return np.abs(posteriors - posteriors.mean(axis=0)).max()

    paper, exact = spread(accel.PAPER), spread(accel.PRESET)
    assert exact < 0.2 * paper, (exact, paper)


def test_keep_variances_raises_only_the_variances_below_the_kept_fraction(mixed):
    schema, x, y = mixed
    model = make_model("nb", schema)
    reference = model.fit_ml(model.features(x), y)
    table = model.table(reference).copy()
    sumsq = table[..., model.layout.columns("sumsq")]
    sumsq[0, 0] -= 0.9 * (sumsq[0, 0] - table[0, model.layout.columns("sum")][0] ** 2 / table[0, model.layout.columns("obs")][0])
    shrunk = table.reshape(-1)
    kept = model.keep_variances(shrunk, reference, 0.8)
    variance = lambda s: model.theta(s)["var"]
    np.testing.assert_allclose(variance(kept)[0, 0], 0.8 * variance(reference)[0, 0], rtol=1e-9)
    changed = np.flatnonzero(kept != shrunk)
    assert list(changed) == [model.layout.columns("sumsq").start]  # class 0's first sum of squares, nothing else
    np.testing.assert_array_equal(model.keep_variances(reference, reference, 0.8), reference)
    unseen = model.table(shrunk).copy()  # class 0's first feature observed no more than the count floor
    unseen[0, model.layout.columns("obs").start] = -0.5
    unseen = unseen.reshape(-1)
    np.testing.assert_array_equal(model.keep_variances(unseen, reference, 0.8), unseen)
    qda = make_model("qda", schema)  # the same covariances (twice the statistics): unchanged
    own = qda.fit_ml(qda.features(x), y)
    np.testing.assert_array_equal(qda.keep_variances(own, 2 * own, 0.8), own)


def test_qda_keep_variances_makes_a_covariance_at_least_the_kept_fraction_of_the_reference(continuous):
    """Exact diffusion's correction can leave QDA's second moments inconsistent with the means (a covariance with a
    negative eigenvalue); ``keep_variances`` raises it, in the positive semi-definite order, to at least 0.8 times
    the reference's, changing only ``outer`` of the class that needed it."""
    schema, x, y = continuous
    model = make_model("qda", schema)
    reference = model.fit_ml(model.features(x), y)
    theta = model.theta(reference)
    table = model.table(reference).copy()
    mean = theta["mean"][1]
    direction = np.array([1.0, -1.0, 0.5, 0.0]) / 1.5
    cov = np.linalg.inv(theta["precision"][1])
    broken = cov - 2.0 * (direction @ cov @ direction) * np.outer(direction, direction)  # a negative eigenvalue
    assert np.linalg.eigvalsh(broken).min() < 0
    count = table[1, 0]
    table[1, model.layout.columns("outer")] = (count * (broken + np.outer(mean, mean)))[model.upper]
    kept = model.keep_variances(table.reshape(-1), reference, 0.8)
    changed = model.table(kept) != table
    assert changed[1, model.layout.columns("outer")].any() and not changed[[0, 2]].any()
    assert not changed[1, : model.layout.columns("outer").start].any()  # count and sums: the mean stays
    raised = np.linalg.inv(model.theta(kept)["precision"][1])
    assert np.linalg.eigvalsh(raised - 0.8 * cov).min() > -1e-9
    np.testing.assert_allclose(model.theta(kept)["mean"], theta["mean"], rtol=1e-12)
    np.testing.assert_array_equal(model.keep_variances(reference, reference, 0.8), reference)


@pytest.mark.parametrize("structure", [{"components": 3}, {"structure": "region-graph", "depth": 1, "repetitions": 2, "sums": 2}])
def test_a_circuits_local_start_is_additive_over_peers_so_their_average_is_the_pooled_one(structure, mixed):
    """A circuit's local start is one E-step from the start every peer shares, not local EM: the peers' statistics
    then add up to those of the pooled data (component k is the same component at every peer), which local EM, each
    peer labelling its components its own way, does not give."""
    schema, x, y = mixed
    model = make_model("pc", schema, **structure)
    phi = model.features(x)
    halves = np.array_split(np.arange(len(y)), 2)
    pooled = model.local_start(phi, y)
    parts = sum(model.local_start(phi[h], y[h]) for h in halves)
    np.testing.assert_allclose(parts, pooled, rtol=1e-10, atol=1e-10)
    em = sum(model.fit_ml(phi[h], y[h]) for h in halves)
    assert np.max(np.abs(em - model.fit_ml(phi, y))) > 1e-3


def test_region_graph_keep_variances_raises_only_the_collapsed_leaf_variances(continuous):
    """The region graph keeps naive Bayes' rule on its Gaussian leaves under exact diffusion: a leaf whose variance
    fell below 0.8 of the reference's gets it back, nothing else changes."""
    schema, x, y = continuous
    model = make_model("pc", schema, structure="region-graph", depth=1, repetitions=2, sums=2)
    reference = model.fit_ml(model.features(x), y)
    np.testing.assert_array_equal(model.keep_variances(reference, reference, 0.8), reference)
    np.testing.assert_array_equal(model.keep_variances(reference, 2 * reference, 0.8), reference)
    leaves = model.leaves.table(model._leaf_table(model.table(reference)))
    sumsq = model.leaves.layout.columns("sumsq").start
    table = model.table(reference).copy()
    at = model.layout.columns("leaves").start + sumsq - 1  # class 0, first leaf row, first feature's sum of squares
    obs, total = leaves[0, model.leaves.layout.columns("obs").start], leaves[0, model.leaves.layout.columns("sum").start]
    table[0, at] = total**2 / obs + 1e-6 * obs  # variance 1e-6
    collapsed = table.reshape(-1)
    kept = model.keep_variances(collapsed, reference, 0.8)
    assert list(np.flatnonzero(kept != collapsed)) == [at]
    variance = lambda s: model.leaves.theta(model._leaf_table(model.table(s)))["var"][0, 0]
    np.testing.assert_allclose(variance(kept), 0.8 * variance(reference), rtol=1e-9)


def test_a_circuits_leaf_rule_raises_collapsed_variances_and_negative_category_counts(mixed):
    """The mixture circuit keeps its leaves (``NaiveBayes.keep_leaves`` on its (y, k) sub-classes) under exact
    diffusion: a sub-class's collapsed variance and a category count driven below zero come back to 0.8 of the
    reference's, nothing else changes; naive Bayes' own rule leaves the category counts alone."""
    schema, x, y = mixed
    model = make_model("pc", schema, components=2)
    reference = model.fit_ml(model.features(x), y)
    np.testing.assert_array_equal(model.keep_variances(reference, reference, 0.8), reference)
    columns = model.layout.columns
    table = model.table(reference).copy()
    table[1, columns("sumsq").start] = table[1, columns("sum").start] ** 2 / table[1, columns("obs").start]  # variance 0
    table[2, columns("cat").start] = -3.0
    broken = table.reshape(-1)
    kept = model.keep_variances(broken, reference, 0.8)
    changed = np.flatnonzero(kept != broken)
    assert list(changed) == [model.layout.n_columns + columns("sumsq").start, 2 * model.layout.n_columns + columns("cat").start]
    np.testing.assert_allclose(model.theta(kept)["var"][1, 0], 0.8 * model.theta(reference)["var"][1, 0], rtol=1e-9)
    assert model.table(kept)[2, columns("cat").start] == 0.8 * model.table(reference)[2, columns("cat").start] > 0
    assert model.leaves.keep_variances(broken, reference, 0.8)[2 * model.layout.n_columns + columns("cat").start] == -3.0
