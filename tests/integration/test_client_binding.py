"""PostgreSQL: the parameters a write transaction's queued text carries are bound on the
client (`_Binder`). Whatever they hold, the server must read back exactly the values
given, and the text must be what psycopg's own `mogrify` would have written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from factnode.store import SqlRepository
from factnode.store._sqltext import _Binder

BIGINT = 2**63 - 1

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-BIGINT, max_value=BIGINT),
    # Quotes, backslashes, percent signs, any plane of Unicode; PostgreSQL text has no NUL.
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))),
)


@pytest.fixture
def cursor(repository: SqlRepository) -> Iterator[Any]:
    if repository.engine.dialect.name != "postgresql":
        pytest.skip("binding on the client is PostgreSQL's (SQLite binds on its own)")
    raw: Any = repository.engine.raw_connection()
    try:
        yield psycopg.ClientCursor(raw.driver_connection)
    finally:
        raw.close()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=st.lists(values, min_size=1, max_size=12))
@example(row=["it's", "back\\slash", " E'x'", "--", "%s", "100%", -1, 0, True, None])
def test_bound_values_read_back_unchanged_and_as_mogrify_writes_them(
    cursor: Any, row: list[Any]
) -> None:
    sql = "SELECT " + ", ".join(["%s"] * len(row))
    text = _Binder(cursor).bind(sql, row)
    assert text == cursor.mogrify(sql, row)
    cursor.execute(text)
    back = cursor.fetchone()
    assert list(back) == row
    assert [type(v) for v in back] == [type(v) for v in row]


def test_a_negative_number_cannot_join_a_minus_sign_into_a_comment(cursor: Any) -> None:
    text = _Binder(cursor).bind("SELECT 1-%s", [-1])
    cursor.execute(text)
    assert cursor.fetchone() == (2,)


def test_what_it_does_not_bind_itself_goes_to_mogrify(cursor: Any) -> None:
    binder = _Binder(cursor)
    # A literal percent sign in the statement, written %% for psycopg.
    cursor.execute(binder.bind("SELECT %s LIKE 'ab%%'", ["abc"]))
    assert cursor.fetchone() == (True,)
    # A type of its own (a float), bound by psycopg.
    cursor.execute(binder.bind("SELECT %s", [1.5]))
    assert cursor.fetchone() == (1.5,)
    # PostgreSQL's text cannot hold NUL: psycopg refuses it, as it did before.
    with pytest.raises(psycopg.DataError, match="NUL"):
        binder.bind("SELECT %s", ["a\x00b"])


def test_a_connection_in_another_encoding_gets_what_mogrify_writes(
    repository: SqlRepository,
) -> None:
    """A connection whose client encoding is not UTF-8 (the binder leaves it to psycopg)
    still gets the text mogrify writes, and reads back the values given."""
    if repository.engine.dialect.name != "postgresql":
        pytest.skip("binding on the client is PostgreSQL's (SQLite binds on its own)")
    url = repository.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, options="-c client_encoding=LATIN1") as conn:
        cursor = psycopg.ClientCursor(conn)
        row = ["café's", -3, None, True]
        sql = "SELECT %s, %s, %s, %s"
        text = _Binder(cursor).bind(sql, row)
        assert text == cursor.mogrify(sql, row)
        cursor.execute(text)
        assert list(cursor.fetchone() or ()) == row
