"""SQLite's checkpoints in a thread of their own, off the writer's commits.

In WAL mode a commit appends the changed pages to the write-ahead log; a checkpoint copies
them back into the database file. SQLite's automatic checkpoint runs inside the commit that
crosses its threshold (1,000 pages), so one commit in several paid for copying and syncing
the pages of all of them: the writer's commits took 3.5 ms at the median and 13 to 16 ms
at the 90th percentile (bench/README.md). With the automatic checkpoint off, this thread
runs a PASSIVE checkpoint after commits, at most every `interval` seconds: it never waits
for the writer or for readers, and SQLite's C code holds no GIL meanwhile. Durability does
not change: a commit is on disk once its log pages are synced (`synchronous=FULL`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger("factnode.store")

CHECKPOINT_INTERVAL_SECONDS = 0.2
STOP_TIMEOUT_SECONDS = 10.0


class Checkpoints:
    """Runs `PRAGMA wal_checkpoint(PASSIVE)` on its own connection after commits."""

    def __init__(self, engine: Engine, interval: float = CHECKPOINT_INTERVAL_SECONDS) -> None:
        self._engine = engine
        self._interval = interval
        self._committed = threading.Event()
        self._stopping = threading.Event()
        # Held while this thread checkpoints: a checkpoint that must not find another one
        # running (an erasure truncating the log) takes it first.
        self.lock = threading.Lock()
        # The last checkpoint's (busy, log pages, pages checkpointed), as SQLite reported them.
        self.last: tuple[int, int, int] | None = None
        self._thread = threading.Thread(target=self._run, name="factnode-checkpoints", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """Says a write transaction committed: its pages wait in the log."""
        self._committed.set()

    def checkpoint(self) -> tuple[int, int, int]:
        """One PASSIVE checkpoint now, on a connection of its own: (busy, log pages,
        pages checkpointed), as SQLite reports them."""
        with self.lock:
            raw: Any = self._engine.raw_connection()
            try:
                cursor = raw.cursor()
                try:
                    row = cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                finally:
                    cursor.close()
            finally:
                raw.close()
        busy, logged, done = row
        return int(busy), int(logged), int(done)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stops the thread after one last checkpoint (bounded wait)."""
        self._stopping.set()
        self._committed.set()
        self._thread.join(STOP_TIMEOUT_SECONDS)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._committed.wait()
            # Commits arriving meanwhile join this checkpoint rather than start one each.
            self._stopping.wait(self._interval)
            self._committed.clear()
            try:
                self.last = self.checkpoint()
            except Exception as exc:  # the next commit tries again; nothing is lost meanwhile
                log.warning("checkpoint failed: %s", type(exc).__name__)
