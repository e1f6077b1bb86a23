import numpy as np
import pytest

from crc.core.errors import CRCError
from crc.estimators import NaiveBayesClassifier, QDAClassifier


def data(seed=0, m=400):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=m)
    x = rng.normal(size=(m, 3)) + y[:, None]
    cat = np.where(rng.random(m) < 0.7, y, 1 - y)
    X = np.column_stack([x, np.array(["a", "b"], dtype=object)[cat]]).astype(object)
    return X, np.array(["neg", "pos"], dtype=object)[y]


@pytest.mark.parametrize("cls", [NaiveBayesClassifier, QDAClassifier])
@pytest.mark.parametrize("learning", ["ml", "rc"])
def test_fit_predict_score(cls, learning):
    X, y = data()
    clf = cls(learning=learning).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (400, 2) and np.allclose(proba.sum(axis=1), 1)
    assert set(clf.predict(X)) <= {"neg", "pos"}
    Xt, yt = data(seed=1)
    assert clf.score(Xt, yt) > 0.75


def test_rc_training_soft_loss_not_above_ml():
    X, y = data()
    rc, ml = NaiveBayesClassifier(learning="rc").fit(X, y), NaiveBayesClassifier(learning="ml").fit(X, y)
    assert rc.training_soft_loss_ <= ml.training_soft_loss_


def test_errors():
    X, y = data()
    with pytest.raises(CRCError, match="not fitted"):
        NaiveBayesClassifier().predict(X)
    with pytest.raises(CRCError, match="learning must be"):
        NaiveBayesClassifier(learning="em").fit(X, y)
    with pytest.raises(CRCError, match="unknown category 'c'"):
        bad = X.copy()
        bad[0, 3] = "c"
        NaiveBayesClassifier().fit(X, y).predict(bad)
