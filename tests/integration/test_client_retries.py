"""The clients retry by gRPC's own service-config retry policy (issue 28): only calls safe to
repeat, on UNAVAILABLE, a bounded number of times, within the call's one deadline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

import factnode
from factnode.api.v1 import factnode_pb2 as pb
from factnode.client import _calls as c


def test_the_policy_covers_the_calls_safe_to_repeat_and_no_other() -> None:
    """Reads and SubmitFact are retried on UNAVAILABLE and RESOURCE_EXHAUSTED; Retract, ResolveContested, Erase and
    the streams are not; retries=0 turns retrying off; gRPC's cap of five attempts holds."""
    config = json.loads(c.service_config(retries=3, backoff=0.2))
    [method] = config["methodConfig"]
    names = {n["method"] for n in method["name"]}
    assert {"GetBelief", "SubmitFact", "Explain", "GetStatus"} <= names
    assert not names & {"Retract", "ResolveContested", "Erase", "SubmitFacts", "WatchBeliefs"}
    policy = method["retryPolicy"]
    assert policy["maxAttempts"] == 4
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
    assert policy["initialBackoff"] == "0.200s" and policy["maxBackoff"] == "1.600s"
    assert json.loads(c.service_config(retries=0, backoff=0.2)) == {"methodConfig": []}
    assert (
        json.loads(c.service_config(9, 0.1))["methodConfig"][0]["retryPolicy"]["maxAttempts"]
        == c.MAX_ATTEMPTS
    )


@pytest.fixture
def unavailable() -> Iterator[tuple[str, list[str]]]:
    """A server whose GetStatus and Retract always answer UNAVAILABLE; it lists the calls."""
    calls: list[str] = []

    def refuse(name: str) -> Any:
        def handler(request: Any, context: grpc.ServicerContext) -> Any:
            calls.append(name)
            context.abort(grpc.StatusCode.UNAVAILABLE, "down for maintenance")

        return handler

    def service(name: str, method: str, request: Any, response: Any) -> Any:
        handler = grpc.unary_unary_rpc_method_handler(
            refuse(method),
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(f"factnode.v1.{name}", {method: handler})

    handlers = service("AdminService", "GetStatus", pb.GetStatusRequest, pb.GetStatusResponse)
    fact = service("FactService", "Retract", pb.RetractRequest, pb.RetractResponse)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handlers, fact))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", calls
    finally:
        server.stop(None)


def test_a_safe_call_is_retried_its_number_of_times_then_fails(
    unavailable: tuple[str, list[str]],
) -> None:
    """GetStatus answered UNAVAILABLE is sent 1 + retries times, then raises Unavailable;
    Retract, not safe to repeat, is sent once."""
    address, calls = unavailable
    with factnode.Client(address, retries=2, backoff=0.01, timeout=10) as client:
        with pytest.raises(factnode.Unavailable):
            client.status()
        assert calls == ["GetStatus"] * 3
        calls.clear()
        with pytest.raises(factnode.Unavailable):
            client.retract(("ns", "s", "p"), "gone")
        assert calls == ["Retract"]


def test_the_async_client_retries_alike(unavailable: tuple[str, list[str]]) -> None:
    """AsyncClient's channel carries the same policy."""
    address, calls = unavailable

    async def run() -> None:
        async with factnode.AsyncClient(address, retries=3, backoff=0.01, timeout=10) as client:
            with pytest.raises(factnode.Unavailable):
                await client.status()

    asyncio.run(run())
    assert calls == ["GetStatus"] * 4
