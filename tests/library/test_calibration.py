import numpy as np
import pytest

from crc.core.calibration import lrc, rc, soft_zero_one
from crc.core.models import MODELS, make_model
from crc.core.models.base import labelled_weights

KINDS = sorted(MODELS)


@pytest.mark.parametrize("kind", KINDS)
def test_rc_preserves_ess_at_every_iteration_and_never_loses_to_ml(kind, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema)
    phi = model.features(x)
    seen = []
    result = rc(model, phi, y, callback=lambda i, s: seen.append(model.ess(s)))
    assert len(seen) == 65
    np.testing.assert_allclose(seen, len(y), rtol=1e-12)
    ml_loss = soft_zero_one(model.posteriors(model.theta(model.fit_ml(phi, y)), phi), y)
    rc_loss = soft_zero_one(model.posteriors(model.theta(result.stats), phi), y)
    assert rc_loss <= ml_loss
    assert result.losses[0] == pytest.approx(ml_loss)
    assert rc_loss == pytest.approx(min(result.losses))
    assert result.losses[-1] < ml_loss  # calibration actually moves on this data


@pytest.mark.parametrize("kind", KINDS)
def test_lrc_preserves_ess_batched_with_padding(kind, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema)
    phi = model.features(x)
    # two nodes, the second padded with 20 rows that must not count
    phi_nodes = np.stack([phi[:100], np.concatenate([phi[100:180], np.zeros((20, phi.shape[1]))])])
    y_nodes = np.stack([y[:100], np.concatenate([y[100:180], np.zeros(20, dtype=y.dtype)])])
    mask = np.stack([np.ones(100), np.r_[np.ones(80), np.zeros(20)]])
    weights = labelled_weights(y_nodes, schema.n_classes, mask)
    start = np.tile(model.uniform(500.0), (2, 1))
    out = lrc(model, start, phi_nodes, weights, mask, iterations=5)
    np.testing.assert_allclose(model.ess(out), 500.0, rtol=1e-12)
    alone = lrc(model, start[1], phi[100:180], labelled_weights(y[100:180], schema.n_classes), iterations=5)
    np.testing.assert_allclose(out[1], alone, rtol=1e-10, atol=1e-9)
