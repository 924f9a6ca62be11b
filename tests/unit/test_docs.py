"""The documentation site: its generated pages match their sources, and `mkdocs build
--strict` (a broken link or anchor fails it) builds it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from factnode import docs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(docs.PAGES))
def test_generated_pages_are_current(name: str) -> None:
    """Each generated page (CLI, gRPC and metrics reference) is what `python -m
    factnode.docs` writes from the parser, the proto and the registry now: rerun it."""
    assert (ROOT / "docs" / name).read_text() == docs.PAGES[name](), (
        f"docs/{name} is stale: run `python -m factnode.docs`"
    )


def test_the_cli_reference_names_every_command_and_option() -> None:
    """The CLI page lists each verb of the parser, nested `review` verbs included, with
    their options."""
    page = docs.cli_page()
    for verb in ("serve", "submit", "review resolve", "export", "import", "backup"):
        assert f"## `factnode {verb}`" in page
    assert "`--force-policy`" in page and "`--reason` `REASON`" in page


@pytest.mark.timeout(300)
def test_mkdocs_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` succeeds: every page in the nav builds, every link and anchor
    resolves."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "operations" / "backup" / "index.html").exists()
