"""The package's layering: no import cycles, a pure core, and an install that names every
package under its import name `factnode`."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "node"
GENERATED = "factnode.api"


def _module_name(path: Path) -> str:
    parts = ["factnode", *path.relative_to(SOURCE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for p in SOURCE.rglob("*.py")
        if not _module_name(p).startswith(GENERATED)
        and "migrations.versions" not in _module_name(p)
    }


def _with_parents(name: str) -> list[str]:
    """Importing a.b.c runs a/__init__, a.b/__init__ and a.b.c."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imports_at_load(path: Path, name: str, known: set[str]) -> set[str]:
    """Project modules that importing `name` loads: top-level imports, not those inside
    functions or under `if TYPE_CHECKING:`. Its own parent packages are left out: Python
    loads them before the module itself, so they cannot close a cycle through it."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in tree.body:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for target in targets:
            found.update(m for m in _with_parents(target) if m in known)
    return found - set(_with_parents(name))


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports_at_load(path, name, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_the_projects_modules() -> None:
    """No set of the project's modules imports itself round in a circle at load time."""
    graph = _graph()
    assert len(graph) > 30, "the walk found too few modules"
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    """The check above can fail: a two-module loop is reported."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_core_imports_only_the_core() -> None:
    """The pure core imports nothing from the store, server, federation, ledger or API."""
    graph = _graph()
    core = {m for m in graph if m.startswith("factnode.core")}
    assert core
    bad = {
        m: sorted(d for d in deps if not d.startswith("factnode.core"))
        for m, deps in graph.items()
        if m in core
    }
    assert {m: d for m, d in bad.items() if d} == {}


def test_the_ledger_imports_neither_server_nor_federation() -> None:
    """The ledger follows the layering: the federation hooks into it, not the reverse."""
    graph = _graph()
    offending = {
        m: sorted(d for d in deps if d.startswith(("factnode.server", "factnode.federation")))
        for m, deps in graph.items()
        if m.startswith("factnode.ledger")
    }
    assert {m: d for m, d in offending.items() if d} == {}


def test_every_package_folder_is_installed_as_factnode() -> None:
    """pyproject lists every folder of node/ holding Python under its `factnode` name."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"factnode": "node"}
    folders = {
        _module_name(d / "__init__.py")
        for d in [SOURCE, *SOURCE.rglob("*")]
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
    }
    assert set(config["packages"]) == folders
