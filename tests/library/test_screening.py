"""``screened``'s test on the receiver's own data (crc.core.screening) and the rule under exact diffusion."""

from __future__ import annotations

import numpy as np

from crc.core.acceleration import PRESET
from crc.core.attacks import poison
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.models import make_model
from crc.core.models.base import labelled_weights
from crc.core.screening import better_than_chance
from crc.topologies import averaging_matrix, random_tree_graph
from support.tables import mixed_columns, prepared

NODES = 6


def trained():
    """A network of NODES peers after 8 rounds of the accelerated algorithm: (model, engine, phi, y, parts)."""
    schema, x, y = prepared(mixed_columns())
    model = make_model("nb", schema)
    phi = model.features(x)
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), NODES)
    engine = CRCEngine(model, LocalData.from_parts(phi, y, parts), averaging_matrix(random_tree_graph(NODES, seed=3)),
                       ess=default_ess(len(y), NODES), iterations=2, acceleration=PRESET, aggregation="screened")
    return model, engine, phi, y, parts


def test_honest_statistics_pass_on_every_peers_data_and_permuted_ones_do_not():
    model, engine, phi, y, parts = trained()
    engine.run(8)
    for receiver, part in enumerate(parts):
        weights = labelled_weights(y[part], model.n_classes)
        honest = engine.stats
        permuted = poison(model, honest, "permute", np.random.default_rng(0))
        many = len(honest)
        assert better_than_chance(model, honest, np.repeat(phi[part][None], many, 0), np.repeat(weights[None], many, 0)).all()
        assert not better_than_chance(model, permuted, np.repeat(phi[part][None], many, 0),
                                      np.repeat(weights[None], many, 0)).any(), receiver
    uniform = model.uniform(engine.ess)[None]
    assert better_than_chance(model, uniform, phi[parts[0]][None], labelled_weights(y[parts[0]], model.n_classes)[None]).all()


def test_without_attack_screening_under_exact_diffusion_is_the_mean():
    model, screened, *_ = trained()
    _, mean, *_ = trained()
    mean.aggregation = "mean"
    screened.run(16)
    mean.run(16)
    np.testing.assert_allclose(screened.stats, mean.stats, rtol=1e-9)
