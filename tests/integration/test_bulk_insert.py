"""Many rows go into SQLite in multi-row statements: in order, and an upsert's last row wins."""

from __future__ import annotations

import pytest

from factnode.store import SqlRepository
from factnode.store._rows import _DECISION_COLUMNS, D, M
from factnode.store._sqltext import MULTI_ROW_FROM, insert_rows


@pytest.mark.parametrize("n", [1, MULTI_ROW_FROM - 1, MULTI_ROW_FROM, 300, 777])
def test_rows_keep_their_order(n: int) -> None:
    """Each row gets the next sequence number in the order given, however many there are."""
    repo = SqlRepository("sqlite://")
    try:
        rows = [
            (f"k{i}", "ns", f"s{i}", "p", "ACCEPTED", "new_key", i, None, None, None, f"d{i}")
            for i in range(n)
        ]
        with repo.engine.begin() as conn:
            insert_rows(conn, D, _DECISION_COLUMNS, rows)
            got = conn.exec_driver_sql("SELECT seq, key_id, decided_at FROM decision").all()
        assert [(k, t) for _, k, t in sorted(got)] == [(r[0], r[6]) for r in rows]
    finally:
        repo.close()


def test_an_upsert_of_many_rows_keeps_the_last_of_each_key() -> None:
    """As one statement per row would: a key given twice ends with its last value."""
    repo = SqlRepository("sqlite://")
    try:
        rows = [(f"name-{i % 20}", f"value-{i}") for i in range(3 * MULTI_ROW_FROM)]
        with repo.engine.begin() as conn:
            insert_rows(conn, M, ("name", "value"), rows, ("name",))
            got = {
                str(name): str(value)
                for name, value in conn.exec_driver_sql("SELECT name, value FROM node_meta")
            }
        for i in range(20):
            assert got[f"name-{i}"] == rows[max(j for j in range(len(rows)) if j % 20 == i)][1]
    finally:
        repo.close()
