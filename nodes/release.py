"""What a peer releases each round: its statistics after the local step, with differential-privacy noise when the
run is private (the peer continues from the released value, ``crc.core.privacy``), and what it puts on the wire,
which a research Byzantine peer poisons (``crc.core.attacks``).

With distributed noise (``crc.core.distributed_noise``) the peer adds no noise of its own to its statistics: each
round it draws one discrete Gaussian share (integer, fixed-point units) for every distinct closed neighbourhood it
is a member of, and adds it to what it sends that neighbourhood's recipient (masked, ``crc.nodes.secure_aggregation``)
and, as a recipient, to its own part of its own neighbourhood's sum. Recipients with the same closed neighbourhood
get the same share, as in the simulator. Each round's shares come from a SHAKE-256 keystream keyed by the round and
the run's ``noise_key``: 32 fresh bytes of ``os.urandom`` per run (kept beside the checkpoint, so that a resumed
peer sends a round again with the same shares), never the run's public seed."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping

import numpy as np

from crc.core.attacks import poison
from crc.core.discrete_gaussian import KeyedRandom, discrete_gaussian_array
from crc.core.distributed_noise import FIXED_POINT_BITS, noise_in_statistics, share_variance
from crc.core.models.base import GenerativeModel
from crc.core.privacy import Privacy, release


class Release:
    """A peer's releases of ``model``'s statistics (size,): noise of ``privacy``'s sigma from a generator seeded with
    ``privacy_seed`` (None: the operating system's entropy), and the ``attack`` of a Byzantine peer seeded from its
    address ``bind`` (None: none). Distributed noise needs ``hoods``: the closed neighbourhood (its members' addresses)
    of every recipient of this peer's statistics, this peer's own included, and ``noise_key`` (32 secret bytes)."""

    def __init__(self, model: GenerativeModel, *, privacy: Privacy | None, privacy_seed: int | None,
                 attack: str | None, bind: str, hoods: Mapping[str, frozenset[str]] | None = None,
                 noise_key: bytes | None = None):
        self.model, self.privacy, self.attack = model, privacy, attack
        self._privacy_rng = np.random.default_rng(privacy_seed)
        self._attack_rng = np.random.default_rng(zlib.crc32(bind.encode()))
        self.distributed = privacy is not None and privacy.noise == "distributed"
        if self.distributed:
            if hoods is None or noise_key is None:
                raise ValueError("distributed noise needs every recipient's closed neighbourhood (secure aggregation) "
                                 "and a noise key")
            self._hoods = dict(hoods)
            units = privacy.sigma * 2.0**FIXED_POINT_BITS
            self._variances = {hood: share_variance(units, len(hood), privacy.colluders) for hood in set(hoods.values())}
            self._noise_key = noise_key
            self._shares: dict[int, dict[str, np.ndarray]] = {}

    def private(self, stats: np.ndarray) -> np.ndarray:
        """The statistics a local step gave, as released: with the plan's noise, or as they are without privacy (or
        with distributed noise, which goes into the sums instead)."""
        if self.privacy is None or self.distributed:
            return stats
        return release(self.model, stats, self.privacy.sigma, self._privacy_rng)

    def on_the_wire(self, stats: np.ndarray) -> np.ndarray:
        """What the peer sends for its statistics: the statistics, or a Byzantine peer's poisoned ones."""
        if self.attack is None:
            return stats
        return poison(self.model, stats, self.attack, self._attack_rng)

    def shares(self, round_: int) -> dict[str, np.ndarray] | None:
        """Distributed noise: this peer's share (size,) int64 in fixed-point units for each recipient of its
        statistics of ``round_``, one draw per distinct closed neighbourhood (the same on a second call, and for the
        same noise key); None without distributed noise."""
        if not self.distributed:
            return None
        if round_ not in self._shares:
            rng = KeyedRandom(hashlib.sha256(self._noise_key + round_.to_bytes(8, "little")).digest())
            drawn = {hood: discrete_gaussian_array(rng, variance, (self.model.size,))
                     for hood, variance in sorted(self._variances.items(), key=lambda item: sorted(item[0]))}
            self._shares = {round_: {address: drawn[hood] for address, hood in self._hoods.items()},
                            **{r: s for r, s in self._shares.items() if r == round_ - 1}}
        return self._shares[round_]

    def with_share(self, stats: np.ndarray, recipient: str, round_: int) -> np.ndarray:
        """``stats`` (size,) plus this peer's share for ``recipient`` in ``round_``, in statistics units with its class
        counts centred (the ESS stays exact); ``stats`` as they are without distributed noise."""
        shares = self.shares(round_)
        if shares is None:
            return stats
        return stats + noise_in_statistics(self.model, shares[recipient])
