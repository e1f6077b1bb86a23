"""CURVE key files and known-peers files (crc.nodes.keys, crc keys, crc node's key options): no sockets."""

import json
import os
import stat

import pytest
import zmq
import zmq.auth
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.errors import CRCError
from crc.nodes.keys import (
    MAX_KNOWN_PEERS_BYTES,
    is_key,
    load_key_pair,
    load_known_peers,
    load_public_key,
    peer_known_peers_file,
    peer_secret_key_file,
    write_keys,
    write_known_peers,
    write_peer_keys,
)

A, B, C = "tcp://10.0.0.1:7000", "tcp://10.0.0.2:7000", "tcp://10.0.0.3:7000"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def public_key() -> str:
    return zmq.curve_keypair()[0].decode("ascii")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_key_files_round_trip_through_pyzmqs_certificate_reader(tmp_path):
    (public, secret), = write_keys(tmp_path, ["alice"])
    assert (public.name, secret.name) == ("alice.key", "alice.key_secret")
    pair = load_key_pair(secret)
    assert load_public_key(public) == pair.public and is_key(pair.public) and is_key(pair.secret)
    assert zmq.auth.load_certificate(secret) == (pair.public.encode(), pair.secret.encode())
    assert zmq.auth.load_certificate(public) == (pair.public.encode(), None)
    assert zmq.curve_public(pair.secret.encode()).decode() == pair.public
    assert mode(secret) == 0o600 and mode(public) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice.key", "alice.key_secret"]  # no temporary left


def test_keys_are_never_overwritten_without_force(tmp_path):
    (_, secret), = write_keys(tmp_path, ["alice"])
    first = load_key_pair(secret)
    with pytest.raises(CRCError, match="alice.key exists: keys are never overwritten without --force"):
        write_keys(tmp_path, ["bob", "alice"])
    assert not (tmp_path / "bob.key").exists()  # nothing written
    assert load_key_pair(secret) == first
    write_keys(tmp_path, ["alice"], force=True)
    assert load_key_pair(secret) != first and mode(secret) == 0o600


@pytest.mark.parametrize("names", [["../evil"], ["a/b"], [".hidden"], [""], ["x" * 101], ["a", "a"]])
def test_key_names_that_are_not_plain_file_names_are_refused(tmp_path, names):
    with pytest.raises(CRCError):
        write_keys(tmp_path, names)
    assert not any(tmp_path.iterdir())


def test_crc_keys_writes_pairs_and_refuses_to_overwrite(tmp_path):
    result = run("keys", "--out", tmp_path, "alice", "bob")
    assert result.exit_code == 0, result.output
    for name in ("alice", "bob"):
        assert load_public_key(tmp_path / f"{name}.key") in result.output
        assert mode(tmp_path / f"{name}.key_secret") == 0o600
    again = run("keys", "--out", tmp_path, "bob")
    assert again.exit_code == 1 and again.output.strip().splitlines() == [
        f"Error: {tmp_path / 'bob.key'} exists: keys are never overwritten without --force"]
    assert run("keys", "--out", tmp_path, "--force", "bob").exit_code == 0


def test_a_secret_key_must_be_private_whole_and_its_own(tmp_path):
    (public, secret), (other_public, other_secret) = write_keys(tmp_path, ["alice", "bob"])
    with pytest.raises(CRCError, match="no secret key"):
        load_key_pair(public)
    os.chmod(secret, 0o644)
    with pytest.raises(CRCError, match=r"permissions 0644 are too open .* chmod 600"):
        load_key_pair(secret)
    os.chmod(secret, 0o600)
    mixed = tmp_path / "mixed.key_secret"
    mixed.write_text(secret.read_text().replace(load_key_pair(secret).public, load_public_key(other_public)))
    os.chmod(mixed, 0o600)
    with pytest.raises(CRCError, match="does not belong to the secret key"):
        load_key_pair(mixed)
    for name, text in [("garbage", "not a certificate\n"), ("short", 'curve\n    public-key = "abc"\n'),
                       ("huge", "#" * (1 << 17))]:
        path = tmp_path / f"{name}.key_secret"
        path.write_text(text)
        os.chmod(path, 0o600)
        with pytest.raises(CRCError) as error:
            load_key_pair(path)
        assert str(path) in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(CRCError, match="cannot read key file"):
        load_key_pair(tmp_path / "missing.key_secret")


def test_known_peers_round_trip(tmp_path):
    known = {A: public_key(), B: public_key()}
    write_known_peers(tmp_path / "k.json", known)
    assert load_known_peers(tmp_path / "k.json", required=[A, B]) == known
    assert load_known_peers(tmp_path / "k.json", required=[B]) == known  # extra entries are allowed


KEY = zmq.curve_keypair()[0].decode()
BAD_KNOWN_PEERS = {
    "not json": ("{", "not valid JSON"),
    "a list": (json.dumps([A, KEY]), "not a list"),
    "a number as key": (json.dumps({A: 7}), f"the key of {A!r} is not a CURVE public key"),
    "a short key": (json.dumps({A: KEY[:39]}), "is not a CURVE public key"),
    "not z85": (json.dumps({A: "\u00e9" * 40}), "is not a CURVE public key"),
    "a space in z85": (json.dumps({A: " " * 40}), "is not a CURVE public key"),
    "an address twice": (f'{{"{A}": "{KEY}", "{A}": "{public_key()}"}}', f"key {A!r} appears twice in an object"),
    "a key twice": (json.dumps({A: KEY, B: KEY}), "have the same key"),
    "a missing neighbour": (json.dumps({A: KEY}), f"no key for neighbour {C!r}"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "nests arrays and objects more than 1 deep"),
    "too large": (json.dumps({A: KEY, "x": "y" * MAX_KNOWN_PEERS_BYTES}), "larger than"),
    "a huge address": (json.dumps({"tcp://" + "h" * 600 + ":1": KEY}), "address longer than"),
}


@pytest.mark.parametrize("case", list(BAD_KNOWN_PEERS))
def test_a_bad_known_peers_file_is_one_line_naming_it(tmp_path, case):
    text, message = BAD_KNOWN_PEERS[case]
    path = tmp_path / "known.json"
    path.write_text(text)
    with pytest.raises(CRCError, match=message) as error:
        load_known_peers(path, required=[A, C] if case == "a missing neighbour" else [])
    assert str(error.value).startswith(f"{path}: ") and "\n" not in str(error.value)


def node_args(tmp_path, *extra):
    return ["node", "--bind", A, "--peers", B, "--data", tmp_path / "none.csv", "--schema", tmp_path / "none.json",
            "--out", tmp_path / "m.json", *extra]


def test_crc_node_refuses_to_run_without_keys_unless_insecure(tmp_path):
    result = run(*node_args(tmp_path))
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        "Error: refusing to run without keys: give --secret-key and --known-peers (write keys with `crc keys`), "
        "or --insecure to run in plaintext on a trusted network"]
    both = run(*node_args(tmp_path, "--insecure", "--secret-key", tmp_path / "k"))
    assert both.exit_code == 2 and "--insecure runs without keys" in both.output
    half = run(*node_args(tmp_path, "--secret-key", tmp_path / "k"))
    assert half.exit_code == 2 and "--secret-key and --known-peers go together" in half.output


def test_crc_node_checks_its_keys_before_reading_its_data(tmp_path):
    (_, secret), = write_keys(tmp_path, ["me"])
    known = tmp_path / "known.json"
    for text, message in [("[]", "not a list"), (json.dumps({C: KEY}), f"no key for neighbour {B!r}"),
                          (json.dumps({B: load_key_pair(secret).public}), "a neighbour has this peer's own key")]:
        known.write_text(text)
        result = run(*node_args(tmp_path, "--secret-key", secret, "--known-peers", known))
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and message in result.output


def test_deployment_keys_give_each_peer_its_neighbours_keys_and_theirs(tmp_path):
    addresses = [A, B, C]
    write_peer_keys(tmp_path, addresses, [[1], [0, 2], [1]])
    own = [load_key_pair(peer_secret_key_file(tmp_path, i)) for i in range(3)]
    assert len({pair.public for pair in own}) == 3
    assert load_known_peers(peer_known_peers_file(tmp_path, 1)) == {A: own[0].public, C: own[2].public}
    assert load_known_peers(peer_known_peers_file(tmp_path, 0)) == {B: own[1].public, C: own[2].public}  # C: in N(B)
    write_peer_keys(tmp_path / "all", addresses)  # no graph: every other peer
    assert set(load_known_peers(peer_known_peers_file(tmp_path / "all", 2))) == {A, B}


def test_crc_split_writes_keys_for_the_given_addresses(tmp_path):
    result = run("split", "--data", "twonorm", "--nodes", "3", "--local-size", "20", "--test-size", "50", "--out",
                 tmp_path, "--keys-for", ",".join([A, B, C]))
    assert result.exit_code == 0, result.output
    own = [load_key_pair(peer_secret_key_file(tmp_path, i)) for i in range(3)]
    assert load_known_peers(peer_known_peers_file(tmp_path, 0), required=[B, C]) == {B: own[1].public, C: own[2].public}
    wrong = run("split", "--data", "twonorm", "--nodes", "3", "--local-size", "20", "--out", tmp_path / "x",
                "--keys-for", ",".join([A, B]))
    assert wrong.exit_code == 1 and "--keys-for: give 3 distinct addresses, one per node (got 2)" in wrong.output
