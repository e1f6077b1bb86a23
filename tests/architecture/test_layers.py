"""The package's layers point only down and its modules import each other without cycles (read from the source)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

from support.toml import tomllib

ROOTS = ("crc", "crc.topologies", "crc.nodes", "crc.cli")

ALLOWED = {
    # layer: (project packages it may import, third-party packages it may import)
    "crc.core": ({"crc.core"}, {"numpy", "scipy", "threadpoolctl"}),
    "crc.tables": ({"crc.core", "crc.tables"}, {"numpy", "pandas"}),
    "crc.protocol": ({"crc.core", "crc.tables", "crc.protocol"}, {"numpy", "scipy", "dp_accounting"}),
    "crc.report": ({"crc.core", "crc.report"}, {"numpy", "matplotlib"}),
    # distributed: only crc.experiments.cluster, only for --cluster (the optional extra 'cluster')
    "crc.experiments": ({"crc.core", "crc.tables", "crc.protocol", "crc.report", "crc.experiments"}, {"numpy", "distributed"}),
    # crc.core.files: the bounded reader of untrusted files (numpy and crc.core.errors only), for graph files;
    # crc.core.lazy: names imported on first use (standard library only)
    "crc.topologies": ({"crc.core.errors", "crc.core.files", "crc.core.lazy", "crc.topologies"}, {"numpy", "scipy", "networkx"}),
    "crc.nodes": ({"crc.core", "crc.tables", "crc.protocol", "crc.topologies", "crc.nodes"},
                  {"numpy", "zmq", "msgpack", "cryptography", "prometheus_client"}),
    "crc.estimators": ({"crc.core", "crc.tables", "crc.protocol", "crc.topologies", "crc.estimators"}, {"numpy", "sklearn"}),
    "crc.bench": ({"crc.core", "crc.tables", "crc.protocol", "crc.topologies", "crc.nodes", "crc.bench"}, {"numpy"}),
    "crc.keel": (set(), set()),
    "crc.source_tree": (set(), set()),
}
"""Every module of the project but ``crc`` itself, ``crc.__main__`` and ``crc.cli`` (which may import anything)."""


def _modules() -> dict[str, Path]:
    found = {}
    for root in ROOTS:
        directory = Path(importlib.util.find_spec(root).submodule_search_locations[0])
        for path in directory.rglob("*.py"):
            parts = path.relative_to(directory).with_suffix("").parts
            name = ".".join((root, *parts[:-1])) if parts[-1] == "__init__" else ".".join((root, *parts))
            if not any(name.startswith(other + ".") or name == other for other in ROOTS if other != root and other.startswith(root)):
                found[name] = path
    return found


def _imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import statement of a module."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(node) for node in tree.body}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base == "__future__":
                continue
            for alias in node.names:  # "from crc.core import metrics" imports the module crc.core.metrics
                full = f"{base}.{alias.name}"
                out.append((full if full in MODULES else base, id(node) in top))
    return out


MODULES = _modules()


def _layer(module: str) -> str | None:
    return max((layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")), key=len, default=None)


def _within(module: str, packages: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_modules_were_found():
    assert {"crc.core.engine", "crc.protocol.simulator", "crc.nodes.peer", "crc.topologies.spec", "crc.cli.main"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if _layer(m)))
def test_imports_point_down(name):
    project, third_party = ALLOWED[_layer(name)]
    for module, _ in _imports(name, MODULES[name]):
        top = module.split(".")[0]
        if top == "crc":
            assert _within(module, project), f"{name} imports {module}, outside its layer's {sorted(project)}"
        else:
            assert top in sys.stdlib_module_names or top in third_party, f"{name} imports {module}"


def test_nothing_imports_the_command_line():
    for name, path in MODULES.items():
        if not _within(name, {"crc.cli"}) and name != "crc.__main__":
            assert not any(_within(m, {"crc.cli"}) for m, _ in _imports(name, path)), f"{name} imports crc.cli"


def test_no_import_cycles():
    graph = {name: {m for m, top in _imports(name, path) if top and m in MODULES} for name, path in MODULES.items()}
    done, active = set(), []

    def visit(node):
        if node in active:
            cycle = active[active.index(node):] + [node]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if node in done:
            return
        active.append(node)
        for child in graph[node]:
            visit(child)
        active.pop()
        done.add(node)

    for node in graph:
        visit(node)


def test_only_crc_is_installed_at_the_top_level():
    distribution = importlib.metadata.distribution("crc-p2p")
    assert distribution.read_text("top_level.txt").split() == ["crc"]


def test_every_package_of_the_source_is_installed():
    """pyproject's package list names every folder with an ``__init__.py`` (a missing one only fails outside an
    editable install)."""
    root = Path(__file__).resolve().parents[2]
    tool = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for package, folder in tool["package-dir"].items():
        for init in (root / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(root / folder).parts
            found.add(".".join((package, *parts)))
    assert found == set(tool["packages"])
