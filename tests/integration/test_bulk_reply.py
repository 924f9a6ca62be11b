"""SubmitFacts' reply is bounded: a stream longer than the reply can carry is refused before
anything of it is written; one at the limit is reported whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import Settings
from factnode.core import Key
from factnode.server import _bulk
from factnode.server._bulk import MAX_SUBMISSION_DETAIL_CHARS, items_that_fit
from factnode.server.app import Node

WAIT = 60.0  # seconds for one whole stream
MAX_REPLY = 64 * 1024  # the node's max_message_bytes in these tests: a few hundred items
NS, PREDICATE = "user:bulk", "lives_in"


def item(i: int) -> pb.SubmitFactRequest:
    """Item `i`: its own key, all keys of one length. Every third has a confidence below the
    minimum (REJECTED, whose decision carries the longest detail), every fifth no source."""
    return pb.SubmitFactRequest(
        fact=pb.FactInput(
            key=pb.Key(namespace=NS, subject=f"s{i:06d}", predicate=PREDICATE),
            object=f"city {i}",
            anchor="user_stated",
            source="" if i % 5 == 0 else "bulk",
            confidence=0.123 if i % 3 == 0 else 0.9,
        )
    )


LIMIT = items_that_fit(MAX_REPLY, Key(NS, f"s{0:06d}", PREDICATE))


async def stream(
    tmp_path: Path, items: Callable[[], AsyncIterator[pb.SubmitFactRequest]]
) -> tuple[pb.SubmitFactsResponse | grpc.aio.AioRpcError, int, int]:
    """One SubmitFacts call on a fresh node: its reply or error, and the node's evidence and
    decision counts afterwards."""
    node = Node(Settings(listen="127.0.0.1:0", data_dir=tmp_path, max_message_bytes=MAX_REPLY))
    port = await node.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            facts = pb_grpc.FactServiceStub(channel)
            outcome: pb.SubmitFactsResponse | grpc.aio.AioRpcError
            try:
                outcome = await facts.SubmitFacts(items(), timeout=WAIT)
            except grpc.aio.AioRpcError as err:
                outcome = err
        counts = await asyncio.to_thread(node.ledger.counts)
    finally:
        await node.stop(0)
    return outcome, counts.evidence, counts.decisions


def numbered(n: int) -> Callable[[], AsyncIterator[pb.SubmitFactRequest]]:
    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        for i in range(n):
            yield item(i)

    return items


async def test_a_stream_at_the_limit_is_reported_whole(tmp_path: Path) -> None:
    """A stream of exactly as many items as the reply can carry gets every result, in order,
    and the reply fits in max_message_bytes (the node could send it)."""
    assert 100 < LIMIT < 1000  # the test's own premise: a few hundred items
    reply, evidence, decisions = await stream(tmp_path, numbered(LIMIT))
    assert isinstance(reply, pb.SubmitFactsResponse), reply
    assert [r.index for r in reply.results] == list(range(LIMIT))
    assert reply.decided_count == LIMIT and reply.invalid_count == 0
    assert reply.ByteSize() <= MAX_REPLY
    outcomes = {r.decision.outcome for r in reply.results}
    assert outcomes == {pb.OUTCOME_ACCEPTED, pb.OUTCOME_REJECTED}
    # The bound's premise: no submission's decision says more than it allows for.
    assert max(len(r.decision.detail) for r in reply.results) <= MAX_SUBMISSION_DETAIL_CHARS
    assert decisions == LIMIT and evidence > 0


async def test_a_stream_one_past_the_limit_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """One item more than the reply can carry: INVALID_ARGUMENT naming the stream and
    max_message_bytes, and not one of its items stored or decided."""
    err, evidence, decisions = await stream(tmp_path, numbered(LIMIT + 1))
    assert isinstance(err, grpc.aio.AioRpcError), "the stream was accepted"
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    bad = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad) for d in status.details)
    assert [v.field for v in bad.field_violations] == ["stream"]
    assert f"item {LIMIT}" in bad.field_violations[0].description
    assert "max_message_bytes" in (err.details() or "")
    assert (evidence, decisions) == (0, 0)


async def test_invalid_items_count_against_the_reply_too(tmp_path: Path) -> None:
    """Refused items' errors take room in the reply as decisions do: a stream of invalid
    items past what the reply can carry is refused, and nothing is written."""

    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        for i in range(LIMIT * 4):
            bad = item(i)
            bad.fact.anchor = "not_an_anchor"
            yield bad
        yield item(0)

    err, evidence, decisions = await stream(tmp_path, items)
    assert isinstance(err, grpc.aio.AioRpcError), "the stream was accepted"
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "max_message_bytes" in (err.details() or "")
    assert (evidence, decisions) == (0, 0)


@pytest.mark.parametrize("n", [1, LIMIT // 2])
async def test_a_short_stream_is_reported_whole(tmp_path: Path, n: int) -> None:
    """Streams under the limit are decided and reported as before."""
    reply, _, decisions = await stream(tmp_path, numbered(n))
    assert isinstance(reply, pb.SubmitFactsResponse), reply
    assert len(reply.results) == n == decisions


async def test_a_refused_stream_that_stops_sending_gets_its_refusal_after_the_drain_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node reads what a refused stream still sends (so a grpc.aio client gets the
    refusal, not INTERNAL), but not forever: a client that neither sends nor half-closes
    gets the refusal once DRAIN_SECONDS have passed, and nothing is written."""
    monkeypatch.setattr(_bulk, "DRAIN_SECONDS", 0.5)
    held_open = asyncio.Event()

    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        for i in range(LIMIT + 1):
            yield item(i)
        await held_open.wait()  # never set: the stream stays open until the node ends it

    started = asyncio.get_running_loop().time()
    err, evidence, decisions = await stream(tmp_path, items)
    took = asyncio.get_running_loop().time() - started
    assert isinstance(err, grpc.aio.AioRpcError), "the stream was accepted"
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "max_message_bytes" in (err.details() or "")
    assert (evidence, decisions) == (0, 0)
    assert took < WAIT / 2, took  # the drain's bound ended it, not the call's deadline


async def test_a_refused_stream_that_goes_on_sending_is_ended_after_the_drain_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past DRAIN_ITEMS more items the node stops reading and ends the call: a client that
    keeps sending cannot hold it open, and nothing is written."""
    monkeypatch.setattr(_bulk, "DRAIN_ITEMS", 10)
    sent = 0

    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        nonlocal sent
        for i in range(LIMIT * 100):
            sent += 1
            yield item(i)

    err, evidence, decisions = await stream(tmp_path, items)
    assert isinstance(err, grpc.aio.AioRpcError), "the stream was accepted"
    # The refusal, or INTERNAL where grpc.aio's failed write overwrote it (grpc/grpc#36066):
    # that is what the bound trades for ending the call.
    assert err.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL)
    assert sent < LIMIT * 100  # the client was stopped, not let to send everything
    assert (evidence, decisions) == (0, 0)
