"""WatchBeliefs scales with changes, not streams: one shared notifier wakes waiting streams
only when the belief-change log moved, and each client holds a bounded number of streams
(issue 22, item 8)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import Settings
from factnode.core import Submission
from factnode.server._context import Changes
from factnode.server.app import Node

WAIT = 10.0  # seconds any one expected event may take


async def _until(cond: Callable[[], bool], what: str) -> None:
    async def poll() -> None:
        while not cond():
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    """A node on this test's event loop allowing 40 streams per client."""
    n = Node(
        Settings(
            listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            node_id="watch-node",
            grace_seconds=0.0,
            watch_streams_per_client=40,
        )
    )
    await n.start()
    try:
        yield n
    finally:
        await n.stop(0)


@pytest.fixture
async def stub(node: Node) -> AsyncIterator[pb_grpc.FactServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{node.port}") as channel:
        yield pb_grpc.FactServiceStub(channel)


def _fact(obj: str) -> pb.SubmitFactRequest:
    return pb.SubmitFactRequest(
        fact=pb.FactInput(
            key=pb.Key(namespace="team:infra", subject="build", predicate="python_version"),
            object=obj,
            anchor="user_stated",
            source="ana",
            valid_from=Timestamp(seconds=1_700_000_000),
        )
    )


async def _open(
    stub: pb_grpc.FactServiceStub, n: int
) -> tuple[list[grpc.aio.UnaryStreamCall], list[list[pb.BeliefChange]], list[asyncio.Task[None]]]:
    calls, seen, tasks = [], [], []
    for _ in range(n):
        call = stub.WatchBeliefs(pb.WatchBeliefsRequest(), timeout=60)
        got: list[pb.BeliefChange] = []

        async def read(call: grpc.aio.UnaryStreamCall = call, got: list = got) -> None:  # type: ignore[type-arg]
            async for change in call:
                got.append(change)

        calls.append(call)
        seen.append(got)
        tasks.append(asyncio.create_task(read()))
    return calls, seen, tasks


async def _close(calls: list[grpc.aio.UnaryStreamCall], tasks: list[asyncio.Task[None]]) -> None:
    for call in calls:
        call.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_idle_streams_are_not_woken_until_a_belief_changes(
    node: Node, stub: pb_grpc.FactServiceStub
) -> None:
    """Forty idle streams are not woken while nothing changes (the shared notifier reads the
    change log at most once per poll interval, not once per stream), nor by a submission that
    changes no belief; one change wakes each stream once and reaches every one."""
    changes = node.changes
    assert changes is not None
    calls, seen, tasks = await _open(stub, 40)
    try:
        await _until(lambda: changes.waiting == 40, "40 waiting streams")
        wakeups, reads = changes.wakeups, changes.reads
        await asyncio.sleep(2.5 * changes.poll_seconds)  # nothing should happen meanwhile
        assert changes.wakeups == wakeups
        assert changes.reads - reads <= 4  # the poll timer's reads: about one per interval
        await stub.SubmitFact(_fact("3.12"), timeout=WAIT)
        await _until(lambda: all(len(s) == 1 for s in seen), "the change on every stream")
        await _until(lambda: changes.waiting == 40, "the streams waiting again")
        assert changes.wakeups == wakeups + 40
        woken = changes.wakeups
        await stub.SubmitFact(_fact("3.12"), timeout=WAIT)  # a DUPLICATE: no belief changes
        await asyncio.sleep(2 * changes.poll_seconds)
        assert changes.wakeups == woken
        assert all(len(s) == 1 for s in seen)
    finally:
        await _close(calls, tasks)


async def test_a_change_written_outside_the_servicers_reaches_the_streams(
    node: Node, stub: pb_grpc.FactServiceStub
) -> None:
    """A belief changed by a write from another thread (as peer input and decay write) wakes
    the waiting streams through the ledger's commit observer."""
    changes = node.changes
    assert changes is not None
    calls, seen, tasks = await _open(stub, 3)
    try:
        await _until(lambda: changes.waiting == 3, "3 waiting streams")
        sub = Submission("team:infra", "build", "python_version", "3.13", "user_stated", "ana")
        await asyncio.to_thread(node.ledger.submit, sub)
        await _until(lambda: all(len(s) == 1 for s in seen), "the change on every stream")
        assert seen[0][0].belief.object == "3.13"
    finally:
        await _close(calls, tasks)


async def test_a_client_beyond_its_stream_cap_is_refused_with_resource_exhausted(
    node: Node, stub: pb_grpc.FactServiceStub
) -> None:
    """With 40 streams per client, a client's 41st WatchBeliefs is refused with
    RESOURCE_EXHAUSTED naming the setting; once one of its streams ends, it may open another."""
    changes = node.changes
    assert changes is not None
    calls, _seen, tasks = await _open(stub, 40)
    try:
        await _until(lambda: changes.waiting == 40, "40 waiting streams")
        extra = stub.WatchBeliefs(pb.WatchBeliefsRequest(), timeout=WAIT)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await extra.read()
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "watch_streams_per_client" in (refused.value.details() or "")
        calls[0].cancel()
        await _until(lambda: changes.waiting == 39, "one stream fewer")
        again, _, more = await _open(stub, 1)
        await _until(lambda: changes.waiting == 40, "the new stream waiting")
        await _close(again, more)
    finally:
        await _close(calls, tasks)


async def test_the_notifier_hears_of_other_replicas_writes_by_polling_the_head() -> None:
    """A change the notifier was not told of (a write through another replica) wakes the
    waiting streams within a poll interval; a poll that finds the head where it was wakes
    nobody."""
    head = [5]
    changes = Changes(lambda: head[0], poll_seconds=0.05)
    await changes.start()
    try:
        woken: Awaitable[None] = asyncio.create_task(changes.wait_beyond(5))
        await asyncio.sleep(0.3)  # several polls, head unchanged
        assert changes.wakeups == 0 and changes.reads >= 3
        head[0] = 6
        await asyncio.wait_for(woken, WAIT)
        assert changes.wakeups == 1 and changes.head == 6
    finally:
        await changes.stop()


async def test_a_stream_on_one_replica_sees_a_change_made_through_another(
    repository_url: str, tmp_path: Path
) -> None:
    """Two replicas on one PostgreSQL store: a stream on the first, whose replica is not
    listening for commits, still gets the second's change from the notifier's poll of the
    change log."""
    if repository_url.startswith("sqlite"):
        pytest.skip("one SQLite store is served by one process")
    async with _replicas(repository_url, tmp_path) as replicas:
        assert replicas[0].listener is not None
        await asyncio.to_thread(replicas[0].listener.stop)  # the poll alone
        await _change_across(replicas)


async def test_a_commit_through_one_replica_wakes_a_watch_on_another_before_any_poll(
    repository_url: str, tmp_path: Path
) -> None:
    """With the first replica's poll set to a minute, a stream on it still gets the second
    replica's change within seconds: the commit's notification (LISTEN/NOTIFY) woke it."""
    if repository_url.startswith("sqlite"):
        pytest.skip("one SQLite store is served by one process")
    async with _replicas(repository_url, tmp_path) as replicas:
        assert replicas[0].changes is not None
        replicas[0].changes.poll_seconds = 60.0
        # Once a poll timer started before the change is long gone:
        took = await _change_across(replicas, settle=1.5)
        assert took < 5.0  # well before the poll's minute


@asynccontextmanager
async def _replicas(url: str, tmp_path: Path) -> AsyncIterator[list[Node]]:
    """Two started replicas of one node on the PostgreSQL store at `url`."""
    replicas = [
        Node(
            Settings(
                listen="127.0.0.1:0",
                data_dir=tmp_path / f"r{i}",
                database_url=url,
                node_id="watch-node",
                grace_seconds=0.0,
            )
        )
        for i in range(2)
    ]
    for r in replicas:
        await r.start()
    try:
        yield replicas
    finally:
        for r in replicas:
            await r.stop(0)


async def _change_across(replicas: list[Node], settle: float = 0.0) -> float:
    """A stream on the first replica, once waiting (and `settle` seconds more), gets the
    change a fact submitted through the second makes: seconds from the submission."""
    first = replicas[0].changes
    assert first is not None
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{replicas[0].port}") as watched,
        grpc.aio.insecure_channel(f"127.0.0.1:{replicas[1].port}") as written,
    ):
        calls, seen, tasks = await _open(pb_grpc.FactServiceStub(watched), 1)
        try:
            await _until(lambda: first.waiting == 1, "the stream waiting")
            await asyncio.sleep(settle)
            sent = time.monotonic()
            await pb_grpc.FactServiceStub(written).SubmitFact(_fact("3.14"), timeout=WAIT)
            await _until(lambda: len(seen[0]) == 1, "the change on the first replica")
            assert seen[0][0].belief.object == "3.14"
            return time.monotonic() - sent
        finally:
            await _close(calls, tasks)
