"""The lock files (requirements/*.lock, written by requirements/update with uv) pin every dependency the installed
project declares, at versions it accepts, with hashes, and the test lock runs the peers' versions."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCKS = Path(__file__).resolve().parents[1] / "requirements"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)(?: ; (.+?))? \\$")

pytestmark = pytest.mark.skipif(not (LOCKS / "peer.lock").exists(), reason="needs the checkout's requirements/")


def pins(name: str) -> dict[str, set[tuple[str, str]]]:
    """{package: {(version, marker), ...}} of a lock file; every pin is followed by at least one hash."""
    lines = (LOCKS / name).read_text().splitlines()
    found: dict[str, set[tuple[str, str]]] = {}
    for index, line in enumerate(lines):
        match = PIN.match(line)
        if match:
            assert lines[index + 1].strip().startswith("--hash=sha256:"), f"{name}: {line} has no hash"
            found.setdefault(canonicalize_name(match[1]), set()).add((match[2], match[3] or ""))
    assert found, f"{name} pins nothing"
    return found


def declared(extra: str | None) -> list[Requirement]:
    """The installed crc-p2p's requirements: its dependencies (``extra`` None) or those of one extra."""
    requirements = [Requirement(text) for text in importlib.metadata.requires("crc-p2p")]
    return [r for r in requirements if (r.marker is None) == (extra is None)
            and (extra is None or r.marker.evaluate({"extra": extra}))]


@pytest.mark.parametrize("lock, extra", [("peer.lock", None), ("test.lock", None), ("test.lock", "test")])
def test_every_declared_dependency_is_pinned_at_versions_it_accepts(lock, extra):
    pinned = pins(lock)
    for requirement in declared(extra):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{lock} lacks {requirement}: run requirements/update"
        for version, _ in pinned[name]:
            assert requirement.specifier.contains(version, prereleases=True), f"{lock}: {name}=={version} is not {requirement}"


def test_the_test_lock_runs_the_versions_the_peers_install():
    peer, test = pins("peer.lock"), pins("test.lock")
    assert {name: test[name] for name in peer} == peer


@pytest.mark.parametrize("python", ["3.10", "3.11", "3.12", "3.13", "3.14"])
@pytest.mark.parametrize("lock", ["peer.lock", "test.lock"])
def test_each_python_the_project_supports_gets_one_version_of_each_package(lock, python):
    """Peers on the same Python minor version install the same versions (pip evaluates the markers)."""
    environment = {"python_version": python, "python_full_version": f"{python}.0"}  # on this platform
    chosen = {name: {version for version, marker in versions if not marker or Marker(marker).evaluate(environment)}
              for name, versions in pins(lock).items()}
    assert all(len(versions) <= 1 for versions in chosen.values()), chosen
    assert all(len(chosen[canonicalize_name(r.name)]) == 1 for r in declared(None))
