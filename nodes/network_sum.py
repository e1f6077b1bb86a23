"""One secure sum of every peer a round (``--sum-over network``): masked words relayed up the roster's spanning tree,
the total sent back down, all or nothing.

Round r, for the n peers of the roster (``crc.nodes.roster``), each with its CURVE key pair:

1. Every peer w computes its words

       y_w = F(s_w) + η_w + sum_{w' != w} sign(w, w') PRG(k_{w,w'})   (mod 2^64)

   with F the fixed point of ``crc.nodes.secure_aggregation`` (2^20, two's complement), η_w its distributed-noise share
   (none without distributed noise), k_{w,w'} = HKDF(X25519(w, w'), run, roster digest, r, h_w) a seed only w and w'
   can derive, h_w the digest of the total w took in round r - 1 (``NetworkSum.seal``; zeros in round 0), and
   sign(w, w') = +1 if w's address sorts first, else -1: every pairwise mask cancels in the sum of all n peers if they
   took the same total.
2. A peer adds its children's partial sums to its own words and sends the result to its parent with the set of
   contributors it holds (a bitmap over the roster). A child's partial names only peers of the child's subtree.
3. The root, once it holds every peer's words, has the total Σ F(s_w) + η_w and sends it down the tree; each peer
   forwards it to its children. If any peer's words are missing, the root sends a total with no words: the round
   releases nothing, and every peer continues from its own start (``Peer._own_start``).

What each party learns. A relay sees partial sums whose masks are pseudorandom to it: the partial of a subtree S still
carries the masks of every pair across S's boundary, removable only by colluders holding every seed across it, i.e.
every peer outside S, who then learn only what the total tells them (their own words subtracted). There are no
reveals: no peer ever sends a seed, so a sum that misses a peer can never be unmasked, by anyone (the root included),
and every round has at most one sum that unmasks, that of all peers, released to every peer. A parent (the root above
all) that sends its children different totals, or a failed total to some and the real one to others, would otherwise
learn from two later sums the response of one peer's data to two aggregates (a model-inconsistency attack, Pasquini et
al. 2022); the digest h_w in the seeds makes the next sum of peers that took different totals pseudorandom to
everyone but a set holding every seed across the split. So a peer that waited in vain for a total the others took
(its parent silent) or skipped ahead (left behind) costs the next round its release too. With distributed noise each
share has the variance ``share_variance(σ, n, colluders)`` sizes: the shares of all but a recipient and the colluders
add up to σ², and the accountant counts one release a round.

A peer resumed from its checkpoint computes the same words again for the round it resumed at (its statistics, noise
share and h_w are those of the checkpoint and the noise key, the masks a function of them and the round): never a
second, different word of a round. A relay that drops a child's partial costs the round (no release), as a peer that stops
does; the roster is fixed for the run, so a peer gone for good costs every later round its release.
"""

from __future__ import annotations

import hashlib

import numpy as np
import zmq

from crc.core.errors import CRCError
from crc.nodes.peer_checkpoint import SEAL_BYTES
from crc.nodes.roster import Roster
from crc.nodes.secure_aggregation import derive, from_fixed, mask, shared_secret, to_fixed
from crc.nodes.wire import Rejected, SumFrame

NO_TOTAL = bytes(SEAL_BYTES)
"""What a peer's words of the first round come after: no total yet."""


class NetworkSum:
    """Peer ``me``'s part in the network sums of run ``run`` over ``roster``, with its z85 CURVE ``secret_key``: its
    masked words, the partial sums its children send it, the total its parent sends, for rounds within ``window``
    of the awaited one (and each neighbour's latest frame beyond it), in a run of ``rounds`` rounds (None: no end)."""

    def __init__(self, me: str, run: str, roster: Roster, secret_key: str, *, window: int = 8,
                 rounds: int | None = None):
        if zmq.curve_public(secret_key.encode("ascii")).decode("ascii") != roster.keys[me]:
            raise CRCError(f"the roster gives {me} another public key than that of this peer's secret key: no peer's "
                           "masks would cancel with its own, and no round would release anything")
        self.me, self.run, self.roster, self.window, self.rounds = me, run, roster, window, rounds
        self.members = roster.members
        self.digest = roster.digest
        self.position = roster.position(me)
        self._index = {address: i for i, address in enumerate(self.members)}
        self._subtree = {child: _subtree(child, roster.children) for child in self.position.children}
        self._pairs = {other: shared_secret(secret_key, roster.keys[other]) for other in self.members if other != me}
        self._partials: dict[int, dict[str, SumFrame]] = {}
        self._totals: dict[int, SumFrame] = {}
        self._ahead: dict[str, SumFrame] = {}  # each neighbour's latest frame beyond the window: where a peer behind goes

    # ------------------------------------------------------------------------------------------------- words

    def words(self, stats: np.ndarray, round_: int, share: np.ndarray | None = None, *,
              after: bytes | None = None) -> np.ndarray:
        """This peer's masked words (size,) uint64 of ``stats`` (size,) for ``round_``, with its noise ``share``
        (size,) int64 in fixed-point units (None: no distributed noise), after the total it took in the round before
        (its ``seal``; None before the first round)."""
        words = to_fixed(stats)
        if share is not None:
            words = words + np.asarray(share, dtype=np.int64).view(np.uint64)
        for other, secret in self._pairs.items():
            pair = mask(derive(secret, "network-sum", self.run, self.digest, round_, (after or NO_TOTAL).hex()), len(words))
            words = words + pair if self.me < other else words - pair
        return words

    def bitmap(self, contributors) -> bytes:
        """The contributors bitmap (bit i of the roster's i-th sorted address, little-endian bit order)."""
        bits = np.zeros(len(self.members), dtype=bool)
        bits[[self._index[w] for w in contributors]] = True
        return np.packbits(bits, bitorder="little").tobytes()

    def contributors(self, bitmap: bytes) -> frozenset[str]:
        bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")[:len(self.members)]
        return frozenset(self.members[i] for i in np.flatnonzero(bits))

    # -------------------------------------------------------------------------------------------- frames in

    def take(self, frame: SumFrame, wanted: int) -> None:
        """Keep a child's partial or the parent's total of a round in [``wanted``, ``wanted + window``], and each
        neighbour's latest frame beyond it (``latest``, ``children_ahead``); a Rejected for a frame from a peer in the
        wrong role, a partial naming peers outside its sender's subtree, a round before the window (or beyond it and
        not the sender's latest) or beyond the run, or a second, different frame of a round (a copy, sent again after
        a restart, is dropped)."""
        if self.rounds is not None and frame.round >= self.rounds:
            raise Rejected("malformed", f"a {frame.kind} of round {frame.round}, beyond this run's {self.rounds} rounds",
                           frame.sender)
        if frame.kind == "partial":
            if frame.sender not in self._subtree:
                raise Rejected("role", f"a partial sum from {frame.sender}, not a child of this peer in the roster's tree",
                               frame.sender)
            if frame.words is None or not self.contributors(frame.contributors) <= self._subtree[frame.sender]:
                raise Rejected("role", "a partial sum naming contributors outside its sender's subtree", frame.sender)
        elif frame.sender != self.position.parent:
            raise Rejected("role", f"a total from {frame.sender}, not this peer's parent in the roster's tree",
                           frame.sender)
        if frame.round > wanted + self.window:
            self._keep_ahead(frame, wanted)
            return
        if frame.round < wanted:
            raise Rejected("stale", f"a {frame.kind} of round {frame.round}, this peer awaits round {wanted}", frame.sender)
        held, key = ((self._partials.setdefault(frame.round, {}), frame.sender) if frame.kind == "partial"
                     else (self._totals, frame.round))
        if key in held:
            if not _same(held[key], frame):
                raise Rejected("duplicate", f"a second, different {frame.kind} of round {frame.round}", frame.sender)
            return
        held[key] = frame

    def _keep_ahead(self, frame: SumFrame, wanted: int) -> None:
        """Keep a neighbour's latest frame beyond the window (one per neighbour); the one it replaces, or a frame not
        later than the one kept, is a Rejected (ahead)."""
        kept = self._ahead.get(frame.sender)
        if kept is not None and kept.round >= frame.round:
            older = frame
        else:
            older, self._ahead[frame.sender] = kept, frame
        if older is not None:
            raise Rejected("ahead", f"a {older.kind} of round {older.round}, more than {self.window} rounds after the "
                                    f"awaited {wanted}, and a later one is kept", frame.sender)

    def children_in(self, round_: int, awaited) -> bool:
        """Whether the partials of round ``round_`` from every child in ``awaited`` are here."""
        return set(awaited) <= set(self._held_partials(round_))

    def _held_partials(self, round_: int) -> dict[str, SumFrame]:
        ahead = {child: frame for child, frame in self._ahead.items()
                 if frame.kind == "partial" and frame.round == round_}
        return {**ahead, **self._partials.get(round_, {})}

    def total(self, round_: int) -> SumFrame | None:
        kept = self._ahead.get(self.position.parent)
        if round_ not in self._totals and kept is not None and kept.round == round_:
            return kept
        return self._totals.get(round_)

    def latest(self, round_: int) -> int | None:
        """The latest round after ``round_`` of which the parent's total is held (None): the parent has gone on, so
        ``round_``'s total will not come, and a peer left behind goes there (taking that total, whose seal the next
        round's masks need). Not one child's partial: a child is never ahead of its parent unless it deviates, and
        would then make its parent skip rounds (the root, which has no parent, follows all its children:
        ``children_ahead``)."""
        kept = self._ahead.get(self.position.parent)
        later = [r for r in [*self._totals, *([] if kept is None else [kept.round])] if r > round_]
        return max(later) if later else None

    def children_ahead(self, round_: int) -> int | None:
        """The earliest of the children's latest rounds after ``round_`` of which a partial is held, if every child
        has sent one (None otherwise): where a root left behind (restarted while its children went on without it)
        goes. No child alone can move it."""
        latest = []
        for child in self.position.children:
            rounds = [r for r, held in self._partials.items() if child in held and r > round_]
            kept = self._ahead.get(child)
            rounds += [] if kept is None or kept.round <= round_ else [kept.round]
            if not rounds:
                return None
            latest.append(max(rounds))
        return min(latest) if latest else None

    # --------------------------------------------------------------------------------------------- the sums

    def fold(self, own: np.ndarray, round_: int) -> tuple[frozenset[str], np.ndarray]:
        """(contributors, words) of this peer's subtree in ``round_``: its own words ``own`` and its children's
        partials that arrived; the round's partials are let go."""
        held = self._held_partials(round_)
        self._partials.pop(round_, None)
        words = own.copy()
        contributors = {self.me}
        for partial in held.values():
            words = words + partial.words
            contributors |= self.contributors(partial.contributors)
        return frozenset(contributors), words

    def complete(self, contributors) -> bool:
        return set(contributors) == set(self.members)

    def decode(self, total: SumFrame) -> np.ndarray | None:
        """The total's statistics sum (size,) float64, None if the round released nothing."""
        if total.words is None or not self.complete(self.contributors(total.contributors)):
            return None
        return from_fixed(total.words)

    def seal(self, total: SumFrame) -> bytes:
        """The ``SEAL_BYTES`` digest of a total as this peer took it: its round and, if it released the sum, its words
        (any total that released nothing seals alike, whoever sent it and whichever contributors it names: the peer
        continues from its own start all the same). The next round's masks cancel only between peers that took the
        same total."""
        released = self.decode(total) is not None
        words = np.ascontiguousarray(total.words, dtype="<u8").tobytes() if released else b""
        return hashlib.sha256(b"crc network total\x00" + total.round.to_bytes(8, "little") + bytes([released])
                              + words).digest()

    def advance(self, round_: int) -> None:
        """Forget the frames of rounds before ``round_``."""
        self._ahead = {sender: frame for sender, frame in self._ahead.items() if frame.round >= round_}
        for held in (self._partials, self._totals):
            for old in [r for r in held if r < round_]:
                del held[old]


def _subtree(peer: str, below) -> frozenset[str]:
    """``peer`` and every peer under it, ``below`` giving each peer's children in the tree."""
    found, stack = {peer}, [peer]
    while stack:
        children = below[stack.pop()]
        found.update(children)
        stack.extend(children)
    return frozenset(found)


def _same(a: SumFrame, b: SumFrame) -> bool:
    same_words = (a.words is None) == (b.words is None) and (a.words is None or np.array_equal(a.words, b.words))
    return same_words and a.contributors == b.contributors
