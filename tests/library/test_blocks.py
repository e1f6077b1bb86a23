"""The product over feature blocks: the model of vertically partitioned data (crc.core.models.blocks)."""

import numpy as np
import pytest

from crc.core.errors import CRCError
from crc.core.models import make_model
from crc.core.models.blocks import BlockMixture, BlockProduct, block_model, check_blocks
from crc.core.schema import CONTINUOUS, Feature, Schema
from support.tables import mixed_columns, prepared

BLOCKS = [[0, 3], [1, 2, 4]]  # continuous and discrete features in both blocks


@pytest.fixture
def mixed():
    return prepared(mixed_columns())


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_the_summed_block_scores_and_one_prior_are_the_log_joint(kind, mixed):
    schema, x, y = mixed
    model = BlockProduct(kind, schema, BLOCKS)
    phi = model.features(x)
    theta = model.theta(model.fit_ml(phi, y))
    summed = sum(model.block_scores(theta, phi, b) for b in range(len(BLOCKS))) + theta["log_prior"]
    np.testing.assert_allclose(summed, model.log_joint(theta, phi), rtol=1e-12, atol=1e-9)


def test_naive_bayes_over_blocks_is_naive_bayes(mixed):
    schema, x, y = mixed
    blocked, plain = BlockProduct("nb", schema, BLOCKS), make_model("nb", schema)
    joint = blocked.log_joint(blocked.theta(blocked.fit_ml(blocked.features(x), y)), blocked.features(x))
    expected = plain.log_joint(plain.theta(plain.fit_ml(plain.features(x), y)), plain.features(x))
    np.testing.assert_allclose(joint, expected, rtol=1e-12, atol=1e-9)


def test_block_qda_is_qda_with_a_block_diagonal_covariance(mixed):
    """Each block's QDA sees only its own continuous features: block QDA's log-joint is the sum of the blocks' QDA
    log-likelihoods, and differs from full QDA where features of two blocks are correlated."""
    schema, x, y = mixed
    blocked = BlockProduct("qda", schema, [[0, 1], [2, 3, 4]])
    theta = blocked.theta(blocked.fit_ml(blocked.features(x), y))
    for b, block in enumerate(blocked.blocks):
        part = make_model("qda", blocked.parts[b].schema)
        own = part.theta(part.fit_ml(part.features(x[:, block]), y))
        np.testing.assert_allclose(theta["blocks"][b]["precision"], own["precision"], rtol=1e-10)
    full = make_model("qda", schema)
    full_joint = full.log_joint(full.theta(full.fit_ml(full.features(x), y)), full.features(x))
    assert np.abs(blocked.log_joint(theta, blocked.features(x)) - full_joint).max() > 1e-3


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_statistics_split_into_blocks_and_join_back(kind, mixed):
    schema, x, y = mixed
    model = BlockProduct(kind, schema, BLOCKS)
    stats = model.fit_ml(model.features(x), y)
    parts = [model.block_statistics(stats, b) for b in range(2)]
    np.testing.assert_array_equal(model.join(parts), stats)
    for b, part in enumerate(model.parts):
        np.testing.assert_allclose(parts[b], part.fit_ml(part.features(x[:, model.blocks[b]]), y), rtol=1e-12)
    assert model.ess(stats) == pytest.approx(len(y))


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_uniform_statistics_give_uniform_posteriors_and_scale_free_parameters(kind, mixed):
    schema, x, _ = mixed
    model = BlockProduct(kind, schema, BLOCKS)
    stats = model.uniform(120.0)
    assert model.ess(stats) == pytest.approx(120.0)
    np.testing.assert_allclose(model.posteriors(model.theta(stats), model.features(x)), 1 / 3, rtol=1e-12)
    phi = model.features(x)
    np.testing.assert_allclose(model.log_joint(model.theta(7 * stats), phi), model.log_joint(model.theta(stats), phi), rtol=1e-12)


@pytest.mark.parametrize("blocks, match", [
    ([], "at least one"), ([[0, 1], []], "empty"), ([[0, 1], [1, 2, 3, 4]], "two blocks"),
    ([[0, 1], [2, 3]], "do not cover"), ([[0, 1, 2, 3, 4, 5]], "outside"),
])
def test_blocks_that_overlap_leave_a_feature_out_or_name_none_are_refused(blocks, match):
    with pytest.raises(CRCError, match=match):
        check_blocks(blocks, 5)


def test_a_model_that_does_not_factorise_over_blocks_is_refused(mixed):
    with pytest.raises(CRCError, match="factorises"):
        BlockProduct("pc", mixed[0], BLOCKS)


def _crossed_clusters(m=400, seed=0):
    """Two classes with identical marginals: class 0 has x0 and x1 of the same sign, class 1 of opposite signs, so
    only the dependence between the two features (one per block) tells the classes apart."""
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=m)
    first = rng.choice([-2.0, 2.0], size=m)
    second = np.where(y == 0, first, -first)
    x = np.column_stack([first, second]) + 0.5 * rng.standard_normal((m, 2))
    schema = Schema(label="y", classes=("a", "b"), features=(Feature("x0", CONTINUOUS), Feature("x1", CONTINUOUS)))
    return schema, x, y


def test_a_mixture_of_block_products_learns_what_the_plain_product_cannot():
    schema, x, y = _crossed_clusters()
    errors = {}
    for name, model in (("product", BlockProduct("nb", schema, [[0], [1]])),
                        ("mixture", BlockMixture("nb", schema, [[0], [1]], components=2))):
        phi = model.features(x)
        predicted = model.log_joint(model.theta(model.fit_ml(phi, y)), phi).argmax(axis=1)
        errors[name] = np.mean(predicted != y)
    assert errors["product"] > 0.3 and errors["mixture"] < 0.05


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_the_mixture_s_summed_block_scores_give_its_component_scores(kind, mixed):
    schema, x, y = mixed
    model = BlockMixture(kind, schema, BLOCKS, components=3)
    phi = model.features(x)
    theta = model.theta(model.fit_ml(phi, y))
    summed = sum(model.block_scores(theta, phi, b) for b in range(len(BLOCKS))) + theta["log_prior"]
    np.testing.assert_allclose(summed, model.leaves.log_joint(theta, phi), rtol=1e-12, atol=1e-9)
    assert model.ess(model.uniform(90.0)) == pytest.approx(90.0)
    np.testing.assert_allclose(model.posteriors(model.theta(model.uniform(90.0)), phi), 1 / 3, rtol=1e-9)


def test_block_model_picks_the_product_or_the_mixture(mixed):
    schema = mixed[0]
    assert type(block_model("qda", schema, BLOCKS)) is BlockProduct
    mixture = block_model("pc", schema, BLOCKS, structure="mixture", components=4, structure_seed=1)
    assert isinstance(mixture, BlockMixture) and mixture.components == 4
    with pytest.raises(CRCError, match="products split by feature block"):
        block_model("pc", schema, BLOCKS, structure="region-graph")
