"""Secure aggregation over a closed neighbourhood (after Bonawitz et al., CCS 2017): a recipient learns only the sum
of its neighbours' statistics, never one neighbour's.

Roles, for one round r and one recipient u with neighbours N(u) (d = |N(u)| >= 2; with d = 1 nothing can be hidden):

1. Every contributor w in N(u) sends u the masked words

       y_w = F(s_w) + PRG(b_w) + sum_{w' in N(u), w' != w} sign(w, w') PRG(k_{w,w'})   (mod 2^64)

   where F is fixed point (``SCALE_BITS`` fractional bits, two's complement), b_w a fresh 256-bit self-mask seed,
   k_{w,w'} = HKDF(X25519(w, w'), run, u, r) the pairwise seed both w and w' derive from their CURVE keys (no key
   exchange), and sign(w, w') = +1 if w's address sorts first, else -1, so pairwise masks cancel in the sum.
   With the words, w sends Shamir shares (threshold ``threshold_for(d)``) of b_w and of each of its pairwise seeds
   k_{w,w'}, one bundle for each other member w' of N(u), sealed for w' (ChaCha20-Poly1305 under a key derived from
   X25519(w, w')): u relays them unread.
2. u names the set S of contributors whose words arrived and sends each member of N(u) the request with S and the
   bundles the members of S sealed for it (to a member left out of S, or with S smaller than a majority of N(u),
   ``fewest_survivors``, it is a notice that asks nothing).
3. Consistency (Bonawitz et al.'s consistency round, with MACs for signatures): each w' in S that accepts the
   request (``Contributor.agree``) commits to S for (u, r) and answers with its vouches: for every other member w of
   S, HMAC-SHA256 under a key derived from X25519(w', w) (only w' and w hold it) of (run, u, r, w', w, the
   membership of N(u) with its keys as w' knows it, S). Once every member of S agreed, u relays to each member the
   vouches the others made for it (a member that does not agree costs the round: nothing is confirmed).
4. Each w' in S answers the confirmation (``Contributor.reveal``) only if it carries a valid vouch of every other
   member of S for the same S and membership, with its own b_{w'}, its pairwise seeds k_{w',x} with the dropped
   contributors x not in S, and, of every other member w of S, its share of b_w and its shares of k_{w,x} for the
   dropped x. An honest contributor refuses a request that leaves itself out of S, names fewer than a majority of
   N(u) (two disjoint sets, {a, b} shown to a and b and {c, d} to c and d, would give u two sums; two majorities
   share a member, which commits to one of them) or, with distributed noise, fewer than all of N(u) but ``--dp-dropouts`` (the noise
   is sized for all shares but the colluders' and that many dropouts', ``fewest_survivors``), names any stranger, or differs from the set it
   committed to for the same (u, r); a confirmation without the vouches is a deviation (``Deviation``: u showed
   members different sets or memberships, or withheld a vouch), refused and reported. Since every honest member
   of S commits to one set and u cannot forge a vouch, all the answers u gets are for one set S that all its
   members saw: u can never hold both what strips w's
   pairwise masks with the members of S (never given) and b_w while w is not in S, nor b_w for a w it declared
   dropped, nor answers for two sets that differ (the attack {a, b} to a, {a, c} to c, which isolated c).
5. u adds the words of S, removes each member's self-mask and its pairwise masks with the dropped contributors
   (from the member's own answer, or, if it was lost after agreeing, from ``threshold_for(d)`` of the others'
   shares), and decodes the sum. If fewer words arrived than a request may name, a member of S did not agree, or a
   mask cannot be removed (too few shares), u unmasks nothing: it keeps its own statistics for the round.
6. A member that refuses a request or a confirmation (``Refused``) tells u so at once with a decline (``wire.Decline``:
   the round, u, and a reason code of ``wire.DECLINE_REASONS``, never free text). u takes a decline only from a member
   of the set S of a round it is unmasking that still owes it an answer; on one before the confirmations it gives the
   round up at once (the set cannot be confirmed) and withdraws the request, a notice to the members of S that did
   not decline (as at the timeout); after them it stops waiting for that member's reveal and unmasks
   what the others revealed, as it would at the timeout. Either way it ends as it would have after waiting its
   ``--timeout`` for a member that did not answer, only sooner (a restarted member declines the round it resumed
   at: its neighbours used to wait a timeout for it; its ``resumed`` notice counts as that decline where the request
   died with its last process, ``SecureAggregationSession.take_resumed``).

   Why a decline is safe: it carries no seed, share or vouch, and its reason is a function of what u itself sent
   (the set, the bundles, the vouches relayed) and of the member's own state that u sees anyway (whether it sent
   masked statistics for the round, whether it restarted: its frames come again from the round it resumed at); a
   deviation's code tells a deviating u that it was caught, which the missing reveal told it before. u unmasks
   nothing more with it: the others answer u exactly as they would had the member stayed silent, and u only stops
   waiting sooner. Whether the member answers was always its own choice: silent, it cost u the round (or its own
   reveal) at the timeout; declining, it costs the same at once, so it can stall the round no more than before, only
   faster. A decline that is not for u's open round or not from a member that owes it an answer (or a second answer)
   is rejected and counted like any other frame, and changes nothing; only a member of N(u) can send one (the
   connection's key names the sender).

Sealed bundles carry a random 96-bit nonce (``seal``): a peer resumed from its checkpoint masks its last round again,
under the same sealing key, and never reuses a nonce with it. Its neighbours send the resumed peer again the masked
frames its last process got (``crc.nodes.resend``): the same bytes, never masked anew, so it holds one frame twice,
and the commitments above still give it at most one sum of a round.

Distributed noise (``--dp-noise distributed``, ``crc.core.distributed_noise``): w adds its integer discrete
Gaussian share η_w (fixed-point units, ``crc.nodes.release``) to F(s_w) before masking, so y_w carries F(s_w) + η_w
and u unmasks the sum with the members' shares in it; the noise on its class counts is then centred
on its public total (``crc.core.privacy.centre_counts``) instead of checked.

Fixed point: x -> round(x 2^20) mod 2^64. Each term must satisfy |x| < 2^34 (about 1.7e10) and at most 64 terms
(``MAX_ENTRIES``) are summed, so the sum stays inside the signed 64-bit range; each term's rounding error is at most 2^-21, so the
decoded sum of d terms is within d 2^-21 (about 5e-7 d) of the exact sum, absolutely.

Threshold and collusion: the shares of w's seeds go to the d - 1 other contributors with threshold
floor((d-1)/2) + 1, a majority of them, and at least c + 1 for ``--colluders`` c (``threshold_for``): u alone learns
only the sum of S; u colluding with up to c contributors cannot rebuild a seed it was not given (at the threshold,
two colluders of four rebuilt a third member's self-mask and pairwise seeds from their shares and stripped its words
to its statistics, with no request; tested). With c colluders a request set must also hold more than (d + c) / 2 and
at least c + 2 members (``fewest_survivors``), so two sets answered in a round share an honest member (who commits to
one) and every sum holds two honest members; a neighbourhood of fewer than c + 2 contributors cannot be unmasked (an
error at start-up). With d = 2 the other contributor already knows the sum minus its own part.
Membership: who is in N(u), with their keys, is each member's own configuration (the neighbourhoods file, whose
keys must be those of the member's known-peers file: keys it knows out of band, ``crc.nodes.node``), never u's word;
the vouches make every member of S confirm the same membership, so u cannot show one member a membership padded with
identities it controls while the others see the true one. A member whose every other listed member is u's own
identity is protected only by the out-of-band keys.
See docs/explanation/threat-model.md for what this protects against whom.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

import msgpack
import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from zmq.utils import z85

from crc.core.distributed_noise import FIXED_POINT_BITS
from crc.core.errors import CRCError
from crc.core.privacy import centre_counts
from crc.nodes.wire import MAX_ENTRIES, NONCE_BYTES, SECURE_AGGREGATION_TERM_LIMIT, SEED_BYTES, SHARE_BYTES, encode_secure_aggregation
from crc.protocol.neighbourhoods import check_protectable, fewest_survivors, threshold_for

SCALE_BITS = FIXED_POINT_BITS
PRIME = 2**521 - 1
"""The Shamir field: a Mersenne prime above every 256-bit seed."""


class Refused(Exception):
    """A contributor will not answer this unmasking request (it would reveal more than the sum); ``reason`` is the
    code its decline carries (``wire.DECLINE_REASONS``)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class Deviation(Refused):
    """A refusal that shows a deviation from the protocol: the request set (or the membership) this peer was shown is
    not the one every other member of the set vouched for, or a member's vouch is missing. Either the recipient
    deviated (showed members different sets or memberships, withheld a vouch) or a member sent a false vouch or none:
    the MACs do not tell which, since the recipient cannot check them."""

    def __init__(self, detail: str):
        super().__init__("deviation", detail)


def to_fixed(x: np.ndarray) -> np.ndarray:
    """Statistics (size,) -> fixed-point words (size,) uint64; a value beyond ±SECURE_AGGREGATION_TERM_LIMIT is a ValueError."""
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.abs(x) < SECURE_AGGREGATION_TERM_LIMIT):
        raise ValueError(f"statistics beyond ±{SECURE_AGGREGATION_TERM_LIMIT:g} cannot be aggregated securely")
    return np.rint(x * 2.0**SCALE_BITS).astype(np.int64).view(np.uint64)


def from_fixed(words: np.ndarray) -> np.ndarray:
    """Fixed-point words (size,) uint64 (a sum of at most MAX_ENTRIES terms) -> float64 (size,)."""
    return np.asarray(words, dtype=np.uint64).view(np.int64).astype(np.float64) / 2.0**SCALE_BITS


def shared_secret(secret_key: str, public_key: str) -> bytes:
    """X25519 agreement of a z85 CURVE secret key and another peer's z85 public key (32 bytes)."""
    private = X25519PrivateKey.from_private_bytes(z85.decode(secret_key.encode()))
    return private.exchange(X25519PublicKey.from_public_bytes(z85.decode(public_key.encode())))


def derive(secret: bytes, purpose: str, *context: object) -> bytes:
    """A 32-byte key for ``purpose`` and ``context`` (run, recipient, round, ...) from a shared or random secret."""
    info = "\x1f".join(["crc-secure-aggregation", purpose, *map(str, context)]).encode()
    return HKDF(algorithm=hashes.SHA256(), length=SEED_BYTES, salt=None, info=info).derive(secret)


def mask(seed: bytes, length: int) -> np.ndarray:
    """``length`` pseudo-random uint64 words: the ChaCha20 keystream of ``seed`` (a 32-byte key, zero nonce)."""
    encryptor = Cipher(algorithms.ChaCha20(seed, bytes(16)), mode=None).encryptor()
    return np.frombuffer(encryptor.update(bytes(8 * length)), dtype=np.uint64).copy()


def shamir_split(secret: bytes, holders: int, threshold: int) -> list[int]:
    """Shares f(1), ..., f(holders) of ``secret`` (an integer below PRIME) with a random polynomial of degree
    ``threshold - 1``."""
    if not 1 <= threshold <= holders:
        raise ValueError(f"threshold {threshold} must be between 1 and the {holders} holders")
    coefficients = [int.from_bytes(secret, "big")] + [secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    shares = []
    for x in range(1, holders + 1):
        value = 0
        for c in reversed(coefficients):
            value = (value * x + c) % PRIME
        shares.append(value)
    return shares


def shamir_join(shares: Mapping[int, int]) -> bytes:
    """The secret (32 bytes) from shares {x: f(x)}, by Lagrange interpolation at 0 (give exactly the threshold)."""
    secret = 0
    for x, y in shares.items():
        numerator, denominator = 1, 1
        for other in shares:
            if other != x:
                numerator = numerator * (-other) % PRIME
                denominator = denominator * (x - other) % PRIME
        secret = (secret + y * numerator * pow(denominator, -1, PRIME)) % PRIME
    if secret >= 2 ** (8 * SEED_BYTES):
        raise ValueError("the shares do not rebuild a seed")
    return secret.to_bytes(SEED_BYTES, "big")


class Neighbourhood:
    """What a peer knows of one recipient's neighbourhood: the recipient, its contributors (sorted) and the run;
    ``dropouts``: the ``--dp-dropouts`` of distributed noise (None without it), and ``colluders``, the
    ``--colluders``, set ``fewest``, the fewest contributors a request may name (``fewest_survivors``), and the
    shares' ``threshold`` (``threshold_for``); a ValueError if the colluders leave no sum that could be unmasked.

    ``holder(w, w')`` is w''s Shamir x-coordinate for w's shares: its 1-based position among N(u) without w."""

    def __init__(self, run: str, recipient: str, contributors: list[str], *, dropouts: int | None = None,
                 colluders: int = 0):
        if not 2 <= len(contributors) <= MAX_ENTRIES or len(set(contributors)) != len(contributors):
            raise ValueError(f"a neighbourhood needs 2 to {MAX_ENTRIES} distinct contributors")
        try:
            check_protectable(len(contributors), colluders)
        except CRCError as exc:
            raise ValueError(f"the neighbourhood of {recipient}: {exc}") from None
        self.run, self.recipient, self.contributors = run, recipient, sorted(contributors)
        self.threshold = threshold_for(len(contributors), colluders)
        self.fewest = fewest_survivors(len(contributors), dropouts, colluders)

    def others(self, me: str) -> list[str]:
        return [w for w in self.contributors if w != me]

    def holder(self, owner: str, holder: str) -> int:
        return self.others(owner).index(holder) + 1


def seal(key: bytes, plain: bytes) -> bytes:
    """``plain`` sealed under ``key`` (ChaCha20-Poly1305): a random 96-bit nonce, then the ciphertext and its tag.

    The nonce is random, not a counter: a peer restarted from its checkpoint seals its last round's shares again
    under the same key (derived from the pair, recipient and round), and a nonce kept in memory would start over."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    return nonce + ChaCha20Poly1305(key).encrypt(nonce, plain, None)


def unseal(key: bytes, sealed: bytes) -> bytes:
    """The plain text of ``seal(key, plain)``; a ValueError if it is too short or does not authenticate."""
    if len(sealed) < NONCE_BYTES + 16:
        raise ValueError("too short to be sealed")
    try:
        return ChaCha20Poly1305(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], None)
    except Exception as exc:  # cryptography raises InvalidTag; anything else is as bad
        raise ValueError("does not authenticate") from exc


def vouch_message(hood: Neighbourhood, membership: list, round_: int, sender: str, receiver: str,
                  survivors: tuple[str, ...]) -> bytes:
    """What a member's vouch authenticates: the run, the recipient, the round, who vouches to whom, the membership
    of the neighbourhood as the voucher knows it ([address, public key] sorted) and the request set (sorted)."""
    return msgpack.packb(["crc-secure-aggregation-vouch", hood.run, hood.recipient, int(round_), sender, receiver,
                          membership, list(survivors)], use_bin_type=True)


class Contributor:
    """A peer's side towards one recipient: masks its statistics and answers the recipient's unmasking request.

    ``secret_key`` is the peer's z85 CURVE secret key, ``public_keys`` the z85 keys of the other contributors;
    ``resumed``: the round the peer resumed at from its checkpoint (None: a fresh run), which it answers no request
    for (``agree``).

    Answering takes two steps (the consistency round of Bonawitz et al. 2017, with MACs for signatures):
    ``agree`` commits this peer to the request set S of the round, once, and returns its vouches: for every other
    member w' of S a MAC, under a key only this peer and w' derive (from their X25519 secret), of S and of the
    neighbourhood's membership with its keys as this peer knows it. ``reveal`` then answers only if the recipient
    relays the vouch of every other member of S for this peer, each for the same S and membership: a recipient that
    shows members different sets (or memberships) cannot forge the vouch of the set a member did not see, so no
    honest member reveals anything for a set that not all its members committed to."""

    def __init__(self, me: str, neighbourhood: Neighbourhood, secret_key: str, public_keys: Mapping[str, str],
                 *, window: int = 8, resumed: int | None = None):
        if me not in neighbourhood.contributors:
            raise ValueError(f"{me} is not a contributor of {neighbourhood.recipient}")
        self.me, self.hood, self.window, self.resumed = me, neighbourhood, window, resumed
        self._pair = {w: shared_secret(secret_key, public_keys[w]) for w in neighbourhood.others(me)}
        own = z85.encode(X25519PrivateKey.from_private_bytes(z85.decode(secret_key.encode())).public_key()
                         .public_bytes_raw()).decode()
        self.membership = sorted([[me, own], *([w, public_keys[w]] for w in neighbourhood.others(me))])
        self._seeds: dict[int, bytes] = {}  # round -> this round's self-mask seed
        self._committed: dict[int, tuple] = {}  # round -> (request set, shares held for its members, pair shares)

    def _pair_seed(self, other: str, round_: int) -> bytes:
        return derive(self._pair[other], "pair", self.hood.run, self.hood.recipient, round_)

    def _share_key(self, other: str, round_: int, sender: str, receiver: str) -> bytes:
        return derive(self._pair[other], "share", self.hood.run, self.hood.recipient, round_, sender, receiver)

    def _vouch(self, other: str, round_: int, sender: str, receiver: str, survivors: tuple[str, ...]) -> hmac.HMAC:
        mac = hmac.HMAC(derive(self._pair[other], "vouch", self.hood.run, self.hood.recipient, round_, sender, receiver),
                        hashes.SHA256())
        mac.update(vouch_message(self.hood, self.membership, round_, sender, receiver, survivors))
        return mac

    def masked(self, stats: np.ndarray, round_: int, noise: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, bytes]]:
        """The masked words (size,) of ``stats`` for round ``round_`` (plus ``noise`` (size,) int64, a distributed
        noise share in fixed-point units, before masking) and, for every other contributor, the sealed bundle of its
        Shamir shares of this peer's secrets: the self-mask seed, then the pairwise seed with each other contributor
        in the neighbourhood's order ({holder: bytes})."""
        seed = secrets.token_bytes(SEED_BYTES)
        self._seeds[round_] = seed
        for old in [r for r in self._seeds if r <= round_ - self.window]:
            del self._seeds[old]
        others = self.hood.others(self.me)
        pair_seeds = [self._pair_seed(other, round_) for other in others]
        words = to_fixed(stats) + mask(seed, len(stats))
        if noise is not None:
            words = words + np.asarray(noise, dtype=np.int64).view(np.uint64)
        for other, pair_seed in zip(others, pair_seeds):
            pair = mask(pair_seed, len(stats))
            words = words + pair if self.me < other else words - pair
        split = [shamir_split(secret, len(others), self.hood.threshold) for secret in [seed, *pair_seeds]]
        sealed = {holder: seal(self._share_key(holder, round_, self.me, holder),
                               b"".join(shares[i].to_bytes(SHARE_BYTES, "big") for shares in split))
                  for i, holder in enumerate(others)}
        return words, sealed

    def agree(self, round_: int, survivors: list[str], sealed_for_me: Mapping[str, bytes]) -> dict[str, bytes]:
        """Commit to the recipient's request naming ``survivors`` (S) for ``round_``, with the shares the other
        members of S sealed for this peer: this peer's vouches {w': 32-byte MAC for w'} for the other members of S.
        Raises Refused when S would reveal more than a sum, or differs from the set already committed to, and for the
        rounds up to the one this peer resumed at: it may have committed to a set for them before it stopped, and
        masks the round it resumes at again with the same pairwise seeds (a recipient answered {a, b, c} before a and
        b restarted, so holding c's self-mask seed, then asking them for {a, b}, got their pairwise seeds with c and
        c's statistics alone)."""
        members = tuple(sorted(survivors))
        if len(set(members)) != len(members) or not set(members) <= set(self.hood.contributors):
            raise Refused("request", "the request names a peer outside the neighbourhood, or one twice")
        if self.me not in members:
            raise Refused("request", "the request leaves this peer out although it asks it to answer")
        if len(members) < self.hood.fewest:
            raise Refused("request", f"the request names {len(members)} of the {len(self.hood.contributors)} contributors, fewer "
                          f"than the {self.hood.fewest} a request must name (a majority, and with distributed noise all "
                          "whose shares the noise is sized for)")
        if round_ not in self._seeds:
            raise Refused("unsent", "no masked statistics of this round were sent (or they are too old)")
        if self.resumed is not None and round_ <= self.resumed:
            raise Refused("resumed", f"this peer resumed at round {self.resumed} from its checkpoint and may have answered another "
                          "request set for it before it stopped")
        if round_ in self._committed:
            if self._committed[round_][0] != members:
                raise Refused("changed", "the request differs from one already answered for this round")
            return self._vouches(round_, members)  # asked again: the same vouches, the shares of the first request
        shares, pair_shares = {}, {}
        for owner in members:
            if owner == self.me:
                continue
            if owner not in sealed_for_me:
                raise Refused("shares", f"no share from {owner}")
            try:
                plain = unseal(self._share_key(owner, round_, owner, self.me), sealed_for_me[owner])
            except ValueError as exc:
                raise Refused("shares", f"the share from {owner} does not decrypt") from exc
            partners = self.hood.others(owner)
            if len(plain) != SHARE_BYTES * (1 + len(partners)):
                raise Refused("shares", f"the shares from {owner} are not one per secret")
            values = [int.from_bytes(plain[i:i + SHARE_BYTES], "big") for i in range(0, len(plain), SHARE_BYTES)]
            shares[owner] = values[0]
            pair_shares[owner] = {partner: value for partner, value in zip(partners, values[1:]) if partner not in members}
        self._committed[round_] = (members, shares, pair_shares)
        for old in [r for r in self._committed if r <= round_ - self.window]:
            del self._committed[old]
        return self._vouches(round_, members)

    def _vouches(self, round_: int, members: tuple[str, ...]) -> dict[str, bytes]:
        return {w: self._vouch(w, round_, self.me, w, members).finalize() for w in members if w != self.me}

    def reveal(self, round_: int, vouches: Mapping[str, bytes]) -> dict:
        """The answer to the request this peer agreed to for ``round_``, once the recipient relays ``vouches``
        {w: w's MAC for this peer} of every other member of its set. Raises Deviation when one is missing or is not
        for the same set and membership (the recipient showed members different ones), Refused when nothing was
        agreed for the round."""
        if round_ not in self._committed or round_ not in self._seeds:
            raise Refused("unagreed", "no request of this round was agreed to (or it is too old)")
        members, shares, pair_shares = self._committed[round_]
        for w in members:
            if w == self.me:
                continue
            if w not in vouches:
                raise Deviation(f"the recipient withheld {w}'s vouch for the request set {list(members)} (or {w} "
                                "made none)")
            try:
                self._vouch(w, round_, w, self.me, members).verify(vouches[w])
            except InvalidSignature:
                raise Deviation(f"{w} did not vouch for the request set {list(members)} and this membership: the "
                                f"recipient showed the members different sets (or memberships), or {w} sent a false "
                                "vouch") from None
        dropped = [w for w in self.hood.others(self.me) if w not in members]
        return {"seed": self._seeds[round_], "shares": shares, "pair_shares": pair_shares,
                "pairs": {w: self._pair_seed(w, round_) for w in dropped}}


def _rebuild(neighbourhood: Neighbourhood, owner: str, shares: Mapping[str, int]) -> bytes | None:
    """A secret of ``owner`` from its holders' ``shares`` {holder: share}; None with fewer than the threshold."""
    if len(shares) < neighbourhood.threshold:
        return None
    chosen = dict(list(shares.items())[:neighbourhood.threshold])
    try:
        return shamir_join({neighbourhood.holder(owner, holder): value for holder, value in chosen.items()})
    except ValueError:
        return None


def unmask(neighbourhood: Neighbourhood, words: Mapping[str, np.ndarray], reveals: Mapping[str, dict]) -> np.ndarray | None:
    """The recipient's sum (size,) of the statistics of the contributors whose ``words`` arrived, from the
    ``reveals`` of those that answered; None if fewer than two arrived or a mask cannot be removed.

    A survivor that answered gives its own seeds; one that did not is covered by the shares the others hold of its
    self-mask seed and of its pairwise seeds with the dropped contributors."""
    survivors = sorted(words)
    if len(survivors) < 2:
        return None
    length = len(next(iter(words.values())))
    total = np.zeros(length, dtype=np.uint64)
    for w in survivors:
        total = total + words[w]
    answering = [h for h in reveals if h in words]
    dropped = [x for x in neighbourhood.contributors if x not in words]
    for w in survivors:
        if w in reveals:
            seed, pairs = reveals[w]["seed"], reveals[w]["pairs"]
        else:
            seed = _rebuild(neighbourhood, w, {h: reveals[h]["shares"][w] for h in answering if w in reveals[h]["shares"]})
            pairs = {x: _rebuild(neighbourhood, w, {h: reveals[h]["pair_shares"][w][x] for h in answering
                                                    if x in reveals[h]["pair_shares"].get(w, {})}) for x in dropped}
        if seed is None or any(pairs.get(x) is None for x in dropped):
            return None
        total = total - mask(seed, length)
        for x in dropped:  # remove w's term sign(w, x) PRG(k_wx)
            pair = mask(pairs[x], length)
            total = total - pair if w < x else total + pair
    return from_fixed(total)


def counted_sum(model, total: np.ndarray, terms: int, ess: float, *, noisy: bool = False) -> np.ndarray | None:
    """An unmasked sum (size,) of ``terms`` peers' statistics of ``model``, its class counts scaled back to exactly
    ``ess`` per term; None if they are off by more than fixed point explains (a contributor sent statistics of
    another ESS). A ``noisy`` sum (distributed noise shares) has its count noise centred on the public total instead
    (``centre_counts``): its total is off by the noise, so no check can tell another ESS apart."""
    expected = terms * ess
    if noisy:
        return centre_counts(model, total.copy(), expected)
    found = float(model.ess(total))
    rounding = model.table(total)[:, model.layout.columns("count")].size * terms * 2.0 ** -(SCALE_BITS + 1)
    if not abs(found - expected) <= rounding + 1e-9 * expected:
        return None
    return total * (expected / found)


class SecureNeighbourhoods:
    """A peer's secure aggregation: a contributor towards every neighbour with at least two contributors, and, with
    at least two neighbours itself, the recipient of its own neighbourhood. Builds and answers the frames of
    ``crc.nodes.wire``; ``keys`` is the peer's ``SecureAggregationKeys``, ``dropouts`` the ``--dp-dropouts`` of
    distributed noise (None without it), ``colluders`` the ``--colluders`` (``Neighbourhood``), ``resumed`` the
    round the peer resumed at (``Contributor``)."""

    def __init__(self, me: str, run: str, peers: tuple[str, ...], keys, *, dropouts: int | None = None, colluders: int = 0,
                 resumed: int | None = None):
        missing = [u for u in peers if u not in keys.neighbourhoods]
        if missing:
            raise ValueError(f"secure aggregation needs the neighbourhood of every neighbour; missing: {', '.join(missing)}")
        self.me, self.run = me, run
        self.contributors: dict[str, Contributor] = {}
        for u in peers:
            members = dict(keys.neighbourhoods[u])
            if me not in members:
                raise ValueError(f"the neighbourhood given for {u} does not list this peer ({me})")
            if len(members) >= 2:
                others = {w: key for w, key in members.items() if w != me}
                self.contributors[u] = Contributor(me, Neighbourhood(run, u, list(members), dropouts=dropouts,
                                                                   colluders=colluders),
                                                   keys.secret_key, others, resumed=resumed)
        self.own = Neighbourhood(run, me, list(peers), dropouts=dropouts, colluders=colluders) if len(peers) >= 2 else None

    @property
    def protected(self) -> list[str]:
        """The neighbours this peer's statistics reach only masked."""
        return list(self.contributors)

    @property
    def receives_masked(self) -> bool:
        return self.own is not None

    def masked_frame(self, recipient: str, stats: np.ndarray, round_: int, *, schema_id: str, ess: float,
                     noise: np.ndarray | None = None) -> bytes | None:
        """The masked statistics frame for ``recipient`` (with a distributed ``noise`` share, ``Contributor.masked``),
        or None if its neighbourhood is too small to hide them."""
        contributor = self.contributors.get(recipient)
        if contributor is None:
            return None
        words, sealed = contributor.masked(stats, round_, noise)
        return encode_secure_aggregation("masked", run=self.run, sender=self.me, round_=round_, schema=schema_id, ess=ess,
                             data=words, shares=sealed)

    def unmask_frame(self, contributor: str, received: Mapping, round_: int) -> bytes:
        """The unmasking request to ``contributor``: the survivors (the senders of ``received``, masked frames) and
        the shares the other survivors sealed for it (a mere notice if it is not among them)."""
        survivors = sorted(received)
        shares = {w: received[w].shares[contributor] for w in survivors if w != contributor and contributor in received[w].shares}
        return encode_secure_aggregation("unmask", run=self.run, sender=self.me, round_=round_, survivors=survivors, shares=shares)

    def agree_frame(self, request) -> bytes | None:
        """This peer's vouches for a neighbour's unmasking request (``wire.Unmask``), committing it to the request's
        set; None for a notice that asks nothing (this peer left out of the survivors, or fewer survivors than a
        request must name: the recipient unmasks nothing this round); raises Refused when answering would reveal
        more than a sum."""
        contributor = self.contributors.get(request.sender)
        if contributor is None:
            raise Refused("unsent", "this peer sent that neighbour no masked statistics")
        if self.me not in request.survivors or len(set(request.survivors)) < contributor.hood.fewest:
            return None
        vouches = contributor.agree(request.round, list(request.survivors), request.shares)
        return encode_secure_aggregation("agree", run=self.run, sender=self.me, round_=request.round, vouches=vouches)

    def confirm_frame(self, contributor: str, agreements: Mapping, round_: int) -> bytes:
        """The confirmation to ``contributor``: the vouches the other members of the set (the senders of
        ``agreements``, ``wire.Agree``) made for it, relayed unread."""
        vouches = {w: a.vouches[contributor] for w, a in agreements.items() if w != contributor and contributor in a.vouches}
        return encode_secure_aggregation("confirm", run=self.run, sender=self.me, round_=round_, vouches=vouches)

    def reveal_frame(self, confirmation) -> bytes:
        """The answer to a neighbour's confirmation (``wire.Confirm``) of the request this peer agreed to; raises
        Deviation when the relayed vouches do not show that every member of the set saw the same set and
        membership, Refused when nothing was agreed."""
        contributor = self.contributors.get(confirmation.sender)
        if contributor is None:
            raise Refused("unsent", "this peer sent that neighbour no masked statistics")
        answer = contributor.reveal(confirmation.round, confirmation.vouches)
        return encode_secure_aggregation("reveal", run=self.run, sender=self.me, round_=confirmation.round, seed=answer["seed"],
                             shares={w: v.to_bytes(SHARE_BYTES, "big") for w, v in answer["shares"].items()},
                             pairs=answer["pairs"],
                             pair_shares={w: {x: v.to_bytes(SHARE_BYTES, "big") for x, v in partners.items()}
                                          for w, partners in answer["pair_shares"].items()})

    def decline_frame(self, recipient: str, round_: int, refusal: Refused) -> bytes:
        """The decline to ``recipient`` of its request or confirmation for ``round_``: only ``refusal``'s reason code."""
        return encode_secure_aggregation("decline", run=self.run, sender=self.me, round_=round_, to=recipient,
                                         reason=refusal.reason)

    def unmask(self, words: Mapping[str, np.ndarray], reveals: Mapping, model, ess: float, *,
               noisy: bool = False) -> np.ndarray | None:
        """The sum (size,) of the survivors' statistics of ``model`` from their words and reveals (``wire.Reveal``),
        checked and scaled by ``counted_sum``; None if it cannot be unmasked or its class counts are off."""
        answers = {w: {"seed": r.seed, "shares": r.shares, "pairs": r.pairs, "pair_shares": r.pair_shares}
                   for w, r in reveals.items()}
        total = unmask(self.own, words, answers)
        return None if total is None else counted_sum(model, total, len(words), ess, noisy=noisy)
