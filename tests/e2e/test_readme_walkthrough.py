"""The README's five-minute walkthrough, run as written: every `$ factnode ...` line of
its console blocks, in order, against a fresh node, and each command's output (stdout,
then stderr) must be the lines the README shows under it.

As in doctest, a line `...` (indented or not) stands for any number of lines. What differs from run to run
is compared as a placeholder: instants the node took (the clock's, with a fraction, or
not at midnight; the walkthrough's own event times are midnights and compared as
written), node ids, the tombstone's id, the store's URL, the listen address and the
replica's name. Runs of spaces count as one, so a table's column widths may differ."""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _e2e import Cli

from factnode.core import MICROS_PER_DAY
from factnode.core.decay import lifetime

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Five-minute walkthrough"

_VARYING = [
    (r"\d{4}-\d\d-\d\dT(?!00:00:00Z)\d\d:\d\d:\d\d(\.\d+)?Z", "<instant>"),
    (r"node-[0-9a-f]{12}", "node-<id>"),
    (r"tombstone [0-9a-f]{32}", "tombstone <id>"),
    (r"store: \S+", "store: <url>"),
    (r"listening on \S+", "listening on <address>"),
    (r"replica \S+ answering; background work \(lease\) on \S+", "replica <name> answering"),
]


def walkthrough() -> list[tuple[str, list[str]]]:
    """(command, the output lines shown under it) for each `$ ` line of the section's
    console blocks, in order."""
    text = README.read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start)]
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", section, re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line.removeprefix("$ "), []))
            else:
                assert steps, f"output before any command in a console block: {line!r}"
                steps[-1][1].append(line)
    return steps


def _normal(line: str) -> str:
    for pattern, placeholder in _VARYING:
        line = re.sub(pattern, placeholder, line)
    return " ".join(line.split())


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether `printed` is what `shown` shows, `...` standing for any run of lines."""
    if not shown:
        return not printed
    if shown[0].strip() == "...":
        return any(matches(shown[1:], printed[i:]) for i in range(len(printed) + 1))
    return (
        bool(printed)
        and _normal(shown[0]) == _normal(printed[0])
        and matches(shown[1:], printed[1:])
    )


def test_the_matcher_takes_ellipses_and_placeholders() -> None:
    """`...` stands for any lines, zero included; a varying part does not make a mismatch,
    while a different value, state or event time does."""
    shown = ["ACCEPTED by rule first_version", "...", "    state:   BELIEVED", "..."]
    printed = ["ACCEPTED by rule first_version", "evidence 1", "    state:   BELIEVED"]
    assert matches(shown, printed)
    assert not matches(shown, ["ACCEPTED by rule first_version", "    state:   AMBIGUOUS"])
    history = "'Oslo'  BELIEVED  2020-01-01T00:00:00Z .. 2027-01-10T02:35:48.105928Z  1"
    assert matches([history], [history.replace("02:35:48.105928Z", "11:00:01.5Z") + "  "])
    assert not matches([history], [history.replace("2020-01-01", "2021-01-01")])


def test_the_readme_walkthrough_runs_as_written(cli: Cli) -> None:
    """Each command of the walkthrough prints what the README shows, on a fresh node; the
    decay step's believed interval ends 30 x log2(0.9 / 0.4) days after the node was told
    the fact about 2020, and an as-of read of an earlier time answers it."""
    steps = walkthrough()
    commands = [command for command, _ in steps]
    assert any(c.startswith("factnode history user:bo ") for c in commands), commands
    printed: dict[str, str] = {}
    for command, shown in steps:
        argv = shlex.split(command)
        assert argv[0] == "factnode", command
        done = cli.run(*argv[1:], check=None)
        output = done.stdout + done.stderr
        failing = bool(shown) and shown[0].startswith("factnode: ")
        assert (done.code != 0) == failing, done.describe()
        assert matches(shown, output.splitlines()), (
            f"README.md shows for `{command}`:\n" + "\n".join(shown) + f"\n\n{done.describe()}"
        )
        printed[command] = output

    # The decay step: age counts from when the node was told, not from 2020.
    [version] = cli.json("history", "user:bo", "bo", "lives_in")["versions"]
    [evidence] = version["evidence"]
    told = datetime.fromisoformat(evidence["recorded_at"])
    life = timedelta(microseconds=lifetime(900, 400, 30 * MICROS_PER_DAY))
    [interval] = version["intervals"]
    assert interval["start"] == "2020-01-01T00:00:00Z"
    expiry = datetime.fromisoformat(interval["end"])
    assert expiry == told + life and round(life / timedelta(days=1), 1) == 35.1
    [history] = [out for c, out in printed.items() if c.startswith("factnode history user:bo ")]
    assert f".. {expiry.astimezone(UTC).isoformat().replace('+00:00', 'Z')} " in history
    earlier = cli.json("get", "user:bo", "bo", "lives_in", "--as-of", "2024-06-01")
    assert (earlier["object"], earlier["state"]) == ("Oslo", "BELIEVED")
