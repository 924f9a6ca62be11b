"""A SQLite file's reads run on a connection kept by each thread that reads: reused from
one read to the next, never shared between threads, holding nothing between reads, and
closed when its thread has ended or the repository closes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection

from factnode.core import MICROS_PER_DAY, Key, Policy, Submission, ids
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock

KEY = Key("reads", "ana", "lives_in")


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[SqlRepository]:
    store = SqlRepository(f"sqlite:///{tmp_path / 'reads.db'}")
    try:
        yield store
    finally:
        store.close()


def _read_conn(repo: SqlRepository) -> Connection:
    with repo.read() as tx:
        tx.meta("anything")  # a statement, so the read really opens
        return tx._c


def _in_thread(repo: SqlRepository) -> Connection:
    got: list[Connection] = []
    t = threading.Thread(target=lambda: got.append(_read_conn(repo)))
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    return got[0]


def test_reads_on_one_thread_reuse_one_connection_and_threads_do_not_share(
    repo: SqlRepository,
) -> None:
    first = _read_conn(repo)
    assert _read_conn(repo) is first
    assert not first.in_transaction()  # nothing held between reads
    other = _in_thread(repo)
    assert other is not first
    assert other.connection.driver_connection is not first.connection.driver_connection


def test_a_read_inside_a_read_takes_a_connection_of_its_own(repo: SqlRepository) -> None:
    with repo.read() as outer:
        outer.meta("x")
        with repo.read() as inner:
            inner.meta("y")
            assert inner._c is not outer._c
    assert _read_conn(repo) is outer._c  # the kept one again


def test_a_read_after_a_commit_sees_it(repo: SqlRepository) -> None:
    ledger = Ledger(repo, Policy(), "node-reads", FakeClock(20_000 * MICROS_PER_DAY))
    with repo.read() as tx:
        assert tx.beliefs([KEY])[KEY] == []
    ledger.submit(Submission("reads", "ana", "lives_in", "Porto", "user_stated", source="t"))
    with repo.read() as tx:  # the same kept connection, which read before the write
        rows = tx.beliefs([KEY])[KEY]
    assert [r.version_id for r in rows] == [ids.version_id(KEY, "Porto")]


def test_an_ended_thread_s_connection_is_closed_when_another_thread_reads(
    repo: SqlRepository,
) -> None:
    ended = _in_thread(repo)
    assert not ended.closed
    _in_thread(repo)  # a new thread's first read sweeps the ended one's
    assert ended.closed


def test_more_reading_threads_than_the_pool_holds_each_keep_one(repo: SqlRepository) -> None:
    """Kept connections are not the pool's: with more live reading threads than its size
    and overflow (15 here), none waits for a pooled connection, and pooled reads still run."""
    pool_limit = repo.engine.pool.size() + repo.engine.pool._max_overflow  # type: ignore[attr-defined]
    release = threading.Event()
    read: list[Connection] = []

    def reader() -> None:
        read.append(_read_conn(repo))
        release.wait(timeout=30)

    threads = [threading.Thread(target=reader) for _ in range(pool_limit + 5)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while len(read) < len(threads) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(read) == len(threads)  # every thread read, none blocked on the pool
        assert len({id(c) for c in read}) == len(threads)
        with repo.engine.connect() as pooled:  # the pool is not used up by them
            assert pooled.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        release.set()
        for t in threads:
            t.join(timeout=30)


def test_close_closes_every_kept_connection(tmp_path: Path) -> None:
    store = SqlRepository(f"sqlite:///{tmp_path / 'close.db'}")
    mine, theirs = _read_conn(store), _in_thread(store)
    store.close()
    assert mine.closed and theirs.closed


def test_kept_readers_do_not_stop_the_log_being_truncated(repo: SqlRepository) -> None:
    """An erasure truncates the write-ahead log (`after_erase`): idle kept readers hold no
    snapshot that would stop it."""
    ledger = Ledger(repo, Policy(), "node-reads", FakeClock(20_000 * MICROS_PER_DAY))
    ledger.submit(Submission("reads", "ana", "lives_in", "Porto", "user_stated", source="t"))
    _read_conn(repo)
    _in_thread(repo)  # ended, but not yet swept
    _in_thread(repo)
    repo.after_erase()
    wal = Path(str(repo.engine.url.database) + "-wal")
    assert wal.stat().st_size == 0


def test_a_memory_store_keeps_no_read_connection() -> None:
    store = SqlRepository("sqlite://")
    try:
        first = _read_conn(store)
        assert _read_conn(store) is not first  # each read a Connection of its own
    finally:
        store.close()


def test_close_waits_for_a_read_under_way_on_another_thread(tmp_path: Path) -> None:
    """`close` does not close a kept connection while another thread reads on it (closing a
    SQLite connection under a running read crashed the node at shutdown); it waits, bounded."""
    store = SqlRepository(f"sqlite:///{tmp_path / 'closing.db'}")
    reading, finished = threading.Event(), threading.Event()
    seen: list[object] = []

    def read() -> None:
        with store.read() as tx:
            reading.set()
            time.sleep(0.3)  # a read still running when the node closes its store
            seen.append(tx.counts())
        finished.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert reading.wait(10)
    store.close()
    assert finished.is_set(), "close returned while a read was under way"
    reader.join(10)
    assert len(seen) == 1
