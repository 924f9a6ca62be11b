"""The background-work lease of a node's replicas on PostgreSQL (specification §10): a session-level
advisory lock, held by one replica's own connection.

Why an advisory lock on a session rather than a row with a holder and an expiry: the server
releases it the moment the holder's session ends, which a kill -9 does at once (the kernel
closes the socket, the backend sees it and exits), so nothing waits for an expiry and no
two clocks are compared; the holder is named by its session's `application_name`, which
`pg_locks` joined with `pg_stat_activity` shows to every replica; and it needs no table.
Its cost: the lease connection must reach PostgreSQL directly or through a session-pooling
proxy (a transaction-pooling PgBouncer would drop a session lock between transactions).
A holder whose connection breaks stops its background work at its next check (one tick):
until then the database may already have let another take over, which the work tolerates
(sync rounds and decay are idempotent and take the store's write lock)."""

from __future__ import annotations

import hashlib
import os
import socket

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.pool import NullPool

# Longest application_name PostgreSQL keeps (NAMEDATALEN - 1).
_NAME_BYTES = 63
_PREFIX = "factnode "


def replica_name() -> str:
    """This process as its replica is named in status and in the lease: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_key(node_id: str) -> int:
    """The advisory lock key of a node's lease: from its id, so that two nodes sharing a
    database (tests using schemas) never share a lease. 31 bits: `pg_locks` then shows it
    whole in `objid` (classid 0)."""
    return int.from_bytes(hashlib.sha256(f"lease:{node_id}".encode()).digest()[:4]) >> 1


# A lease connection cut off without a word (a network partition) is noticed by both ends
# within about 11 s, not the system's TCP defaults of minutes: the holder's check then
# fails and it stops its work, and the server ends the session, freeing the lock.
_KEEPALIVES = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "options": "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3",
}

_HOLDER = text(
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.database = ("
    "  SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid = 0 AND l.objid = :key AND l.objsubid = 1"
)


class Lease:
    """One replica's hold on its node's lease: `hold` takes or keeps it, `holder` names who
    has it, `release` gives it up. Blocking: call from a thread."""

    def __init__(self, url: str, node_id: str, replica: str) -> None:
        self.replica = replica
        self.key = lease_key(node_id)
        name = (_PREFIX + replica).encode()[:_NAME_BYTES].decode(errors="ignore")
        self._name = name.removeprefix(_PREFIX)
        self._engine: Engine = create_engine(
            url, poolclass=NullPool, connect_args={"application_name": name, **_KEEPALIVES}
        )
        self._conn: Connection | None = None
        self.held = False

    def hold(self) -> bool:
        """Takes the lease if it is free, or checks that the session holding it is alive;
        whether this replica holds it now. A database error gives it up (and says False)."""
        try:
            if self._conn is None:
                self._conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            if self.held:
                self._conn.exec_driver_sql("SELECT 1")  # the lock lives as long as the session
            else:
                got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key})
                self.held = bool(got.scalar())
        except Exception:
            self._drop()
        return self.held

    def holder(self) -> str | None:
        """The replica holding the lease (as it named itself), or None when nobody does."""
        with self._engine.connect() as conn:
            name = conn.execute(_HOLDER, {"key": self.key}).scalar()
        return None if name is None else str(name).removeprefix(_PREFIX)

    def release(self) -> None:
        """Gives the lease up (ending the session does) and closes the engine."""
        self._drop()
        self._engine.dispose()

    def _drop(self) -> None:
        self.held = False
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                conn.invalidate()
