"""Telling a node's other replicas that a write committed (PostgreSQL `LISTEN`/`NOTIFY`).

Only a wake-up: what changed is read from the logs themselves (the change log, the touch
log), in commit order, so a notification lost or late costs latency and nothing else: the
watch notifier still polls (`server._context.Changes`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Connection
from sqlalchemy.engine import make_url

from factnode.store._sqltext import write_soon

log = logging.getLogger("factnode.store")

CHANNEL = "factnode_commits"
# How often the listener looks up from waiting, to see whether it should stop.
_WAKE_SECONDS = 1.0


def notify_commit(conn: Connection) -> None:
    """Inside a write transaction: every listener hears of it once it commits (not if it
    rolls back); queued to go out with the commit."""
    write_soon(conn, f"NOTIFY {CHANNEL}", ())


class CommitListener:
    """A thread that calls `heard` whenever a write commits on the database at `url`,
    through any replica; reconnects after an outage."""

    def __init__(self, url: str, heard: Callable[[], None]) -> None:
        self._conninfo = make_url(url).set(drivername="postgresql")
        self._heard = heard
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="factnode-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * _WAKE_SECONDS + 1)

    def _run(self) -> None:
        import psycopg  # only a PostgreSQL store needs it (the `postgres` extra)

        conninfo = self._conninfo.render_as_string(hide_password=False)
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._heard()  # whatever committed while we were not listening
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=_WAKE_SECONDS, stop_after=1):
                            self._heard()
            except Exception as exc:  # an outage: the poll still runs; listen again soon
                log.warning("listening for commits failed: %s", type(exc).__name__)
                self._stop.wait(_WAKE_SECONDS)
