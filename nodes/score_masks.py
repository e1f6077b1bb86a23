"""Secure aggregation of a vertical group's scores: the label holder learns only the sum of its members' block scores,
never one member's (``crc node --partition vertical:K --secure-aggregation``; K >= 3, so that two members or more
hide each other).

Member w sends, for pass t, the words

    y_w = F(scores_w) + sum_{w' member, w' != w} sign(w, w') PRG(k_{w,w'})   (mod 2^64)

where F is ``crc.nodes.secure_aggregation``'s fixed point (2^-20, terms below 2^34), k_{w,w'} = HKDF(X25519(w, w'),
run, label holder, t, h_w) the pairwise seed both members derive from their CURVE keys (no key exchange), and
sign(w, w') = +1 if w's address sorts first, else -1. h_w is member w's transcript: the SHA-256 chain of everything
it took from the label holder (the group's ids, then every pass's weights). The masks cancel in the sum of every
member's words, which is all the label holder can decode, as long as it sent every member the same: a label holder
that shows members different ids or weights (zero weights to all but one member, so that the change of the sum from
one pass to the next is that member's change of scores alone) gets words whose masks do not cancel, decodes nothing,
and the group stops. Unlike secure aggregation over a neighbourhood, nothing has to survive a member's
drop-out (a vertical group stops without it), so there are no self-masks and no shares: the label holder is never
given a seed. A member that restarts sends the same words again for a pass (its scores are those of its checkpoint,
its masks the pass's).

The cost: the decoded sum is within (K - 1) 2^-21 of the exact one, absolutely, so a run with secure aggregation
follows the plain run to about 1e-6 rather than to rounding. What remains revealed: the sum of the members' scores
(with K = 2 the one member's: refused), and everything else the plain protocol reveals (the table in docs/explanation/vertical.md).
"""

from __future__ import annotations

import hashlib

import msgpack
import numpy as np

from crc.core.errors import CRCError
from crc.nodes.secure_aggregation import derive, from_fixed, mask, shared_secret, to_fixed

PURPOSE = "vertical-scores"
TRANSCRIPT_BYTES = 32


class ScoreMasks:
    """One peer's pairwise masks with the other ``members`` of its group (address -> z85 public key): this peer's
    ``secret_key`` (z85) and address ``bind``, in run ``run``."""

    def __init__(self, secret_key: str, bind: str, members: dict[str, str], run: str):
        self.bind, self.run = bind, run
        self._secrets = {address: shared_secret(secret_key, public) for address, public in members.items()}
        self.transcript = bytes(TRANSCRIPT_BYTES)
        """The digest of what this member took from the label holder so far (``took``), in every pass's masks."""

    def took(self, kind: str, round_: int, *fields) -> None:
        """This member took a message of ``kind`` and round ``round_`` from the label holder, whose content is
        ``fields`` (the ids; the best flag and the weights' float64 bytes): chained into the transcript."""
        body = msgpack.packb([kind, round_, *fields], use_bin_type=True)
        self.transcript = hashlib.sha256(self.transcript + body).digest()

    def masked(self, scores: np.ndarray, holder: str, pass_: int) -> np.ndarray:
        """This member's words (n,) uint64 for its ``scores`` (any shape) of pass ``pass_``, sent to ``holder``, under
        masks keyed by its transcript; a CRCError for a score beyond what the fixed point encodes."""
        try:
            words = to_fixed(np.ravel(scores))
        except ValueError as exc:
            raise CRCError(f"pass {pass_}: this block's scores cannot be aggregated securely ({exc})") from None
        for address, secret in self._secrets.items():
            if address == holder:
                continue
            pad = mask(derive(secret, PURPOSE, self.run, holder, pass_, self.transcript.hex()), words.size)
            words = words + pad if self.bind < address else words - pad  # uint64: modulo 2^64
        return words


def unmasked_sum(words: list[np.ndarray]) -> np.ndarray:
    """The sum (n,) float64 of every member's scores from their words (each (n,) uint64)."""
    total = np.zeros_like(words[0])
    for each in words:
        total = total + each
    return from_fixed(total)
