"""Exit codes (for scripts) and how a failed call becomes one, with its message on stderr."""

from __future__ import annotations

import sys
from typing import NoReturn

from factnode.client import ClientError, InvalidFact, NotFound, PermissionDenied, Unavailable

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_REFUSED, EXIT_NOT_FOUND, EXIT_INVALID = (
    range(7)
)
# `submit` whose decision is REJECTED (no provenance, low confidence): recorded, not believed.
EXIT_REJECTED = 7


class UsageError(Exception):
    """A command-line argument is wrong; exits 2 with the message."""


def fail(message: str, code: int) -> NoReturn:
    """Prints `factnode: message` on stderr and exits with `code`."""
    print(f"factnode: {message}", file=sys.stderr)
    raise SystemExit(code)


def failed_call(err: ClientError, address: str) -> NoReturn:
    """Exits with the code for the client's exception; each bad field on its own line."""
    if isinstance(err, Unavailable):
        fail(
            f"cannot reach a factnode at {address} ({err.code.lower()}): "
            "is `factnode serve` running?",
            EXIT_UNREACHABLE,
        )
    if isinstance(err, InvalidFact) and err.field_errors:
        lines = [f"{err.code}: invalid request"]
        lines += [f"  {e.field}: {e.reason}" for e in err.field_errors]
        fail("\n".join(lines), EXIT_INVALID)
    exit_code = (
        EXIT_INVALID if isinstance(err, InvalidFact)
        else EXIT_NOT_FOUND if isinstance(err, NotFound)
        else EXIT_REFUSED if isinstance(err, PermissionDenied)
        else EXIT_ERROR
    )  # fmt: skip
    fail(f"{err.code}: {err}", exit_code)
