"""The log of what every write changed, kept on PostgreSQL for the replicas' memories of
served answers (specification §10).

Every write transaction, from any replica, logs the keys whose served answers it changed
in `served_touch` (one row with no key where it cannot say which: an erasure, decay),
under the store's write lock: sequence numbers are taken in commit order, so every reader
sees a prefix of the log. A read that may answer from memory first reads the log past its
memory's position, in its own read transaction (`read_touch_log`): a write acknowledged
before the read started is in that prefix, whichever replica made it. Nothing depends on
being told of a write (no LISTEN/NOTIFY to miss); the price is one query per read."""

from __future__ import annotations

from sqlalchemy import Connection

from factnode.core import ids
from factnode.store._rows import ST
from factnode.store._sqltext import driver_form, insert_rows, write_soon
from factnode.store.repository import Touched, TouchLog

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


def read_touch_log(conn: Connection, after: int | None) -> TouchLog:
    """The log past position `after` (None: nothing is known yet, every key counts)."""
    low, head = conn.exec_driver_sql(_HEAD).one()
    if head is None or (after is not None and head <= after):
        return TouchLog(head, frozenset())
    if after is None or (low is not None and after < low - 1):
        return TouchLog(head, None)
    found = [r[0] for r in conn.exec_driver_sql(_SINCE, (after, head)).all()]
    return TouchLog(head, None if None in found else frozenset(found))
