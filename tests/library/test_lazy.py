"""Packages whose names are imported on first use (crc.core.lazy): each name resolves to its module's object, an
unknown one is the AttributeError Python gives, and dir() lists both kinds."""

import sys

import pytest

import crc.bench
import crc.protocol
import crc.topologies
from crc.core.lazy import lazy_names


def test_a_lazy_name_is_its_modules_object_and_an_unknown_one_an_attribute_error():
    namespace = {"eager": 1}
    getattr_, dir_ = lazy_names("pkg", {"dumps": "json"}, namespace)
    assert getattr_("dumps") is sys.modules["json"].dumps
    with pytest.raises(AttributeError, match="^module 'pkg' has no attribute 'loads'$"):
        getattr_("loads")
    namespace["later"] = 2  # the package's globals as they are when asked
    assert dir_() == ["dumps", "eager", "later"]


@pytest.mark.parametrize("package, name, module", [(crc.protocol, "simulate", "crc.protocol.simulator"),
                                                   (crc.topologies, "Schedule", "crc.topologies.schedule"),
                                                   (crc.bench, "run_flop", "crc.bench.suite")])
def test_the_packages_resolve_their_lazy_names(package, name, module):
    assert getattr(package, name) is getattr(sys.modules[module], name)
    assert name in dir(package)
    with pytest.raises(AttributeError, match=f"^module '{package.__name__}' has no attribute 'nothing'$"):
        package.nothing  # noqa: B018
