"""Exact sampling of the discrete Gaussian N_Z(0, σ²) on the integers, in integer arithmetic from a CSPRNG.

N_Z(0, σ²) gives integer ``x`` probability proportional to exp(-x² / (2σ²)). The sampler is Algorithm 3 of
Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy": a discrete Laplace
proposal of scale t = ⌊σ⌋ + 1, accepted with probability exp(-(|y| - σ²/t)² / (2σ²)). Every Bernoulli
trial is a comparison of uniform integers (``randbelow``), every exponent an exact rational: no floating point,
so none of the attacks on floating-point noise (Mironov 2012) apply. The variance σ² is an integer here (the
caller rounds it up, which only adds noise).

The uniform integers come from ``KeyedRandom``: SHAKE-256 of a 32-byte key and a block counter (an extendable-output
hash in counter mode, a CSPRNG; standard library only); a peer keys it with fresh random bytes, the simulator with
a key derived from its seed (reproducible runs).
"""

from __future__ import annotations

import hashlib
import math
import random

import numpy as np

KEYSTREAM_CHUNK = 1 << 16
"""Bytes of keystream drawn at a time (one counter block)."""


class KeyedRandom(random.Random):
    """``random.Random`` whose bits are the keystream SHAKE-256(key ‖ counter) of ``key`` (32 bytes);
    ``randbelow(n)`` is uniform on [0, n) by rejection of ``getrandbits(n.bit_length())``."""

    def __init__(self, key: bytes):
        if len(key) != 32:
            raise ValueError(f"a keystream key has 32 bytes, got {len(key)}")
        self._key, self._counter = key, 0
        self._buffer, self._position = b"", 0
        super().__init__(0)

    def _block(self) -> bytes:
        self._counter += 1
        return hashlib.shake_256(self._key + self._counter.to_bytes(8, "little")).digest(KEYSTREAM_CHUNK)

    def seed(self, *args, **kwargs) -> None:
        """The state is the keystream: seeding has no effect (``random.Random.__init__`` calls it)."""

    def _bytes(self, count: int) -> bytes:
        start = self._position
        end = start + count
        if end > len(self._buffer):
            self._buffer, start, end = self._buffer[start:], 0, count
            while len(self._buffer) < count:
                self._buffer += self._block()
        self._position = end
        return self._buffer[start:end]

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            return 0
        return int.from_bytes(self._bytes((k + 7) // 8), "little") >> (-k % 8)

    def random(self) -> float:
        return self.getrandbits(53) * 2.0**-53

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), n >= 1: ``getrandbits(k)``, k = n.bit_length(), until below n (what
        ``random.Random`` does, written out: the samplers spend most of their time here, and the draws must not
        depend on the Python release)."""
        if n < 1:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        k = n.bit_length()
        size, shift = (k + 7) // 8, -k % 8
        while True:
            start = self._position
            if start + size <= len(self._buffer):  # ``_bytes`` inlined: most of a draw's time is these calls
                self._position = start + size
                r = int.from_bytes(self._buffer[start:start + size], "little") >> shift
            else:
                r = int.from_bytes(self._bytes(size), "little") >> shift
            if r < n:
                return r

    @classmethod
    def from_seed(cls, *seed: object) -> KeyedRandom:
        """A keystream keyed by the SHA-256 of ``seed`` (the simulator's reproducible noise)."""
        return cls(hashlib.sha256(repr(seed).encode()).digest())


def bernoulli(rng: KeyedRandom, numerator: int, denominator: int) -> bool:
    """True with probability numerator / denominator (0 <= numerator <= denominator)."""
    return rng.randbelow(denominator) < numerator


def bernoulli_exp(rng: KeyedRandom, numerator: int, denominator: int) -> bool:
    """True with probability exp(-γ), γ = numerator / denominator >= 0 (CKS 2020, Algorithm 1)."""
    while numerator > denominator:  # exp(-γ) = exp(-1)^⌊γ⌋ exp(-(γ - ⌊γ⌋))
        if not bernoulli_exp(rng, 1, 1):
            return False
        numerator -= denominator
    k = 1
    while bernoulli(rng, numerator, denominator * k):
        k += 1
    return k % 2 == 1


def discrete_laplace(rng: KeyedRandom, scale: int) -> int:
    """An integer with probability proportional to exp(-|x| / scale) (CKS 2020, Algorithm 2)."""
    while True:
        u = rng.randbelow(scale)
        if not bernoulli_exp(rng, u, scale):
            continue
        v = 0
        while bernoulli_exp(rng, 1, 1):
            v += 1
        magnitude = u + scale * v
        negative = bernoulli(rng, 1, 2)
        if negative and magnitude == 0:
            continue
        return -magnitude if negative else magnitude


def discrete_gaussian(rng: KeyedRandom, variance: int) -> int:
    """One draw of N_Z(0, variance), ``variance`` a positive integer (CKS 2020, Algorithm 3)."""
    if variance < 1:
        raise ValueError(f"the discrete Gaussian needs an integer variance >= 1, got {variance}")
    t = math.isqrt(variance) + 1
    while True:
        y = discrete_laplace(rng, t)
        # accept with exp(-(|y| - σ²/t)² / (2σ²)) = exp(-(|y| t - σ²)² / (2 σ² t²))
        if bernoulli_exp(rng, (abs(y) * t - variance) ** 2, 2 * variance * t * t):
            return y


def discrete_gaussian_array(rng: KeyedRandom, variance: int, shape: tuple[int, ...]) -> np.ndarray:
    """Independent draws of N_Z(0, variance) (int64, ``shape``)."""
    count = math.prod(shape)
    return np.array([discrete_gaussian(rng, variance) for _ in range(count)], dtype=np.int64).reshape(shape)
