"""A store with no room for a write: StorageFull naming the data directory (the server's
RESOURCE_EXHAUSTED), nothing of the write stored, reads served, and writes back once there
is room. SQLite's `max_page_count` on the writer's connection stands in for a full disk
(SQLITE_FULL, as a full disk gives; tests/e2e/test_disk_full.py fills a real one)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from factnode.core import MICROS_PER_DAY, Policy, Submission
from factnode.ledger import Ledger
from factnode.server._errors import status_for
from factnode.store import SqlRepository, StorageFull
from factnode.testing import FakeClock


def _submission(i: int) -> Submission:
    return Submission("full", f"s{i}", "lives_in", "x" * 2000, "user_stated", source="test")


def _cap_pages(repo: SqlRepository, extra: int | None) -> None:
    """Caps the database at its current size plus `extra` pages (None: lifts the cap)."""
    with repo._write_connection() as conn:
        raw = conn.connection.driver_connection  # the writer's own sqlite3 connection
        assert raw is not None
        pages = int(raw.execute("PRAGMA page_count").fetchone()[0])
        cap = 2**31 - 2 if extra is None else pages + extra
        raw.execute(f"PRAGMA max_page_count={cap}")


def test_a_full_store_refuses_the_write_serves_reads_and_recovers(tmp_path: Path) -> None:
    """The write that finds no room raises StorageFull naming the data directory and leaves
    nothing behind; reads answer meanwhile; with room again the same write succeeds."""
    repo = SqlRepository(f"sqlite:///{tmp_path / 'full.db'}")
    try:
        ledger = Ledger(repo, Policy(), "node-full", FakeClock(20_000 * MICROS_PER_DAY))
        ledger.submit_many([_submission(0)])
        before = ledger.counts()
        _cap_pages(repo, 0)
        with pytest.raises(StorageFull) as full:
            ledger.submit_many([_submission(i) for i in range(1, 50)])
        assert str(tmp_path.resolve()) in str(full.value)
        assert ledger.counts() == before
        assert ledger.served(_submission(0).key)[0] is not None  # reads are served
        _cap_pages(repo, None)
        ledger.submit_many([_submission(i) for i in range(1, 50)])
        assert ledger.counts().evidence == before.evidence + 49
    finally:
        repo.close()


def test_storage_full_is_resource_exhausted_naming_the_disk() -> None:
    """The server answers StorageFull with RESOURCE_EXHAUSTED and its message, never INTERNAL."""
    status = status_for(StorageFull("the data directory /srv/factnode"))
    assert status.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "no space left on the disk holding the data directory /srv/factnode" in status.details
