"""A SQLite file's checkpoints run in their own thread, never inside the writer's commits."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from factnode.core import MICROS_PER_DAY, Policy, Submission
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock

WAIT_SECONDS = 10.0


def _ledger(repo: SqlRepository) -> Ledger:
    return Ledger(repo, Policy(), "node-checkpoints", FakeClock(20_000 * MICROS_PER_DAY))


def _write(ledger: Ledger, batches: int, per_batch: int = 20) -> None:
    for b in range(batches):
        ledger.submit_many(
            [
                Submission("cp", f"subject-{b}-{i}", "lives_in", f"city-{i}", "user_stated")
                for i in range(per_batch)
            ]
        )


def test_commits_leave_their_pages_to_the_checkpoint_thread(tmp_path: Path) -> None:
    """The store's connections never checkpoint on commit (wal_autocheckpoint 0); after
    writes the thread has copied every logged page into the database file."""
    repo = SqlRepository(f"sqlite:///{tmp_path / 'cp.db'}")
    try:
        assert repo.checkpoints is not None and repo.checkpoints.running
        with repo.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
        _write(_ledger(repo), batches=30)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            last = repo.checkpoints.last
            if last is not None and last[1] > 0 and last[1] == last[2]:
                break
            assert time.monotonic() < deadline, f"not checkpointed in {WAIT_SECONDS}s: {last}"
            time.sleep(0.05)
    finally:
        repo.close()
    assert not repo.checkpoints.running


def test_what_was_committed_is_in_the_database_file_after_close(tmp_path: Path) -> None:
    """Once the store is closed the database file alone, read without its write-ahead log,
    holds every committed fact (the thread's last checkpoint, then SQLite's on close)."""
    db = tmp_path / "cp.db"
    repo = SqlRepository(f"sqlite:///{db}")
    try:
        _write(_ledger(repo), batches=5)
    finally:
        repo.close()
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())  # the file without its -wal beside it
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT count(*) FROM evidence").fetchone()[0] == 100


def test_an_in_memory_store_has_no_checkpoint_thread() -> None:
    """Only a SQLite file has a write-ahead log to checkpoint."""
    repo = SqlRepository("sqlite://")
    try:
        assert repo.checkpoints is None
    finally:
        repo.close()


def test_an_erasures_truncation_waits_for_a_running_checkpoint(tmp_path: Path) -> None:
    """The log's truncation after an erasure never runs beside the thread's checkpoint
    (SQLite would answer it busy and leave erased bytes in the log): it waits for it."""
    repo = SqlRepository(f"sqlite:///{tmp_path / 'cp.db'}")
    try:
        _write(_ledger(repo), batches=2)
        assert repo.checkpoints is not None
        finished = threading.Event()
        with repo.checkpoints.lock:  # as while the thread checkpoints

            def erase() -> None:
                repo.after_erase()
                finished.set()

            eraser = threading.Thread(target=erase)
            eraser.start()
            assert not finished.wait(0.3)
        assert finished.wait(WAIT_SECONDS)
        eraser.join(WAIT_SECONDS)
        assert Path(f"{tmp_path / 'cp.db'}-wal").stat().st_size == 0  # truncated
    finally:
        repo.close()


def test_writes_run_on_one_kept_connection_which_is_replaced_once_invalidated(
    tmp_path: Path,
) -> None:
    """A SQLite file's write transactions share one connection kept open (its page cache
    stays valid between them); a failed write leaves it usable, and an invalidated one is
    replaced by the next write, which lands."""
    repo = SqlRepository(f"sqlite:///{tmp_path / 'kept.db'}")
    try:
        ledger = _ledger(repo)
        _write(ledger, batches=1, per_batch=3)
        first = repo._pinned
        assert first is not None and not first.closed
        try:
            with repo.write():
                raise RuntimeError("a write failing midway")
        except RuntimeError:
            pass
        _write(ledger, batches=2, per_batch=3)  # the first batch again, then three new facts
        assert repo._pinned is first
        first.invalidate()
        ledger.submit_many(
            [Submission("cp", "after-invalidate", "lives_in", "Porto", "user_stated")]
        )
        assert repo._pinned is not first and repo._pinned is not None
        with repo.read() as tx:
            assert tx._c.exec_driver_sql("SELECT count(*) FROM evidence").scalar() == 7
    finally:
        repo.close()
    assert repo._pinned is not None and repo._pinned.closed


def test_the_log_stays_bounded_under_sustained_writes_and_reads(tmp_path: Path) -> None:
    """With a writer that never pauses and a reader beside it, the log is started over each
    time it passes its limit (writes held back for a RESTART checkpoint), so its file never
    grows far past the limit; without that it only grew."""
    limit = 1024 * 1024
    db = tmp_path / "bounded.db"
    wal = Path(f"{db}-wal")
    repo = SqlRepository(f"sqlite:///{db}", wal_limit_bytes=limit)
    stop = threading.Event()
    sizes: list[int] = []
    failures: list[BaseException] = []

    def keep(fn: Callable[[], None]) -> Callable[[], None]:
        def loop() -> None:
            try:
                while not stop.is_set():
                    fn()
            except BaseException as exc:  # surfaced below, not lost in the thread
                failures.append(exc)

        return loop

    ledger = _ledger(repo)
    counter = iter(range(10**9))

    def write() -> None:
        n = next(counter)
        ledger.submit_many(
            [
                Submission("cp", f"s-{n}-{i}", "lives_in", f"city-{i}", "user_stated")
                for i in range(20)
            ]
        )

    def read() -> None:
        with repo.read() as tx:
            tx._c.exec_driver_sql("SELECT count(*) FROM evidence").scalar()

    threads = [threading.Thread(target=keep(write)), threading.Thread(target=keep(read))]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            sizes.append(wal.stat().st_size if wal.exists() else 0)
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(WAIT_SECONDS)
        written = next(counter) * 20
        assert repo.checkpoints is not None
        restarts = repo.checkpoints.restarts
        repo.close()
    assert not failures, failures
    assert restarts >= 2, f"the log never passed its limit ({written} facts): nothing tested"
    # The limit, plus what the writer logs while one checkpoint runs. Without the restarts
    # the log grows with every batch, to many times this within the three seconds.
    assert max(sizes) < limit + 4 * 1024 * 1024, (max(sizes), restarts, written)
