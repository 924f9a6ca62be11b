"""The node's periodic work (sync rounds, decay), run by one replica at a time (specification §10)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from factnode.store import Lease

log = logging.getLogger("factnode.server")

Job = Callable[[], Coroutine[Any, Any, None]]


class Background:
    """Runs `jobs` (each a loop until cancelled) while this replica holds the lease: checked,
    and taken when free, twice every `interval` seconds (a dead holder's work moves within
    two intervals, with room for a loaded machine); lost, the jobs are cancelled. Without a
    lease (SQLite: one process per store) the jobs simply run."""

    def __init__(self, jobs: list[Job], lease: Lease | None, replica: str, interval: float) -> None:
        self._jobs = jobs
        self._lease = lease
        self.replica = replica
        self.interval = interval
        self._running: list[asyncio.Task[None]] = []
        self._keeper: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether this replica runs the background work now."""
        return bool(self._running)

    def start(self) -> None:
        if self._lease is None:
            self._start_jobs()
        else:
            self._keeper = asyncio.create_task(self._keep())

    def holder(self) -> str | None:
        """The replica that runs the background work, or None (blocking: reads the database)."""
        return self.replica if self._lease is None else self._lease.holder()

    async def _keep(self) -> None:
        assert self._lease is not None
        while True:
            held = await asyncio.to_thread(self._lease.hold)
            if held and not self._running:
                log.info("replica %s holds the lease: it runs sync rounds and decay", self.replica)
                self._start_jobs()
            elif not held and self._running:
                log.warning("replica %s lost the lease: its background work stops", self.replica)
                await self._stop_jobs()
            await asyncio.sleep(self.interval / 2)

    def _start_jobs(self) -> None:
        self._running = [asyncio.create_task(job()) for job in self._jobs]

    async def _stop_jobs(self) -> None:
        running, self._running = self._running, []
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop(self) -> None:
        """Stops the work and gives the lease up, for another replica to take at once."""
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        await self._stop_jobs()
        if self._lease is not None:
            await asyncio.to_thread(self._lease.release)
