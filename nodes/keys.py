"""CURVE keys of peers: key pairs in pyzmq's certificate format and the known-peers file.

A key pair is two files written by ``zmq.auth.create_certificates``:
``NAME.key`` (the public key, to hand to the neighbours) and ``NAME.key_secret``
(public and secret key, file mode 0600, never leaves its machine). Keys are
z85 text, 40 characters for 32 bytes.

The known-peers file, like ssh's known_hosts, is a JSON object mapping each
neighbour's address to its public key (z85)::

    {"tcp://10.0.0.6:7000": "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", ...}

Nothing in these files is trusted: sizes, types and keys are checked before use.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.utils import z85

from crc.core.errors import CRCError
from crc.core.files import atomic_write_json, read_json
from crc.nodes.wire import ADDRESS_BYTES, DEFAULT_RUN, MAX_ENTRIES

KEY_TEXT_LENGTH = 40
"""z85 characters of a 32-byte CURVE key."""
MAX_KEY_FILE_BYTES = 64 * 1024
MAX_KNOWN_PEERS_BYTES = 1024 * 1024
MAX_ADDRESS_LENGTH = 512
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
PUBLIC_SUFFIX, SECRET_SUFFIX = ".key", ".key_secret"


@dataclass(frozen=True)
class KeyPair:
    """A peer's own CURVE keys, z85 text."""

    public: str
    secret: str


@dataclass(frozen=True)
class PeerKeys:
    """What an authenticated peer needs: its own key pair and each neighbour's public key (address -> z85)."""

    own: KeyPair
    known: Mapping[str, str]


def new_key_pair() -> KeyPair:
    """A fresh CURVE key pair (kept in memory; ``write_keys`` writes pairs to files)."""
    public, secret = zmq.curve_keypair()
    return KeyPair(public=public.decode("ascii"), secret=secret.decode("ascii"))


def is_key(text) -> bool:
    """Whether ``text`` is a z85 CURVE key (40 characters decoding to 32 bytes)."""
    if not isinstance(text, str) or len(text) != KEY_TEXT_LENGTH or not text.isascii():
        return False
    try:
        return len(z85.decode(text.encode("ascii"))) == 32
    except (ValueError, KeyError, IndexError, OverflowError):  # z85.decode raises these for characters outside z85
        return False


def key_files(directory, name: str) -> tuple[Path, Path]:
    """(public, secret) key files of ``name`` in ``directory``."""
    return Path(directory) / f"{name}{PUBLIC_SUFFIX}", Path(directory) / f"{name}{SECRET_SUFFIX}"


def write_keys(directory, names: Iterable[str], *, force: bool = False) -> list[tuple[Path, Path]]:
    """A new key pair per name: ``directory/NAME.key`` and ``directory/NAME.key_secret`` (mode 0600).

    Existing key files are only replaced with ``force``; nothing is written if one of them exists without it.
    The secret file is written into a private temporary directory first, so it is never readable by others.
    """
    names = list(names)
    for name in names:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise CRCError(f"key name {name!r}: use letters, digits, '.', '_' and '-' (at most 100, not starting "
                           "with '.' or '-')")
    if len(set(names)) != len(names):
        raise CRCError("a key name is given twice")
    directory = Path(directory)
    existing = [str(path) for name in names for path in key_files(directory, name) if path.exists()]
    if existing and not force:
        raise CRCError(f"{existing[0]} exists: keys are never overwritten without --force")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(dir=directory, prefix=".keys-") as private:  # mode 0700
        for name in names:
            public, secret = (Path(p) for p in zmq.auth.create_certificates(private, name))
            os.chmod(secret, 0o600)
            os.chmod(public, 0o644)
            targets = key_files(directory, name)
            os.replace(secret, targets[1])
            os.replace(public, targets[0])
            written.append(targets)
    return written


def _certificate(path, *, secret: bool) -> tuple[str, str | None]:
    """(public, secret or None) z85 keys of a certificate file, checked."""
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise CRCError(f"{path}: cannot read key file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_KEY_FILE_BYTES:
        raise CRCError(f"{path}: not a key file (a regular file of at most {MAX_KEY_FILE_BYTES} bytes)")
    try:
        public, secret_key = zmq.auth.load_certificate(path)
        public, secret_key = public.decode("ascii"), secret_key.decode("ascii") if secret_key else None
    except (OSError, ValueError, UnicodeDecodeError):
        raise CRCError(f"{path}: not a CURVE certificate (no public-key line; write one with `crc keys`)") from None
    if not is_key(public):
        raise CRCError(f"{path}: the public key is not {KEY_TEXT_LENGTH} characters of z85")
    if secret and secret_key is None:
        raise CRCError(f"{path}: no secret key (a {PUBLIC_SUFFIX} file is public; give the {SECRET_SUFFIX} file)")
    if secret and info.st_mode & 0o077:
        raise CRCError(f"{path}: permissions {stat.S_IMODE(info.st_mode):04o} are too open for a secret key; "
                       f"run chmod 600 {path}")
    if secret_key is not None:
        if not is_key(secret_key):
            raise CRCError(f"{path}: the secret key is not {KEY_TEXT_LENGTH} characters of z85")
        if zmq.curve_public(secret_key.encode("ascii")).decode("ascii") != public:
            raise CRCError(f"{path}: the public key does not belong to the secret key")
    return public, secret_key


def load_key_pair(path) -> KeyPair:
    """A peer's own keys from its ``.key_secret`` file (which must be private to its owner)."""
    public, secret = _certificate(path, secret=True)
    return KeyPair(public=public, secret=secret)


def load_public_key(path) -> str:
    """The public key (z85) of a ``.key`` (or ``.key_secret``) file."""
    return _certificate(path, secret=False)[0]


def load_known_peers(path, required: Iterable[str] = ()) -> dict[str, str]:
    """The known-peers file at ``path`` (address -> z85 public key); every address in ``required`` must be in it.

    One line naming the file and the problem for anything else: too large, not a JSON object, an address twice,
    a value that is not a key, or two addresses sharing a key (a key names one peer).
    """
    path = Path(path)
    raw = read_json(path, max_bytes=MAX_KNOWN_PEERS_BYTES, what="known-peers file", max_depth=1)
    if not isinstance(raw, dict):
        raise CRCError(f"{path}: a known-peers file is a JSON object mapping addresses to public keys, "
                       f"not a {type(raw).__name__}")
    for address, key in raw.items():
        if len(address) > MAX_ADDRESS_LENGTH:
            raise CRCError(f"{path}: an address longer than {MAX_ADDRESS_LENGTH} characters")
        if not is_key(key):
            shown = repr(key) if isinstance(key, str) and len(key) <= 60 else type(key).__name__
            raise CRCError(f"{path}: the key of {address!r} is not a CURVE public key ({KEY_TEXT_LENGTH} characters "
                           f"of z85): {shown}")
    owners: dict[str, str] = {}
    for address, key in raw.items():
        if key in owners:
            raise CRCError(f"{path}: {owners[key]!r} and {address!r} have the same key")
        owners[key] = address
    missing = [address for address in required if address not in raw]
    if missing:
        raise CRCError(f"{path}: no key for neighbour {missing[0]!r}" +
                       (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return raw


def write_known_peers(path, known: Mapping[str, str]) -> None:
    """Write a known-peers file (address -> z85 public key)."""
    atomic_write_json(path, dict(sorted(known.items())))


def peer_secret_key_file(directory, index: int) -> Path:
    """Secret key file of peer ``index`` in a deployment directory (its public key is beside it, ``.key``)."""
    return key_files(Path(directory) / "keys", f"node-{index}")[1]


def deployment_run_id(directory) -> str:
    """The run id of the deployment whose keys ``write_peer_keys`` wrote into ``directory``: named after peer 0's
    public key, so that each new set of keys (a launch, a split) is a run of its own, as secure aggregation needs
    (``crc.nodes.settings.check_masking_run``); the default run id without keys (plaintext peers)."""
    public = key_files(Path(directory) / "keys", "node-0")[0]
    if not public.exists():
        return DEFAULT_RUN
    return "crc-" + hashlib.sha256(public.read_bytes()).hexdigest()[:16]


def peer_known_peers_file(directory, index: int) -> Path:
    return Path(directory) / f"known-peers-{index}.json"


def peer_neighbourhoods_file(directory, index: int) -> Path:
    return Path(directory) / f"neighbourhoods-{index}.json"


def load_neighbourhoods(path, own: str, neighbours: Iterable[str]) -> dict[str, dict[str, str]]:
    """The neighbourhoods file of secure aggregation: for each neighbour address, the public key (z85) of every
    member of its neighbourhood, this peer (``own``) included. One line naming the file for anything else: too
    large or deep, not objects of keys, a neighbour missing, this peer missing from one, an address too long."""
    path = Path(path)
    raw = read_json(path, max_bytes=MAX_KNOWN_PEERS_BYTES * 16, what="neighbourhoods file", max_depth=3)
    if not isinstance(raw, dict):
        raise CRCError(f"{path}: a neighbourhoods file maps each neighbour to {{address: public key}} of its neighbours")
    for recipient, members in raw.items():
        if not isinstance(members, dict) or not 1 <= len(members) <= MAX_ENTRIES:
            raise CRCError(f"{path}: the neighbourhood of {recipient[:80]!r} is not an object of 1 to {MAX_ENTRIES} "
                           "addresses and keys (secure aggregation takes neighbourhoods of at most that size)")
        for address, key in [(recipient, None), *members.items()]:
            if len(address) > ADDRESS_BYTES:
                raise CRCError(f"{path}: an address longer than {ADDRESS_BYTES} characters")
            if key is not None and not is_key(key):
                raise CRCError(f"{path}: the key of {address!r} in the neighbourhood of {recipient!r} is not a CURVE "
                               "public key")
        if own not in members:
            raise CRCError(f"{path}: the neighbourhood of {recipient!r} does not list this peer ({own})")
    missing = [u for u in neighbours if u not in raw]
    if missing:
        raise CRCError(f"{path}: no neighbourhood for neighbour {missing[0]!r}")
    return raw


def write_peer_keys(directory, addresses: list[str], neighbours: list[list[int]] | None = None, *,
                    force: bool = False, neighbourhoods: bool = True) -> list[str]:
    """Keys of a deployment of ``len(addresses)`` peers: a key pair per peer in ``directory/keys/node-<i>.key`` and
    ``.key_secret``, and per peer ``directory/known-peers-<i>.json`` with the addresses and public keys of its
    ``neighbours[i]`` and of their neighbours (of every other peer without ``neighbours``): only the neighbours may
    connect (``crc.nodes.node``), the others are the members of the neighbours' neighbourhoods whose keys secure
    aggregation needs to know out of band. With ``neighbours`` and ``neighbourhoods``, also
    ``directory/neighbourhoods-<i>.json`` (a horizontal peer's secure aggregation reads it; a vertical or hybrid
    group's peers read none). Returns every peer's public key (z85), in the order of ``addresses``."""
    names = [f"node-{index}" for index in range(len(addresses))]
    pairs = write_keys(Path(directory) / "keys", names, force=force)
    public = [load_public_key(public_file) for public_file, _ in pairs]
    for index in range(len(addresses)):
        others = neighbours[index] if neighbours is not None else [j for j in range(len(addresses)) if j != index]
        known = others if neighbours is None else sorted({j for u in others for j in [u, *neighbours[u]]} - {index})
        write_known_peers(peer_known_peers_file(directory, index), {addresses[j]: public[j] for j in known})
        if neighbours is not None and neighbourhoods:  # each neighbourhood: the members secure aggregation masks with
            hoods = {addresses[u]: {addresses[w]: public[w] for w in neighbours[u]} for u in others}
            atomic_write_json(peer_neighbourhoods_file(directory, index), hoods)
    return public
