"""What a peer's checkpoint holds, what it must match to be resumed, and its writing every round.

The file format is ``crc.nodes.checkpoint``'s; this module fixes its content for a peer. The statistics vector
holds the peer's statistics (size,), then, if its acceleration keeps it, its last aggregate (the statistics
before the first round); then, with momentum, the safeguard's reset flag for the next round (0 or 1), and, when the
peer releases only every k-th round (``PeerSettings.release_every``), its momentum memory, the aggregate of its last
release round (the averaging rounds between move the aggregate, not the memory); with exact
diffusion, the statistics after the last local steps (the statistics before the first round); then, with the
``averaged`` classifier, the running average of its statistics (the statistics before the first round); then, where the peer
keeps the last statistics heard on each link (``kept_links``), one flag per link in sorted order (1: heard, 0: not
yet) and each link's last heard statistics (zeros where not heard, never read); with a network sum, the seal of the
last total taken (``crc.nodes.network_sum.NetworkSum.seal``), one value 0-255 per byte (zeros before the first
round). A resumed peer thus continues exactly as an uninterrupted one, under injected message loss too.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from crc.core import acceleration
from crc.core.acceleration import PAPER, Acceleration
from crc.core.errors import CRCError
from crc.core.files import atomic_write_bytes, read_bytes
from crc.core.models.base import GenerativeModel
from crc.nodes import checkpoint
from crc.nodes.metrics import Metrics
from crc.nodes.settings import PeerSettings


@dataclass
class PeerState:
    """Where a peer is: its completed ``round``, its statistics (size,), its last aggregate (size,) when its
    acceleration keeps one, its acceleration memory, the last statistics (size,) heard on each kept link, and the
    running average of its statistics (size,) when its classifier is ``averaged``, and with a network sum the seal of
    the last total it took (None before the first)."""

    round: int
    stats: np.ndarray
    aggregated: np.ndarray | None = None
    memory: acceleration.Memory | None = None
    heard: dict[str, np.ndarray] = field(default_factory=dict)
    average: np.ndarray | None = None
    sealed: bytes | None = None


SEAL_BYTES = 32
"""The length of a network sum's seal of a total (``crc.nodes.network_sum.NetworkSum.seal``, SHA-256)."""


def kept_links(settings: PeerSettings, model: GenerativeModel) -> tuple[str, ...]:
    """The neighbours whose last heard statistics a peer keeps for a message the injected loss drops, sorted: all of
    them where ``acceleration.keeps_last_heard``, under injected loss and without secure aggregation (whose sums carry
    no one sender's statistics); none otherwise."""
    if settings.loss <= 0 or settings.secure_aggregation is not None:
        return ()
    return tuple(sorted(settings.peers)) if acceleration.keeps_last_heard(model, settings.acceleration) else ()


def identity(settings: PeerSettings, *, schema_id: str, ess: float, instances: int, last_heard: bool = False) -> dict:
    """What a checkpoint must match to be resumed; ``last_heard``: whether it holds the last heard on each link."""
    s = settings
    found = {"bind": s.bind, "peers": sorted(s.peers), "rounds": s.rounds, "iters": s.iters, "run": s.run,
             "schema_id": schema_id, "ess": ess, "instances": instances}
    if s.privacy is not None:  # resuming under other noise would break the accounting
        found["privacy"] = s.privacy.to_json()
    if s.secure_aggregation is not None:
        found["secure_aggregation"] = True
    if s.acceleration != PAPER:  # it also decides what the checkpoint holds (``layout``)
        found["acceleration"] = asdict(s.acceleration)
    if s.release_every > 1:  # so does this, and the rounds that release
        found["release_every"] = s.release_every
    if s.network is not None:  # so does this (the seal); and the masks derive from the roster
        found["network"] = s.network.digest
    if last_heard:  # it too decides what the checkpoint holds
        found["last_heard"] = True
    return found


def layout(state: PeerState, speedup: Acceleration, links: tuple[str, ...] = (), release_every: int = 1, *,
           network: bool = False) -> np.ndarray:
    """The checkpoint's statistics vector of ``state`` under ``speedup`` with the kept ``links``, releasing every
    ``release_every`` rounds, of a peer in a ``network`` sum or not (see the module's docstring)."""
    parts = [state.stats]
    if speedup.keeps_aggregate:
        parts.append(state.stats if state.aggregated is None else state.aggregated)
    if speedup.has_momentum:
        parts.append([float(state.memory is not None and bool(state.memory.reset))])
        if release_every > 1:
            parts.append(state.stats if state.memory is None else state.memory.previous)
    if speedup.exact_diffusion:
        parts.append(state.stats if state.memory is None else state.memory.previous)
    if speedup.keeps_average:
        parts.append(state.stats if state.average is None else state.average)
    if links:
        parts.append([float(link in state.heard) for link in links])
        parts.extend(state.heard.get(link, np.zeros_like(state.stats)) for link in links)
    if network:
        parts.append(np.frombuffer(state.sealed or bytes(SEAL_BYTES), dtype=np.uint8).astype(np.float64))
    return np.concatenate(parts) if len(parts) > 1 else state.stats


def restore(round_: int, vector: np.ndarray, speedup: Acceleration, size: int, *, source,
            links: tuple[str, ...] = (), release_every: int = 1, network: bool = False) -> PeerState:
    """The state a checkpoint's statistics ``vector`` of round ``round_`` holds (``layout``'s inverse); a momentum
    reset flag or a link's heard flag other than 0 or 1, a seal's value other than an integer 0-255, is a CRCError
    naming ``source``."""
    sealed = _sealed(vector[-SEAL_BYTES:], source=source) if network and round_ > 0 else None
    vector = vector[:-SEAL_BYTES] if network else vector
    state = PeerState(round_, vector[:size], heard=_heard(vector, links, size, source=source), sealed=sealed)
    if round_ == 0:  # no memory, aggregate, average or total before the first round
        return state
    at = size  # where the next part starts
    if speedup.keeps_aggregate:
        state.aggregated = vector[at:at + size]
        at += size
        if speedup.has_momentum:
            reset = vector[at]
            if reset not in (0.0, 1.0):
                raise CRCError(f"{source}: damaged checkpoint: momentum reset flag {float(reset)!r} (0 or 1)")
            at += 1
            previous = state.aggregated
            if release_every > 1:
                previous = vector[at:at + size]
                at += size
            state.memory = acceleration.Memory(previous, np.array(reset == 1.0))
    if speedup.exact_diffusion:
        state.memory = acceleration.Memory(vector[at:at + size], np.array(False))
        at += size
    if speedup.keeps_average:
        state.average = vector[at:at + size]
    return state


def _sealed(values: np.ndarray, *, source) -> bytes:
    """A seal (``SEAL_BYTES``) from its values in a checkpoint, one per byte."""
    if not np.all((values == np.rint(values)) & (values >= 0) & (values <= 255)):
        raise CRCError(f"{source}: damaged checkpoint: the seal of the last network total is not {SEAL_BYTES} bytes")
    return values.astype(np.uint8).tobytes()


def _heard(vector: np.ndarray, links: tuple[str, ...], size: int, *, source) -> dict[str, np.ndarray]:
    """The last heard statistics (size,) of each heard link, from the end of a checkpoint's ``vector`` (``layout``)."""
    if not links:
        return {}
    start = len(vector) - len(links) * (size + 1)
    flags = vector[start:start + len(links)]
    if not np.all((flags == 0.0) | (flags == 1.0)):
        raise CRCError(f"{source}: damaged checkpoint: last heard flags {flags.tolist()!r} (0 or 1)")
    blocks = vector[start + len(links):].reshape(len(links), size)
    return {link: blocks[at] for at, link in enumerate(links) if flags[at] == 1.0}


NOISE_KEY_FILE = "noise.key"
NOISE_KEY_BYTES = 32
NOISE_KEY_ENTRY = "noise_key"
"""The identity entry of a private peer's checkpoint that names its noise key (``_key_digest``): a valid key of
another run swapped in beside it would noise the round sent again afresh, releasing it twice."""


def _key_digest(key: bytes) -> str:
    """A name of a noise key that reveals nothing of it (SHA-256 of the key under a label of its own), hex."""
    return hashlib.sha256(b"crc checkpoint noise key\x00" + key).hexdigest()


def _kept_noise_key(path: Path) -> bytes:
    """The noise key a resumed run wrote in ``path``, or a CRCError saying why it cannot be used."""
    if not path.exists():
        raise CRCError(f"{path}: the run's noise key is missing: a resumed private peer would noise the round it sends "
                       f"again afresh, releasing it twice; restore the key or delete the checkpoint to start afresh")
    key = read_bytes(path, max_bytes=NOISE_KEY_BYTES, what="noise key", regular=True)
    if len(key) != NOISE_KEY_BYTES:
        raise CRCError(f"{path}: damaged noise key ({len(key)} bytes, not {NOISE_KEY_BYTES}); restore it or delete the "
                       f"checkpoint to start afresh")
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise CRCError(f"{path}: noise key open to other users (mode {mode:04o}): whoever reads it can remove the "
                       f"noise; chmod 600 it if no one else has, else delete the checkpoint to start afresh")
    return key


MASKED_FRESH_START = ("this peer masks what it sends (--secure-aggregation), and started afresh under the same "
                      "--run-id it would mask the rounds it sent again with the same masks: start every peer afresh "
                      "under a new --run-id, with new --checkpoint directories (`crc split --keys-for` writes both)")
"""``checkpoint.FRESH_START`` and ``checkpoint.DAMAGED`` for a masking peer: a new directory or a deleted checkpoint
alone would reuse its masks (resumed from the round before a damaged one, it may send a round again with other
statistics under the same masks)."""


class PeerCheckpoints:
    """A peer's checkpoints in ``directory`` (None: none are written or read), for a checkpoint ``identity``; a
    ``private`` peer's are bound to its noise key (``NOISE_KEY_ENTRY``). A ``guarded`` peer (``private``, or
    ``masked`` by secure aggregation) stops when the checkpoint of a round it is about to send cannot be written
    (``save``)."""

    def __init__(self, directory: str | None, identity: dict, speedup: Acceleration, log: logging.Logger,
                 links: tuple[str, ...] = (), release_every: int = 1, *, private: bool = False, masked: bool = False,
                 network: bool = False):
        self.directory, self.identity, self.speedup, self.log, self.links = directory, identity, speedup, log, links
        self.network = network
        self.release_every, self.private, self.masked, self.guarded = release_every, private, masked, private or masked
        self._kept_key: bytes | None = None  # the noise key of the checkpoint found by ``load``
        self._failing = False

    @property
    def _key_path(self) -> Path | None:
        return None if not self.directory else Path(self.directory) / NOISE_KEY_FILE

    def _bind_key(self, key: bytes) -> None:
        """Name ``key`` in the identity the checkpoints are written under from now on."""
        self.identity = {**self.identity, NOISE_KEY_ENTRY: _key_digest(key)}

    def load(self, start: PeerState) -> tuple[PeerState, dict] | None:
        """(the state, the metrics as written) of the checkpoint, or None without one; ``start`` is the state of a
        fresh run, which fixes the vector's length."""
        if not self.directory:
            return None
        if self.private and checkpoint.exists(self.directory):  # the key must be the one it was written with
            self._kept_key = _kept_noise_key(self._key_path)
            self._bind_key(self._kept_key)
        found = checkpoint.load(self.directory, identity=self.identity,
                                size=len(layout(start, self.speedup, self.links, self.release_every, network=self.network)),
                                remedy=MASKED_FRESH_START if self.masked else checkpoint.FRESH_START,
                                damaged=MASKED_FRESH_START if self.masked else checkpoint.DAMAGED)
        if found is None:
            return None
        round_, vector, metrics = found
        return restore(round_, vector, self.speedup, len(start.stats), source=self.directory, links=self.links,
                       release_every=self.release_every, network=self.network), metrics

    def noise_key(self, *, resumed: bool) -> bytes:
        """The 32-byte key of this run's privacy noise (local noise or distributed shares): fresh from ``os.urandom``
        for a fresh run (written beside the checkpoint, mode 0600, when there is a directory), the one written before
        for a ``resumed`` run, so that a resumed peer sends the round it sends again with the same noise. A resumed
        run's key that is missing, not 32 bytes or readable by others is a CRCError: fresh noise on a round already
        sent would release it twice, and whoever reads the key can subtract the noise. A fresh key is named in the
        identity of the checkpoints written from now on."""
        path = self._key_path
        if resumed and path is not None:
            return self._kept_key if self._kept_key is not None else _kept_noise_key(path)
        key = os.urandom(NOISE_KEY_BYTES)
        if path is not None:
            try:
                atomic_write_bytes(path, key, private=True)
            except OSError as exc:
                raise CRCError(f"{path}: cannot write the noise key ({exc.strerror or exc})") from None
        self._bind_key(key)
        return key

    def save(self, state: PeerState, metrics: Metrics, *, before_send: bool = False) -> None:
        """Write the checkpoint; a write that fails (a full disk, no file descriptor left) keeps the previous one,
        which ``checkpoint.save`` replaces only whole, and is counted and logged (an error when the last write
        succeeded, then quietly until one succeeds again): the run goes on. Except ``before_send`` on a ``guarded``
        peer, which raises a CRCError: restarted from the previous checkpoint after it sent the round, it would
        compute and send that round again from other inputs, a second release under fresh noise (privacy) or a
        second masking under the same pairwise seeds (secure aggregation). Stopped before the send, it resumes from
        the previous checkpoint and sends the round once."""
        if not self.directory:
            return
        failing = self._failing
        try:
            checkpoint.save(self.directory, identity=self.identity, round_=state.round,
                            stats=layout(state, self.speedup, self.links, self.release_every, network=self.network),
                            metrics=metrics.to_json())
        except OSError as exc:
            self._failing = True
            metrics.checkpoint_failures += 1
            if before_send and self.guarded:
                raise CRCError(f"round {state.round}: checkpoint not written ({exc.strerror or exc}): a private or "
                               f"secure-aggregation peer stops rather than send a round its checkpoint does not hold; "
                               f"free {self.directory} and start it again: it resumes from its last checkpoint") from None
            self.log.log(logging.DEBUG if failing else logging.ERROR,
                         "round %d: checkpoint not written (%s); the previous one is kept", state.round, exc)
            return
        self._failing = False
        if failing:
            self.log.warning("round %d: checkpoint written again", state.round)
