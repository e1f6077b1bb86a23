"""Fixtures shared by the tests of a peer's set-up."""

import pytest

from support.network import scenario


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """A two-peer deployment's files (data, schema, test set) in a directory of the module's own."""
    directory = tmp_path_factory.mktemp("deployment")
    scenario(directory, nodes=2, rounds=3)
    return directory
