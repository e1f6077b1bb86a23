"""What one repeat of a simulation runs on: the standardized training and test data and the peers' parts, whether
the parts are rows (``crc.protocol.repeat``) or feature blocks (``crc.protocol.vertical``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from crc.core.models import GenerativeModel


@dataclass
class Split:
    """One repeat's standardized training and test data and the nodes' parts.

    ``train_rows`` and ``test_rows`` index the data set; ``parts`` index the training set.
    """

    model: GenerativeModel
    phi_train: np.ndarray
    y_train: np.ndarray
    phi_test: np.ndarray
    y_test: np.ndarray
    parts: list
    x_train: np.ndarray
    """Standardized training instances (m, d), for a feature map the peers compute otherwise (clipped data)."""
    train_rows: np.ndarray
    test_rows: np.ndarray
    absent: tuple = ()
    """Labels of the classes with no training instance: the schema keeps them, their counts stay at the floor
    and their test instances count as errors."""
    test_wanted: int = 0
    """The test instances ``test_size`` asked for: more than ``len(test_rows)`` when the data set was too small
    for a test fraction beside the training set, which then left its remaining instances for testing."""


def warn_singular_qda(dims: int, y_train: np.ndarray, n_classes: int, *, of: str = "") -> None:
    """Warn (``crc.data`` logger) if a class present in ``y_train`` (m,) has no more instances than ``dims``, the
    continuous features one QDA covariance spans (``of``: whose, as the message names them; the schema's by default):
    that class's covariance is singular, its eigenvalues floored at 1e-9. The message says whether every class is so
    (QDA as a whole may do little better than chance) or how many of them (a class of 3 rows among hundreds)."""
    counts = np.bincount(y_train, minlength=n_classes)
    present = counts[counts > 0]
    few = present[present <= dims]
    if not dims or not few.size:
        return
    if few.size == present.size:
        which, fate = "every class has", "every covariance is singular and QDA may do little better than chance"
    else:
        which = f"{few.size} of {present.size} classes ha{'s' if few.size == 1 else 've'}"
        fate = (f"{'its covariance is' if few.size == 1 else 'their covariances are'} singular (the fewest instances: "
                f"{few.min()}) and QDA may do little better than chance on {'it' if few.size == 1 else 'them'}")
    logging.getLogger("crc.data").warning(
        f"QDA: {which} no more training instances than the {dims} continuous features{of}, so {fate}: naive Bayes "
        f"(--model nb), or more training instances")
