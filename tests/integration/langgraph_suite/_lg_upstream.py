"""LangGraph's own store tests, fetched at a pinned version and given factnode's store.

The tests are LangGraph's (MIT, LangChain, Inc.), shipped in the source distribution of
`langgraph-checkpoint-postgres`: its `tests/test_store.py` and `tests/test_async_store.py`
exercise BaseStore through `store` fixtures. They are fetched from the package registry by
pip, checked against a pinned hash and written under `upstream/` (not committed), with
their licence. Only the store factories are swapped: the `store` fixtures and the
`_create_vector_store` helpers; PostgreSQL-only names resolve to `_lg_names`. Everything
else is upstream's text, unchanged."""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "langgraph-checkpoint-postgres"
VERSION = "3.2.0"  # the release for langgraph-checkpoint 4.3 (the installed major.minor)
SDIST_SHA256 = "dffef0e6822d7c614019f7f2c4bdbef42859746aee2d3e6d9d9747cf3744ca90"

HERE = Path(__file__).parent
UPSTREAM = HERE / "upstream"
# upstream file -> (the name it is written as, the fixture that replaces its `store`)
SUITES = {
    "tests/test_store.py": ("test_lg_store.py", "factnode_store"),
    "tests/test_async_store.py": ("test_lg_async_store.py", "async_factnode_store"),
}
EXTRAS = {"tests/embed_test_utils.py": "embed_test_utils.py", "LICENSE": "LICENSE"}
# Imports of PostgreSQL and of upstream's conftest: their names come from `_lg_names`.
_SWAPPED_MODULES = ("psycopg", "langgraph.store.postgres", "langgraph.checkpoint.postgres",
                    "tests.")  # fmt: skip
_STAMP = UPSTREAM / "VERSION"


def _swapped(module: str) -> bool:
    return any(module == m or module.startswith(m.rstrip(".") + ".") for m in _SWAPPED_MODULES)


def _store_fixture(fixture: str) -> str:
    if fixture.startswith("async"):
        return (
            "@pytest.fixture\n"
            f"async def store({fixture}):  # factnode: the swapped store fixture\n"
            f"    yield {fixture}\n"
        )
    return (
        "@pytest.fixture\n"
        f"def store({fixture}):  # factnode: the swapped store fixture\n"
        f"    yield {fixture}\n"
    )


def swap_fixtures(source: str, fixture: str) -> str:
    """Upstream's test module with its store factories swapped for factnode's."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    cuts: list[tuple[int, int, str]] = []  # (first line, last line, replacement), 1-based
    names: set[str] = set()
    factory = "afactnode_vector_store" if fixture.startswith("async") else "factnode_vector_store"
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and _swapped(node.module):
            names.update(a.asname or a.name for a in node.names)
            cuts.append((node.lineno, node.end_lineno or node.lineno, ""))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
            "store", "_create_vector_store",
        ):  # fmt: skip
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            new = (
                _store_fixture(fixture)
                if node.name == "store"
                else f"_create_vector_store = {factory}  # factnode: the swapped factory\n"
            )
            cuts.append((first, node.end_lineno or node.lineno, new))
    if not any(new.startswith("@pytest.fixture") for _, _, new in cuts):
        raise RuntimeError(f"{PACKAGE} {VERSION}: no `store` fixture found to swap")
    names.add(factory)
    out: list[str] = []
    skip_to = 0
    by_start = {first: (last, new) for first, last, new in cuts}
    for number, line in enumerate(lines, start=1):
        if number <= skip_to:
            continue
        if number in by_start:
            skip_to, new = by_start[number]
            out.append(new)
            continue
        out.append(line)
    imports = f"from _lg_names import {', '.join(sorted(names))}  # factnode: swapped names\n"
    # After `from __future__` (which must come first) and before the rest.
    at = next((i + 1 for i, line in enumerate(out) if line.startswith("from __future__")), 0)
    out.insert(at, imports)
    return "".join(out)


def _download(into: Path) -> Path:
    requirement = into / "requirement.txt"
    requirement.write_text(f"{PACKAGE}=={VERSION} --hash=sha256:{SDIST_SHA256}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
         ":all:", "--require-hashes", "-r", str(requirement), "-d", str(into)],
        check=True, timeout=300,
    )  # fmt: skip
    (sdist,) = into.glob("*.tar.gz")
    if hashlib.sha256(sdist.read_bytes()).hexdigest() != SDIST_SHA256:  # pip checked; so do we
        raise RuntimeError(f"{sdist.name} does not match the pinned hash")
    return sdist


def ensure() -> Path:
    """The swapped suite under `upstream/`, fetched once per pinned version."""
    stamp = f"{PACKAGE}=={VERSION} sha256:{SDIST_SHA256}\n"
    if _STAMP.is_file() and _STAMP.read_text() == stamp:
        return UPSTREAM
    UPSTREAM.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        sdist = _download(Path(tmp))
        with tarfile.open(sdist) as archive:
            root = archive.getnames()[0].split("/")[0]

            def read(name: str) -> str:
                member = archive.extractfile(f"{root}/{name}")
                if member is None:
                    raise RuntimeError(f"{sdist.name} has no {name}")
                return member.read().decode("utf-8")

            for name, (written, fixture) in SUITES.items():
                (UPSTREAM / written).write_text(swap_fixtures(read(name), fixture))
            for name, written in EXTRAS.items():
                (UPSTREAM / written).write_text(read(name))
    _STAMP.write_text(stamp)
    return UPSTREAM


if __name__ == "__main__":
    print(ensure())
