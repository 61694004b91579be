"""No import cycle between modules, nor between the packages of ``provision``.

Imports are read with :mod:`ast` from every module, including imports inside functions
(a deferred import still ties two modules together) and imports under ``TYPE_CHECKING``.
Packages are the direct children of ``provision`` (``provision.plan``, ``provision.spec``)
and the top-level modules (``provision.app``, ``provision.versions``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "provision"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The longest prefix of ``name`` that is a provision module (``a.b.C`` -> ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = node.module or ""
        if node.level:
            base = f"{package}.{base}".rstrip(".")
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def _edges(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    targets = {_resolve(n) for node in ast.walk(tree) for n in _imported(module, node)}
    return {t for t in targets if t is not None and t != module and t.startswith("provision")}


MODULE_GRAPH = {m: _edges(m) for m in MODULES}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, targets in MODULE_GRAPH.items():
        edges = graph.setdefault(_package(module), set())
        edges.update(_package(t) for t in targets if _package(t) != _package(module))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_reader_sees_deferred_imports() -> None:
    assert "provision.apply.workflow" in MODULE_GRAPH["provision.cli.apply"]


def test_no_package_cycle() -> None:
    assert _cycles(_package_graph()) == []


def test_no_module_cycle_outside_detect() -> None:
    assert _cycles(MODULE_GRAPH) == []
