"""Row mapping: the tables' columns in a fixed order, the statements that read them, and
the conversions between rows (plain tuples, read by position on the hot paths) and the
core's types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select

from factnode.core import BeliefState, Evidence, EvidenceStatus, Key, Rule, ids
from factnode.core.consensus import Vote
from factnode.core.refresh import StoredBelief
from factnode.store._tables import (
    BeliefChangeRow,
    BeliefRow,
    ConfirmationRow,
    DecisionRow,
    ErasedEvidenceRow,
    ErasureBoundRow,
    ErasureReceiptRow,
    ErasureRow,
    EvidenceRow,
    NodeMetaRow,
    PinRow,
    ServedTouchRow,
    VoteRow,
)

# The tables by name from the models' metadata, typed as Table (`Model.__table__` is not).
_TABLES = EvidenceRow.metadata.tables
E = _TABLES[EvidenceRow.__tablename__]
C = _TABLES[ConfirmationRow.__tablename__]
D = _TABLES[DecisionRow.__tablename__]
B = _TABLES[BeliefRow.__tablename__]
BC = _TABLES[BeliefChangeRow.__tablename__]
ER = _TABLES[ErasureRow.__tablename__]
EE = _TABLES[ErasedEvidenceRow.__tablename__]
EB = _TABLES[ErasureBoundRow.__tablename__]
RC = _TABLES[ErasureReceiptRow.__tablename__]
M = _TABLES[NodeMetaRow.__tablename__]
V = _TABLES[VoteRow.__tablename__]
P = _TABLES[PinRow.__tablename__]
ST = _TABLES[ServedTouchRow.__tablename__]

# The evidence table's columns in one order: rows are read and written as tuples in it.
_EVIDENCE_COLUMNS = (
    "evidence_id",
    "key_id",
    "namespace",
    "subject",
    "predicate",
    "object",
    "version_id",
    "attribution",
    "source",
    "worth_milli",
    "confidence_milli",
    "valid_from",
    "valid_from_defaulted",
    "recorded_at",
    "origin_node",
    "corrects",
    "contradicts_namespace",
    "contradicts_subject",
    "contradicts_predicate",
    "anchor_cap",
    "idempotency_key",
    "status",
    "subject_id",
    "origin_recorded_at",
    "retracts",
    "contradicts_key_id",
    "confirmed_at",
)
_SELECT_EVIDENCE = select(*(E.c[name] for name in _EVIDENCE_COLUMNS))
_EVIDENCE_KEY_ID = _EVIDENCE_COLUMNS.index("key_id")
_EVIDENCE_STATUS = _EVIDENCE_COLUMNS.index("status")
_EVIDENCE_RETRACTS = _EVIDENCE_COLUMNS.index("retracts")
_EVIDENCE_CONTRADICTS_KEY_ID = _EVIDENCE_COLUMNS.index("contradicts_key_id")
_ACTIVE = EvidenceStatus.ACTIVE


def _evidence(row: Sequence[Any], key: Key | None = None) -> Evidence:
    """Evidence from a row of `_SELECT_EVIDENCE`, read by position (the hot read path);
    `key`, when the caller holds it, is the row's key (shared rather than built again)."""
    (
        evidence_id,
        _key_id,
        namespace,
        subject,
        predicate,
        obj,
        version_id,
        attribution,
        source,
        worth_milli,
        confidence_milli,
        valid_from,
        valid_from_defaulted,
        recorded_at,
        origin_node,
        corrects,
        contradicts_namespace,
        contradicts_subject,
        contradicts_predicate,
        anchor_cap,
        _idempotency_key,
        _status,
        _subject_id,
        origin_recorded_at,
        retracts,
        _contradicts_key_id,
        confirmed_at,
    ) = row
    return Evidence(
        evidence_id,
        Key(namespace, subject, predicate) if key is None else key,
        obj,
        version_id,
        attribution,
        source,
        worth_milli,
        confidence_milli,
        valid_from,
        bool(valid_from_defaulted),  # SQLite's driver reads a BOOLEAN column as 0 or 1
        recorded_at,
        origin_node,
        corrects,
        Key(contradicts_namespace, contradicts_subject, contradicts_predicate)
        if contradicts_namespace is not None
        else None,
        anchor_cap,
        origin_recorded_at,
        bool(retracts),
        confirmed_at=confirmed_at,
    )


# Rows carry each enum as its plain string: StrEnum members are their values, and str()
# gives them without the enum's attribute machinery (the write path's hottest loop).
def _evidence_values(
    e: Evidence, status: EvidenceStatus, idempotency_key: str | None
) -> tuple[Any, ...]:
    """One evidence row as a tuple in `_EVIDENCE_COLUMNS` order."""
    c = e.contradicts
    key = e.key
    return (
        e.evidence_id,
        ids.key_id(key),
        key.namespace,
        key.subject,
        key.predicate,
        e.object,
        e.version_id,
        e.attribution,
        e.source,
        e.worth_milli,
        e.confidence_milli,
        e.valid_from,
        e.valid_from_defaulted,
        e.recorded_at,
        e.origin_node,
        e.corrects,
        c.namespace if c else None,
        c.subject if c else None,
        c.predicate if c else None,
        e.anchor_cap,
        idempotency_key,
        str(status),
        ids.subject_id(key.namespace, key.subject),
        e.origin_recorded_at,
        e.retracts,
        ids.key_id(c) if c else None,
        e.confirmed_at,
    )


def _evidence_row(
    e: Evidence, status: EvidenceStatus, idempotency_key: str | None
) -> dict[str, Any]:
    return dict(zip(_EVIDENCE_COLUMNS, _evidence_values(e, status, idempotency_key), strict=True))


def _key(m: Any) -> Key:
    return Key(m["namespace"], m["subject"], m["predicate"])


# Belief rows with their value, and vote rows, read by position as the evidence rows are.
_SELECT_BELIEFS = (
    select(
        B.c.namespace,
        B.c.subject,
        B.c.predicate,
        B.c.version_id,
        E.c.object,
        B.c.evidence_id,
        B.c.rule,
        B.c.state,
        B.c.updated_at,
    )
    .select_from(B)
    .join(E, E.c.evidence_id == B.c.evidence_id)
)
_SELECT_VOTES = select(
    V.c.voter,
    V.c.namespace,
    V.c.subject,
    V.c.predicate,
    V.c.version_id,
    V.c.evidence_id,
    V.c.anchor,
    V.c.worth_milli,
    V.c.fresh_since,
    V.c.cast_at,
    V.c.seq,
    V.c.signature,
    V.c.equivocated,
)


def _stored_belief(row: Sequence[Any]) -> StoredBelief:
    namespace, subject, predicate, version_id, obj, evidence_id, rule, state, updated_at = row
    return StoredBelief(
        Key(namespace, subject, predicate),
        version_id,
        obj,
        evidence_id,
        Rule(rule),
        BeliefState(state),
        updated_at,
    )


def _vote(row: Sequence[Any]) -> Vote:
    (voter, namespace, subject, predicate, version_id, evidence_id, anchor, worth, fresh, cast) = (
        row[:10]
    )
    seq, signature, equivocated = row[10:13]
    return Vote(
        voter,
        Key(namespace, subject, predicate),
        version_id,
        evidence_id,
        anchor,
        worth,
        fresh,
        cast,
        seq or 0,
        bytes(signature) if signature else b"",
        bool(equivocated),
    )


def _vote_values(v: Vote) -> tuple[Any, ...]:
    return (
        v.voter,
        *_key_values(v.key),
        v.version_id,
        v.evidence_id,
        v.anchor,
        v.worth_milli,
        v.fresh_since,
        v.cast_at,
        v.seq,
        v.signature or None,
        v.equivocated,
    )


# Columns of the other tables the write path inserts, in the order of their value tuples.
_KEY_COLUMNS = ("key_id", "namespace", "subject", "predicate")
_DECISION_COLUMNS = (
    *_KEY_COLUMNS,
    "outcome",
    "rule",
    "decided_at",
    "evidence_id",
    "version_id",
    "supersedes",
    "detail",
)
_BELIEF_COLUMNS = (*_KEY_COLUMNS, "version_id", "evidence_id", "rule", "state", "updated_at")
_BELIEF_CHANGE_COLUMNS = (*_KEY_COLUMNS, "version_id", "state", "rule", "changed_at")
_VOTE_COLUMNS = (
    "voter",
    *_KEY_COLUMNS,
    "version_id",
    "evidence_id",
    "anchor",
    "worth_milli",
    "fresh_since",
    "cast_at",
    "seq",
    "signature",
    "equivocated",
)
_SELECT_EVIDENCE_ID = select(E.c.evidence_id)
_SELECT_ERASURES = select(ER)
_SELECT_ERASED_IDS = select(EE.c.erasure_id, EE.c.evidence_id)
_DELETE_BELIEFS = delete(B)


def _key_values(key: Key) -> tuple[str, str, str, str]:
    return (ids.key_id(key), key.namespace, key.subject, key.predicate)
