"""The memory of served answers on PostgreSQL, kept correct across replicas (DESIGN §10).

Every write transaction, from any replica, logs the keys whose served answers it changed
in `served_touch` (one row with no key where it cannot say which: an erasure, decay),
under the store's write lock: sequence numbers are taken in commit order, so every reader
sees a prefix of the log. Each read that asks the memory first reads the log's head, in
its own read transaction, and forgets every key logged since the memory's position: a
write acknowledged before the read started is in that prefix, whichever replica made it,
so no answer it changed can be served. Nothing depends on being told of a write (no
LISTEN/NOTIFY to miss); the price is one query per read.

A read that missed fills its answer only if the memory's position has not moved since it
caught up (`epoch`), as `ServedMemory` does with its own writes."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Connection

from factnode.core import Key, ids
from factnode.store._rows import ST
from factnode.store._sqltext import driver_form, insert_rows, write_soon
from factnode.store.cache import ServedMemory, Touched

V = TypeVar("V")

# Rows kept in the log behind its head; a replica whose position fell further behind than
# this (pruned under it) starts its memory over.
KEEP_ROWS = 100_000
# A write prunes the log every this many writes of its replica.
PRUNE_EVERY = 1_000

_HEAD = "SELECT min(seq), max(seq) FROM served_touch"
_SINCE = "SELECT DISTINCT key_id FROM served_touch WHERE seq > %s AND seq <= %s"
_PRUNE = "DELETE FROM served_touch WHERE seq < (SELECT max(seq) FROM served_touch) - ?"


def log_touched(conn: Connection, touched: Touched, writes: int) -> None:
    """Logs what a write transaction changed (inside it, before its commit: queued to go out
    with it), and every PRUNE_EVERY writes drops the rows far behind the head."""
    if touched.every:
        rows: list[tuple[str | None]] = [(None,)]
    else:
        rows = [(ids.key_id(k),) for k in touched.keys]
    if rows:
        insert_rows(conn, ST, ("key_id",), rows)
    if writes % PRUNE_EVERY == 0:
        write_soon(conn, *driver_form(conn, _PRUNE, (KEEP_ROWS,)))


class CheckedMemory(ServedMemory[V]):
    """Served answers of up to `capacity` hot keys, valid as of the log position `epoch()`."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._ids: dict[str, Key] = {}
        self._started = False
        self.hits = 0  # answers served from memory (for tests and the bench)

    def get(self, key: Key) -> V | None:
        """Nothing outside a read transaction: a hit needs the log's head (`recall`)."""
        return None

    def recall(self, tx: Any, key: Key) -> V | None:
        """The kept answer of `key` inside the read transaction `tx`, once every key logged
        up to the head that `tx` sees is forgotten."""
        if self.capacity == 0:
            return None
        conn: Connection = tx._c
        low, head = conn.exec_driver_sql(_HEAD).one()
        with self._lock:
            at = self._epoch
            if head is None or head <= at:
                return self._hit(key)
        if not self._started or (low is not None and at < low - 1):
            gone: list[str | None] | None = None  # nothing known yet, or pruned under us
        else:
            gone = [r[0] for r in conn.exec_driver_sql(_SINCE, (at, head)).all()]
        with self._lock:
            if self._epoch == at:
                self._catch_up(gone, head)
            # Entries as of `head` or later reflect every write this read must see.
            return self._hit(key) if self._epoch >= head else None

    def _hit(self, key: Key) -> V | None:
        """The kept answer of `key`, counted; the caller holds the lock."""
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
        return found

    def _catch_up(self, gone: list[str | None] | None, head: int) -> None:
        """Forgets the keys logged up to `head` (None among them, or `gone` None: every key);
        the caller holds the lock."""
        if gone is None or None in gone:
            self._entries.clear()
            self._ids.clear()
        else:
            for key_id in gone:
                key = self._ids.pop(key_id, None)  # type: ignore[arg-type]
                if key is not None:
                    self._entries.pop(key, None)
        self._epoch = head
        self._started = True

    def _keep(self, answers: dict[Key, V]) -> None:  # type: ignore[override]
        for key in answers:
            self._ids[ids.key_id(key)] = key
        super()._keep(answers)
        if len(self._ids) > 2 * max(self.capacity, 1):
            self._ids = {ids.key_id(k): k for k in self._entries}

    def forget(self, touched: Touched) -> None:
        """Nothing: the log says what changed, to every replica alike (this one's writes too)."""

    def publish(self, touched: Touched) -> None:
        """Nothing: an answer worked out by a write could be kept after the log has moved
        past a later write by another replica."""
