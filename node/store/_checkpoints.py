"""SQLite's checkpoints in a thread of their own, off the writer's commits.

In WAL mode a commit appends the changed pages to the write-ahead log; a checkpoint copies
them back into the database file. SQLite's automatic checkpoint runs inside the commit that
crosses its threshold (1,000 pages), so one commit in several paid for copying and syncing
the pages of all of them, and the writer's commits had a long tail (bench/README.md). With the automatic checkpoint off, this thread
runs a PASSIVE checkpoint after commits, at most every `interval` seconds: it never waits
for the writer or for readers, and SQLite's C code holds no GIL meanwhile. Durability does
not change: a commit is on disk once its log pages are synced (`synchronous=FULL`).

A PASSIVE checkpoint alone never lets the log start over while writes keep coming: SQLite
rewinds the log only when a write transaction begins with every logged page already copied
back, and under sustained writes new pages always arrive while the checkpoint runs, so the
log only grew, without bound (bench/README.md). Once the log holds more than
`wal_limit_bytes`, this thread therefore holds the store's writes back (`pause_writes`, the
repository's writer lock) for one RESTART checkpoint: it copies the pages left and waits
(at most RESTART_BUSY_MS) for reads still on the old log, so the next write rewinds the log,
and that write's commit truncates the file to `journal_size_limit` (the same bound). A read
that outlasts the wait makes that checkpoint give up; the next one tries again.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger("factnode.store")

CHECKPOINT_INTERVAL_SECONDS = 0.2
STOP_TIMEOUT_SECONDS = 10.0
WAL_LIMIT_BYTES = 64 * 1024 * 1024
# How long a RESTART checkpoint waits for reads on the old log; writes wait meanwhile.
RESTART_BUSY_MS = 1000
BUSY_TIMEOUT_MS = 30000  # the engine's own (`make_engine`), put back afterwards


class Checkpoints:
    """Runs `PRAGMA wal_checkpoint(PASSIVE)` on its own connection after commits, and a
    RESTART with writes held back once the log is over `wal_limit_bytes`."""

    def __init__(
        self,
        engine: Engine,
        pause_writes: AbstractContextManager[Any],
        interval: float = CHECKPOINT_INTERVAL_SECONDS,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
    ) -> None:
        self._engine = engine
        self._pause_writes = pause_writes
        self._interval = interval
        self.wal_limit_bytes = wal_limit_bytes
        self._page_size: int | None = None
        # RESTART checkpoints run (and how many of them found a read still on the old log).
        self.restarts = 0
        self.restarts_busy = 0
        self._committed = threading.Event()
        # Set by a commit that finds the log's file past the limit: checkpoint now.
        self._overgrown = threading.Event()
        self._stopping = threading.Event()
        database = engine.url.database
        self._wal = f"{database}-wal" if database else None
        # Held while this thread checkpoints: a checkpoint that must not find another one
        # running (an erasure truncating the log) takes it first.
        self.lock = threading.Lock()
        # The last checkpoint's (busy, log pages, pages checkpointed), as SQLite reported them.
        self.last: tuple[int, int, int] | None = None
        self._thread = threading.Thread(target=self._run, name="factnode-checkpoints", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """Says a write transaction committed: its pages wait in the log. A log grown past
        the limit is checkpointed at once, not after the interval."""
        if self._wal is not None and _file_size(self._wal) > self.wal_limit_bytes:
            self._overgrown.set()
        self._committed.set()

    def checkpoint(self) -> tuple[int, int, int]:
        """One PASSIVE checkpoint now, on a connection of its own: (busy, log pages,
        pages checkpointed), as SQLite reports them."""
        with self.lock:
            return self._run_pragma("PASSIVE")

    def restart(self) -> tuple[int, int, int]:
        """One RESTART checkpoint now with writes held back: afterwards (busy 0) the next
        write starts the log over and its commit truncates the file."""
        with self.lock, self._pause_writes:
            row = self._run_pragma("RESTART", busy_ms=RESTART_BUSY_MS)
        self.restarts += 1
        self.restarts_busy += row[0]
        return row

    def _run_pragma(self, mode: str, busy_ms: int | None = None) -> tuple[int, int, int]:
        raw: Any = self._engine.raw_connection()
        try:
            cursor = raw.cursor()
            try:
                if self._page_size is None:
                    self._page_size = int(cursor.execute("PRAGMA page_size").fetchone()[0])
                if busy_ms is not None:
                    cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
                try:
                    row = cursor.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
                finally:
                    if busy_ms is not None:
                        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            finally:
                cursor.close()
        finally:
            raw.close()
        busy, logged, done = row
        return int(busy), int(logged), int(done)

    def over_limit(self, logged_pages: int) -> bool:
        """The log holds more than `wal_limit_bytes` (pages as a checkpoint reports them)."""
        return logged_pages * (self._page_size or 0) > self.wal_limit_bytes

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stops the thread after one last checkpoint (bounded wait)."""
        self._stopping.set()
        self._overgrown.set()
        self._committed.set()
        self._thread.join(STOP_TIMEOUT_SECONDS)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._committed.wait()
            # Commits arriving meanwhile join this checkpoint rather than start one each.
            self._overgrown.wait(self._interval)
            self._overgrown.clear()
            self._committed.clear()
            try:
                self.last = self.checkpoint()
                if self.over_limit(self.last[1]):
                    self.last = self.restart()
            except Exception as exc:  # the next commit tries again; nothing is lost meanwhile
                log.warning("checkpoint failed: %s", type(exc).__name__)


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
