"""Erased values leave the SQLite file itself: not in the database, its WAL or its shared memory."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from factnode.core import MICROS_PER_DAY, Key, Outcome, Policy, Submission
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock

NS = "user:ana"


def _file_bytes(db: Path) -> bytes:
    """The database file and any -wal/-shm companions, concatenated."""
    return b"".join(
        p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()
    )


def _filler(ledger: Ledger, n: int) -> None:
    """Other people's facts around the erased one, so its pages are shared, not private."""
    ledger.submit_many(
        [
            Submission(NS, f"person-{i}", "lives_in", f"Town-{i}", "user_stated", f"src-{i}")
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("checkpointed", [False, True], ids=["in-wal", "in-main-file"])
@pytest.mark.parametrize(
    ("scope", "size"),
    [("evidence", 1), ("key", 1), ("subject", 1), ("key", 3000)],
    ids=["evidence", "key", "subject", "key-overflow-pages"],
)
def test_erased_value_and_source_are_not_in_the_database_files(
    tmp_path: Path, scope: str, size: int, checkpointed: bool
) -> None:
    """After an erase, open or closed, neither the value nor the source is in the file's bytes."""
    db = tmp_path / "factnode.db"
    tag = uuid.uuid4().hex
    # A long value spills into overflow pages, which are freed separately.
    value = f"Rua-Secreta-4711-{tag}" + "-x" * (size // 2)
    source = f"whisper-{tag}"
    key = Key(NS, "ana", "lives_in")
    clock = FakeClock()

    repo = SqlRepository(f"sqlite:///{db}")
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        _filler(ledger, 50)
        submitted = ledger.submit(
            Submission(NS, "ana", "lives_in", value, "user_stated", source, 0.5, 0.9)
        )
        ledger.submit(Submission(NS, "ana", "lives_in", value, "api_response", source, 0.5, 0.9))
        _filler(ledger, 50)
        if checkpointed:
            # Closing checkpoints the WAL: the value now sits in the main file's pages.
            repo.close()
            assert not Path(f"{db}-wal").exists()
            repo = SqlRepository(f"sqlite:///{db}")
            ledger = Ledger(repo, Policy(), "node-test", clock)
        # The control: before the erase the bytes are there, so this test can fail.
        raw = _file_bytes(db)
        assert value.encode() in raw and source.encode() in raw
        if checkpointed:
            assert value.encode() in db.read_bytes()
        clock.advance(1)
        if scope == "evidence":
            # Erase both pieces of evidence that carry the value.
            for h in ledger.history(key):
                for evidence_id in h.evidence_ids:
                    ledger.erase(evidence_id=evidence_id, operator="dpo", reason="request")
            assert submitted.evidence_id not in repr(ledger.decisions(page_size=1000).items)
        elif scope == "key":
            ledger.erase(key=key, operator="dpo", reason="request")
        else:
            ledger.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        assert ledger.counts().erasures >= 1
        # A running node holds no copy either: the WAL was checkpointed and truncated.
        raw = _file_bytes(db)
        assert value.encode() not in raw and source.encode() not in raw
    finally:
        repo.close()

    raw = _file_bytes(db)
    assert value.encode() not in raw
    assert source.encode() not in raw
    assert tag.encode() not in raw
    # The neighbours were not harmed.
    assert b"Town-7" in raw and b"src-7" in raw


def _postgres_files(repo: SqlRepository) -> list[Path]:
    """Every file of the test schema's tables, their TOAST tables and all their indexes, as
    PostgreSQL itself reports them; skips where the server's files cannot be read here."""
    with repo.engine.connect() as conn:
        try:
            base = Path(str(conn.exec_driver_sql("SHOW data_directory").scalar()))
            conn.exec_driver_sql("CHECKPOINT")  # shared buffers out to the files
        except Exception as exc:
            pytest.skip(f"PostgreSQL's data directory is not available to this test: {exc}")
        rels = conn.exec_driver_sql(
            """
            WITH own AS (
                SELECT c.oid, c.reltoastrelid FROM pg_class c
                WHERE c.relnamespace = current_schema()::regnamespace
            ), toast AS (
                SELECT reltoastrelid AS oid FROM own WHERE reltoastrelid <> 0
            ), toast_index AS (
                SELECT i.indexrelid AS oid FROM pg_index i JOIN toast t ON i.indrelid = t.oid
            )
            SELECT pg_relation_filepath(oid) FROM (
                SELECT oid FROM own UNION SELECT oid FROM toast UNION SELECT oid FROM toast_index
            ) r WHERE pg_relation_filepath(oid) IS NOT NULL
            """
        ).scalars()
        paths = [base / p for p in rels]
    if not os.access(base, os.R_OK | os.X_OK):
        pytest.skip(f"{base} is not readable by this user")
    # A relation over 1 GiB continues in .1, .2, ... segments.
    return [f for p in paths for f in (p, *sorted(p.parent.glob(f"{p.name}.[0-9]*"))) if f.exists()]


def _postgres_bytes(repo: SqlRepository) -> bytes:
    return b"".join(f.read_bytes() for f in _postgres_files(repo))


@pytest.mark.postgres
@pytest.mark.parametrize("repository_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("scope", ["evidence", "key", "subject"])
def test_erased_value_is_not_in_the_postgresql_table_files(repository_url: str, scope: str) -> None:
    """On PostgreSQL the erased value and source leave the files of every table and index
    (VACUUM FULL rewrites them; a plain VACUUM would leave the dead rows' bytes in place)."""
    tag = uuid.uuid4().hex
    value, source = f"Rua-Secreta-4711-{tag}", f"whisper-{tag}"
    key = Key(NS, "ana", "lives_in")
    repo = SqlRepository(repository_url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        _filler(ledger, 50)
        submitted = ledger.submit(
            Submission(NS, "ana", "lives_in", value, "user_stated", source, 0.5, 0.9)
        )
        # The control: before the erase the bytes are in the files, so this test can fail.
        raw = _postgres_bytes(repo)
        assert value.encode() in raw and source.encode() in raw
        if scope == "evidence":
            ledger.erase(evidence_id=submitted.evidence_id, operator="dpo", reason="request")
        elif scope == "key":
            ledger.erase(key=key, operator="dpo", reason="request")
        else:
            ledger.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        raw = _postgres_bytes(repo)
        assert tag.encode() not in raw
        assert b"Town-7" in raw and b"src-7" in raw  # the neighbours were not harmed
    finally:
        repo.close()


def test_retention_purges_expired_evidence_down_to_the_bytes(tmp_path: Path) -> None:
    """With retain_decayed_days = 10, a claim that expired more than ten days ago is purged
    by the decay job as an erasure purges it: its value and source leave the file's bytes,
    a hash tombstone and a PURGED decision (without the value) are logged, and a claim still
    within retention is kept."""
    db = tmp_path / "factnode.db"
    tag = uuid.uuid4().hex
    value, source = f"Rua-Velha-{tag}", f"rumour-{tag}"
    clock = FakeClock()
    policy = replace(Policy(), retain_decayed_days=10)
    repo = SqlRepository(f"sqlite:///{db}")
    try:
        ledger = Ledger(repo, policy, "node-test", clock)
        _filler(ledger, 50)
        old = Submission(NS, "ana", "lives_in", value, "llm_generated", source, 0.5, 0.8)
        ledger.submit(old)  # 0.8 halves to 0.4 in 30 days: expires then
        clock.advance(25 * MICROS_PER_DAY)
        kept = ledger.submit(
            Submission(NS, "bo", "lives_in", "Faro", "llm_generated", "x", 0.5, 0.8)
        )
        clock.advance(20 * MICROS_PER_DAY)  # day 45: expired 15 days ago; Faro holds to day 55
        raw = _file_bytes(db)  # the control: the bytes are there, so this test can fail
        assert value.encode() in raw and source.encode() in raw
        report = ledger.run_decay()
        assert report.tombstoned == 1
        assert ledger.evidence_by_ids([kept.evidence_id])  # within retention: held
        purged = [
            d.decision
            for d in ledger.decisions(Key(NS, "ana", "lives_in"), page_size=1000).items
            if d.decision.outcome is Outcome.PURGED
        ]
        assert len(purged) == 1 and value not in purged[0].detail
        assert ledger.counts().erasures == 1
        assert ledger.run_decay().tombstoned == 0
        raw = _file_bytes(db)
        assert value.encode() not in raw and source.encode() not in raw
    finally:
        repo.close()
    data = _file_bytes(db)
    assert value.encode() not in data and source.encode() not in data
