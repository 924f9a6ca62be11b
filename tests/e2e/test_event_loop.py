"""`factnode serve` on each event loop it offers: it says which, serves, and stops cleanly."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _e2e import RPC_TIMEOUT, ServerProcess, open_channel, start_server, unique_ns

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

ANNOUNCE_TIMEOUT = 10.0


def _announced_loop(server: ServerProcess) -> str:
    """The loop named on serve's `event loop:` line, waited for with a bound."""
    deadline = time.monotonic() + ANNOUNCE_TIMEOUT
    while time.monotonic() < deadline:
        for line in list(server.lines):
            if line.startswith("event loop: "):
                return line.removeprefix("event loop: ")
        time.sleep(0.05)
    pytest.fail(f"serve named no event loop within {ANNOUNCE_TIMEOUT}s: {server.output()}")


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_serve_runs_on_the_chosen_loop(tmp_path: Path, loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")
    server = start_server(tmp_path, "--event-loop", loop)
    try:
        assert _announced_loop(server) == loop
        channel = open_channel(server.address)
        try:
            facts = pb_grpc.FactServiceStub(channel)
            key = pb.Key(namespace=unique_ns("loop"), subject="ana", predicate="lives_in")
            request = pb.SubmitFactRequest(
                fact=pb.FactInput(key=key, object="Porto", anchor="user_stated", source="t")
            )
            reply = facts.SubmitFact(request, timeout=RPC_TIMEOUT)
            assert reply.decision.outcome == pb.OUTCOME_ACCEPTED
            belief = facts.GetBelief(pb.GetBeliefRequest(key=key), timeout=RPC_TIMEOUT)
            assert belief.object == "Porto"
        finally:
            channel.close()
    finally:
        code = server.stop()
    assert code == 0, server.output()


def test_auto_is_the_default(tmp_path: Path) -> None:
    """Without a choice serve takes uvloop where it is installed, else asyncio's loop."""
    try:
        import uvloop  # noqa: F401

        expected = "uvloop"
    except ImportError:
        expected = "asyncio"
    server = start_server(tmp_path)
    try:
        assert _announced_loop(server) == expected
    finally:
        assert server.stop() == 0, server.output()
