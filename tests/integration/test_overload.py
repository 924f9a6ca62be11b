"""Overload answers, it does not cancel (issue 41, finding 10): thousands of concurrent calls
from one client complete, slower, with nothing lost; a node holding more calls than it takes
answers RESOURCE_EXHAUSTED with a retry hint, having done nothing, and the clients' retry
policy waits as told and sends the same request (the same idempotency key) again."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from langgraph.store.base import Item

import factnode
from factnode.api.v1 import factnode_pb2 as pb
from factnode.client import _calls as c
from factnode.config import Settings
from factnode.langgraph import AsyncFactnodeStore
from factnode.server.app import Node

START_TIMEOUT = 20.0  # seconds for the node to start or stop
RUN_TIMEOUT = 240.0  # seconds for a whole burst of calls (each call has its own deadline too)
CALL_TIMEOUT = 120.0  # one call's deadline, queueing included: the burst is slow on a busy host
PUSHBACK = "grpc-retry-pushback-ms"


class ServedNode:
    """A Node on an event-loop thread of its own, tokenless on 127.0.0.1:<OS-chosen port>."""

    def __init__(self, tmp: Path, **settings: Any) -> None:
        self.settings = Settings(
            listen="127.0.0.1:0", data_dir=tmp / "data", node_id="overload", grace_seconds=0.0,
            **settings,
        )  # fmt: skip
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.node: Node = self.call(self._start())
        self.address = f"127.0.0.1:{self.node.port}"

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=START_TIMEOUT)

    async def _start(self) -> Node:
        node = Node(self.settings)
        await node.start()
        return node

    def refused(self) -> float:
        """Calls the node has refused for overload so far (its metric)."""
        value = self.node.metrics.registry.get_sample_value("factnode_calls_overloaded_total")
        return value or 0.0

    def decisions(self, namespace: str) -> list[Any]:
        """Every decision the node logged in `namespace`, read from its ledger."""
        out: list[Any] = []
        token = ""
        while True:
            page = self.node.ledger.decisions(namespace=namespace, page_size=1000, page_token=token)
            out.extend(page.items)
            token = page.next_page_token
            if not token:
                return out

    def close(self) -> None:
        self.call(self.node.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=START_TIMEOUT)
        assert not self.thread.is_alive(), "the node's event loop did not stop"
        self.loop.close()


@pytest.fixture
def served(tmp_path: Path, repository_url: str) -> Iterator[ServedNode]:
    """A node with the default limits, on SQLite and on PostgreSQL."""
    n = ServedNode(tmp_path, database_url=repository_url)
    yield n
    n.close()


def _outcomes(results: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        name = "ok" if not isinstance(r, BaseException) else getattr(r, "code", type(r).__name__)
        out[name] = out.get(name, 0) + 1
    return out


def test_three_thousand_concurrent_beliefs_from_one_client_all_complete(
    served: ServedNode,
) -> None:
    """3,000 GetBelief calls at once on one AsyncClient all answer (before: about 700 were
    CANCELLED by gRPC's server, which drops calls the application has not yet picked up)."""
    key = ("ovl", "ana", "lives_in")

    async def run() -> list[Any]:
        async with factnode.AsyncClient(served.address, timeout=CALL_TIMEOUT) as client:
            await client.submit(key, "Porto", "user_stated", source="ana")
            calls = [client.belief(key) for _ in range(3000)]
            return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(asyncio.wait_for(run(), RUN_TIMEOUT))
    assert _outcomes(results) == {"ok": 3000}
    assert {r.object for r in results} == {"Porto"}


def test_fifteen_hundred_put_get_pairs_through_the_langgraph_store_are_all_kept_once(
    served: ServedNode,
) -> None:
    """About 1,500 concurrent put+get pairs through AsyncFactnodeStore (LangGraph's
    test_large_batches_async's shape) all complete; every put is stored and logged once
    (before: some 290 puts failed CANCELLED and were not stored)."""
    root = f"lg-{uuid.uuid4().hex[:8]}"
    pairs = 1500

    async def pair(store: AsyncFactnodeStore, i: int) -> Item | None:
        ns = ("test", "large", str(i % 5))
        await store.aput(ns, f"key{i}", {"n": i})
        return await store.aget(ns, f"key{i}")

    async def run() -> list[Any]:
        async with AsyncFactnodeStore(
            served.address, namespace=root, timeout=CALL_TIMEOUT
        ) as store:
            return await asyncio.gather(
                *(pair(store, i) for i in range(pairs)), return_exceptions=True
            )

    results = asyncio.run(asyncio.wait_for(run(), RUN_TIMEOUT))
    assert _outcomes(results) == {"ok": pairs}
    assert [r.value for r in results] == [{"n": i} for i in range(pairs)]
    logged = served.decisions(root)
    assert len(logged) == pairs
    assert len({d.decision.evidence_id for d in logged}) == pairs


def _submit(i: int, root: str) -> bytes:
    req = c.submit_request((root, f"s{i}", "p"), f"v{i}", "user_stated", source="test")
    return req.SerializeToString()


def test_a_node_over_its_call_limit_answers_resource_exhausted_with_a_retry_hint(
    tmp_path: Path,
) -> None:
    """With max_calls_in_flight=1 and no queue, of 200 SubmitFacts at once (no client
    retries) some are answered RESOURCE_EXHAUSTED, each with grpc-retry-pushback-ms and a
    google.rpc.RetryInfo of the same delay, and wrote nothing: the log holds one decision
    per call answered OK."""
    node = ServedNode(tmp_path, max_calls_in_flight=1, max_calls_waiting=0)
    root = f"ovl-{uuid.uuid4().hex[:8]}"
    try:

        async def run() -> list[Any]:
            options = [("grpc.enable_retries", 0)]
            async with grpc.aio.insecure_channel(node.address, options=options) as channel:
                rpc = channel.unary_unary(c.SUBMIT.path)

                async def one(i: int) -> Any:
                    try:
                        return await rpc(_submit(i, root), timeout=CALL_TIMEOUT)
                    except grpc.aio.AioRpcError as err:
                        return err

                return await asyncio.gather(*(one(i) for i in range(200)))

        results = asyncio.run(asyncio.wait_for(run(), RUN_TIMEOUT))
        refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        answered = [r for r in results if not isinstance(r, grpc.aio.AioRpcError)]
        assert refused, "the node never refused a call over its limit"
        assert {r.code() for r in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        for err in refused:
            trailers = dict(err.trailing_metadata() or ())
            delay_ms = int(trailers[PUSHBACK])
            assert delay_ms > 0
            status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
            info = error_details_pb2.RetryInfo()
            assert status.details[0].Unpack(info)
            assert info.retry_delay.ToMilliseconds() == delay_ms
            assert "max_calls_in_flight" in err.details()
        assert node.refused() == len(refused)
        assert len(node.decisions(root)) == len(answered)
    finally:
        node.close()


def test_the_clients_ride_out_an_overloaded_node_and_each_submit_is_logged_once(
    tmp_path: Path, repository_url: str
) -> None:
    """With 4 calls running and 48 waiting at most, 100 concurrent submits from one
    AsyncClient all complete: those refused were retried after the node's hint, and the
    log holds 100 decisions, one per submit."""
    node = ServedNode(
        tmp_path, max_calls_in_flight=4, max_calls_waiting=48, database_url=repository_url
    )
    root = f"ovl-{uuid.uuid4().hex[:8]}"
    try:

        async def run() -> list[Any]:
            async with factnode.AsyncClient(node.address, timeout=CALL_TIMEOUT) as client:
                return await asyncio.gather(
                    *(client.submit((root, f"s{i}", "p"), "v", "user_stated", source="t")
                      for i in range(100)),
                    return_exceptions=True,
                )  # fmt: skip

        results = asyncio.run(asyncio.wait_for(run(), RUN_TIMEOUT))
        assert _outcomes(results) == {"ok": 100}
        assert node.refused() > 0, "the node never refused a call: nothing was retried"
        logged = node.decisions(root)
        assert sorted(d.decision.evidence_id for d in logged) == sorted(
            r.evidence_id for r in results
        )
    finally:
        node.close()


@pytest.fixture
def busy_once() -> Iterator[tuple[str, list[pb.SubmitFactRequest]]]:
    """A server whose SubmitFact answers its first call RESOURCE_EXHAUSTED with a 50 ms retry
    hint and the rest OK, and whose Retract is always refused so; it lists the requests."""
    seen: list[pb.SubmitFactRequest] = []

    def submit(request: pb.SubmitFactRequest, context: grpc.ServicerContext) -> Any:
        seen.append(request)
        if len(seen) == 1:
            context.set_trailing_metadata(((PUSHBACK, "50"),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy")
        return pb.SubmitFactResponse(evidence_id="e1")

    def retract(request: Any, context: grpc.ServicerContext) -> Any:
        context.set_trailing_metadata(((PUSHBACK, "50"),))
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy")

    handlers = {
        "SubmitFact": grpc.unary_unary_rpc_method_handler(
            submit, pb.SubmitFactRequest.FromString, pb.SubmitFactResponse.SerializeToString
        ),
        "Retract": grpc.unary_unary_rpc_method_handler(
            retract, pb.RetractRequest.FromString, pb.RetractResponse.SerializeToString
        ),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("factnode.v1.FactService", handlers),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", seen
    finally:
        server.stop(None)


def test_a_retried_submit_carries_the_same_idempotency_key(
    busy_once: tuple[str, list[pb.SubmitFactRequest]],
) -> None:
    """A SubmitFact refused RESOURCE_EXHAUSTED with a hint is sent again by the channel's
    retry policy, byte for byte (the same idempotency key); Retract is not retried and raises
    Overloaded carrying the node's hint."""
    address, seen = busy_once
    with factnode.Client(address, timeout=10) as client:
        done = client.submit(("ns", "s", "p"), "v", "user_stated", source="t")
        assert done.evidence_id == "e1"
        assert len(seen) == 2 and seen[0] == seen[1]
        assert seen[0].idempotency_key
        with pytest.raises(factnode.Overloaded) as refused:
            client.retract(("ns", "s", "p"), "gone")
        assert refused.value.code == "RESOURCE_EXHAUSTED"
        assert refused.value.retry_after == pytest.approx(0.05)


def test_the_policy_retries_overload_and_not_other_exhaustion() -> None:
    """Calls safe to repeat are retried on UNAVAILABLE and RESOURCE_EXHAUSTED (the node's other
    RESOURCE_EXHAUSTED answers say not to, with a negative push-back)."""
    config = json.loads(c.service_config(retries=3, backoff=0.2))
    policy = config["methodConfig"][0]["retryPolicy"]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
