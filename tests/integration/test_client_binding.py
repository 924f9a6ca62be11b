"""PostgreSQL: the parameters a write transaction's queued text carries are bound on the
client (`_bind`, psycopg's `mogrify`). Whatever they hold, the server must read back exactly
the values given."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from factnode.store import SqlRepository
from factnode.store._sqltext import _bind

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
def test_bound_values_read_back_unchanged(cursor: Any, row: list[Any]) -> None:
    """Strings with quotes, backslashes and percent signs, integers, booleans and NULL come
    back from the server exactly as bound, with their types."""
    sql = "SELECT " + ", ".join(["%s"] * len(row))
    text = _bind(cursor, sql, row)
    cursor.execute(text)
    back = cursor.fetchone()
    assert list(back) == row
    assert [type(v) for v in back] == [type(v) for v in row]


def test_a_negative_number_cannot_join_a_minus_sign_into_a_comment(cursor: Any) -> None:
    """1 - (-1) is 2: the bound negative number does not make `--` a comment."""
    text = _bind(cursor, "SELECT 1-%s", [-1])
    cursor.execute(text)
    assert cursor.fetchone() == (2,)


def test_a_nul_is_refused_as_psycopg_refuses_it(cursor: Any) -> None:
    """PostgreSQL's text cannot hold NUL: binding one raises psycopg's DataError."""
    with pytest.raises(psycopg.DataError, match="NUL"):
        _bind(cursor, "SELECT %s", ["a\x00b"])


def test_a_connection_in_another_encoding_reads_back_the_values(
    repository: SqlRepository,
) -> None:
    """A connection whose client encoding is not UTF-8 reads back the values given."""
    if repository.engine.dialect.name != "postgresql":
        pytest.skip("binding on the client is PostgreSQL's (SQLite binds on its own)")
    url = repository.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, options="-c client_encoding=LATIN1") as conn:
        cursor = psycopg.ClientCursor(conn)
        row = ["café's", -3, None, True]
        sql = "SELECT %s, %s, %s, %s"
        cursor.execute(_bind(cursor, sql, row))
        assert list(cursor.fetchone() or ()) == row
