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
def _insert_sql(
    dialect: Dialect,
    table: Table,
    columns: tuple[str, ...],
    conflict: tuple[str, ...] = (),
    rows: int = 1,
) -> str:
    """A driver-level INSERT of `rows` rows of `columns` with positional markers in the
    dialect's style; with `conflict` (the primary key), a row that is already there is
    overwritten instead."""
    quote = dialect.identifier_preparer
    mark = _mark(dialect)
    row = f"({', '.join([mark] * len(columns))})"
    sql = (
        f"INSERT INTO {quote.format_table(table)} ({', '.join(quote.quote(c) for c in columns)})"
        f" VALUES {', '.join([row] * rows)}"
    )
    if conflict:
        # The same upsert syntax on SQLite (3.24+) and PostgreSQL.
        changed = ", ".join(
            f"{quote.quote(c)} = excluded.{quote.quote(c)}" for c in columns if c not in conflict
        )
        sql += (
            f" ON CONFLICT ({', '.join(quote.quote(c) for c in conflict)}) DO UPDATE SET {changed}"
        )
    return sql


_DEFERRED = "factnode.deferred_inserts"  # key in the connection's `info`


@contextmanager
def deferred_inserts(conn: Connection) -> Iterator[None]:
    """PostgreSQL: inside the block `insert_rows` only queues its rows; the queue goes out
    in one pipeline (psycopg's pipeline mode: sent without waiting for each answer) before
    any other statement of the transaction and when the block ends, so reads still see the
    inserts and an error still surfaces before the commit. A write transaction's inserts
    then cost about one round trip instead of one each. Elsewhere it does nothing."""
    if conn.dialect.name != "postgresql":
        yield
        return
    conn.info[_DEFERRED] = []
    try:
        yield
        flush_inserts(conn)
    finally:
        conn.info.pop(_DEFERRED, None)


def flush_inserts(conn: Connection) -> None:
    """Sends the inserts `deferred_inserts` queued, in order, and waits for them."""
    queued = conn.info.get(_DEFERRED)
    if not queued:
        return
    inserts = queued.copy()
    queued.clear()
    driver = conn.connection.driver_connection
    with driver.pipeline(), driver.cursor() as cursor:  # type: ignore[union-attr]
        for sql, rows in inserts:
            cursor.executemany(sql, rows)


def _driver(conn: Connection, sql: str, params: Any, many: bool = False) -> Any:
    """Runs `sql` on a DBAPI cursor of `conn` (inside its transaction), after any queued
    inserts; returns the cursor."""
    flush_inserts(conn)
    cursor = conn.connection.cursor()
    if many:
        cursor.executemany(sql, params)
    else:
        cursor.execute(sql, params)
    return cursor


def scalar(conn: Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of `sql` (None without a row); `sql` is written
    with `?` markers, turned into the dialect's own."""
    if conn.dialect.paramstyle != "qmark":
        sql = sql.replace("?", _mark(conn.dialect))
    cursor = _driver(conn, sql, tuple(params))
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

    A few rows go in one driver `executemany`. Many rows on SQLite go in multi-row INSERTs:
    `executemany` steps its statement once per row and gives the GIL back at every step,
    which a busy event loop then makes it wait for (SubmitFacts about 10% faster with
    statements of up to 256 rows, bench/README.md). PostgreSQL keeps `executemany`, which
    psycopg pipelines."""
    if not rows:
        return
    if conn.dialect.name != "sqlite" or len(rows) < MULTI_ROW_FROM:
        sql = _insert_sql(conn.dialect, table, columns, conflict)
        queued = conn.info.get(_DEFERRED)
        if queued is not None:
            queued.append((sql, list(rows)))
        else:
            _driver(conn, sql, list(rows), True).close()
        return
    if conflict:
        # One statement must not upsert a row twice; executed one by one, the last would win.
        at = [columns.index(c) for c in conflict]
        rows = list({tuple(r[i] for i in at): r for r in rows}.values())
    start = 0
    for n in _groups(len(rows)):
        part = rows[start : start + n]
        start += n
        params = [value for row in part for value in row]
        _driver(conn, _insert_sql(conn.dialect, table, columns, conflict, n), params).close()


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


def run_in(
    conn: Connection, head: ClauseElement, column: str, values: Collection[str]
) -> Iterator[list[Any]]:
    """Runs `head` over `values` in chunks at driver level, yielding each chunk's rows.

    The hot path's reads and deletes by id. Each chunk is padded to a power of two by
    repeating its last value, so a handful of statement texts serve every size."""
    for part in chunks(sorted(values)):
        n = 1 << (len(part) - 1).bit_length()
        params = (*part, *[part[-1]] * (n - len(part)))
        cursor = _driver(conn, _in_sql(conn.dialect, head, column, n), params)
        try:
            yield cursor.fetchall() if cursor.description is not None else []
        finally:
            cursor.close()


def select_in(
    conn: Connection, head: ClauseElement, column: str, values: Collection[str]
) -> Iterator[Any]:
    """The rows of `head` whose `column` is one of `values`."""
    for result in run_in(conn, head, column, values):
        yield from result


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
