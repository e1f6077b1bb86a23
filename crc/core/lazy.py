"""Names of a package imported from their modules on first use (PEP 562): a package whose import must stay light
(``crc``, ``crc.protocol``, ``crc.topologies``, ``crc.bench``) lists what it offers and the module each lives in.

Standard library only: the command line imports these packages before it knows what it needs."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(package: str, names: Mapping[str, str], namespace: Mapping) -> tuple[Callable, Callable]:
    """A package's module-level ``__getattr__`` and ``__dir__``: each of ``names`` (name -> its module) imported when
    first asked for; ``namespace`` is the package's ``globals()``, whose names ``__dir__`` lists beside them."""

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
