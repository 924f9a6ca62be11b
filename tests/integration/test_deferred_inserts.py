"""On PostgreSQL a write transaction's inserts are queued and sent together (one pipeline
round trip): every later statement still sees them, and a failing insert still fails the
transaction before its commit, leaving nothing of it. On SQLite the same calls run at once."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select

from factnode.store import SqlRepository, _engine
from factnode.store._rows import _DECISION_COLUMNS, D, M
from factnode.store._sqltext import (
    _DEFERRED,
    delete_in,
    driver_form,
    insert_rows,
    scalar,
    select_in,
    select_in_together,
)


def _decisions(n: int, prefix: str = "k") -> list[tuple[object, ...]]:
    return [
        (f"{prefix}{i}", "ns", f"s{i}", "p", "ACCEPTED", "new_key", i, None, None, None, "d")
        for i in range(n)
    ]


def test_a_later_read_sees_the_queued_inserts(repository: SqlRepository) -> None:
    """Raw reads, SQLAlchemy reads and the commit all come after the queued rows."""
    with repository.write() as tx:
        conn = tx._c
        insert_rows(conn, M, ("name", "value"), [("alpha", "1"), ("beta", "2")])
        if conn.dialect.name == "postgresql":
            assert len(conn.info[_DEFERRED]) == 1  # queued, not yet sent
        raw = sorted(r[0] for r in select_in(conn, select(M.c.value), "name", ["alpha", "beta"]))
        insert_rows(conn, D, _DECISION_COLUMNS, _decisions(3))
        counted = conn.execute(select(D.c.key_id)).scalars().all()
    assert raw == ["1", "2"]
    assert sorted(counted) == ["k0", "k1", "k2"]
    with repository.read() as tx:
        stored = tx._c.exec_driver_sql("SELECT count(*) FROM decision").scalar()
    assert stored == 3


def test_a_failing_queued_insert_fails_the_transaction_and_keeps_none_of_it(
    repository: SqlRepository,
) -> None:
    """A duplicate primary key in the queue raises before the commit; the rows queued
    beside it, and those written before them, are rolled back with it."""
    with repository.write() as tx:
        insert_rows(tx._c, M, ("name", "value"), [("kept", "1")])
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"), repository.write() as tx:
        insert_rows(tx._c, D, _DECISION_COLUMNS, _decisions(2, "lost"))
        insert_rows(tx._c, M, ("name", "value"), [("fresh", "2"), ("kept", "3")])
    with repository.read() as tx:
        names = dict(tx._c.exec_driver_sql("SELECT name, value FROM node_meta").all())
        decisions = tx._c.exec_driver_sql("SELECT count(*) FROM decision").scalar()
    assert names.get("kept") == "1" and "fresh" not in names
    assert decisions == 0
    with repository.write() as tx:  # the store takes writes again, with no queue left over
        insert_rows(tx._c, M, ("name", "value"), [("after", "4")])
    with repository.read() as tx:
        after = tx._c.exec_driver_sql("SELECT value FROM node_meta WHERE name = 'after'").scalar()
        assert _DEFERRED not in tx._c.info
    assert after == "4"


def test_a_pooled_connection_the_server_dropped_is_replaced_before_use(
    repository: SqlRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection idle in the pool is pinged before use: one the server has meanwhile
    terminated is replaced, and the write goes through."""
    if repository.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's pooled connections; SQLite has none to drop")
    import psycopg

    monkeypatch.setattr(_engine, "PING_AFTER_IDLE_SECONDS", 0.0)
    with repository.write() as tx:
        pid = tx._c.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        insert_rows(tx._c, M, ("name", "value"), [("before", "1")])
    url = repository.engine.url.set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with repository.write() as tx:
        insert_rows(tx._c, M, ("name", "value"), [("after", "2")])
        assert tx._c.exec_driver_sql("SELECT pg_backend_pid()").scalar() != pid
    with repository.read() as tx:
        names = dict(tx._c.exec_driver_sql("SELECT name, value FROM node_meta").all())
    assert names["before"] == "1" and names["after"] == "2"


def _postgres_only(repository: SqlRepository) -> None:
    if repository.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's transaction control; SQLite runs its own BEGIN statements")


def test_the_pool_gets_its_connections_back_in_transactional_mode(
    repository: SqlRepository,
) -> None:
    """A write transaction sends its own BEGIN in its first text (psycopg in autocommit
    mode meanwhile); after it, committed or failed, every pooled connection is back in
    psycopg's own transactions: a statement rolled back there leaves nothing."""
    _postgres_only(repository)
    with repository.write() as tx:
        insert_rows(tx._c, M, ("name", "value"), [("kept", "1")])
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"), repository.write() as tx:
        insert_rows(tx._c, M, ("name", "value"), [("kept", "2")], ())
        scalar(tx._c, "SELECT count(*) FROM node_meta")
    idle = repository.engine.pool.checkedin()  # type: ignore[attr-defined]
    assert idle >= 1
    conns = [repository.engine.connect() for _ in range(idle)]
    try:
        for conn in conns:
            assert conn.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
            conn.exec_driver_sql("INSERT INTO node_meta (name, value) VALUES ('rolled', 'x')")
            conn.rollback()
    finally:
        for conn in conns:
            conn.close()
    with repository.read() as tx:
        names = dict(tx._c.exec_driver_sql("SELECT name, value FROM node_meta").all())
    assert names.get("kept") == "1" and "rolled" not in names


def test_a_write_whose_connection_dies_midway_fails_and_the_next_one_lands(
    repository: SqlRepository,
) -> None:
    """The server ends the writer's connection inside its transaction: that write fails
    with nothing of it kept, the connection is dropped, and the next write goes through."""
    _postgres_only(repository)
    import psycopg

    url = repository.engine.url.set(drivername="postgresql")
    with pytest.raises(psycopg.OperationalError), repository.write() as tx:
        pid = scalar(tx._c, "SELECT pg_backend_pid()")
        insert_rows(tx._c, M, ("name", "value"), [("lost", "1")])
        with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as a:
            a.execute("SELECT pg_terminate_backend(%s)", (pid,))
        scalar(tx._c, "SELECT count(*) FROM node_meta")
    with repository.write() as tx:
        insert_rows(tx._c, M, ("name", "value"), [("after", "2")])
        assert scalar(tx._c, "SELECT pg_backend_pid()") != pid
    with repository.read() as tx:
        names = dict(tx._c.exec_driver_sql("SELECT name, value FROM node_meta").all())
    assert names.get("after") == "2" and "lost" not in names


@pytest.mark.parametrize("n", [1, 40, 300])
def test_queued_rows_keep_their_order_and_an_upsert_keeps_the_last(
    repository: SqlRepository, n: int
) -> None:
    """Rows queued in a write transaction get their sequence numbers in the order given,
    however many there are; a name upserted twice in one call ends with its last value."""
    rows = _decisions(n)
    names = [(f"name-{i % 7}", f"value-{i}") for i in range(n)]
    with repository.write() as tx:
        insert_rows(tx._c, D, _DECISION_COLUMNS, rows)
        insert_rows(tx._c, M, ("name", "value"), names, ("name",))
    with repository.read() as tx:
        got = tx._c.exec_driver_sql("SELECT seq, key_id FROM decision").all()
        stored = dict(tx._c.exec_driver_sql("SELECT name, value FROM node_meta").all())
    assert [k for _, k in sorted(got)] == [r[0] for r in rows]
    for name, _ in names:
        assert stored[name] == [v for k, v in names if k == name][-1]


def test_what_was_read_ahead_is_not_answered_after_a_write(repository: SqlRepository) -> None:
    """A statement read ahead answers its next read only while the transaction has written
    nothing since: after an insert the read goes to the database and sees the row."""
    query = "SELECT value FROM node_meta WHERE name = ?"
    with repository.write() as tx:
        conn = tx._c
        ahead = [driver_form(conn, query, ("alpha",)), driver_form(conn, query, ("beta",))]
        select_in_together(conn, [], ahead=ahead)
        assert scalar(conn, query, ("alpha",)) is None  # read ahead, or read now: none yet
        insert_rows(conn, M, ("name", "value"), [("beta", "2")])
        assert scalar(conn, query, ("beta",)) == "2"


def test_a_read_runs_without_a_transaction_only_at_read_committed(
    repository: SqlRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At READ COMMITTED each statement of a read sees its own snapshot anyway, so a read
    sends no BEGIN or COMMIT (psycopg in autocommit mode), and its connection goes back to
    the pool in transactional mode, even when the read failed. At a stricter default
    isolation a read keeps its transaction, and its one snapshot."""
    _postgres_only(repository)
    import psycopg

    assert repository.engine.dialect.default_isolation_level == "READ COMMITTED"
    with repository.read() as tx:
        assert tx._c.connection.driver_connection.autocommit is True  # type: ignore[union-attr]
        assert scalar(tx._c, "SELECT count(*) FROM node_meta") is not None
    with pytest.raises(Exception, match=r"(?i)no_such_table"), repository.read() as tx:
        scalar(tx._c, "SELECT 1 FROM no_such_table")
    with repository.engine.connect() as conn:
        assert conn.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
    # A connection given back after an AUTOCOMMIT use (as an erasure's reclaim is) carries
    # the server's default level explicitly from then on: still the default.
    idle = repository.engine.pool.checkedin()  # type: ignore[attr-defined]
    used = [repository.engine.connect() for _ in range(idle)]
    for conn in used:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("SELECT 1")
        conn.close()
    with repository.read() as tx:
        assert tx._c.connection.driver_connection.isolation_level is not None  # type: ignore[union-attr]
        assert tx._c.connection.driver_connection.autocommit is True  # type: ignore[union-attr]
    monkeypatch.setattr(repository.engine.dialect, "default_isolation_level", "REPEATABLE READ")
    with repository.read() as tx:
        assert tx._c.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
        scalar(tx._c, "SELECT 1")
        status = tx._c.connection.driver_connection.info.transaction_status  # type: ignore[union-attr]
        assert status == psycopg.pq.TransactionStatus.INTRANS


def test_a_queued_delete_goes_out_before_the_rows_queued_after_it(
    repository: SqlRepository,
) -> None:
    """A DELETE by id is queued like an insert (on PostgreSQL) and keeps its place: rows
    deleted and inserted again under the same names in one transaction end with the new
    values, and names deleted only are gone."""
    with repository.write() as tx:
        insert_rows(tx._c, M, ("name", "value"), [("a", "1"), ("b", "1"), ("c", "1")])
    with repository.write() as tx:
        conn = tx._c
        queued = len(conn.info.get(_DEFERRED) or [])
        delete_in(conn, delete(M), "node_meta.name", ["a", "b"])
        if conn.dialect.name == "postgresql":
            assert len(conn.info[_DEFERRED]) == queued + 1  # queued, not yet sent
        insert_rows(conn, M, ("name", "value"), [("a", "2")])
    with repository.read() as tx:
        names = dict(tx._c.exec_driver_sql("SELECT name, value FROM node_meta").all())
    assert names["a"] == "2" and "b" not in names and names["c"] == "1"
