"""Erased values leave the SQLite file itself: not in the database, its WAL or its shared memory."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from node.core import Key, Policy, Submission
from node.ledger import Ledger
from node.store import SqlRepository
from node.testing import FakeClock

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
