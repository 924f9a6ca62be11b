"""Hand-built SQL for the hot paths: driver-level inserts, IN lists and prefix ranges.

SQLAlchemy's compiling and expanding of parameters cost more than SQLite's own work on the
write path, so these build each statement's text once per shape (cached) and run it with
positional parameters in the dialect's style. The inserts, IN lists and `scalar` go
straight to a DBAPI cursor of the transaction's connection: SQLAlchemy's result set-up
for each statement (metadata, processors) cost more than a small statement itself, and
these read plain tuples by position anyway."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.expression import ClauseElement

from factnode.store.repository import chunks


def _mark(dialect: Dialect) -> str:
    """The dialect's positional parameter marker (psycopg takes %s for positions)."""
    return "?" if dialect.paramstyle == "qmark" else "%s"


# SQLite inserts this many rows or more with multi-row statements of at most
# MAX_ROWS_PER_INSERT rows (a power of two; 256 evidence rows are 6,656 parameters, under
# SQLite's 32,766).
MULTI_ROW_FROM = 32
MAX_ROWS_PER_INSERT = 256


@functools.lru_cache(maxsize=256)
def _insert_parts(
    dialect: Dialect,
    table: Table,
    columns: tuple[str, ...],
    conflict: tuple[str, ...] = (),
) -> tuple[str, str, str]:
    """A driver-level INSERT of `columns` as its parts: the head up to VALUES, one row of
    positional markers in the dialect's style, and the tail. With `conflict` (the primary
    key), a row that is already there is overwritten instead."""
    quote = dialect.identifier_preparer
    mark = _mark(dialect)
    head = (
        f"INSERT INTO {quote.format_table(table)} ({', '.join(quote.quote(c) for c in columns)})"
        " VALUES "
    )
    tail = ""
    if conflict:
        # The same upsert syntax on SQLite (3.24+) and PostgreSQL.
        changed = ", ".join(
            f"{quote.quote(c)} = excluded.{quote.quote(c)}" for c in columns if c not in conflict
        )
        tail = (
            f" ON CONFLICT ({', '.join(quote.quote(c) for c in conflict)}) DO UPDATE SET {changed}"
        )
    return head, f"({', '.join([mark] * len(columns))})", tail


@functools.lru_cache(maxsize=256)
def _insert_sql(
    dialect: Dialect,
    table: Table,
    columns: tuple[str, ...],
    conflict: tuple[str, ...] = (),
    rows: int = 1,
) -> str:
    """The INSERT of `_insert_parts` with `rows` rows of markers."""
    head, row, tail = _insert_parts(dialect, table, columns, conflict)
    return head + ", ".join([row] * rows) + tail


@dataclass(frozen=True, slots=True)
class _Rows:
    """A multi-row INSERT queued by `insert_rows`, bound by `_after_queued` one row at a
    time: psycopg keeps a short statement's parsed template, but parses a long one anew at
    every bind (8 rows of 20 columns: 177 us as one statement, 56 row by row; 256 rows:
    7.0 ms against 1.7, bench/README.md)."""

    head: str
    row: str
    tail: str
    rows: Sequence[tuple[Any, ...]]

    def bound(self, cursor: Any) -> str:
        return self.head + ", ".join(_bind(cursor, self.row, r) for r in self.rows) + self.tail


def _bind(cursor: Any, sql: str, params: Sequence[Any]) -> str:
    """`sql` with its parameters bound on the client by psycopg's own `mogrify` (the quoting
    libpq does for the connection). A hand-written binder was faster per row but gained
    nothing end to end (bench/README.md, "Tried and not adopted"), so psycopg does it."""
    return str(cursor.mogrify(sql, params))


_DEFERRED = "factnode.deferred_writes"  # key in the connection's `info`


@contextmanager
def deferred_writes(conn: Connection, *, commit: bool = False) -> Iterator[None]:
    """PostgreSQL: inside the block, statements whose answer nobody reads (inserts, the
    writer's lock) are only queued (`write_soon`). The queue goes out together with the next
    statement that is read, in one text (`_after_queued`), and when the block ends; so reads
    see the writes before them, in order, and an error still surfaces before the commit. A
    write transaction's statements then cost a few round trips instead of one each. With
    `commit`, the block's normal end sends the COMMIT in that last text too: the commit
    that follows then has nothing left to do (psycopg sees the transaction ended). On an
    error nothing more is sent, and the transaction rolls back. Elsewhere it does nothing."""
    if conn.dialect.name != "postgresql":
        yield
        return
    with _autocommit(conn, wanted=commit) as own_begin:
        conn.info[_DEFERRED] = []
        if own_begin:
            # psycopg would send its BEGIN alone, one round trip more: ours goes first in
            # the first text. In autocommit mode psycopg sends none; the BEGIN still opens
            # one transaction on the server, which the COMMIT at the end closes.
            write_soon(conn, "BEGIN", ())
        try:
            yield
            if commit:
                _driver(conn, "COMMIT", ()).close()
            else:
                flush_writes(conn)
        finally:
            conn.info.pop(_DEFERRED, None)
            forget_read_ahead(conn)


@contextmanager
def statement_reads(conn: Connection) -> Iterator[None]:
    """PostgreSQL at READ COMMITTED: each statement sees a snapshot of its own whether or
    not it runs inside a transaction, so a read runs without one (psycopg in autocommit
    mode): no BEGIN and no COMMIT, two round trips fewer. At a stricter default isolation
    a read keeps its transaction; elsewhere this does nothing."""
    if (
        conn.dialect.name != "postgresql"
        or conn.dialect.default_isolation_level != "READ COMMITTED"
    ):
        yield
        return
    with _autocommit(conn, wanted=True):
        yield


@contextmanager
def _autocommit(conn: Connection, *, wanted: bool) -> Iterator[bool]:
    """psycopg in autocommit mode for the block, when `wanted` and when it may be: idle, in
    its own transactions, which start at the server's default isolation level (none set on
    the connection, or that one: SQLAlchemy sets it again on a connection given back after
    an AUTOCOMMIT use, as an erasure's reclaim is). Yields whether it switched. After the
    block it is back in its own transactions: one an error left open is rolled back, and a
    connection that cannot be put back is dropped rather than returned to the pool in
    autocommit mode."""
    import psycopg

    driver: Any = conn.connection.driver_connection
    level = driver.isolation_level
    may = (
        not driver.autocommit
        and (level is None or level.name.replace("_", " ") == conn.dialect.default_isolation_level)
        and driver.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )
    if not (wanted and may):
        yield False
        return
    driver.autocommit = True
    try:
        yield True
    finally:
        try:
            driver.rollback()  # nothing to send after a COMMIT went out
            driver.autocommit = False
        except psycopg.Error:
            conn.invalidate()


def forget_read_ahead(conn: Connection) -> None:
    """A write makes what was read ahead stale."""
    conn.info.pop(_AHEAD, None)


def write_soon(conn: Connection, sql: str, params: Any, many: bool = False) -> None:
    """Runs `sql` now, or inside `deferred_writes` queues it to go out with the next read."""
    forget_read_ahead(conn)
    queued = conn.info.get(_DEFERRED)
    if queued is None:
        _driver(conn, sql, params, many).close()
    else:
        queued.append((sql, params, many))


def flush_writes(conn: Connection) -> None:
    """Sends what `write_soon` queued, in order, and waits for it."""
    if conn.info.get(_DEFERRED):
        _driver(conn, ";", ()).close()


_AHEAD = "factnode.read_ahead"  # key in the connection's `info`


class _Answered:
    """A cursor's reading side over rows `select_in_together` read ahead."""

    description = ()

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def close(self) -> None:
        self._rows = []


def driver_form(
    conn: Connection, sql: str, params: Sequence[Any] = ()
) -> tuple[str, tuple[Any, ...]]:
    """`sql`, written with `?` markers, and its parameters as `scalar` runs them."""
    if conn.dialect.paramstyle != "qmark":
        sql = sql.replace("?", _mark(conn.dialect))
    return sql, tuple(params)


def _driver(conn: Connection, sql: str, params: Any, many: bool = False) -> Any:
    """Runs `sql` on a DBAPI cursor of `conn` (inside its transaction), after the writes
    `write_soon` queued and in the same round trip; returns the cursor. A read whose answer
    `select_in_together` read ahead is answered from it."""
    ahead = conn.info.get(_AHEAD)
    if ahead:
        if not many and isinstance(params, tuple) and (sql, params) in ahead:
            return _Answered(ahead.pop((sql, params)))
        if many or not sql.startswith("SELECT"):
            forget_read_ahead(conn)  # it may write
    if conn.info.get(_DEFERRED):
        if not many:
            return _after_queued(conn, [(sql, params)])
        flush_writes(conn)
    cursor = conn.connection.cursor()
    _run(cursor, sql, params, many)
    return cursor


def _after_queued(conn: Connection, reads: Sequence[tuple[str, Any]]) -> Any:
    """PostgreSQL: the writes `write_soon` queued, then `reads`, bound on the client and
    sent as one query text, so that they cost one round trip and one wait for the answer
    (a pipeline still waits on the socket once per statement, and each wait gives up the
    GIL, which a busy event loop then holds: about 0.6 ms a wait under load,
    bench/README.md). An error in any of them fails the whole text, as it fails the
    transaction. Returns the cursor at the answer of the first read."""
    import psycopg  # only a PostgreSQL store needs it (the `postgres` extra)

    cursor = psycopg.ClientCursor(conn.connection.driver_connection)  # type: ignore[arg-type]
    queued = conn.info.get(_DEFERRED) or []
    writes = [
        sql.bound(cursor) if isinstance(sql, _Rows) else _bind(cursor, sql, row)
        for sql, params, many in queued
        for row in (params if many else [params])
    ]
    queued.clear()
    cursor.execute(";\n".join([*writes, *(_bind(cursor, sql, p) for sql, p in reads)]))
    for _ in writes:
        cursor.nextset()
    return cursor


def _run(cursor: Any, sql: str, params: Any, many: bool) -> None:
    if many:
        cursor.executemany(sql, params)
    else:
        cursor.execute(sql, params)


def scalar(conn: Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of `sql` (None without a row); `sql` is written
    with `?` markers, turned into the dialect's own."""
    cursor = _driver(conn, *driver_form(conn, sql, params))
    try:
        row = cursor.fetchone()
    finally:
        cursor.close()
    return None if row is None else row[0]


def insert_rows(
    conn: Connection,
    table: Table,
    columns: tuple[str, ...],
    rows: Sequence[tuple[Any, ...]],
    conflict: tuple[str, ...] = (),
) -> None:
    """Inserts (or, given `conflict`, upserts) tuple rows, in order, with no per-row
    parameter building.

    A few rows on SQLite go in one driver `executemany`; many go in multi-row INSERTs:
    `executemany` steps its statement once per row and gives the GIL back at every step,
    which a busy event loop then makes it wait for (SubmitFacts about 10% faster with
    statements of up to 256 rows, bench/README.md). On PostgreSQL, inside
    `deferred_writes`, rows are queued as multi-row INSERTs, which the server takes as one
    statement each rather than one per row; outside it `executemany`, which psycopg
    pipelines."""
    if not rows:
        return
    postgres = conn.dialect.name == "postgresql"
    deferred = postgres and conn.info.get(_DEFERRED) is not None
    if not deferred and (postgres or len(rows) < MULTI_ROW_FROM):
        write_soon(conn, _insert_sql(conn.dialect, table, columns, conflict), list(rows), True)
        return
    if conflict:
        # One statement must not upsert a row twice; executed one by one, the last would win.
        at = [columns.index(c) for c in conflict]
        rows = list({tuple(r[i] for i in at): r for r in rows}.values())
    start = 0
    if deferred:
        # Bound on the client, PostgreSQL's texts need not repeat.
        parts = _insert_parts(conn.dialect, table, columns, conflict)
        forget_read_ahead(conn)
        for n in _chunks(len(rows)):
            conn.info[_DEFERRED].append((_Rows(*parts, rows[start : start + n]), None, False))
            start += n
        return
    for n in _groups(len(rows)):  # SQLite's texts are prepared once each
        part = rows[start : start + n]
        start += n
        params = [value for row in part for value in row]
        write_soon(conn, _insert_sql(conn.dialect, table, columns, conflict, n), params)


def _chunks(total: int) -> Iterator[int]:
    """`total` rows as statements of MAX_ROWS_PER_INSERT and one of the rest."""
    yield from [MAX_ROWS_PER_INSERT] * (total // MAX_ROWS_PER_INSERT)
    if total % MAX_ROWS_PER_INSERT:
        yield total % MAX_ROWS_PER_INSERT


def _groups(total: int) -> Iterator[int]:
    """`total` rows as statements of MAX_ROWS_PER_INSERT, then powers of two, largest first:
    a handful of statement texts (each prepared once) serve every batch size."""
    yield from [MAX_ROWS_PER_INSERT] * (total // MAX_ROWS_PER_INSERT)
    rest = total % MAX_ROWS_PER_INSERT
    size = MAX_ROWS_PER_INSERT
    while rest:
        size >>= 1
        if rest & size:
            yield size
            rest -= size


@functools.lru_cache(maxsize=256)
def _in_sql(dialect: Dialect, head: ClauseElement, column: str, n: int) -> str:
    """`head` (a statement without parameters) restricted to `column` IN `n` positional values."""
    mark = _mark(dialect)
    return f"{head.compile(dialect=dialect)} WHERE {column} IN ({', '.join([mark] * n)})"


def _in_statements(
    dialect: Dialect, head: ClauseElement, column: str, values: Collection[str]
) -> Iterator[tuple[str, tuple[str, ...]]]:
    """`head` over `values` as statements of chunks, each padded to a power of two by
    repeating its last value, so that a handful of statement texts serve every size."""
    for part in chunks(sorted(values)):
        n = 1 << (len(part) - 1).bit_length()
        yield _in_sql(dialect, head, column, n), (*part, *[part[-1]] * (n - len(part)))


def delete_in(conn: Connection, head: ClauseElement, column: str, values: Collection[str]) -> None:
    """Runs the DELETE `head` over `values` in chunks at driver level; inside
    `deferred_writes` it is queued like an insert, as nobody reads its answer."""
    for sql, params in _in_statements(conn.dialect, head, column, values):
        write_soon(conn, sql, params)


def select_in(
    conn: Connection, head: ClauseElement, column: str, values: Collection[str]
) -> Iterator[Any]:
    """The rows of `head` whose `column` is one of `values`, read in chunks at driver
    level: the hot path's reads by id."""
    for sql, params in _in_statements(conn.dialect, head, column, values):
        yield from _fetch_all(conn, sql, params)


@functools.lru_cache(maxsize=64)
def _pairs_sql(dialect: Dialect, head: ClauseElement, table: str, columns: str, n: int) -> str:
    """`head` (a SELECT from `table` without parameters) joined to `n` positional pairs of
    `columns` (two names, comma-separated): a search of the table's index on them per pair."""
    a, b = columns.split(",")
    mark = _mark(dialect)
    values = ", ".join([f"({mark}, {mark})"] * n)
    return (
        f"WITH wanted({a}, {b}) AS (VALUES {values}) {head.compile(dialect=dialect)} "
        f"JOIN wanted ON {table}.{a} = wanted.{a} AND {table}.{b} = wanted.{b}"
    )


def select_pairs(
    conn: Connection,
    head: ClauseElement,
    table: str,
    columns: tuple[str, str],
    pairs: Collection[tuple[str, str]],
) -> Iterator[Any]:
    """The rows of `head` (a SELECT from `table`) whose two `columns` hold one of `pairs`,
    read in chunks at driver level, each padded to a power of two (as `select_in` pads, so
    a handful of statement texts serve every size) with empty pairs, which no row holds.
    Where rows are wanted by a composite key, reading by one of its columns and filtering
    reads every row that shares it."""
    for part in chunks(sorted(pairs), 256):
        n = 1 << (len(part) - 1).bit_length()
        params = tuple(x for pair in part for x in pair) + ("", "") * (n - len(part))
        sql = _pairs_sql(conn.dialect, head, table, ",".join(columns), n)
        yield from _fetch_all(conn, sql, params)


@functools.lru_cache(maxsize=64)
def _page_sql(
    dialect: Dialect, head: ClauseElement, conditions: tuple[str, ...], order: tuple[str, ...]
) -> str:
    """`head` (a statement without parameters) where every one of `conditions` (written with
    `?` markers) holds, in `order`, with a LIMIT marker last."""
    mark = _mark(dialect)
    where = f" WHERE {' AND '.join(conditions)}".replace("?", mark) if conditions else ""
    return f"{head.compile(dialect=dialect)}{where} ORDER BY {', '.join(order)} LIMIT {mark}"


def select_page(
    conn: Connection,
    head: ClauseElement,
    conditions: Sequence[tuple[str, Sequence[Any]]],
    order: Sequence[str],
    limit: int,
) -> list[Any]:
    """The first `limit` rows of `head` in `order` where every condition holds: each is SQL
    with `?` markers and its values. Read at driver level, as `select_in` reads: compiling
    the statement and SQLAlchemy's row handling cost a ListBeliefs page more than its
    reading (bench/README.md)."""
    sql = _page_sql(conn.dialect, head, tuple(c for c, _ in conditions), tuple(order))
    return _fetch_all(conn, sql, (*(v for _, values in conditions for v in values), limit))


def fetch_all(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """Every row of `sql`, written with `?` markers, run at driver level: on PostgreSQL
    inside `deferred_writes` it goes out with the queued writes, in one round trip."""
    return _fetch_all(conn, *driver_form(conn, sql, params))


def _fetch_all(conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """Every row of one driver-level statement (`_driver`)."""
    cursor = _driver(conn, sql, params)
    try:
        return list(cursor.fetchall())
    finally:
        cursor.close()


def in_statements(
    conn: Connection, head: ClauseElement, column: str, values: Collection[str]
) -> list[tuple[str, tuple[str, ...]]]:
    """The driver-level statements `select_in` runs for these arguments."""
    return list(_in_statements(conn.dialect, head, column, values))


def select_in_together(
    conn: Connection,
    queries: Sequence[tuple[ClauseElement, str, Collection[str]]],
    ahead: Sequence[tuple[str, tuple[Any, ...]]] = (),
) -> list[list[Any]]:
    """The rows of each `(head, column, values)`, as `select_in` gives them. On PostgreSQL
    the statements go out as one text (`_after_queued`) with any queued writes: one round trip
    for all of them instead of one each. So do the driver-level statements `ahead`
    (`driver_form`, `in_statements`): their answers are kept for the transaction's next
    read of exactly that statement, until it writes anything. Elsewhere `ahead` is left
    to be read when asked for."""
    if conn.dialect.name != "postgresql":
        return [list(select_in(conn, *q)) for q in queries]
    plans = [list(_in_statements(conn.dialect, *q)) for q in queries]
    held = conn.info.get(_AHEAD) or {}
    ahead = [a for a in dict.fromkeys(ahead) if a not in held]  # each once, and not again
    statements = [*(statement for plan in plans for statement in plan), *ahead]
    if not statements:
        return [[] for _ in queries]
    cursor = _after_queued(conn, statements)
    try:
        out: list[list[Any]] = []
        for plan in plans:
            rows: list[Any] = []
            for _ in plan:
                rows.extend(cursor.fetchall())
                cursor.nextset()
            out.append(rows)
        for statement in ahead:
            held[statement] = cursor.fetchall()
            cursor.nextset()
        conn.info[_AHEAD] = held
        return out
    finally:
        cursor.close()


@functools.lru_cache(maxsize=64)
def _under_sql(
    dialect: Dialect, head: ClauseElement, column: str, fixed: tuple[str, ...], n: int
) -> str:
    """`head` restricted to rows whose `column` lies in one of `n` prefix ranges, with the
    `fixed` columns equal to given values inside each range's term (so that each term is
    one index range and the database can answer the OR range by range)."""
    mark = _mark(dialect)
    same = "".join(f"{c} = {mark} AND " for c in fixed)
    term = f"({same}{column} >= {mark} AND {column} < {mark})"
    where = " OR ".join([term] * n) if n else " AND ".join(f"{c} = {mark}" for c in fixed)
    return f"{head.compile(dialect=dialect)}" + (f" WHERE {where}" if where else "")


def select_under(
    conn: Connection,
    head: ClauseElement,
    column: str,
    prefixes: Collection[str],
    fixed: Sequence[tuple[str, Any]] = (),
) -> Iterator[Any]:
    """The rows of `head` whose hex `column` starts with one of `prefixes` (the empty prefix:
    every row), `fixed` columns equal to their values; a few statements for many prefixes."""
    names = tuple(c for c, _ in fixed)
    values = tuple(v for _, v in fixed)
    wanted = sorted(set(prefixes))
    if "" in wanted:
        yield from conn.exec_driver_sql(_under_sql(conn.dialect, head, column, names, 0), values)
        return
    for part in chunks(wanted, 64):
        n = 1 << (len(part) - 1).bit_length()
        padded = [*part, *[part[-1]] * (n - len(part))]
        params = tuple(x for p in padded for x in (*values, p, p + "g"))
        yield from conn.exec_driver_sql(_under_sql(conn.dialect, head, column, names, n), params)
