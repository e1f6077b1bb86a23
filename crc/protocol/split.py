"""What one repeat of a simulation runs on: the standardized training and test data and the peers' parts, whether
the parts are rows (``crc.protocol.repeat``) or feature blocks (``crc.protocol.vertical``)."""

from __future__ import annotations

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
