"""SQLModel tables: the store's schema, kept apart from the core's value types.

The Alembic migrations in `migrations/versions` create exactly this schema; a test
compares the two so they cannot drift.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import BigInteger, Index, LargeBinary, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, REAL, TSVECTOR
from sqlmodel import Field, SQLModel

ID = 32  # hex chars of a content-addressed id
NAME = 256  # key parts (validation.MAX_KEY_PART_BYTES)


class EvidenceRow(SQLModel, table=True):
    """One piece of evidence; `status` ACTIVE, REJECTED or DECAYED."""

    __tablename__ = "evidence"
    # Every index here is named by a query plan (bench/index_plans.py, bench/README.md).
    # The three on columns most rows leave NULL are partial: a row without one writes no
    # entry (migration 0009), and every lookup compares the column, which implies NOT NULL.
    __table_args__ = (
        Index("ix_evidence_key_valid_from", "key_id", "valid_from"),
        Index("ix_evidence_status_attribution", "status", "attribution"),
        Index(
            "ix_evidence_idempotency",
            "idempotency_key",
            unique=True,
            sqlite_where=text("idempotency_key IS NOT NULL"),
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
        Index("ix_evidence_subject_id", "subject_id"),
        Index(
            "ix_evidence_contradicts_key_id",
            "contradicts_key_id",
            sqlite_where=text("contradicts_key_id IS NOT NULL"),
            postgresql_where=text("contradicts_key_id IS NOT NULL"),
        ),
        Index(
            "ix_evidence_corrects",
            "corrects",
            sqlite_where=text("corrects IS NOT NULL"),
            postgresql_where=text("corrects IS NOT NULL"),
        ),
    )

    evidence_id: str = Field(primary_key=True, max_length=ID)
    key_id: str = Field(max_length=ID)
    namespace: str = Field(max_length=NAME)
    subject: str = Field(max_length=NAME)
    predicate: str = Field(max_length=NAME)
    object: str = Field(sa_type=Text)
    version_id: str = Field(max_length=ID)
    attribution: str = Field(max_length=64)
    source: str = Field(sa_type=Text)
    worth_milli: int
    confidence_milli: int
    valid_from: int = Field(sa_type=BigInteger)
    valid_from_defaulted: bool
    recorded_at: int = Field(sa_type=BigInteger)
    origin_node: str = Field(max_length=NAME)
    corrects: str | None = Field(default=None, max_length=ID)
    contradicts_namespace: str | None = Field(default=None, max_length=NAME)
    contradicts_subject: str | None = Field(default=None, max_length=NAME)
    contradicts_predicate: str | None = Field(default=None, max_length=NAME)
    anchor_cap: str | None = Field(default=None, max_length=64)
    idempotency_key: str | None = Field(default=None, max_length=128)
    status: str = Field(max_length=16)
    # Added in migration 0002 (federation).
    subject_id: str | None = Field(default=None, max_length=ID)
    origin_recorded_at: int | None = Field(default=None, sa_type=BigInteger)
    # Added in migration 0007 (retractions are evidence): a retraction (specification §5), and the
    # key id of `contradicts`, so a key's state loads what other keys say against it.
    retracts: bool = False
    contradicts_key_id: str | None = Field(default=None, max_length=ID)
    # Added in revision r28 (decay closes a claim): the latest confirmation that counts here
    # (`core.decay.confirmed_at`); None: never restated.
    confirmed_at: int | None = Field(default=None, sa_type=BigInteger)


class DecisionRow(SQLModel, table=True):
    """The decision log: one row per decision, in order. Holds ids, never values."""

    __tablename__ = "decision"
    __table_args__ = (Index("ix_decision_namespace_seq", "namespace", "seq"),)

    seq: int | None = Field(default=None, primary_key=True)
    key_id: str = Field(max_length=ID, index=True)
    namespace: str = Field(max_length=NAME)
    subject: str = Field(max_length=NAME)
    predicate: str = Field(max_length=NAME)
    outcome: str = Field(max_length=16)
    rule: str = Field(max_length=32)
    decided_at: int = Field(sa_type=BigInteger)
    # Not indexed: only an erasure looks decisions up by evidence, and it does so by key.
    evidence_id: str | None = Field(default=None, max_length=ID)
    version_id: str | None = Field(default=None, max_length=ID)
    supersedes: str | None = Field(default=None, max_length=ID)
    detail: str = Field(sa_type=Text)


class BeliefRow(SQLModel, table=True):
    """The served belief per key (one row per believed value of a multi-valued key)."""

    __tablename__ = "belief"
    __table_args__ = (
        Index("ix_belief_state", "state"),
        # A ListBeliefs page of one subject, in the page's order (key_id, version_id): the
        # (namespace, subject, predicate) index it replaced (migration 0009) left SQLite
        # filtering a whole namespace by subject and PostgreSQL sorting the subject's rows.
        Index("ix_belief_subject_page", "namespace", "subject", "key_id", "version_id"),
        # ListBeliefs pages a namespace in (key_id, version_id) order: without this index
        # each page sorted every belief of the namespace to return the first 100.
        Index("ix_belief_page", "namespace", "key_id", "version_id"),
    )

    key_id: str = Field(primary_key=True, max_length=ID)
    version_id: str = Field(primary_key=True, max_length=ID)
    namespace: str = Field(max_length=NAME)
    subject: str = Field(max_length=NAME)
    predicate: str = Field(max_length=NAME)
    evidence_id: str = Field(max_length=ID)
    rule: str = Field(max_length=32)
    state: str = Field(max_length=16)
    updated_at: int = Field(sa_type=BigInteger)


class BeliefChangeRow(SQLModel, table=True):
    """Every change of a served belief, in order; `seq` is WatchBeliefs' resume token."""

    __tablename__ = "belief_change"
    __table_args__ = (Index("ix_belief_change_key", "key_id"),)

    seq: int | None = Field(default=None, primary_key=True)
    key_id: str = Field(max_length=ID)
    namespace: str = Field(max_length=NAME)
    subject: str = Field(max_length=NAME)
    predicate: str = Field(max_length=NAME)
    version_id: str | None = Field(default=None, max_length=ID)
    state: str | None = Field(default=None, max_length=16)
    rule: str | None = Field(default=None, max_length=32)
    changed_at: int = Field(sa_type=BigInteger)


class ServedTouchRow(SQLModel, table=True):
    """A key whose served answer a write changed (its served rows or votes), in commit order;
    `key_id` None: every key (an erasure, decay). Written on PostgreSQL only, where each
    replica keeps its memory of served answers in step from it (`store._checked`)."""

    __tablename__ = "served_touch"

    seq: int | None = Field(default=None, primary_key=True)
    key_id: str | None = Field(default=None, max_length=ID)


class ErasureRow(SQLModel, table=True):
    """A privacy-erase tombstone: only hashes, the time, the operator and the reason."""

    __tablename__ = "erasure"
    __table_args__ = (Index("ix_erasure_scope", "scope", "scope_hash"),)

    erasure_id: str = Field(primary_key=True, max_length=ID)
    scope: str = Field(max_length=16)
    scope_hash: str = Field(max_length=ID)
    erased_at: int = Field(sa_type=BigInteger)
    operator: str = Field(max_length=NAME)
    reason: str = Field(sa_type=Text)
    evidence_count: int
    origin_node: str | None = Field(default=None, max_length=NAME)
    # Its origin's signature (specification §7), passed on unchanged; None: unsigned.
    signature: bytes | None = Field(default=None, sa_type=LargeBinary)


class ErasedEvidenceRow(SQLModel, table=True):
    """An evidence id that may never be stored again."""

    __tablename__ = "erased_evidence"

    evidence_id: str = Field(primary_key=True, max_length=ID)
    erasure_id: str = Field(max_length=ID)


class ErasureBoundRow(SQLModel, table=True):
    """A node's signed statement that it applied an erasure dated beyond its clock at
    `bound_at` (its clock): the erasure covers what that node originates up to then
    (`core.erasure_bounds`). One per node and erasure, the lowest; kept and gossiped."""

    __tablename__ = "erasure_bound"

    erasure_id: str = Field(primary_key=True, max_length=ID)
    node_id: str = Field(primary_key=True, max_length=NAME)
    bound_at: int = Field(sa_type=BigInteger)
    # The node's signature (specification §7); None: this node's own (signed as it is
    # offered) or one taken from a peer that signs nothing.
    signature: bytes | None = Field(default=None, sa_type=LargeBinary)


class ConfirmationRow(SQLModel, table=True):
    """A restatement of held evidence, signed by the node that took it (specification §6).
    Append-only: a view as known at an earlier time counts only those received by then."""

    __tablename__ = "confirmation"

    evidence_id: str = Field(primary_key=True, max_length=ID)
    signer: str = Field(primary_key=True, max_length=NAME)
    confirmed_at: int = Field(primary_key=True, sa_type=BigInteger)
    received_at: int = Field(sa_type=BigInteger)
    signature: bytes | None = Field(default=None, sa_type=LargeBinary)


class NodeMetaRow(SQLModel, table=True):
    """Small node facts that must survive restarts, such as the node id."""

    __tablename__ = "node_meta"

    name: str = Field(primary_key=True, max_length=64)
    value: str = Field(sa_type=Text)


class VoteRow(SQLModel, table=True):
    """The current vote of each node (this one included) for each key: its highest signed
    sequence number (specification §7), with the voter's signature, relayed unchanged."""

    __tablename__ = "vote"
    __table_args__ = (
        Index("ix_vote_evidence", "evidence_id"),
        Index("ix_vote_key", "key_id"),
    )

    voter: str = Field(primary_key=True, max_length=NAME)
    key_id: str = Field(primary_key=True, max_length=ID)
    namespace: str = Field(max_length=NAME)
    subject: str = Field(max_length=NAME)
    predicate: str = Field(max_length=NAME)
    version_id: str | None = Field(default=None, max_length=ID)
    evidence_id: str = Field(max_length=ID)
    anchor: int
    worth_milli: int
    fresh_since: int = Field(sa_type=BigInteger)
    cast_at: int = Field(sa_type=BigInteger)
    seq: int = Field(default=0, sa_type=BigInteger, sa_column_kwargs={"server_default": "0"})
    # None on a vote stored before votes were signed (migration 0009): refused by peers.
    signature: bytes | None = Field(default=None, sa_type=LargeBinary)
    # The voter is proven to have equivocated on the key: the row is a marker, counting zero
    # (the proof itself is in `equivocation`).
    equivocated: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})


class EvidenceSignatureRow(SQLModel, table=True):
    """Relayed evidence's signature by its origin (specification §7), kept to pass it on unchanged.
    Apart from the evidence rows, which the hot read path reads; gone when the evidence is
    erased. This node's own evidence is signed as it is offered."""

    __tablename__ = "evidence_signature"

    evidence_id: str = Field(primary_key=True, max_length=ID)
    signature: bytes = Field(sa_type=LargeBinary)


class EquivocationRow(SQLModel, table=True):
    """Proof that a voter signed two different votes with one sequence number on one key
    (specification §7): both votes, as JSON, kept and gossiped; the voter counts zero on the key."""

    __tablename__ = "equivocation"

    voter: str = Field(primary_key=True, max_length=NAME)
    key_id: str = Field(primary_key=True, max_length=ID)
    namespace: str = Field(max_length=NAME)
    subject: str = Field(max_length=NAME)
    predicate: str = Field(max_length=NAME)
    seq: int = Field(sa_type=BigInteger)
    first: str = Field(sa_type=Text)
    second: str = Field(sa_type=Text)


class PinRow(SQLModel, table=True):
    """An operator's resolution of a key under review: the version it serves while the
    key stays AMBIGUOUS or CONTESTED (specification §7). The latest resolution replaces."""

    __tablename__ = "pin"

    key_id: str = Field(primary_key=True, max_length=ID)
    version_id: str = Field(max_length=ID)
    operator: str = Field(max_length=NAME)
    reason: str = Field(sa_type=Text)
    pinned_at: int = Field(sa_type=BigInteger)


class MemberRecordRow(SQLModel, table=True):
    """A member's signed record as this node last took it (specification §7): who it is, where it
    listens, its certificate, its incarnation and signature; `revoked` when the revocation
    list held names its certificate (kept, never dialed)."""

    __tablename__ = "member_record"

    node_id: str = Field(primary_key=True, max_length=NAME)
    address: str = Field(max_length=NAME)
    certificate: str = Field(sa_type=Text)  # PEM
    incarnation: int = Field(sa_type=BigInteger)
    signature: str = Field(sa_type=Text)  # hex
    revoked: bool = False


class SearchDocRow(SQLModel, table=True):
    """An active assertion as recall finds it (`SearchBeliefs`, specification §8): one row
    per assertion, removed with its evidence by an erasure or purge. On SQLite its words are
    in the FTS5 table `search_text` (rowid = `doc_id`; created by migration r29 beside this
    table); on PostgreSQL in `document`, weighted (value and subject A, predicate B,
    namespace C, source D) and indexed with GIN. Derived from the evidence: r29 builds it
    from the rows held then."""

    __tablename__ = "search_doc"
    __table_args__ = (
        Index("ix_search_doc_evidence", "evidence_id", unique=True),
        Index(
            "ix_search_doc_document",
            "document",
            postgresql_using="gin",
            # SQLite keeps its words in search_text: the column stays NULL, the index empty.
            sqlite_where=text("document IS NOT NULL"),
        ),
    )

    doc_id: int | None = Field(default=None, primary_key=True)
    evidence_id: str = Field(max_length=ID)
    document: str | None = Field(
        default=None, sa_type=Text().with_variant(TSVECTOR(), "postgresql")
    )


class SearchVectorRow(SQLModel, table=True):
    """A caller's vector of an active assertion (`SubmitFactRequest.embeddings`: one per
    field of an agent's memory, say), unit-normalised, in the embedder's `space`. SQLite:
    little-endian float32s; PostgreSQL: real[], which pgvector casts to its vector type.
    Removed with the evidence by an erasure or purge."""

    __tablename__ = "search_vector"
    __table_args__ = (
        # The newest vectors of a space first (`vector_matches`).
        Index("ix_search_vector_space", "space", "vector_id"),
        Index("ix_search_vector_evidence", "evidence_id"),
    )

    vector_id: int | None = Field(default=None, primary_key=True)
    evidence_id: str = Field(max_length=ID)
    space: str = Field(max_length=128)
    vector: bytes = Field(sa_type=LargeBinary().with_variant(ARRAY(REAL()), "postgresql"))


class ErasureReceiptRow(SQLModel, table=True):
    """A member's signed statement that it applied an erasure (specification §6, "Erasure
    receipts"): when, by its own clock, and how many pieces of evidence it removed. One per
    erasure and member, the latest; kept and gossiped. Holds ids and counts, never values."""

    __tablename__ = "erasure_receipt"

    erasure_id: str = Field(primary_key=True, max_length=ID)
    node_id: str = Field(primary_key=True, max_length=NAME)
    applied_at: int = Field(sa_type=BigInteger)
    removed: int = Field(sa_type=BigInteger)
    # The member's signature; None: this node's own (signed as it is offered).
    signature: bytes | None = Field(default=None, sa_type=LargeBinary)
