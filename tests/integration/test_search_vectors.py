"""Recall by the callers' vectors (SearchBeliefs' `embedding`), on both backends and, where
the extension can be installed, with pgvector: only served values are found, a fact ranks by
its best vector, spaces and lengths are never mixed, words and vectors fuse, and an erasure
takes the vectors with the evidence, down to the database file's bytes."""

from __future__ import annotations

import array
import math
import os
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from test_erase_bytes import _postgres_bytes

from factnode.core import Evidence, Policy, Submission, recall
from factnode.core.recall import Embedding
from factnode.ledger import Hit, Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock

NS = "user:ana"
SPACE = "test-embedder"


def _unit(v: Sequence[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(_unit(a), _unit(b), strict=True))


def _put(
    ledger: Ledger,
    subject: str,
    value: str,
    vectors: Sequence[Sequence[float]],
    anchor: str = "user_stated",
    space: str = SPACE,
) -> Evidence:
    evidence = ledger.evidence_of(Submission(NS, subject, "says", value, anchor, "chat"))
    ledger.ingest(
        [(evidence, None)], {evidence.evidence_id: [Embedding(space, tuple(v)) for v in vectors]}
    )
    return evidence


def _search(
    ledger: Ledger, vector: Sequence[float], words: str = "", space: str = SPACE, **kw: object
) -> list[Hit]:
    query = recall.search(
        words,
        embedding=Embedding(space, tuple(vector)),
        known_anchors=Policy().anchors,
        **kw,  # type: ignore[arg-type]
    )
    return ledger.reading.search(query, lambda namespace: True).items


def test_a_vector_finds_the_served_value_by_cosine_never_a_superseded_one(
    ledger: Ledger, clock: FakeClock
) -> None:
    """The score is the cosine similarity; a superseded value's vector finds nothing, and an
    earlier as_of finds it as the value believed then."""
    porto = [1.0, 0.0, 0.2]
    _put(ledger, "ana", "Porto", [porto])
    before = clock.now()
    clock.advance(60_000_000)
    _put(ledger, "ana", "Lisbon", [[0.0, 1.0, 0.2]])
    hits = _search(ledger, porto)
    assert [h.object for h in hits] == ["Lisbon"]
    assert hits[0].score == pytest.approx(_cosine(porto, [0.0, 1.0, 0.2]), abs=1e-6)
    # The control: as of before the move, Porto is what was believed, and it is found.
    [then] = _search(ledger, porto, as_of=before)
    assert (then.object, then.score) == ("Porto", pytest.approx(1.0, abs=1e-6))


def test_a_fact_ranks_by_its_best_vector_and_spaces_never_mix(ledger: Ledger) -> None:
    """Of a fact's vectors (one per field) the best decides; another space, or another
    length, is never compared."""
    _put(ledger, "a", "two fields", [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    _put(ledger, "b", "one field", [[0.7, 0.7, 0.0]])
    _put(ledger, "c", "other space", [[0.0, 0.0, 1.0]], space="another-embedder")
    _put(ledger, "d", "other length", [[0.0, 0.0, 1.0, 0.0]])
    hits = _search(ledger, [0.0, 0.1, 1.0])
    assert [h.object for h in hits] == ["two fields", "one field"]
    assert hits[0].score == pytest.approx(_cosine([0.0, 0.1, 1.0], [0.0, 0.0, 1.0]), abs=1e-6)
    assert [h.object for h in _search(ledger, [0.0, 0.0, 1.0], space="another-embedder")] == [
        "other space"
    ]


def test_words_and_a_vector_are_fused_by_rank(ledger: Ledger) -> None:
    """With words and a vector, a value both rankings put first beats one only the words
    or only the vector favour, and the score is the fused rank."""
    _put(ledger, "a", "green tea", [[1.0, 0.0]])
    _put(ledger, "b", "green coffee", [[0.0, 1.0]])
    _put(ledger, "c", "black tea", [[0.9, 0.1]])
    by_vector = [h.object for h in _search(ledger, [1.0, 0.0])]
    assert by_vector == ["green tea", "black tea", "green coffee"]
    fused = _search(ledger, [1.0, 0.0], words="green tea")
    assert fused[0].object == "green tea"
    assert fused[0].score == pytest.approx(2 / (recall.RRF_K + 1))


def test_a_duplicate_or_rejected_submission_keeps_no_vector(
    ledger: Ledger, repository: SqlRepository
) -> None:
    """Only the submission that stores the evidence keeps its vectors."""
    kept = _put(ledger, "a", "kept", [[1.0, 0.0]])
    _put(ledger, "a", "kept", [[0.0, 1.0]])  # the same evidence: a DUPLICATE (restatement)
    rejected = ledger.evidence_of(
        Submission(NS, "b", "says", "weak", "user_stated", "chat", 0.5, 0.1)
    )
    ledger.ingest([(rejected, None)], {rejected.evidence_id: [Embedding(SPACE, (0.0, 1.0))]})
    with repository.engine.connect() as conn:
        rows = conn.execute(text("SELECT evidence_id FROM search_vector")).all()
    assert [r[0] for r in rows] == [kept.evidence_id]


def test_an_erasure_takes_the_vectors_with_the_evidence(
    ledger: Ledger, repository: SqlRepository
) -> None:
    """After an erase, the fact's vectors are gone and it is found by nothing."""
    gone = _put(ledger, "ana", "secret", [[0.3, 0.4, 0.5]])
    _put(ledger, "ravi", "public", [[0.3, 0.4, 0.6]])
    assert [h.object for h in _search(ledger, [0.3, 0.4, 0.5])] == ["secret", "public"]
    ledger.erase(evidence_id=gone.evidence_id, operator="dpo", reason="request")
    assert [h.object for h in _search(ledger, [0.3, 0.4, 0.5])] == ["public"]
    with repository.engine.connect() as conn:
        left = conn.execute(text("SELECT evidence_id FROM search_vector")).all()
    assert gone.evidence_id not in {r[0] for r in left} and len(left) == 1


def test_erased_vectors_leave_the_database_files(repository_url: str) -> None:
    """An erased fact's vector bytes (unit-normalised float32s, in the byte order of the
    machine, as SQLite's blob and PostgreSQL's real[] both keep them) leave the database's
    files: SQLite's file, WAL and shared memory; every PostgreSQL file of the schema. A
    neighbour's stay."""
    vector = [0.123456, -0.654321, 0.314159, 0.271828, -0.577215]
    neighbour = [0.2, 0.1, 0.3, 0.4, 0.5]
    packed = array.array("f", _unit(vector)).tobytes()
    kept = array.array("f", _unit(neighbour)).tobytes()
    repo = SqlRepository(repository_url)

    def file_bytes() -> bytes:
        if repo.engine.dialect.name == "postgresql":
            return _postgres_bytes(repo)
        db = Path(repo.engine.url.database or "")
        parts = (db, Path(f"{db}-wal"), Path(f"{db}-shm"))
        return b"".join(p.read_bytes() for p in parts if p.exists())

    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        gone = _put(ledger, "ana", f"secret-{uuid.uuid4().hex}", [vector])
        _put(ledger, "ravi", "public", [neighbour])
        raw = file_bytes()
        assert packed in raw and kept in raw  # the control: the bytes are there to find
        ledger.erase(evidence_id=gone.evidence_id, operator="dpo", reason="request")
        raw = file_bytes()
        assert packed not in raw
        assert kept in raw
    finally:
        repo.close()


@pytest.fixture
def pgvector_url() -> Iterator[str]:
    """A fresh PostgreSQL database with pgvector created in it."""
    base = os.environ.get("FACTNODE_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("FACTNODE_TEST_POSTGRES_URL is not set: PostgreSQL store tests skipped")
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            available = conn.execute(
                text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            ).first()
            if available is None:
                pytest.skip("pgvector is not installed on this PostgreSQL server")
            name = f"factnode_vec_{uuid.uuid4().hex[:12]}"
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(base).set(database=name)
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("CREATE EXTENSION vector"))
        engine.dispose()
        yield url.render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.mark.postgres
def test_pgvector_ranks_as_the_portable_path_does(pgvector_url: str, tmp_path: Path) -> None:
    """With pgvector installed in the database, the node asks it for the inner products;
    the hits and scores are those SQLite's portable path gives for the same facts."""
    rankings = []
    for url in (pgvector_url, f"sqlite:///{tmp_path}/factnode.db"):
        repo = SqlRepository(url)
        try:
            ledger = Ledger(repo, Policy(), "node-test", FakeClock())
            for i in range(30):
                angle = i / 5
                _put(ledger, f"s{i}", f"value {i}", [[math.cos(angle), math.sin(angle), 0.5]])
            with repo.engine.connect() as conn:
                if conn.dialect.name == "postgresql":
                    assert conn.execute(
                        text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
                    ).first()
            hits = _search(ledger, [0.6, 0.8, 0.1])
            rankings.append([(h.object, round(h.score, 5)) for h in hits])
        finally:
            repo.close()
    assert rankings[0] == rankings[1] and len(rankings[0]) == 10
