"""Importing ``crc`` from a checkout's root folder, where ``./crc`` comes before the installed package.

``pyproject.toml`` maps the checkout's folders ``topologies/``, ``nodes/`` and
``cli/`` into the package as ``crc.topologies``, ``crc.nodes`` and ``crc.cli``.
Python run from the checkout's root (``python -m crc``, ``python -`` with a
README example) finds the folder ``./crc`` first, which does not hold them.
``find_folders`` then adds, at the end of the import system's finders, one
that finds exactly those three packages in their folders; an installed
package (which holds them) and an editable install's own finder are asked
first and are unaffected.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

MAPPED_FOLDERS = {"crc.topologies": "topologies", "crc.nodes": "nodes", "crc.cli": "cli"}
"""Packages that ``pyproject.toml``'s ``package-dir`` maps to folders beside ``crc/`` (a test checks they agree)."""


class _MappedFolders(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        folder = MAPPED_FOLDERS.get(fullname)
        if folder is None:
            return None
        directory = self.root / folder
        return importlib.util.spec_from_file_location(fullname, directory / "__init__.py",
                                                      submodule_search_locations=[str(directory)])


def find_folders(package_dir: Path) -> None:
    """When ``package_dir`` (the folder of the imported ``crc``) lies in a checkout whose mapped folders are not
    inside it, let imports find them beside it."""
    root = package_dir.parent
    in_checkout = (root / "pyproject.toml").is_file() and all(
        (root / folder / "__init__.py").is_file() and not (package_dir / folder).exists()
        for folder in MAPPED_FOLDERS.values())
    if in_checkout and not any(isinstance(finder, _MappedFolders) for finder in sys.meta_path):
        sys.meta_path.append(_MappedFolders(root))
