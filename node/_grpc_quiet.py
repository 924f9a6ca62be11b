"""gRPC's C core kept out of a process's output: the demo's walkthrough and the console's.

The C core reads its log settings (GRPC_VERBOSITY, GRPC_TRACE) from the environment once,
when `grpc` is first imported, which the CLI has done before a verb runs; setting them
later changes nothing. By default it still logs lines of its own, such as a failed TLS
handshake (`I1205 12:19:53.29 24820 ssl_transport_security.cc:2563] Handshake failed`),
which the console and the demo already report in words. So these run in a fresh
interpreter with the C core's logging off and a user's GRPC_TRACE dropped."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# Set in the fresh interpreter: it must not start another.
QUIET = "FACTNODE_GRPC_QUIET"


def quiet_environment() -> dict[str, str]:
    """This process's environment with gRPC's C core logging nothing."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_TRACE"}
    env.update({QUIET: "1", "GRPC_VERBOSITY": "NONE"})
    return env


def rerun_quietly(argv: Sequence[str]) -> None:
    """Replaces this process by `python ARGV` (same pid) with `quiet_environment()`; returns
    at once when this process is that one already."""
    if os.environ.get(QUIET) == "1":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv], quiet_environment())
