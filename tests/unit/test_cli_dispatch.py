"""The CLI's one dispatch table and its mapping of client exceptions to exit codes."""

from __future__ import annotations

import argparse
import json

import pytest

from factnode.cli import VERBS, build_parser
from factnode.cli._exits import failed_call, report
from factnode.client import (
    ClientError,
    FailedPrecondition,
    FieldError,
    InvalidFact,
    NotFound,
    PermissionDenied,
    Unavailable,
)


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def test_every_subcommand_runs_through_the_table() -> None:
    """The parser offers exactly the verbs of VERBS, in its order, serve and health included."""
    assert _subcommands(build_parser()) == list(VERBS)
    assert {"serve", "certs", "demo", "health", "submit", "review"} <= set(VERBS)


def test_each_parser_function_adds_its_own_verb() -> None:
    """A verb's parser function adds the subcommand named by its table entry, and only it."""
    for name, verb in VERBS.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        verb.add(sub, argparse.ArgumentParser(add_help=False))
        assert list(sub.choices) == [name]


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (Unavailable("connect failed", "UNAVAILABLE"), 3,
         "factnode: cannot reach a factnode at h:1 (unavailable): is `factnode serve` running?"),
        (Unavailable("late", "DEADLINE_EXCEEDED"), 3,
         "factnode: cannot reach a factnode at h:1 (deadline_exceeded): is `factnode serve` running?"),
        (PermissionDenied("no token", "UNAUTHENTICATED"), 4, "factnode: UNAUTHENTICATED: no token"),
        (PermissionDenied("reader", "PERMISSION_DENIED"), 4,
         "factnode: PERMISSION_DENIED: reader"),
        (NotFound("no belief", "NOT_FOUND"), 5, "factnode: NOT_FOUND: no belief"),
        (InvalidFact("bad", (FieldError("fact.key.subject", "is required"),
                             FieldError("fact.worth", "must be in [0, 1]"))), 6,
         "factnode: INVALID_ARGUMENT: invalid request\n  fact.key.subject: is required\n"
         "  fact.worth: must be in [0, 1]"),
        (InvalidFact("page token is malformed"), 6,
         "factnode: INVALID_ARGUMENT: page token is malformed"),
        (FailedPrecondition("k is not under review", "FAILED_PRECONDITION"), 8,
         "factnode: FAILED_PRECONDITION: k is not under review"),
        (ClientError("boom", "INTERNAL"), 1, "factnode: INTERNAL: boom"),
        (NotFound("no belief for a\x1b[2J/b\nc", "NOT_FOUND"), 5,
         "factnode: NOT_FOUND: no belief for a\\x1b[2J/b\\nc"),
    ],
)  # fmt: skip
def test_client_exceptions_exit_with_the_documented_codes(
    error: ClientError, code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each client exception exits with the README's code; bad fields one per stderr line;
    control characters the node echoed (a key's) come escaped."""
    with pytest.raises(SystemExit) as exited:
        report(failed_call(error, "h:1"), json=False)
    assert exited.value.code == code
    assert capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize(
    "error",
    [
        Unavailable("connect failed", "UNAVAILABLE"),
        NotFound("no belief", "NOT_FOUND"),
        FailedPrecondition("not under review", "FAILED_PRECONDITION"),
        InvalidFact("bad", (FieldError("fact.worth", "must be in [0, 1]"),)),
    ],
)
def test_with_json_a_failure_is_an_object_on_stdout_and_nothing_on_stderr(
    error: ClientError, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: the status, message, exit code and field violations as JSON on stdout."""
    failure = failed_call(error, "h:1")
    with pytest.raises(SystemExit) as exited:
        report(failure, json=True)
    out = capsys.readouterr()
    assert out.err == ""
    doc = json.loads(out.out)["error"]
    assert exited.value.code == doc["exit_code"] == failure.exit_code
    assert doc["status"] == error.code
    assert [(v["field"], v["description"]) for v in doc["field_violations"]] == [
        (e.field, e.reason) for e in getattr(error, "field_errors", ())
    ]
