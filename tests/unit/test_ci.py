"""The README's two set-up commands and .ci/run: CI runs the test command the README gives,
then the static checks, and a node's own install is the light one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setup_commands() -> list[str]:
    """The command lines of the README's "Set up" block, `.venv/bin/` prefixes removed."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Set up") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "README.md's Set up section has no ```sh block"
    lines = [line.strip() for line in block.group(1).splitlines()]
    return [line.replace(".venv/bin/", "") for line in lines if line and not line.startswith("#")]


def test_ci_runs_the_readmes_test_command_then_the_lint() -> None:
    """.ci/run runs the README's second command as written, and .ci/lint after it."""
    commands = _setup_commands()
    assert len(commands) == 2, commands
    test_command = commands[1]
    assert "pytest" in test_command, test_command
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines()]
    runs = [i for i, line in enumerate(ci_lines) if line.startswith(test_command)]
    assert runs, f".ci/run does not run the README's test command: {test_command!r}"
    lint = [i for i, line in enumerate(ci_lines) if ".ci/lint" in line and not line.startswith("#")]
    assert lint and min(lint) > runs[0], ".ci/run must call .ci/lint after the test command"


def test_the_readmes_first_command_installs_no_extra() -> None:
    """The README's first command installs the package without extras (`pip install -e .`),
    so running a node does not pull in the test toolchain."""
    first = _setup_commands()[0]
    assert "pip install -e . " in first + " ", first
    assert "[" not in first, first
