"""QDA's batched precisions: the Cholesky path against the floored eigendecomposition."""

import numpy as np
import pytest

from crc.core.models.qda import EIG_FLOOR, _floored_eigen, _lower_inverse, _precision_and_logdet


def _covariances(rng, batch, d):
    a = rng.standard_normal(batch + (d, d + 5))
    return a @ np.swapaxes(a, -1, -2) / (d + 5)


@pytest.mark.parametrize("d", [1, 5, 17, 40])
def test_lower_inverse_inverts(d):
    lower = np.linalg.cholesky(_covariances(np.random.default_rng(d), (3, 2), d))
    np.testing.assert_allclose(_lower_inverse(lower) @ lower, np.broadcast_to(np.eye(d), lower.shape), atol=1e-10)


def test_cholesky_path_equals_the_eigendecomposition_on_positive_definite_batches():
    cov = _covariances(np.random.default_rng(0), (4, 3), 30)
    precision, logdet = _precision_and_logdet(cov)
    ref_precision, ref_logdet = _floored_eigen(cov)
    np.testing.assert_allclose(precision, ref_precision, rtol=0, atol=1e-10 * np.abs(ref_precision).max())
    np.testing.assert_allclose(logdet, ref_logdet, rtol=0, atol=1e-10)


def test_eigenvalues_below_the_floor_are_floored_in_a_batch():
    rng = np.random.default_rng(1)
    cov = _covariances(rng, (5,), 6)
    cov[2] = np.diag([1.0, 1.0, 1.0, 1.0, 1.0, 1e-12])  # positive definite, one eigenvalue under the floor
    precision, logdet = _precision_and_logdet(cov)
    assert precision[2, 5, 5] == pytest.approx(1 / EIG_FLOOR)
    assert logdet[2] == pytest.approx(np.log(EIG_FLOOR))
    np.testing.assert_allclose(precision[[0, 1, 3, 4]], np.linalg.inv(cov[[0, 1, 3, 4]]), rtol=1e-9, atol=1e-9)
    before_precision, before_logdet = precision, logdet
    cov[4] = np.diag([1.0, 1.0, 1.0, 1.0, 1.0, -1.0])  # not positive definite: it takes the eigenvalues ...
    precision, logdet = _precision_and_logdet(cov)
    ref_precision, ref_logdet = _floored_eigen(cov[4])
    np.testing.assert_array_equal(precision[4], ref_precision)
    assert logdet[4] == ref_logdet and precision[4, 5, 5] == pytest.approx(1 / EIG_FLOOR)
    # ... and the others keep what they had in a batch without it, bit for bit
    np.testing.assert_array_equal(precision[:4], before_precision[:4])
    np.testing.assert_array_equal(logdet[:4], before_logdet[:4])


def test_a_feature_constant_within_a_class_takes_the_eigen_path_without_a_per_matrix_loop(monkeypatch):
    import crc.core.models.qda as qda

    rng = np.random.default_rng(2)
    cov = _covariances(rng, (6,), 8)
    alone_precision, alone_logdet = _precision_and_logdet(cov[[0, 2, 3, 5]])
    for i in (1, 4):  # feature 3 constant within classes 1 and 4: zero variance and covariances
        cov[i, 3, :] = cov[i, :, 3] = 0.0

    def no_loop(_):
        raise AssertionError("the batch went down the one-by-one path")

    monkeypatch.setattr(qda, "_one_by_one", no_loop)
    precision, logdet = _precision_and_logdet(cov)
    for i in (1, 4):
        ref_precision, ref_logdet = _floored_eigen(cov[i])
        np.testing.assert_array_equal(precision[i], ref_precision)
        assert logdet[i] == ref_logdet and precision[i, 3, 3] == pytest.approx(1 / EIG_FLOOR)
    np.testing.assert_array_equal(precision[[0, 2, 3, 5]], alone_precision)
    np.testing.assert_array_equal(logdet[[0, 2, 3, 5]], alone_logdet)


def test_no_continuous_feature_gives_empty_precisions():
    precision, logdet = _precision_and_logdet(np.zeros((3, 0, 0)))
    assert precision.shape == (3, 0, 0) and np.array_equal(logdet, np.zeros(3))
