"""What a peer releases each round: its statistics after the local step, with differential-privacy noise when the
run is private (the peer continues from the released value, ``crc.core.privacy``), and what it puts on the wire,
which a research Byzantine peer poisons (``crc.core.attacks``)."""

from __future__ import annotations

import zlib

import numpy as np

from crc.core.attacks import poison
from crc.core.models.base import GenerativeModel
from crc.core.privacy import Privacy, release


class Release:
    """A peer's releases of ``model``'s statistics (size,): noise of ``privacy``'s sigma from a generator seeded with
    ``privacy_seed`` (None: the operating system's entropy), and the ``attack`` of a Byzantine peer seeded from its
    address ``bind`` (None: none)."""

    def __init__(self, model: GenerativeModel, *, privacy: Privacy | None, privacy_seed: int | None,
                 attack: str | None, bind: str):
        self.model, self.privacy, self.attack = model, privacy, attack
        self._privacy_rng = np.random.default_rng(privacy_seed)
        self._attack_rng = np.random.default_rng(zlib.crc32(bind.encode()))

    def private(self, stats: np.ndarray) -> np.ndarray:
        """The statistics a local step gave, as released: with the plan's noise, or as they are without privacy."""
        if self.privacy is None:
            return stats
        return release(self.model, stats, self.privacy.sigma, self._privacy_rng)

    def on_the_wire(self, stats: np.ndarray) -> np.ndarray:
        """What the peer sends for its statistics: the statistics, or a Byzantine peer's poisoned ones."""
        if self.attack is None:
            return stats
        return poison(self.model, stats, self.attack, self._attack_rng)
