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

import os
import sys

MAPPED_FOLDERS = {"crc.topologies": "topologies", "crc.nodes": "nodes", "crc.cli": "cli"}
"""Packages that ``pyproject.toml``'s ``package-dir`` maps to folders beside ``crc/`` (a test checks they agree)."""


class _MappedFolders:
    """A finder (``sys.meta_path``) of the mapped packages in the checkout ``root`` (a path). Plain ``os.path`` and
    ``importlib.util`` only on a find: ``crc`` imports this module before the ``crc`` command can handle Ctrl-C."""

    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        folder = MAPPED_FOLDERS.get(fullname)
        if folder is None:
            return None
        import importlib.util

        directory = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(fullname, os.path.join(directory, "__init__.py"),
                                                      submodule_search_locations=[directory])


def find_folders(package_dir: str) -> None:
    """When ``package_dir`` (the folder of the imported ``crc``) lies in a checkout whose mapped folders are not
    inside it, let imports find them beside it."""
    root = os.path.dirname(package_dir)
    in_checkout = os.path.isfile(os.path.join(root, "pyproject.toml")) and all(
        os.path.isfile(os.path.join(root, folder, "__init__.py")) and not os.path.exists(os.path.join(package_dir, folder))
        for folder in MAPPED_FOLDERS.values())
    if in_checkout and not any(isinstance(finder, _MappedFolders) for finder in sys.meta_path):
        sys.meta_path.append(_MappedFolders(root))
