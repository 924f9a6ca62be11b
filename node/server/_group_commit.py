"""Group commit: concurrent submissions decided in arrival order by one writer and committed
together, each acknowledged only after the commit that holds it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from factnode.core import Evidence
from factnode.ledger import Submitted

log = logging.getLogger("factnode.server")

MAX_BATCH = 256  # submissions per write transaction

Ingest = Callable[[Sequence[tuple[Evidence, str | None]]], list[Submitted]]


class WriterClosed(Exception):
    """The node is shutting down: the writer takes no more submissions."""


@dataclass(frozen=True, slots=True)
class _Pending:
    evidence: Evidence
    idempotency_key: str | None
    done: asyncio.Future[Submitted]


class GroupCommit:
    """One writer task per node drains the queue in arrival order; each drained batch (up to
    `max_batch`) goes to `ingest` in one thread call, i.e. one write transaction. A caller's
    future resolves after that commit; if the batch fails, every caller in it gets the
    exception. Nothing waits to fill a batch: while one commits, the next ones queue.

    Inside a batch `ingest` decides in order, so duplicates and idempotency keys come out as
    they would one call at a time; the belief in each answer is the key's belief after the
    whole batch's commit."""

    def __init__(
        self,
        ingest: Ingest,
        on_commit: Callable[[list[Submitted]], None] = lambda done: None,
        max_batch: int = MAX_BATCH,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._ingest = ingest
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Starts the writer task on the running loop."""
        if self._task is not None:
            raise RuntimeError("the writer is already started")
        self._task = asyncio.create_task(self._run(), name="factnode-group-commit")

    async def submit(self, evidence: Evidence, idempotency_key: str | None) -> Submitted:
        """Queues checked evidence; returns its decision once the batch holding it committed.

        A caller cancelled while waiting does not withdraw its submission: it is decided and
        committed with its batch, as a call cancelled mid-transaction would be."""
        if self._closed or self._task is None:
            raise WriterClosed("the node's writer is not running")
        done: asyncio.Future[Submitted] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(evidence, idempotency_key, done))
        return await done

    async def stop(self) -> None:
        """Takes no more submissions, commits every one already queued, then ends the writer.

        Should the writer itself end abnormally, whatever is still queued fails with
        WriterClosed rather than waiting forever."""
        if self._closed:
            return
        self._closed = True
        if self._task is None:
            return
        self._queue.put_nowait(None)  # after every queued submission: they are drained first
        try:
            await self._task
        finally:
            self._fail_queued()

    def _fail_queued(self) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None and not item.done.done():
                item.done.set_exception(WriterClosed("the node stopped before this commit"))

    async def _run(self) -> None:
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self._max_batch and not self._queue.empty():
                item = self._queue.get_nowait()
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            await self._commit(batch)

    async def _commit(self, batch: list[_Pending]) -> None:
        try:
            done = await asyncio.to_thread(
                self._ingest, [(p.evidence, p.idempotency_key) for p in batch]
            )
            if len(done) != len(batch):
                raise RuntimeError(f"ingest answered {len(done)} of {len(batch)} submissions")
        except Exception as exc:
            for p in batch:
                if not p.done.done():
                    p.done.set_exception(exc)
            return
        except asyncio.CancelledError:
            for p in batch:
                if not p.done.done():
                    p.done.set_exception(WriterClosed("the writer was cancelled mid-commit"))
            raise
        for p, submitted in zip(batch, done, strict=True):
            if not p.done.done():
                p.done.set_result(submitted)
        try:
            self._on_commit(done)
        except Exception as exc:
            # Committed and acknowledged already; the type only, as a message could quote a fact.
            log.error("after-commit hook failed: %s", type(exc).__name__)
