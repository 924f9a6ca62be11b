"""evidence ids cover everything arbitration reads (worth, confidence, corrects, contradicts)

Every stored evidence id is recomputed with the second form and every reference to it
(corrections, decisions, served beliefs, votes) follows. Nothing is lost: only ids change.
The formula is written out here, not imported, so this step stays what it was when later
versions change the code.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_COLUMNS = (
    "evidence_id, namespace, subject, predicate, object, attribution, source, valid_from, "
    "worth_milli, confidence_milli, corrects, contradicts_namespace, contradicts_subject, "
    "contradicts_predicate"
)
# Tables holding an evidence id that refers to a row of `evidence`.
_REFERENCES = (("decision", "evidence_id"), ("belief", "evidence_id"), ("vote", "evidence_id"))


def _digest(kind: str, *parts: str) -> str:
    h = hashlib.sha256(kind.encode())
    for part in parts:
        raw = part.encode("utf-8")
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.hexdigest()[:32]


def _new_ids(rows: Sequence[Any]) -> dict[str, str]:
    """Old id -> new id; a correction's id covers the new id of what it corrects."""
    by_old = {r.evidence_id: r for r in rows}
    out: dict[str, str] = {}

    def new_id(old: str, depth: int = 0) -> str:
        if old in out:
            return out[old]
        r = by_old[old]
        corrects = r.corrects or ""
        if corrects in by_old and depth < 10_000:
            corrects = new_id(corrects, depth + 1)
        contradicts = (
            (r.contradicts_namespace, r.contradicts_subject, r.contradicts_predicate)
            if r.contradicts_namespace is not None
            else ("", "", "")
        )
        out[old] = _digest(
            "evidence/2",
            r.namespace,
            r.subject,
            r.predicate,
            r.object,
            r.attribution,
            r.source,
            str(r.valid_from),
            str(r.worth_milli),
            str(r.confidence_milli),
            corrects,
            *contradicts,
        )
        return out[old]

    for old in by_old:
        new_id(old)
    return out


def _first_form_ids(rows: Sequence[Any]) -> dict[str, str]:
    """New id -> id of the first form (key, object, attribution, source, event time)."""
    return {
        r.evidence_id: _digest(
            "evidence",
            r.namespace,
            r.subject,
            r.predicate,
            r.object,
            r.attribution,
            r.source,
            str(r.valid_from),
        )
        for r in rows
    }


def _rewrite(mapping: dict[str, str]) -> None:
    """Replaces every evidence id, and every reference to one, by `mapping`."""
    conn = op.get_bind()
    pairs = [{"old": old, "new": new} for old, new in mapping.items() if old != new]
    if not pairs:
        return
    conn.execute(sa.text("UPDATE evidence SET evidence_id = :new WHERE evidence_id = :old"), pairs)
    conn.execute(sa.text("UPDATE evidence SET corrects = :new WHERE corrects = :old"), pairs)
    for table, column in _REFERENCES:
        conn.execute(sa.text(f"UPDATE {table} SET {column} = :new WHERE {column} = :old"), pairs)
    # A write cache warmed before this step must not serve states keyed by the old ids.
    conn.execute(
        sa.text("UPDATE node_meta SET value = value || :mark WHERE name = 'write_generation'"),
        {"mark": "/0005"},
    )


def _rows() -> Sequence[Any]:
    return op.get_bind().execute(sa.text(f"SELECT {_COLUMNS} FROM evidence")).all()


def upgrade() -> None:
    _rewrite(_new_ids(_rows()))


def downgrade() -> None:
    mapping = _first_form_ids(_rows())
    if len(set(mapping.values())) < len(mapping):
        raise RuntimeError(
            "cannot downgrade below 0005: this store holds one statement with several worths "
            "or confidences, which the first id form cannot tell apart"
        )
    _rewrite(mapping)
