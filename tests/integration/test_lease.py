"""The background-work lease of a node's replicas on PostgreSQL (specification §10): one replica
at a time runs the jobs; when it goes, another takes them up within two intervals."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from factnode.server._background import Background, Job
from factnode.store import Lease

pytestmark = pytest.mark.postgres

INTERVAL = 0.2


class Ticks:
    """A job that counts, per replica, the ticks it ran."""

    def __init__(self) -> None:
        self.by: dict[str, int] = {}

    def job(self, replica: str) -> Job:
        async def run() -> None:
            while True:
                self.by[replica] = self.by.get(replica, 0) + 1
                await asyncio.sleep(INTERVAL / 4)

        return run


async def _until(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the bound"
        await asyncio.sleep(0.02)


async def test_one_replica_runs_the_jobs_and_another_takes_over_when_it_lets_go(
    postgres_url: str,
) -> None:
    """Three replicas of one node: exactly one runs the jobs and every replica names it as
    the holder; once it gives the lease up, another runs them within two intervals and the
    first runs nothing more."""
    node = f"node-{uuid.uuid4().hex[:8]}"
    ticks = Ticks()
    names = [f"r{i}" for i in range(3)]
    replicas = [
        Background([ticks.job(n)], Lease(postgres_url, node, n), n, INTERVAL) for n in names
    ]
    for r in replicas:
        r.start()
    try:
        await _until(lambda: sum(r.running for r in replicas) == 1, 10 * INTERVAL)
        await asyncio.sleep(3 * INTERVAL)
        [first] = [r for r in replicas if r.running]
        assert set(ticks.by) == {first.replica}
        holders = {await asyncio.to_thread(r.holder) for r in replicas}
        assert holders == {first.replica}
        await first.stop()
        stopped_at, left = time.monotonic(), ticks.by[first.replica]
        rest = [r for r in replicas if r is not first]
        await _until(lambda: any(r.running for r in rest), 2 * INTERVAL + 1.0)
        moved = time.monotonic() - stopped_at
        assert moved <= 2 * INTERVAL + 0.5, moved  # the check's period, and a loaded machine
        await asyncio.sleep(2 * INTERVAL)
        assert sum(r.running for r in rest) == 1
        assert ticks.by[first.replica] == left
        [second] = [r for r in rest if r.running]
        assert await asyncio.to_thread(rest[0].holder) == second.replica
    finally:
        for r in replicas:
            await r.stop()


def test_nobody_holds_a_lease_no_replica_has_taken(postgres_url: str) -> None:
    """`holder` is None until some replica takes the lease, and the lease of one node is not
    another's: two nodes on one database each have their holder."""
    a = Lease(postgres_url, f"node-{uuid.uuid4().hex[:8]}", "a")
    b = Lease(postgres_url, f"node-{uuid.uuid4().hex[:8]}", "b")
    try:
        assert a.holder() is None
        assert a.hold() and b.hold()
        assert (a.holder(), b.holder()) == ("a", "b")
        a.release()
        assert b.holder() == "b"
    finally:
        a.release()
        b.release()
