"""Alembic migrations: the head schema is the SQLModel schema, and re-running them is harmless."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, MetaData, inspect, text
from sqlmodel import SQLModel

import factnode.store._tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from factnode.core import Confirmation, Key, Policy, Submission, ids, recall
from factnode.core.erasure_bounds import ErasureBound, lowered_bounds
from factnode.core.members import MemberRecord
from factnode.core.receipts import Receipt
from factnode.core.signed import Signature
from factnode.ledger import Ledger, NotFound, ensure_node_id
from factnode.store import SqlRepository, StoredMember, Writes
from factnode.store.migrations import alembic_config, include_name, upgrade
from factnode.store.repository import Transaction
from factnode.testing import Credentials, FakeClock

LIVES_IN = Key("user:ana", "ana", "lives_in")
TABLES = {
    "belief",
    "belief_change",
    "decision",
    "erased_evidence",
    "erasure",
    "evidence",
    "member_record",
    "node_meta",
}


def _head() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def _schema(engine: Engine) -> dict[str, object]:
    """Every table's columns, indexes and primary key, as the database reports them."""
    insp = inspect(engine)
    return {
        t: (
            [(c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(t)],
            sorted(
                (i["name"] or "", tuple(i["column_names"]), i["unique"])
                for i in insp.get_indexes(t)
            ),
            insp.get_pk_constraint(t)["constrained_columns"],
        )
        for t in sorted(insp.get_table_names())
    }


def test_head_schema_matches_the_sqlmodel_tables(tmp_path: Path) -> None:
    """A database migrated to head differs in nothing from SQLModel.metadata."""
    repo = SqlRepository(f"sqlite:///{tmp_path}/factnode.db")
    try:
        assert _revision(repo.engine) == _head()
        with repo.engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "include_name": include_name}
            )
            diff = compare_metadata(ctx, SQLModel.metadata)
        assert diff == []
        assert set(inspect(repo.engine).get_table_names()) >= TABLES
        # The control: the comparison does see the tables, so drift would show.
        with repo.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"include_name": include_name})
            diff = compare_metadata(ctx, MetaData())
        removed = {d[1].name for d in diff if d[0] == "remove_table"}
        assert removed >= TABLES
    finally:
        repo.close()


def test_head_schema_matches_on_every_backend(repository: SqlRepository) -> None:
    """On SQLite and PostgreSQL alike, the migrated schema has no drift from the tables."""
    with repository.engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_name": include_name,
            },
        )
        assert compare_metadata(ctx, SQLModel.metadata) == []


def test_migrating_a_migrated_database_is_a_no_op(repository_url: str) -> None:
    """Upgrading an up-to-date database again changes no schema and keeps every row."""
    clock = FakeClock()
    repo = SqlRepository(repository_url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        ensure_node_id(repo, "node-a", "fresh")
        ledger.submit(Submission("user:ana", "ana", "lives_in", "Lisbon", "user_stated", "ana"))
        ledger.submit(Submission("user:ana", "ana", "lives_in", "Porto", "llm_generated", "gpt"))
        before_schema = _schema(repo.engine)
        before_counts = ledger.counts()
        belief = ledger.belief(LIVES_IN)
        upgrade(repo.engine)
        upgrade(repo.engine, "head")
        assert _revision(repo.engine) == _head()
        assert _schema(repo.engine) == before_schema
        assert ledger.counts() == before_counts
    finally:
        repo.close()

    again = SqlRepository(repository_url)  # opening migrates once more
    try:
        assert _revision(again.engine) == _head()
        with again.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
        reopened = Ledger(again, Policy(), "node-test", clock)
        assert reopened.counts() == before_counts
        assert reopened.belief(LIVES_IN) == belief
        assert ensure_node_id(again, None, "fresh") == "node-a"
    finally:
        again.close()


def test_a_0002_database_with_data_upgrades_and_still_erases(tmp_path: Path) -> None:
    """0003 drops the decision log's evidence index: an older database opens with its data,
    and an erasure still removes the decisions about the erased evidence (found by key)."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    clock = FakeClock()
    repo = SqlRepository(url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        kept = ledger.submit(
            Submission("user:ana", "ana", "lives_in", "Lisbon", "user_stated", "a")
        )
        doomed = ledger.submit(
            Submission("user:bob", "bob", "lives_in", "Faro", "user_stated", "b")
        )
        counts = ledger.counts()
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0002")
            conn.commit()
        assert _revision(repo.engine) == "0002"
        names = {i["name"] for i in inspect(repo.engine).get_indexes("decision")}
        assert "ix_decision_evidence_id" in names  # the 0002 schema, as an older node left it
    finally:
        repo.close()

    again = SqlRepository(url)  # opening migrates to head
    try:
        assert _revision(again.engine) == _head()
        names = {i["name"] for i in inspect(again.engine).get_indexes("decision")}
        assert "ix_decision_evidence_id" not in names
        ledger = Ledger(again, Policy(), "node-test", clock)
        assert ledger.counts() == counts
        assert ledger.belief(LIVES_IN).object == "Lisbon"

        def logged(evidence_id: str) -> int:
            with again.engine.connect() as conn:
                q = text("SELECT count(*) FROM decision WHERE evidence_id = :e")
                return int(conn.execute(q, {"e": evidence_id}).scalar() or 0)

        assert logged(doomed.evidence_id) == 1
        ledger.erase(evidence_id=doomed.evidence_id, operator="op", reason="asked")
        assert logged(doomed.evidence_id) == 0
        assert logged(kept.evidence_id) == 1
    finally:
        again.close()


def test_0005_rewrites_evidence_ids_and_every_reference(tmp_path: Path) -> None:
    """A 0004 store (ids without worth, confidence, corrects, contradicts) upgrades to ids of
    the second form; corrections, decisions and served beliefs follow; nothing is lost."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    clock = FakeClock()
    repo = SqlRepository(url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        first = ledger.submit(
            Submission("user:ana", "ana", "lives_in", "Lisbon", "user_stated", "a", valid_from=1)
        )
        fix = ledger.submit(
            Submission(
                "user:ana",
                "ana",
                "lives_in",
                "Porto",
                "user_stated",
                "a",
                valid_from=2,
                corrects=first.evidence_id,
            )
        )
        counts, belief = ledger.counts(), ledger.belief(LIVES_IN)
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0004")
            conn.commit()
            old_ids = set(conn.execute(text("SELECT evidence_id FROM evidence")).scalars())
        assert old_ids.isdisjoint({first.evidence_id, fix.evidence_id})
    finally:
        repo.close()

    again = SqlRepository(url)  # opening migrates to head
    try:
        ledger = Ledger(again, Policy(), "node-test", clock)
        with again.engine.connect() as conn:
            ids_now = set(conn.execute(text("SELECT evidence_id FROM evidence")).scalars())
            corrects = conn.execute(
                text("SELECT corrects FROM evidence WHERE evidence_id = :e"),
                {"e": fix.evidence_id},
            ).scalar()
            logged = set(
                conn.execute(
                    text("SELECT evidence_id FROM decision WHERE evidence_id IS NOT NULL")
                ).scalars()
            )
        assert ids_now == {first.evidence_id, fix.evidence_id}
        assert corrects == first.evidence_id
        assert logged <= ids_now and fix.evidence_id in logged
        assert ledger.counts() == counts
        assert ledger.belief(LIVES_IN) == belief
    finally:
        again.close()


def test_0007_turns_retraction_rows_into_retraction_evidence(tmp_path: Path) -> None:
    """A 0006 store's retraction rows become retraction evidence (codebase_verified, source
    `migrated:retraction`) that still ends what it ended, and assertions naming
    `contradicts` are found from the key they contradict; the step reverses."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    clock = FakeClock()
    works_at, employer = Key("user:ana", "ana", "works_at"), Key("user:ana", "ana", "employer")
    repo = SqlRepository(url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        ledger.submit(Submission("user:ana", "ana", "lives_in", "Lisbon", "user_stated", "a"))
        ledger.submit(Submission(*works_at, "Acme", "user_stated", "a", valid_from=1))
        clock.advance(10)
        ledger.retract(LIVES_IN, reason="moved away")
        ledger.submit(Submission(*employer, "Initech", "user_stated", "a", contradicts=works_at))
        with pytest.raises(NotFound):
            ledger.belief(LIVES_IN)
        with pytest.raises(NotFound):
            ledger.belief(works_at)
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0006")
            conn.commit()
            rows = conn.execute(text("SELECT key_id, version_id FROM retraction")).all()
            assert [(k, v) for k, v in rows] == [(ids.key_id(LIVES_IN), None)]
            assert not conn.execute(
                text("SELECT count(*) FROM evidence WHERE object = ''")
            ).scalar()
    finally:
        repo.close()

    again = SqlRepository(url)  # opening migrates to head
    try:
        ledger = Ledger(again, Policy(), "node-test", clock)
        with pytest.raises(NotFound):
            ledger.belief(LIVES_IN)
        with pytest.raises(NotFound):
            ledger.belief(works_at)
        with again.read() as tx:
            [migrated] = tx.key_states([LIVES_IN])[LIVES_IN].retractions
            [moved] = tx.key_states([works_at])[works_at].retractions
        assert migrated.retracts and migrated.version_id == "" and migrated.object == ""
        assert (migrated.attribution, migrated.source) == (
            "codebase_verified",
            "migrated:retraction",
        )
        assert migrated.evidence_id == ids.evidence_id(
            LIVES_IN, "", "codebase_verified", "migrated:retraction", migrated.valid_from,
            1000, 1000, None, None, retracts=True,
        )  # fmt: skip
        assert moved.key == employer and moved.contradicts == works_at
    finally:
        again.close()


def _evidence_indexes(engine: Engine) -> dict[str, str]:
    """The evidence and belief indexes by name, with whether each is partial: its WHERE."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.execute(
                text(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                    "AND tbl_name IN ('evidence', 'belief') AND sql IS NOT NULL"
                )
            ).all()
        else:
            rows = conn.execute(
                text(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = "
                    "current_schema() AND tablename IN ('evidence', 'belief')"
                )
            ).all()
    return {name: ("partial" if " WHERE " in sql.upper() else "full") for name, sql in rows}


def test_0009_reshapes_the_indexes_and_reverses(
    repository_url: str,
) -> None:
    """0009_rows drops the evidence subject index, puts belief's subject index in page order
    and makes the idempotency, contradicts and corrects indexes partial; down to 0008
    restores them as they were, with every row and answer kept, and opening the store
    again migrates back up."""
    clock = FakeClock()
    works_at = Key("user:ana", "ana", "works_at")
    repo = SqlRepository(repository_url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        first = ledger.submit(
            Submission(
                "user:ana", "ana", "lives_in", "Lisbon", "user_stated", "a", idempotency_key="k"
            )
        )
        ledger.submit(Submission(*works_at, "Acme", "user_stated", "a", valid_from=1))
        clock.advance(10)
        ledger.submit(
            Submission("user:ana", "ana", "lives_in", "Porto", "user_stated", "a",
                       corrects=first.evidence_id, contradicts=works_at)
        )  # fmt: skip
        at_head = _evidence_indexes(repo.engine)
        assert "ix_evidence_subject" not in at_head and "ix_belief_subject" not in at_head
        assert at_head["ix_belief_subject_page"] == "full"
        for name in (
            "ix_evidence_idempotency",
            "ix_evidence_contradicts_key_id",
            "ix_evidence_corrects",
        ):
            assert at_head[name] == "partial", name
        assert at_head["ix_evidence_key_valid_from"] == "full"
        with pytest.raises(NotFound):
            ledger.belief(works_at)
        counts, belief = ledger.counts(), ledger.belief(LIVES_IN)
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0008")
            conn.commit()
        down = _evidence_indexes(repo.engine)
        assert down["ix_evidence_subject"] == down["ix_belief_subject"] == "full"
        assert "ix_belief_subject_page" not in down
        assert down["ix_evidence_idempotency"] == down["ix_evidence_corrects"] == "full"
    finally:
        repo.close()

    again = SqlRepository(repository_url)  # opening migrates to head
    try:
        assert _revision(again.engine) == _head()
        assert _evidence_indexes(again.engine) == at_head
        ledger = Ledger(again, Policy(), "node-test", clock)
        assert (ledger.counts(), ledger.belief(LIVES_IN)) == (counts, belief)
        with pytest.raises(NotFound):  # still ended by the contradiction found by its key
            ledger.belief(works_at)
        retry = ledger.submit(
            Submission(
                "user:ana", "ana", "lives_in", "Faro", "user_stated", "a", idempotency_key="k"
            )
        )
        assert retry.evidence_id == first.evidence_id  # the partial unique index still finds it
        report = ledger.erase(subject=("user:ana", "ana"), operator="op", reason="test")
        assert report.evidence_erased == 3  # found by subject_id
    finally:
        again.close()


def test_0009_adds_signed_votes_and_reverses(tmp_path: Path) -> None:
    """0009_signed adds each vote's sequence number and signature, the tombstones'
    signatures and the evidence-signature and equivocation tables; downgraded to 0008 they
    are gone and the votes stay; upgraded again, the votes
    read back unsigned with number 0, which the node signs again on open."""
    url = f"sqlite:///{tmp_path / 'signed.db'}"
    credentials = Credentials(["node-test"])
    repo = SqlRepository(url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        credentials.roster(ledger, [])
        ledger.submit(Submission(*LIVES_IN, "Lisbon", "agent_observed", "agent:a", 0.5, 0.9))
        with repo.read() as tx:
            [signed] = tx.votes([LIVES_IN])[LIVES_IN]
        assert signed.seq > 0 and signed.signature
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0008")
            conn.commit()
            columns = {c["name"] for c in inspect(conn).get_columns("vote")}
            assert not {"seq", "signature"} & columns
            assert not {"equivocation", "evidence_signature"} & set(inspect(conn).get_table_names())
            assert "signature" not in {c["name"] for c in inspect(conn).get_columns("erasure")}
            assert conn.execute(text("SELECT count(*) FROM vote")).scalar() == 1
    finally:
        repo.close()

    again = SqlRepository(url)  # opening migrates to head
    try:
        assert _revision(again.engine) == _head()
        with again.read() as tx:
            [old] = tx.votes([LIVES_IN])[LIVES_IN]
        assert (old.seq, old.signature, old.version_id) == (0, b"", signed.version_id)
        ledger = Ledger(again, Policy(), "node-test", FakeClock())
        roster = credentials.roster(ledger, [])
        assert ledger.sign_own_votes() == 1
        with again.read() as tx:
            [resigned] = tx.votes([LIVES_IN])[LIVES_IN]
        assert resigned.seq > signed.seq and roster.verify_vote(resigned) is Signature.VALID
    finally:
        again.close()


def _adds_a_table_and_reverses(
    url: str,
    table: str,
    down_to: str,
    put: Callable[[Transaction], None],
    read: Callable[[Transaction], object],
    written: object,
    empty: object,
) -> None:
    """A revision that creates `table`: what `put` writes reads back as `written`; down to
    `down_to` drops the table and keeps every other table's rows; up again restores it
    empty."""
    repo = SqlRepository(url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        ledger.submit(Submission("user:ana", "ana", "lives_in", "Lisbon", "user_stated", "a"))
        counts = ledger.counts()
        with repo.write() as tx:
            put(tx)
        with repo.read() as tx:
            assert read(tx) == written
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, down_to)
            conn.commit()
        assert _revision(repo.engine) == down_to
        assert table not in inspect(repo.engine).get_table_names()
    finally:
        repo.close()

    again = SqlRepository(url)  # opening migrates to head
    try:
        assert _revision(again.engine) == _head()
        assert table in inspect(again.engine).get_table_names()
        with again.read() as tx:
            assert read(tx) == empty
        assert Ledger(again, Policy(), "node-test", FakeClock()).counts() == counts
    finally:
        again.close()


def test_0009_members_adds_the_member_record_table_and_reverses(tmp_path: Path) -> None:
    """0009_members creates member_record (a stored record reads back as written); down to
    0008 drops it and keeps every other table's rows; up again restores an empty table."""
    record = MemberRecord("alpha", "10.0.0.1:7421", b"-----BEGIN CERTIFICATE-----\n", 7, b"\x01")
    _adds_a_table_and_reverses(
        f"sqlite:///{tmp_path / 'members.db'}",
        "member_record",
        "0008",
        lambda tx: tx.apply(Writes(members=[StoredMember(record, revoked=True)])),
        lambda tx: tx.member_records(),
        [StoredMember(record, revoked=True)],
        [],
    )


def test_r27_adds_the_erasure_bound_table_and_reverses(tmp_path: Path) -> None:
    """r27_erasure_bounds creates erasure_bound (a stored bound reads back as written, each
    node's lowest kept); down to r26 drops it and keeps every other table's rows; up again
    restores an empty table."""

    def put(tx: Transaction) -> None:
        for bound in (
            ErasureBound("e" * 32, "b", 7, b"\x01"),
            ErasureBound("e" * 32, "b", 9, b"\x02"),
        ):
            lowered = lowered_bounds(tx.erasure_bounds([bound.erasure_id]), [bound])
            tx.apply(Writes(erasure_bounds=lowered))

    _adds_a_table_and_reverses(
        f"sqlite:///{tmp_path / 'bounds.db'}",
        "erasure_bound",
        "r26_served_touch",
        put,
        lambda tx: tx.bounds_under([""]),
        [ErasureBound("e" * 32, "b", 7, b"\x01")],
        [],
    )


def test_r28_adds_confirmations_and_reverses(tmp_path: Path) -> None:
    """r28_confirmations creates confirmation and evidence.confirmed_at (a confirmation reads
    back as written); down to r27 drops both and keeps every other table's rows; up again
    restores an empty table."""
    confirmation = Confirmation(ids.value_hash("held"), "node-test", 5, 6, b"\x01")

    _adds_a_table_and_reverses(
        f"sqlite:///{tmp_path / 'confirmations.db'}",
        "confirmation",
        "r27_erasure_bounds",
        lambda tx: tx.confirm([confirmation], []),
        lambda tx: tx.confirmations([confirmation.evidence_id]),
        [confirmation],
        [],
    )


def test_r28_brings_back_what_the_old_decay_marked(tmp_path: Path) -> None:
    """Evidence the decay of r27 and before marked DECAYED (gone from every view, its row
    whole, its key's served rows emptied) is ACTIVE after upgrading, and the node works the
    key out again when it opens the store: the present and its event time serve it."""
    url = f"sqlite:///{tmp_path / 'old-decay.db'}"
    clock = FakeClock()
    repo = SqlRepository(url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", clock)
        start = clock.now()
        sub = Submission(*LIVES_IN, "Lisbon", "llm_generated", "gpt", 0.5, 0.9, start)
        ledger.submit(sub)
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "r27_erasure_bounds")
            # What the old decay did: the evidence marked, the key's served rows emptied.
            conn.execute(text("UPDATE evidence SET status = 'DECAYED'"))
            conn.execute(text("DELETE FROM belief"))
            conn.commit()
        assert "confirmed_at" not in {
            c["name"] for c in inspect(repo.engine).get_columns("evidence")
        }
    finally:
        repo.close()

    again = SqlRepository(url)  # opening migrates to head
    try:
        with again.engine.connect() as conn:
            assert conn.execute(text("SELECT DISTINCT status FROM evidence")).all() == [("ACTIVE",)]
        ledger = Ledger(again, Policy(), "node-test", clock)  # opening recomputes the key
        assert ledger.belief(LIVES_IN, as_of=start).object == "Lisbon"
        assert ledger.belief(LIVES_IN).object == "Lisbon"
        assert [b.object for b in ledger.list_beliefs("user:ana").items] == ["Lisbon"]
        assert ledger.forgetting.recount_after_upgrade() == 0  # once only
    finally:
        again.close()


def test_r30_adds_erasure_receipts_and_reverses(tmp_path: Path) -> None:
    """r30_receipts creates erasure_receipt (a receipt reads back as written); down to r29
    drops it and keeps every other table's rows; up again restores an empty table."""
    receipt = Receipt("0123456789abcdef0123456789abcdef", "node-b", 5, 2, b"\x01")
    _adds_a_table_and_reverses(
        f"sqlite:///{tmp_path / 'receipts.db'}",
        "erasure_receipt",
        "r29_search",
        lambda tx: tx.put_receipts([receipt]),
        lambda tx: list(tx.receipts([receipt.erasure_id]).values()),
        [receipt],
        [],
    )


def test_r29_indexes_what_the_store_holds_and_reverses(repository_url: str) -> None:
    """r29_search builds recall's index from the active assertions held when it runs (a
    retraction and a rejected fact are not indexed); down to r28 drops it, and up again
    indexes them anew, so a search finds them."""
    repo = SqlRepository(repository_url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        ledger.submit(Submission("user:ana", "ana", "lives_in", "Lisbon", "user_stated", "chat"))
        ledger.submit(Submission("user:ana", "ana", "works_at", "Acme", "user_stated", "chat"))
        ledger.submit(Submission("user:ana", "ana", "likes", "tea", "user_stated", "a", 0.5, 0.1))
        ledger.retract(Key("user:ana", "ana", "works_at"), reason="left")
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "r28_confirmations")
            conn.commit()
        assert "search_doc" not in inspect(repo.engine).get_table_names()
    finally:
        repo.close()

    again = SqlRepository(repository_url)  # opening migrates to head: r29 indexes the rows
    try:
        with again.read() as tx:
            indexed = tx.search_matches(["lisbon", "acme", "tea", "left"], every_word=False)
        assert sorted(m.key.predicate for m in indexed) == ["lives_in", "works_at"]
        ledger = Ledger(again, Policy(), "node-test", FakeClock())
        found = ledger.reading.search(
            recall.search("Lisbon", known_anchors=Policy().anchors), lambda ns: True
        )
        assert [h.object for h in found.items] == ["Lisbon"]
    finally:
        again.close()


def test_r30_gives_the_erasures_held_before_this_nodes_own_receipt(tmp_path: Path) -> None:
    """An erasure made before r30 shows this node as confirmed after the upgrade, dated when
    it was made, counting the evidence its tombstone listed."""
    url = f"sqlite:///{tmp_path / 'old-erasure.db'}"
    repo = SqlRepository(url)
    try:
        ensure_node_id(repo, "node-old", "node-old")
        ledger = Ledger(repo, Policy(), "node-old", FakeClock())
        ledger.submit(Submission("user:ana", "ana", "lives_in", "Lisbon", "user_stated", "a"))
        done = ledger.erase(subject=("user:ana", "ana"), operator="dpo", reason="request")
        with repo.engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "r29_search")
            conn.commit()
    finally:
        repo.close()
    again = SqlRepository(url)
    try:
        with again.read() as tx:
            held = list(tx.receipts([done.erasure_id]).values())
        assert held == [Receipt(done.erasure_id, "node-old", done.erased_at, 1)]
    finally:
        again.close()
