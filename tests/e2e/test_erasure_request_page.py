"""docs/operations/erasure-requests.md run as written: every `$ factnode ...` line of its
console blocks, in order, against a fresh node, must print the lines the page shows under
it (stdout, then stderr; `...` stands for any lines; runs of spaces count as one).

Ids, instants, node ids and the operator's name differ from run to run: an id the page shows is bound to the id printed in
its place, and a later command that names it is run with the printed one."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from _e2e import Cli

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "erasure-requests.md"
ID = re.compile(r"\b[0-9a-f]{32}\b")
INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
NODE = re.compile(r"node-[0-9a-f]{12}")
OPERATOR = re.compile(r" by [\w.-]+: ")  # who erased: the token's name (none: "operator")


def steps() -> list[tuple[str, list[str]]]:
    """(command, the lines shown under it) for each `$ ` line of the page's console blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", PAGE.read_text(), re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line.removeprefix("$ "), []))
            else:
                out[-1][1].append(line)
    return out


def shape(line: str) -> str:
    """A line with what varies from run to run replaced, and its spaces collapsed."""
    varying = ((ID, "<id>"), (INSTANT, "<instant>"), (NODE, "<node>"), (OPERATOR, " by <who>: "))
    for pattern, placeholder in varying:
        line = pattern.sub(placeholder, line)
    return " ".join(line.split())


def bind(shown: list[str], printed: list[str], ids: dict[str, str]) -> bool:
    """Whether `printed` is what `shown` shows; binds each id shown to the one printed in its
    place (an id already bound, or the all-zero id, must be printed as it is)."""
    if not shown:
        return not printed
    if shown[0].strip() == "...":
        return any(bind(shown[1:], printed[i:], ids) for i in range(len(printed) + 1))
    if not printed or shape(shown[0]) != shape(printed[0]):
        return False
    pairs = list(zip(ID.findall(shown[0]), ID.findall(printed[0]), strict=True))
    if any(ids.get(a, a if a == "0" * 32 else b) != b for a, b in pairs):
        return False
    if not bind(shown[1:], printed[1:], ids):
        return False
    ids.update(pairs)
    return True


def test_the_erasure_request_page_runs_as_written(cli: Cli) -> None:
    """Each command of the page prints what the page shows, on a fresh node: erase by
    evidence and by subject with --wait, the erased key not found, `erasures` listing both,
    `erasures show` one of them, and an unknown id NOT_FOUND (exit 5)."""
    ids: dict[str, str] = {}
    ran = []
    for command, shown in steps():
        argv = [ID.sub(lambda m: ids.get(m[0], m[0]), a) for a in shlex.split(command)]
        assert argv[0] == "factnode", command
        done = cli.run(*argv[1:], check=None)
        failing = bool(shown) and shown[0].startswith("factnode: ")
        assert (done.code != 0) == failing, done.describe()
        assert bind(shown, (done.stdout + done.stderr).splitlines(), ids), (
            f"the page shows for `{command}`:\n" + "\n".join(shown) + f"\n\n{done.describe()}"
        )
        ran.append(argv[1:3])
    assert ["erasures", "show"] in ran and ["erase", "--subject"] in ran
