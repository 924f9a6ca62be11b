"""Watchers on one replica hear of commits made through another at once (LISTEN/NOTIFY),
not at the notifier's next poll (DESIGN §10)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import Settings
from factnode.server.app import Node

pytestmark = pytest.mark.postgres

WAIT = 10.0


async def test_a_commit_through_one_replica_wakes_a_watch_on_another_before_any_poll(
    postgres_url: str, tmp_path: Path
) -> None:
    """With the first replica's poll set to a minute, a stream on it still gets the second
    replica's change within seconds: the commit's notification woke it."""
    replicas = [
        Node(
            Settings(
                listen="127.0.0.1:0",
                data_dir=tmp_path / f"r{i}",
                database_url=postgres_url,
                node_id="listen-node",
                grace_seconds=0.0,
            )
        )
        for i in range(2)
    ]
    for r in replicas:
        await r.start()
    try:
        changes = replicas[0].changes
        assert changes is not None
        changes.poll_seconds = 60.0
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{replicas[0].port}") as watched,
            grpc.aio.insecure_channel(f"127.0.0.1:{replicas[1].port}") as written,
        ):
            stream = pb_grpc.FactServiceStub(watched).WatchBeliefs(
                pb.WatchBeliefsRequest(namespace="listen"), timeout=4 * WAIT
            )
            first = asyncio.ensure_future(stream.read())
            deadline = time.monotonic() + WAIT
            while changes.waiting == 0:
                assert time.monotonic() < deadline, "the stream never waited"
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.5)  # a poll timer started before the change is long gone
            fact = pb.FactInput(
                key=pb.Key(namespace="listen", subject="pi", predicate="value"),
                object="3.14",
                attribution="user_stated",
                source="test",
            )
            sent = time.monotonic()
            await pb_grpc.FactServiceStub(written).SubmitFact(
                pb.SubmitFactRequest(fact=fact), timeout=WAIT
            )
            change = await asyncio.wait_for(first, WAIT)
            assert change.belief.object == "3.14"
            assert time.monotonic() - sent < 5.0  # well before the poll's minute
            stream.cancel()
    finally:
        for r in replicas:
            await r.stop(0)
