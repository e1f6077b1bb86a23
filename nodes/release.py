"""What a peer releases each round: its statistics after the local step, with differential-privacy noise when the
run is private (the peer continues from the released value, ``crc.core.privacy``), and what it puts on the wire,
which a research Byzantine peer poisons (``crc.core.attacks``).

All of a peer's noise is exact: discrete Gaussians on the fixed-point integers (``crc.core.discrete_gaussian``),
from a SHAKE-256 keystream keyed by the round and the run's ``noise_key``: 32 fresh bytes of ``os.urandom`` per run
(kept beside the checkpoint), never the run's public seed. Local noise (``exact_release``) rounds the statistics to
the fixed point and adds N_Z(0, ⌈(σ 2^F)²⌉) to every coordinate, its keystream keyed by those fixed-point
statistics too: a resumed peer that computes a round's statistics again releases the same values; if they differ
(other neighbours' statistics arrived), the noise is fresh, rather than the same noise, which would publish the
noise-free difference of the two. (A keyed pseudorandom function of the statistics: each release's noise is the
discrete Gaussian whatever the statistics, as long as the key is secret.)

With distributed noise (``crc.core.distributed_noise``) the peer adds no noise of its own to its statistics: each
round it draws one discrete Gaussian share (integer, fixed-point units) for every distinct closed neighbourhood it
is a member of, and adds it to what it sends that neighbourhood's recipient (masked, ``crc.nodes.secure_aggregation``)
and, as a recipient, to its own part of its own neighbourhood's sum. Recipients with the same closed neighbourhood
get the same share, as in the simulator, unless dropouts are tolerated (``--dp-dropouts``): two of them could then
unmask different members of the same shares, so each gets its own; a resumed peer sends a round again with the
same shares."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping

import numpy as np

from crc.core.attacks import poison
from crc.core.discrete_gaussian import KeyedRandom, discrete_gaussian_array
from crc.core.distributed_noise import (
    FIXED_POINT_BITS,
    exact_release,
    fixed_point,
    noise_in_statistics,
    share_variance,
    sum_key,
)
from crc.core.models.base import GenerativeModel
from crc.core.plausibility import SECURE_AGGREGATION_TERM_LIMIT
from crc.core.privacy import Privacy

_ENCODABLE = float(np.nextafter(SECURE_AGGREGATION_TERM_LIMIT, 0.0))
"""The largest |value| secure aggregation's fixed point encodes (``to_fixed`` takes values strictly within the limit)."""


class Release:
    """A peer's releases of ``model``'s statistics (size,): noise of ``privacy``'s sigma from keystreams keyed by
    ``noise_key`` (32 secret bytes, needed with privacy), and the ``attack`` of a Byzantine peer seeded from its
    address ``bind`` (None: none). Distributed noise needs ``hoods``: the closed neighbourhood (its members'
    addresses) of every recipient of this peer's statistics, this peer's own included."""

    def __init__(self, model: GenerativeModel, *, privacy: Privacy | None, attack: str | None, bind: str,
                 hoods: Mapping[str, frozenset[str]] | None = None, noise_key: bytes | None = None):
        self.model, self.privacy, self.attack = model, privacy, attack
        self._attack_rng = np.random.default_rng(zlib.crc32(bind.encode()))
        if privacy is not None and noise_key is None:
            raise ValueError("a private peer's noise needs a noise key")
        self._noise_key = noise_key
        self.distributed = privacy is not None and privacy.noise == "distributed"
        if self.distributed:
            if hoods is None:
                raise ValueError("distributed noise needs every recipient's closed neighbourhood (secure aggregation)")
            units = privacy.sigma * 2.0**FIXED_POINT_BITS
            self._sums = {address: sum_key(address, hood, privacy.dropouts) for address, hood in hoods.items()}
            self._variances = {key: share_variance(units, len(key[0]), privacy.colluders, privacy.dropouts)
                               for key in set(self._sums.values())}
            self._shares: dict[int, dict[str, np.ndarray]] = {}

    @property
    def local(self) -> bool:
        """Whether the peer noises its own statistics (local noise): each noisy local step is an accounted release."""
        return self.privacy is not None and not self.distributed

    def _keystream(self, round_: int, context: bytes = b"") -> KeyedRandom:
        """The keystream of ``round_``'s noise (and of ``context``) under the run's noise key."""
        return KeyedRandom(hashlib.sha256(self._noise_key + round_.to_bytes(8, "little") + context).digest())

    def private(self, stats: np.ndarray, round_: int) -> np.ndarray:
        """The statistics (size,) a local step of ``round_`` gave, as released: with the plan's exact local noise, or
        as they are without privacy (or with distributed noise, which goes into the sums instead)."""
        if self.privacy is None or self.distributed:
            return stats
        rng = self._keystream(round_, fixed_point(stats).tobytes())
        return exact_release(self.model, stats, self.privacy.sigma, rng)

    def contributed(self, stats: np.ndarray) -> np.ndarray:
        """Distributed noise: the statistics (size,) a local step gave, as this peer puts them into its recipients'
        sums, held coordinate by coordinate within what secure aggregation encodes. Nothing looks at them to decide
        whether to send them (that decision would depend on the private data without noise): the recipients check
        the noisy sums instead. Holding them in a box is a projection, so one instance still moves them by at most
        the sensitivity."""
        return np.clip(stats, -_ENCODABLE, _ENCODABLE)

    def on_the_wire(self, stats: np.ndarray) -> np.ndarray:
        """What the peer sends for its statistics: the statistics, or a Byzantine peer's poisoned ones."""
        if self.attack is None:
            return stats
        return poison(self.model, stats, self.attack, self._attack_rng)

    def shares(self, round_: int) -> dict[str, np.ndarray] | None:
        """Distributed noise: this peer's share (size,) int64 in fixed-point units for each recipient of its
        statistics of ``round_``, one draw per distinct closed neighbourhood, or per recipient with dropouts (the same
        on a second call, and for the same noise key); None without distributed noise."""
        if not self.distributed:
            return None
        if round_ not in self._shares:
            rng = self._keystream(round_)
            drawn = {key: discrete_gaussian_array(rng, variance, (self.model.size,))
                     for key, variance in sorted(self._variances.items(), key=lambda item: (sorted(item[0][0]), item[0][1]))}
            self._shares = {round_: {address: drawn[key] for address, key in self._sums.items()},
                            **{r: s for r, s in self._shares.items() if r == round_ - 1}}
        return self._shares[round_]

    def with_share(self, stats: np.ndarray, recipient: str, round_: int) -> np.ndarray:
        """``stats`` (size,) plus this peer's share for ``recipient`` in ``round_``, in statistics units with its class
        counts centred (the ESS stays exact); ``stats`` as they are without distributed noise."""
        shares = self.shares(round_)
        if shares is None:
            return stats
        return stats + noise_in_statistics(self.model, shares[recipient])
