"""Group commit: concurrent submissions decided in arrival order by one writer and committed
together, each acknowledged only after the commit that holds it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from factnode.core import Evidence
from factnode.core.recall import Embedding
from factnode.ledger import Submitted

log = logging.getLogger("factnode.server")

MAX_BATCH = 256  # submissions per write transaction

# One answer per submission, in order: its decision, or the error that is its alone.
Ingest = Callable[
    [Sequence[tuple[Evidence, str | None]], Mapping[str, Sequence[Embedding]]],
    Sequence[Submitted | Exception],
]


class WriterClosed(Exception):
    """The node is shutting down: the writer takes no more submissions."""


@dataclass(frozen=True, slots=True)
class _Pending:
    evidence: Evidence
    idempotency_key: str | None
    done: asyncio.Future[Submitted]
    embeddings: tuple[Embedding, ...] = ()


class GroupCommit:
    """One writer thread per node drains the queue in arrival order; each drained batch (up
    to `max_batch`) goes to `ingest`, i.e. one write transaction. A caller's future resolves
    after that commit; an error `ingest` answers for one submission (`Ledger.ingest_each`:
    the database refused its data, and the rest were committed without it) goes to that
    caller only; if the batch fails, every caller in it gets the exception. Nothing waits
    to fill a batch: while one commits, the next ones queue.

    The writer is a thread of its own rather than a task handing each batch to a pool: after
    a commit it takes the next batch at once, without waiting for the event loop to resume
    it and for a pool thread to wake. On PostgreSQL, whose batches wait on the database,
    that gave SubmitFact more calls per second; on SQLite the rate did not move
    (bench/README.md). The event loop only queues
    submissions and settles each batch's callers.

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
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended: asyncio.Future[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Starts the writer thread; its callers are answered on the running loop."""
        if self._thread is not None:
            raise RuntimeError("the writer is already started")
        self._loop = asyncio.get_running_loop()
        self._ended = self._loop.create_future()
        self._thread = threading.Thread(target=self._run, name="factnode-writer", daemon=True)
        self._thread.start()

    async def submit(
        self,
        evidence: Evidence,
        idempotency_key: str | None,
        embeddings: tuple[Embedding, ...] = (),
    ) -> Submitted:
        """Queues checked evidence (with the caller's vectors of it, if any); returns its
        decision once the batch holding it committed.

        A caller cancelled while waiting does not withdraw its submission: it is decided and
        committed with its batch, as a call cancelled mid-transaction would be."""
        if self._closed or self._loop is None:
            raise WriterClosed("the node's writer is not running")
        done: asyncio.Future[Submitted] = self._loop.create_future()
        self._queue.put(_Pending(evidence, idempotency_key, done, embeddings))
        return await done

    async def stop(self) -> None:
        """Takes no more submissions, commits every one already queued, then ends the writer.

        Should the writer itself end abnormally, whatever is still queued fails with
        WriterClosed rather than waiting forever."""
        if self._closed:
            return
        self._closed = True
        if self._ended is None:
            return
        self._queue.put(None)  # after every queued submission: they are drained first
        try:
            await asyncio.shield(self._ended)
        finally:
            self._fail_queued()

    def _fail_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None and not item.done.done():
                item.done.set_exception(WriterClosed("the node stopped before this commit"))

    # -- the writer thread ------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first]
                stopping = False
                while len(batch) < self._max_batch:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stopping = True
                        break
                    batch.append(item)
                self._commit(batch)
                if stopping:
                    return
        except BaseException as exc:
            # Its callers are answered (WriterClosed); the thread ends here, reported once.
            log.critical("the writer stopped: %s", type(exc).__name__)
        finally:
            self._call_soon(self._end)

    def _commit(self, batch: list[_Pending]) -> None:
        try:
            vectors = {p.evidence.evidence_id: p.embeddings for p in batch if p.embeddings}
            done = self._ingest([(p.evidence, p.idempotency_key) for p in batch], vectors)
            if len(done) != len(batch):
                raise RuntimeError(f"ingest answered {len(done)} of {len(batch)} submissions")
        except Exception as exc:
            self._call_soon(_fail, batch, exc)
            return
        except BaseException:
            self._call_soon(_fail, batch, WriterClosed("the writer ended mid-commit"))
            raise
        self._call_soon(self._settle, batch, done)

    def _call_soon(self, callback: Callable[..., None], *args: object) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: no caller is left to answer
            self._loop.call_soon_threadsafe(callback, *args)

    # -- back on the event loop -------------------------------------------------------

    def _settle(self, batch: list[_Pending], done: Sequence[Submitted | Exception]) -> None:
        for p, answer in zip(batch, done, strict=True):
            if p.done.done():
                continue
            if isinstance(answer, Exception):
                p.done.set_exception(answer)
            else:
                p.done.set_result(answer)
        try:
            self._on_commit([d for d in done if not isinstance(d, Exception)])
        except Exception as exc:
            # Committed and acknowledged already; the type only, as a message could quote a fact.
            log.error("after-commit hook failed: %s", type(exc).__name__)

    def _end(self) -> None:
        """The writer thread ended (stopped, or died): nothing queued may wait for it."""
        self._closed = True
        self._fail_queued()
        assert self._ended is not None
        if not self._ended.done():
            self._ended.set_result(None)


def _fail(batch: list[_Pending], exc: Exception) -> None:
    for p in batch:
        if not p.done.done():
            p.done.set_exception(exc)
