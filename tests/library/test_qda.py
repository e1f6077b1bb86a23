"""QDA's batched precisions: the Cholesky path against the floored eigendecomposition."""

import numpy as np
import pytest

from crc.core.models.qda import EIG_FLOOR, _floored_eigen, _positive_definite, _precision_and_logdet


def _covariances(rng, batch, d):
    a = rng.standard_normal(batch + (d, d + 5))
    return a @ np.swapaxes(a, -1, -2) / (d + 5)


def test_cholesky_path_equals_the_eigendecomposition_on_positive_definite_batches():
    cov = _covariances(np.random.default_rng(0), (4, 3), 30)
    precision, logdet = _precision_and_logdet(cov)
    ref_precision, ref_logdet = _floored_eigen(cov)
    np.testing.assert_allclose(precision, ref_precision, rtol=0, atol=1e-10 * np.abs(ref_precision).max())
    np.testing.assert_allclose(logdet, ref_logdet, rtol=0, atol=1e-10)


def test_eigenvalues_below_the_floor_are_floored_in_a_batch():
    rng = np.random.default_rng(1)
    cov = _covariances(rng, (5,), 6)
    rotation = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    small = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1e-12])
    cov[2] = (rotation * small) @ rotation.T  # positive definite, one eigenvalue under the floor, no small variance
    assert np.diagonal(cov[2]).min() > EIG_FLOOR
    precision, logdet = _precision_and_logdet(cov)
    np.testing.assert_allclose(precision[2], (rotation / np.maximum(small, EIG_FLOOR)) @ rotation.T, rtol=1e-6)
    assert logdet[2] == pytest.approx(np.log(EIG_FLOOR))
    np.testing.assert_allclose(precision[[0, 1, 3, 4]], np.linalg.inv(cov[[0, 1, 3, 4]]), rtol=1e-9, atol=1e-9)
    before_precision, before_logdet = precision, logdet
    cov[4] = np.eye(6)
    cov[4, 0, 1] = cov[4, 1, 0] = 3.0  # eigenvalues 4, -2 and 1: not positive definite, it takes the eigenvalues ...
    precision, logdet = _precision_and_logdet(cov)
    ref_precision, ref_logdet = _floored_eigen(cov[4])
    np.testing.assert_array_equal(precision[4], ref_precision)
    assert logdet[4] == ref_logdet == pytest.approx(np.log(4.0) + np.log(EIG_FLOOR))
    # ... and the others keep what they had in a batch without it, bit for bit
    np.testing.assert_array_equal(precision[:4], before_precision[:4])
    np.testing.assert_array_equal(logdet[:4], before_logdet[:4])


@pytest.mark.parametrize("d", [8, 20])  # numpy's batched calls, LAPACK per matrix
def test_a_feature_constant_within_a_class_is_independent_with_the_floored_variance(monkeypatch, d):
    import crc.core.models.qda as qda

    rng = np.random.default_rng(2)
    cov = _covariances(rng, (6,), d)
    alone_precision, alone_logdet = _precision_and_logdet(cov[[0, 2, 3, 5]])
    exact = cov[1].copy()
    exact[3, :] = exact[:, 3] = 0.0  # feature 3 constant within class 1: zero variance and covariances
    noise = rng.standard_normal(d) * 1e-15
    noise[3] = 3e-16
    for i in (1, 4):  # the same within class 4 up to rounding noise
        cov[i, 3, :] = cov[i, :, 3] = exact[3] if i == 1 else noise

    def no_eigen(_):
        raise AssertionError("a constant feature sent its matrix to the eigendecomposition")

    monkeypatch.setattr(qda, "_floored_eigen", no_eigen)
    precision, logdet = _precision_and_logdet(cov)
    monkeypatch.undo()
    others = [j for j in range(d) if j != 3]
    for i in (1, 4):
        assert precision[i, 3, 3] == 1 / EIG_FLOOR
        assert not precision[i, 3, others].any() and not precision[i, others, 3].any()
        rest = cov[i][np.ix_(others, others)]
        np.testing.assert_allclose(precision[i][np.ix_(others, others)], np.linalg.inv(rest), rtol=1e-9, atol=1e-9)
        assert logdet[i] == pytest.approx(np.linalg.slogdet(rest)[1] + np.log(EIG_FLOOR), abs=1e-9)
    # with exact zeros this is the floored eigendecomposition of the whole matrix
    ref_precision, ref_logdet = _floored_eigen(exact)
    np.testing.assert_allclose(precision[1], ref_precision, rtol=0, atol=1e-10 * np.abs(ref_precision).max())
    assert logdet[1] == pytest.approx(ref_logdet, abs=1e-9)
    np.testing.assert_array_equal(precision[[0, 2, 3, 5]], alone_precision)
    np.testing.assert_array_equal(logdet[[0, 2, 3, 5]], alone_logdet)


def test_a_constant_feature_beside_a_singular_rest_is_independent_of_it_and_leaves_its_accuracy():
    """The rest goes to the eigendecomposition; the constant feature (in the middle) keeps exact zeros, and its
    stand-in variance, on the rest's scale, leaves the rest's floored precision as accurate as alone."""
    rng = np.random.default_rng(4)
    rest = _covariances(rng, (), 7) * 1e-8  # variances near the floor
    rest[:, 6] = rest[6, :] = rest[:, 5]  # features 5 and 6 equal: singular
    rest[6, 6] = rest[5, 5]
    assert np.diagonal(rest).min() > 2 * EIG_FLOOR
    cov = np.zeros((8, 8))
    others = [0, 1, 2, 4, 5, 6, 7]
    cov[np.ix_(others, others)] = rest
    cov[3, 3], cov[3, others] = 1e-12, 1e-20
    cov[others, 3] = 1e-20
    precision, logdet = _precision_and_logdet(cov)
    ref_precision, ref_logdet = _floored_eigen(rest)
    assert precision[3, 3] == 1 / EIG_FLOOR and not precision[3, others].any() and not precision[others, 3].any()
    np.testing.assert_allclose(precision[np.ix_(others, others)], ref_precision, rtol=0, atol=1e-12 * np.abs(ref_precision).max())
    assert logdet == pytest.approx(ref_logdet + np.log(EIG_FLOOR), abs=1e-9)


def test_the_factorisation_takes_numpy_below_the_loop_order_and_lapack_from_it(monkeypatch):
    import crc.core.models.qda as qda

    def refuse(_):
        raise AssertionError("the other factorisation path")

    for d, other in ((6, "_looped_factors"), (20, "_batched_factors")):
        cov = _covariances(np.random.default_rng(d), (3,), d)
        with monkeypatch.context() as patch:
            patch.setattr(qda, other, refuse)
            precision, logdet = _precision_and_logdet(cov)
        np.testing.assert_allclose(precision, np.linalg.inv(cov), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(logdet, np.linalg.slogdet(cov)[1], atol=1e-9)
    # LAPACK works in place only on float64: other inputs are converted first, not factorised in a lost copy
    single = cov.astype(np.float32)
    np.testing.assert_allclose(_precision_and_logdet(single)[0], np.linalg.inv(single.astype(np.float64)), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("d", [6, 20])  # numpy's batched calls, LAPACK per matrix
def test_a_batch_whose_factorisation_fails_sends_only_the_failing_matrix_to_the_eigendecomposition(monkeypatch, d):
    import crc.core.models.qda as qda

    assert 6 < qda.LAPACK_LOOP_ORDER <= 20
    cov = _covariances(np.random.default_rng(3), (7,), d)
    alone_precision, alone_logdet = _precision_and_logdet(cov)
    cov[5] = np.eye(d)
    cov[5, 0, 1] = cov[5, 1, 0] = 3.0  # eigenvalues 4, -2 and 1: indefinite, its factorisation fails
    assert np.linalg.eigvalsh(cov[5]).min() < 0
    seen = []
    floored_eigen = qda._floored_eigen
    monkeypatch.setattr(qda, "_floored_eigen", lambda m: seen.append(len(m)) or floored_eigen(m))
    precision, logdet = _precision_and_logdet(cov)
    assert seen == [1]
    ref_precision, ref_logdet = floored_eigen(cov[5:6])
    np.testing.assert_array_equal(precision[5], ref_precision[0])
    others = [0, 1, 2, 3, 4, 6]
    np.testing.assert_array_equal(precision[others], alone_precision[others])
    np.testing.assert_array_equal(logdet[others], alone_logdet[others])



@pytest.mark.parametrize("d", [8, 20])
def test_memory_order_changes_no_bit_of_a_batch_with_a_failing_matrix(d):
    rng = np.random.default_rng(5)
    for _ in range(20):
        cov = _covariances(rng, (4,), d)
        cov[2] = np.eye(d)
        cov[2, 0, 1] = cov[2, 1, 0] = 3.0
        c_order, fortran = _precision_and_logdet(cov), _precision_and_logdet(np.asfortranarray(cov))
        np.testing.assert_array_equal(fortran[0], c_order[0])
        np.testing.assert_array_equal(fortran[1], c_order[1])


def test_no_continuous_feature_gives_empty_precisions():
    precision, logdet = _precision_and_logdet(np.zeros((3, 0, 0)))
    assert precision.shape == (3, 0, 0) and np.array_equal(logdet, np.zeros(3))


def test_positive_definiteness_is_told_per_matrix_in_a_batch_with_some_that_are_not():
    rng = np.random.default_rng(2)
    cov = _covariances(rng, (3, 4), 5)
    shift = np.linalg.eigvalsh(cov)[..., 0]
    failing = np.array([[True, False, False, True], [False, False, False, False], [False, True, True, False]])
    cov[failing] -= 2 * shift[failing][:, None, None] * np.eye(5)  # smallest eigenvalue -shift: indefinite
    cov[1, 2, 4, :] = cov[1, 2, :, 4] = 0.0  # singular, its last pivot exactly 0: no Cholesky factor
    expected = failing.copy()
    expected[1, 2] = True
    np.testing.assert_array_equal(_positive_definite(cov), ~expected)
    assert _positive_definite(cov[1, [0, 1, 3]]).all() and _positive_definite(cov[0]).shape == (4,)
