"""Erased values leave the SQLite file itself: not in the database, its WAL or its shared memory."""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from factnode.core import MICROS_PER_DAY, Key, Outcome, Policy, Submission, recall
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


# -- recall's full-text index ------------------------------------------------------------

# Consonants only (no vowel, no trailing s): no stemmer (SQLite's porter, PostgreSQL's
# english) changes such a word, so the index keeps it exactly as written.
_CONSONANTS = "bcdfghjklmnpqrtvwxz"


def _index_word(first: str) -> str:
    """A word found nowhere else: `first` and 23 random consonants. FTS5 stores a term after
    the term before it as the prefix they share and the rest, so the two words of a test
    begin with different letters that no other indexed word begins with."""
    rng = random.Random(uuid.uuid4().int)
    return first + "".join(rng.choice(_CONSONANTS) for _ in range(23))


def _fts_bytes(repo: SqlRepository) -> bytes:
    """What the FTS5 table holds: its index segments (the words as indexed) and its content."""
    with repo.engine.connect() as conn:
        blocks = [bytes(r[0]) for r in conn.exec_driver_sql("SELECT block FROM search_text_data")]
        content = [repr(r).encode() for r in conn.exec_driver_sql("SELECT * FROM search_text")]
    return b"".join(blocks + content)


def _searched(ledger: Ledger, word: str) -> list[str]:
    request = recall.search(word, limit=100)
    return [h.object for h in ledger.reading.search(request, lambda ns: True).items]


@pytest.mark.parametrize("checkpointed", [False, True], ids=["in-wal", "in-main-file"])
@pytest.mark.parametrize("scope", ["evidence", "key", "subject"])
def test_erased_words_leave_the_fts5_index_and_the_sqlite_files(
    tmp_path: Path, scope: str, checkpointed: bool
) -> None:
    """The erased value's and source's words leave SQLite's FTS5 index (its segments and
    content), and with them the database file, its WAL and its shared memory; the control
    shows each word in the index's own blocks before the erase, so the check can fail."""
    db = tmp_path / "factnode.db"
    value_word, source_word = _index_word("z"), _index_word("x")
    value, source = f"Rua Secreta {value_word}", f"whisper {source_word}"
    clock = FakeClock()
    repo = SqlRepository(f"sqlite:///{db}")
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        _filler(ledger, 50)
        submitted = ledger.submit(
            Submission(NS, "ana", "lives_in", value, "user_stated", source, 0.5, 0.9)
        )
        _filler(ledger, 50)
        if checkpointed:
            repo.close()
            repo = SqlRepository(f"sqlite:///{db}")
            ledger = Ledger(repo, Policy(), "node-test", clock)
        # The control: both words are in the index's blocks, its content and the files.
        assert _searched(ledger, value_word) == [value]
        assert _searched(ledger, source_word) == [value]
        with repo.engine.connect() as conn:
            blocks = b"".join(
                bytes(r[0]) for r in conn.exec_driver_sql("SELECT block FROM search_text_data")
            )
        assert value_word.encode() in blocks and source_word.encode() in blocks
        indexed, raw = _fts_bytes(repo), _file_bytes(db)
        for word in (value_word, source_word):
            assert word.encode() in indexed and word.encode() in raw
        clock.advance(1)
        if scope == "evidence":
            ledger.erase(evidence_id=submitted.evidence_id, operator="dpo", reason="request")
        elif scope == "key":
            ledger.erase(key=Key(NS, "ana", "lives_in"), operator="dpo", reason="request")
        else:
            ledger.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        assert _searched(ledger, value_word) == [] and _searched(ledger, source_word) == []
        indexed, raw = _fts_bytes(repo), _file_bytes(db)
        for word in (value_word, source_word):
            assert word.encode() not in indexed
            assert word.encode() not in raw
        # The neighbours are still indexed and found.
        assert len(_searched(ledger, "town")) == 50
    finally:
        repo.close()
    raw = _file_bytes(db)
    assert value_word.encode() not in raw and source_word.encode() not in raw
    assert b"Town-7" in raw


@pytest.mark.postgres
@pytest.mark.parametrize("repository_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("scope", ["evidence", "key", "subject"])
def test_erased_words_leave_the_postgresql_search_doc_files(
    repository_url: str, scope: str
) -> None:
    """On PostgreSQL the erased value's and source's lexemes leave the files of `search_doc`
    (its tsvector column, its TOAST and its GIN index) and of every other table; the control
    shows them in search_doc's own files before the erase."""
    value_word, source_word = _index_word("z"), _index_word("x")
    value, source = f"Rua Secreta {value_word}", f"whisper {source_word}"
    repo = SqlRepository(repository_url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        _filler(ledger, 50)
        submitted = ledger.submit(
            Submission(NS, "ana", "lives_in", value, "user_stated", source, 0.5, 0.9)
        )
        assert _searched(ledger, value_word) == [value]  # the control: indexed and found
        doc = _search_doc_bytes(repo)
        assert value_word.encode() in doc and source_word.encode() in doc
        if scope == "evidence":
            ledger.erase(evidence_id=submitted.evidence_id, operator="dpo", reason="request")
        elif scope == "key":
            ledger.erase(key=Key(NS, "ana", "lives_in"), operator="dpo", reason="request")
        else:
            ledger.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        assert _searched(ledger, value_word) == [] and _searched(ledger, source_word) == []
        doc, raw = _search_doc_bytes(repo), _postgres_bytes(repo)
        for word in (value_word, source_word):
            assert word.encode() not in doc and word.encode() not in raw
        assert len(_searched(ledger, "town")) == 50  # the neighbours are still indexed
    finally:
        repo.close()


def _search_doc_bytes(repo: SqlRepository) -> bytes:
    """The files of search_doc alone: its heap, TOAST and indexes."""
    with repo.engine.connect() as conn:
        own = {
            str(p)
            for p in conn.exec_driver_sql(
                """
                SELECT pg_relation_filepath(oid) FROM pg_class WHERE oid IN (
                    SELECT 'search_doc'::regclass
                    UNION SELECT reltoastrelid FROM pg_class
                        WHERE oid = 'search_doc'::regclass AND reltoastrelid <> 0
                    UNION SELECT indexrelid FROM pg_index WHERE indrelid = 'search_doc'::regclass
                )
                """
            ).scalars()
        }
    files = _postgres_files(repo)  # checkpointed; skips where the files cannot be read
    chosen = [f for f in files if any(str(f).endswith(p) or f"{p}." in str(f) for p in own)]
    assert chosen, "search_doc has no files"
    return b"".join(f.read_bytes() for f in chosen)


def test_retention_purge_takes_the_words_out_of_the_fts5_index(tmp_path: Path) -> None:
    """A claim purged by retention (as an erasure purges it) leaves the FTS5 index's blocks
    and content and the files; the control shows its words there before the decay job."""
    db = tmp_path / "factnode.db"
    value_word, source_word = _index_word("z"), _index_word("x")
    clock = FakeClock()
    repo = SqlRepository(f"sqlite:///{db}")
    try:
        ledger = Ledger(repo, replace(Policy(), retain_decayed_days=10), "node-test", clock)
        _filler(ledger, 50)
        ledger.submit(
            Submission(
                NS, "ana", "lives_in", f"Rua Velha {value_word}", "llm_generated",
                f"rumour {source_word}", 0.5, 0.8,
            )
        )  # fmt: skip
        clock.advance(45 * MICROS_PER_DAY)  # expired on day 30: past retention on day 40
        assert _searched(ledger, value_word) == []  # expired: no longer served
        indexed = _fts_bytes(repo)  # the control: still held, so still indexed
        assert value_word.encode() in indexed and source_word.encode() in indexed
        assert ledger.run_decay().tombstoned == 1
        indexed, raw = _fts_bytes(repo), _file_bytes(db)
        for word in (value_word, source_word):
            assert word.encode() not in indexed and word.encode() not in raw
        assert len(_searched(ledger, "town")) == 50
    finally:
        repo.close()
    raw = _file_bytes(db)
    assert value_word.encode() not in raw and source_word.encode() not in raw


def test_erasures_by_the_thousand_leave_the_word_index_sound(tmp_path: Path) -> None:
    """On SQLite 3.40, a thousand delete-and-merge cycles of FTS5 ('optimize') left its index
    malformed, and every later erase failed: the index is rebuilt instead. 1,100 erasures
    in a row all succeed, and the words left are still found."""
    repo = SqlRepository(f"sqlite:///{tmp_path / 'factnode.db'}")
    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        _filler(ledger, 1200)
        for i in range(1100):
            ledger.erase(key=Key(NS, f"person-{i}", "lives_in"), operator="dpo", reason="r")
        with repo.engine.connect() as conn:
            conn.exec_driver_sql("INSERT INTO search_text (search_text) VALUES ('integrity-check')")
        with repo.read() as tx:
            left = tx.search_matches(["town"], every_word=False)
        assert len(left) == 100
    finally:
        repo.close()
