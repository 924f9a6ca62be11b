"""The memory of served answers on PostgreSQL, where several replicas write one database
(specification §10): a kept answer is served only while no write, through any replica, changed
it; every write logs what it touched, and every read checks that log first."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import inspect

from factnode.core import Key, Policy, Submission
from factnode.ledger import Ledger, NotFound
from factnode.ledger._memory import CheckedMemory
from factnode.store import SqlRepository, _checked
from factnode.store.migrations import alembic_config
from factnode.testing import FakeClock

pytestmark = pytest.mark.postgres

PORTO, FARO = Key("user:ana", "ana", "lives_in"), Key("user:bob", "bob", "lives_in")


def _said(key: Key, value: str, year: int) -> Submission:
    at = int(datetime(year, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    return Submission(
        key.namespace, key.subject, key.predicate, value, "user_stated", "s", valid_from=at
    )


@pytest.fixture
def replicas(postgres_url: str) -> Iterator[tuple[Ledger, Ledger]]:
    """Two replicas of one node (two repositories, two ledgers) on one fresh schema."""
    repos = [SqlRepository(postgres_url) for _ in range(2)]
    try:
        a, b = (Ledger(r, Policy(), "node-r", FakeClock()) for r in repos)
        yield a, b
    finally:
        for r in repos:
            r.close()


def _hits(ledger: Ledger) -> int:
    memory = ledger.memory
    assert isinstance(memory, CheckedMemory)
    return memory.hits


def test_a_kept_answer_is_served_until_another_replica_changes_its_key(
    replicas: tuple[Ledger, Ledger],
) -> None:
    """Replica A keeps 'Porto' and serves it from memory; replica B's later 'Faro' is what A
    answers next (not the kept one); a key B's write did not touch is still a hit."""
    a, b = replicas
    a.submit(_said(PORTO, "Porto", 2020))
    a.submit(_said(FARO, "Lagos", 2020))
    assert a.served(PORTO)[0].object == "Porto" and a.served(FARO)[0].object == "Lagos"
    before = _hits(a)
    assert a.served(PORTO)[0].object == "Porto"
    assert _hits(a) == before + 1  # from memory
    b.submit(_said(PORTO, "Faro", 2024))
    assert a.served(PORTO)[0].object == "Faro"
    assert a.served(FARO)[0].object == "Lagos"
    assert _hits(a) == before + 2  # Lagos still kept: B touched only Porto
    assert a.served(PORTO)[0].object == "Faro"
    assert _hits(a) == before + 3


def test_an_erasure_through_another_replica_empties_the_memory(
    replicas: tuple[Ledger, Ledger],
) -> None:
    """An erasure cannot say which answers it changed: A's memory starts over and answers
    from the database (the erased key is gone, the other comes back unchanged)."""
    a, b = replicas
    a.submit(_said(PORTO, "Porto", 2020))
    a.submit(_said(FARO, "Lagos", 2020))
    a.served(PORTO), a.served(FARO)
    b.erase(key=PORTO, operator="op", reason="asked")
    before = _hits(a)
    assert a.served(FARO)[0].object == "Lagos"
    assert _hits(a) == before  # read from the database
    with pytest.raises(NotFound):
        a.served(PORTO)


def test_a_replica_left_behind_by_pruning_starts_its_memory_over(
    replicas: tuple[Ledger, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the log was pruned past a replica's position, it cannot know what changed: it
    forgets everything rather than serve a kept answer."""
    monkeypatch.setattr(_checked, "PRUNE_EVERY", 1)
    monkeypatch.setattr(_checked, "KEEP_ROWS", 1)
    a, b = replicas
    a.submit(_said(PORTO, "Porto", 2020))
    a.served(PORTO)
    for year in range(2021, 2025):
        b.submit(_said(FARO, f"city-{year}", year))
    b.submit(_said(PORTO, "Faro", 2030))
    for year in range(2031, 2035):
        b.submit(_said(FARO, f"city-{year}", year))
    assert a.served(PORTO)[0].object == "Faro"


def test_the_touch_log_migration_goes_down_and_up(postgres_url: str) -> None:
    """r26_served_touch adds the served_touch table and its downgrade removes it."""
    repo = SqlRepository(postgres_url)
    try:
        assert "served_touch" in inspect(repo.engine).get_table_names()
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0008")
            conn.commit()
        assert "served_touch" not in inspect(repo.engine).get_table_names()
    finally:
        repo.close()
    again = SqlRepository(postgres_url)  # opening migrates to head
    try:
        assert "served_touch" in inspect(again.engine).get_table_names()
    finally:
        again.close()


def test_an_erased_key_leaves_the_touch_log(replicas: tuple[Ledger, Ledger]) -> None:
    """Erasing a key removes its id from the touch log too, as from the other logs; the
    erasure's own row (every key) is what the other replicas act on."""
    a, b = replicas
    a.submit(_said(PORTO, "Porto", 2020))
    b.submit(_said(PORTO, "Faro", 2024))
    b.erase(key=PORTO, operator="op", reason="asked")
    with a.repo.read() as tx:
        rows = tx._c.exec_driver_sql("SELECT key_id FROM served_touch").all()  # type: ignore[attr-defined]
    assert rows and all(key_id is None for (key_id,) in rows), rows
    with pytest.raises(NotFound):
        a.served(PORTO)
