import networkx as nx
import numpy as np
import pytest

from crc.bench.per_node_loop import per_node_crc
from crc.core.calibration import rc
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.errors import CRCError
from crc.core.models import MODELS, make_model
from crc.topologies import averaging_matrix, complete_graph, random_tree_graph

KINDS = sorted(MODELS)


def label_sorted_parts(y: np.ndarray, n: int) -> list[np.ndarray]:
    """Non-i.i.d. parts: instances sorted by class, cut into n contiguous chunks."""
    return np.array_split(np.argsort(y, kind="stable"), n)


@pytest.mark.parametrize("kind, options", [(kind, {}) for kind in KINDS]
                         + [("pc", {"structure": "region-graph", "structure_seed": 5})])
def test_theorem_1_complete_graph_equals_rc(kind, options, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema, **options)
    phi = model.features(x)
    n, lr, rounds = 6, 0.05, 30
    local = LocalData.from_parts(phi, y, label_sorted_parts(y, n))
    engine = CRCEngine(model, local, averaging_matrix(complete_graph(n)), ess=default_ess(len(y), n, lr))
    rc_stats = []
    rc(model, phi, y, lr=lr, iterations=rounds, init=model.uniform(len(y)), select_best=False,
       callback=lambda i, s: rc_stats.append(s))
    for t in range(1, rounds + 1):
        aggregated = engine.step()
        expected = model.posteriors(model.theta(rc_stats[t - 1]), phi)
        got = model.posteriors(model.theta(aggregated), phi[None])
        assert np.max(np.abs(got - expected[None])) < 1e-9, f"round {t}"
    # and the run did move away from the uniform start
    assert np.max(np.abs(expected - 1 / schema.n_classes)) > 0.1


@pytest.mark.parametrize("kind", KINDS)
def test_engine_equals_per_node_loop_on_a_tree_with_unequal_sizes(kind, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema)
    phi = model.features(x)
    parts = np.split(np.random.default_rng(0).permutation(len(y)), [30, 100, 130, 200, 260])
    graph = random_tree_graph(len(parts), seed=1)
    engine = CRCEngine(model, LocalData.from_parts(phi, y, parts), averaging_matrix(graph), ess=800.0, iterations=2)
    fast = engine.run(12)
    slow = per_node_crc(model, [phi[p] for p in parts], [y[p] for p in parts],
                        [list(graph.neighbors(v)) for v in range(len(parts))], ess=800.0, rounds=12, iterations=2)
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-7)
    np.testing.assert_allclose(model.ess(fast), 800.0, rtol=1e-12)


def test_dynamic_mixing_is_called_per_round(mixed):
    schema, x, y = mixed
    model = make_model("nb", schema)
    local = LocalData.from_parts(model.features(x), y, np.array_split(np.arange(len(y)), 4))
    calls = []

    def mixing(round_):
        calls.append(round_)
        return averaging_matrix(nx.path_graph(4) if round_ % 2 else nx.star_graph(3))

    CRCEngine(model, local, mixing, ess=100.0).run(5)
    assert calls == [1, 2, 3, 4, 5]


def test_engine_rejects_bad_settings(mixed):
    schema, x, y = mixed
    model = make_model("nb", schema)
    local = LocalData.from_parts(model.features(x), y, np.array_split(np.arange(len(y)), 3))
    with pytest.raises(CRCError, match="must be positive"):
        CRCEngine(model, local, averaging_matrix(complete_graph(3)), ess=0.0)
    with pytest.raises(CRCError, match="expected \\(3, 3\\)"):
        CRCEngine(model, local, averaging_matrix(complete_graph(4)), ess=10.0).step()
    with pytest.raises(CRCError, match="at least one local instance"):
        LocalData.from_parts(model.features(x), y, [np.arange(5), np.arange(0)])
