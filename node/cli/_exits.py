"""Exit codes (for scripts) and how a failed call becomes one: its message on stderr, or
with `--json` an error object on stdout (`_json.error_json`)."""

from __future__ import annotations

import re
import sys
from typing import NamedTuple, NoReturn

from factnode.client import (
    ClientError,
    FailedPrecondition,
    InvalidFact,
    NotFound,
    PermissionDenied,
    Unavailable,
)

from ._json import error_json
from ._output import as_json, safe

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_REFUSED, EXIT_NOT_FOUND, EXIT_INVALID = (
    range(7)
)
# `submit` whose decision is REJECTED (no provenance, low confidence): recorded, not believed.
EXIT_REJECTED = 7
# The key is not in the state the command needs (FAILED_PRECONDITION), e.g. `review resolve`
# on a key that is not under review: nothing was written.
EXIT_PRECONDITION = 8
# `sync`: the round with at least one peer failed (the output names each and why).
EXIT_SYNC_FAILED = 9
# `erase --wait`: the timeout passed before every current member confirmed the erasure (the
# output names those still waited for); the erasure itself is done here.
EXIT_WAIT_TIMEOUT = 10

# The one list `--help` and the docs (docs/reference/cli.md, generated) repeat.
EXIT_CODES = (
    "0 ok, 1 error, 2 usage or configuration, 3 unreachable, 4 refused (authentication or "
    "permission), 5 not found, 6 invalid argument, 7 submit REJECTED, 8 not in the state the "
    "command needs (e.g. review resolve on a key not under review, import into a node that is "
    "not empty), 9 sync failed with a peer, 10 erase --wait timed out before every member "
    "confirmed"
)


class UsageError(Exception):
    """A command-line argument is wrong; exits 2 with the message."""


class Failure(NamedTuple):
    """A command that failed: the status name, the message, the exit code, the bad fields;
    `named` when the text starts with the status (not for usage errors or an unreachable
    node, whose message says it in words)."""

    status: str
    message: str
    exit_code: int
    violations: tuple[tuple[str, str], ...] = ()
    named: bool = True


def fail(message: str, code: int, *, json: bool = False, status: str = "USAGE") -> NoReturn:
    """Prints `factnode: message` on stderr (with `json`, the error object on stdout) and
    exits with `code`."""
    report(Failure(status, message, code, named=False), json=json)


def report(failure: Failure, *, json: bool) -> NoReturn:
    """Prints a failure as text on stderr or as the JSON error object on stdout; exits."""
    if json:
        print(as_json(error_json(*failure[:4])))
    else:
        head = f"{failure.status}: {failure.message}" if failure.named else failure.message
        lines = [safe(head), *(f"  {safe(f)}: {safe(r)}" for f, r in failure.violations)]
        print("factnode: " + "\n".join(lines), file=sys.stderr)
    raise SystemExit(failure.exit_code)


# The request fields the node names that the command line spells otherwise; any other
# field is named as it is (a positional such as `subject`, or an option with its name).
_FLAGS = {
    "page_size": "--limit",
    "page_token": "--page-token",
    "attribution": "--anchor",
    "anchor": "--anchor",
    "valid_from": "--valid-from",
    "idempotency_key": "--idempotency-key",
    "as_of": "--as-of",
    "known_at": "--known-at",
    "worth": "--worth",
    "confidence": "--confidence",
    "source": "--source",
    "corrects": "--corrects",
    "contradicts": "--contradicts",
    "reason": "--reason",
    "operator": "--operator",
    "at": "--at",
    "version_id": "--version",
    "evidence_id": "--evidence",
    "object": "--value",
    "now": "--now",
    "peer_node_id": "--peer",
}
# Commands whose value is a positional argument rather than `--value`.
_VALUE_POSITIONAL = {"submit"}


def flag_for(field: str, command: str) -> str:
    """The command-line argument a request field comes from, as the user typed it: `--limit`
    for page_size, `--contradicts` for contradicts.subject; a positional keeps its name."""
    head = field.split(".", 1)[0]
    if head == "object" and command in _VALUE_POSITIONAL:
        return "value"
    return _FLAGS.get(head, field)


def failed_call(err: ClientError, address: str, command: str = "") -> Failure:
    """The failure for the client's exception (each bad field on its own line in text, named
    as `command`'s argument)."""
    if isinstance(err, Unavailable):
        return Failure(
            err.code,
            f"cannot reach a factnode at {address} ({err.code.lower()}): "
            "is `factnode serve` running?",
            EXIT_UNREACHABLE,
            named=False,
        )
    if isinstance(err, InvalidFact):
        violations = tuple((flag_for(e.field, command), e.reason) for e in err.field_errors)
        return Failure(err.code, "invalid request" if violations else str(err), EXIT_INVALID,
                       violations)  # fmt: skip
    exit_code = (
        EXIT_NOT_FOUND if isinstance(err, NotFound)
        else EXIT_REFUSED if isinstance(err, PermissionDenied)
        else EXIT_PRECONDITION if isinstance(err, FailedPrecondition)
        else EXIT_ERROR
    )  # fmt: skip
    return Failure(err.code, str(err), exit_code)


# What gRPC accepts as a target: a scheme (dns:, unix:, ipv4:, ...) or HOST:PORT.
_TARGET = re.compile(r"(dns|unix|unix-abstract|ipv4|ipv6|vsock):.+")
_HOST_PORT = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


def check_address(address: str) -> None:
    """Raises UsageError naming `address` unless it is HOST:PORT, [IPv6]:PORT or a gRPC
    target with a scheme (`unix:/path`, `dns:///host:port`)."""
    match = _HOST_PORT.fullmatch(address)
    if match and 0 < int(match.group(2)) < 65536:
        return
    if not match and _TARGET.fullmatch(address):
        return
    raise UsageError(
        f"--address: {address!r} is not a valid address; give HOST:PORT (e.g. 127.0.0.1:7420)"
    )
