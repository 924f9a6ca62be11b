"""Engine set-up: SQLite's pragmas and transaction control, PostgreSQL's connection checks."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.pool import NullPool, StaticPool
from sqlmodel import create_engine

from factnode.store._checkpoints import BUSY_TIMEOUT_MS, WAL_LIMIT_BYTES
from factnode.store._sqltext import flush_writes, forget_read_ahead, write_soon


def make_engine(
    url: str, *, unpooled: bool = False, wal_limit_bytes: int = WAL_LIMIT_BYTES
) -> Engine:
    """An engine for `url`; SQLite gets WAL, a busy timeout, secure_delete and BEGIN IMMEDIATE.
    A SQLite file's commits never checkpoint: its repository's `Checkpoints` thread does, and
    a log started over is truncated to `wal_limit_bytes` (`journal_size_limit`).
    `unpooled` (a SQLite file): each connect opens a connection and closing it closes it,
    with no limit on how many are open; for connections their holders keep."""
    if not url.startswith("sqlite"):
        # hide_parameters: a database error must not quote a fact's value or source in a log.
        engine = create_engine(url, hide_parameters=True)
        _ping_when_idle(engine)

        @event.listens_for(engine, "before_cursor_execute")
        def _after_queued(conn: Connection, *_: Any) -> None:
            forget_read_ahead(conn)  # it may write
            flush_writes(conn)  # a statement sees every write queued before it

        return engine
    memory = url in ("sqlite://", "sqlite:///:memory:")
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        poolclass=StaticPool if memory else NullPool if unpooled else None,
        hide_parameters=True,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from pysqlite so BEGIN IMMEDIATE is ours to emit.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if not memory:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA wal_autocheckpoint=0")
            cur.execute(f"PRAGMA journal_size_limit={int(wal_limit_bytes)}")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        # Erased values must not survive in free pages.
        cur.execute("PRAGMA secure_delete=ON")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = "IMMEDIATE" if conn.get_execution_options().get("write") else "DEFERRED"
        # On the driver's connection: through `exec_driver_sql` this BEGIN was a tenth of a
        # short read's cost (an as-of GetBelief, bench/README.md). Its errors reach the
        # caller as the driver's, as the hot paths' statements' do (`_sqltext`).
        conn.connection.driver_connection.execute(f"BEGIN {mode}")  # type: ignore[union-attr]

    return engine


PING_AFTER_IDLE_SECONDS = 1.0
_LAST_USED = "factnode.last_used"


def _ping_when_idle(engine: Engine) -> None:
    """A pooled PostgreSQL connection idle for more than PING_AFTER_IDLE_SECONDS is pinged
    before use and replaced if the server dropped it (a restart, an idle timeout). Unlike
    `pool_pre_ping`, a connection in steady use is not: each ping is a round trip, a
    visible share of a write batch's time on a busy machine (bench/README.md). A server
    restarted under steady load fails the next transaction on each pooled connection once;
    the pool then replaces that connection."""

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        last = record.info.get(_LAST_USED)
        if last is not None and time.monotonic() - last <= PING_AFTER_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error:
            # The pool discards this connection and checks out another.
            raise DisconnectionError("the database dropped a pooled connection") from None

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info[_LAST_USED] = time.monotonic()


# SQLite's result codes for a write the disk had no room for: SQLITE_FULL (a page of the
# database or its log), and SQLITE_IOERR_SHMSIZE (the log's shared-memory index could not
# grow). PostgreSQL's SQLSTATE for the same: disk_full.
_SQLITE_FULL = 13
_SQLITE_IOERR_SHMSIZE = 10 | (19 << 8)
_PG_DISK_FULL = "53100"


def is_disk_full(exc: BaseException) -> bool:
    """`exc` is the database saying its disk has no room for a write: through SQLAlchemy,
    or from the driver itself (the hot paths' statements run on DBAPI cursors)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == _SQLITE_FULL or code == _SQLITE_IOERR_SHMSIZE
    return getattr(orig, "sqlstate", None) == _PG_DISK_FULL


def is_memory(engine: Engine) -> bool:
    """An in-memory SQLite database: one shared connection, one transaction at a time."""
    return isinstance(engine.pool, StaticPool)


def lock_writer(conn: Connection) -> None:
    """Holds the store's write lock for the rest of the transaction: SQLite's BEGIN
    IMMEDIATE already does; PostgreSQL takes an advisory lock, one writer at a time."""
    if conn.dialect.name != "sqlite":
        # Queued inside `deferred_writes`: it goes out, and is held, before the next read.
        write_soon(conn, "SELECT pg_advisory_xact_lock(7210432)", ())


# Tables whose rows an erasure removes (values, sources, or the key's text).
_ERASED_TABLES = (
    "evidence",
    "decision",
    "belief",
    "belief_change",
    "vote",
    "pin",
    "search_doc",
    "search_vector",
)


def reclaim_erased(engine: Engine) -> None:
    """Pushes erased bytes out of the WAL (SQLite) or dead tuples (PostgreSQL)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            # A plain VACUUM frees dead row versions but leaves their bytes in the pages;
            # VACUUM FULL writes each table anew and drops the old files. It locks the
            # table while it runs: erasures are rare operator actions.
            for table in _ERASED_TABLES:
                conn.exec_driver_sql(f"VACUUM FULL {table}")
