"""retractions are evidence: the retraction table's rows move into `evidence`

A retraction becomes evidence with `retracts` true (specification §5), decided by the rules,
replicated and erased like any evidence. Each stored retraction row becomes retraction
evidence attributed `codebase_verified`, source `migrated:retraction`, worth and confidence
1, dated at its `at`, so that it keeps ending what it ended (the rule order gives it the top
anchor; only `codebase_verified` evidence stated at the same instant with full confidence
could stand against it). A row whose key or version no longer has any evidence here ends
nothing and is dropped. Rows get `contradicts_key_id`, so a key's state loads what other keys
say against it with one indexed query. The id formula is written out here, not imported, so
this step stays what it was when later versions change the code.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_MIGRATED_ANCHOR = "codebase_verified"
_MIGRATED_SOURCE = "migrated:retraction"


def _digest(kind: str, *parts: str) -> str:
    h = hashlib.sha256(kind.encode())
    for part in parts:
        raw = part.encode("utf-8")
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.hexdigest()[:32]


def _bump_generation(conn: sa.Connection) -> None:
    # A write cache warmed before this step must not serve states from the old layout.
    conn.execute(
        sa.text("UPDATE node_meta SET value = value || :mark WHERE name = 'write_generation'"),
        {"mark": "/0007"},
    )


def upgrade() -> None:
    conn = op.get_bind()
    _add_contradicts_key_id(conn)
    rows = _retraction_evidence(conn)
    held = {r[0] for r in conn.execute(sa.text("SELECT evidence_id FROM evidence"))}
    fresh = [r for eid, r in rows.items() if eid not in held]
    if fresh:
        conn.execute(
            sa.text(
                "INSERT INTO evidence (evidence_id, key_id, namespace, subject, predicate, "
                "object, version_id, attribution, source, worth_milli, confidence_milli, "
                "valid_from, valid_from_defaulted, recorded_at, origin_node, status, "
                "subject_id, retracts) VALUES (:evidence_id, :key_id, :namespace, :subject, "
                ":predicate, :object, :version_id, :attribution, :source, :worth_milli, "
                ":confidence_milli, :valid_from, :valid_from_defaulted, :recorded_at, "
                ":origin_node, :status, :subject_id, :retracts)"
            ),
            fresh,
        )
    with op.batch_alter_table("retraction", schema=None) as batch_op:
        batch_op.drop_index("ix_retraction_key_id")
    op.drop_table("retraction")
    # The default only filled the rows already there; the node always writes the column.
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.alter_column("retracts", server_default=None)
    _bump_generation(conn)


def _add_contradicts_key_id(conn: sa.Connection) -> None:
    """The new columns and indexes, and each contradiction's key id filled in."""
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("retracts", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("contradicts_key_id", sa.String(length=32), nullable=True))
        batch_op.create_index(
            "ix_evidence_contradicts_key_id", ["contradicts_key_id"], unique=False
        )
        batch_op.create_index("ix_evidence_corrects", ["corrects"], unique=False)
    contradicting = conn.execute(
        sa.text(
            "SELECT DISTINCT contradicts_namespace, contradicts_subject, contradicts_predicate "
            "FROM evidence WHERE contradicts_namespace IS NOT NULL"
        )
    ).all()
    if contradicting:
        conn.execute(
            sa.text(
                "UPDATE evidence SET contradicts_key_id = :kid WHERE contradicts_namespace = :ns "
                "AND contradicts_subject = :s AND contradicts_predicate = :p"
            ),
            [
                {"kid": _digest("key", ns, s, p), "ns": ns, "s": s, "p": p}
                for ns, s, p in contradicting
            ],
        )


def _retraction_evidence(conn: sa.Connection) -> dict[str, dict[str, object]]:
    """Each retraction row that still ends something, as the evidence row it becomes (by id)."""
    node = conn.execute(sa.text("SELECT value FROM node_meta WHERE name = 'node_id'")).scalar()
    keys = {
        kid: (ns, s, p)
        for kid, ns, s, p in conn.execute(
            sa.text("SELECT DISTINCT key_id, namespace, subject, predicate FROM evidence")
        )
    }
    objects = {
        vid: obj
        for vid, obj in conn.execute(sa.text("SELECT DISTINCT version_id, object FROM evidence"))
    }
    rows: dict[str, dict[str, object]] = {}
    for key_id, version_id, at, recorded_at in conn.execute(
        sa.text("SELECT key_id, version_id, at, recorded_at FROM retraction ORDER BY id")
    ):
        if key_id not in keys or (version_id is not None and version_id not in objects):
            continue  # nothing here for it to end
        obj = objects[version_id] if version_id is not None else ""
        row = _evidence_row(key_id, keys[key_id], obj, version_id, at, recorded_at, node or "")
        rows.setdefault(str(row["evidence_id"]), row)
    return rows


def _evidence_row(
    key_id: str,
    key: tuple[str, str, str],
    obj: str,
    version_id: str | None,
    at: int,
    recorded_at: int,
    node: str,
) -> dict[str, object]:
    """A retraction row as retraction evidence (the module's docstring says how)."""
    ns, s, p = key
    eid = _digest(
        "retraction/1",
        ns,
        s,
        p,
        obj,
        _MIGRATED_ANCHOR,
        _MIGRATED_SOURCE,
        str(at),
        "1000",
        "1000",
        "",
        "",
        "",
        "",
    )
    return {
        "evidence_id": eid,
        "key_id": key_id,
        "namespace": ns,
        "subject": s,
        "predicate": p,
        "object": obj,
        "version_id": version_id or "",
        "attribution": _MIGRATED_ANCHOR,
        "source": _MIGRATED_SOURCE,
        "worth_milli": 1000,
        "confidence_milli": 1000,
        "valid_from": at,
        "valid_from_defaulted": False,
        "recorded_at": recorded_at,
        "origin_node": node,
        "status": "ACTIVE",
        "subject_id": _digest("subject", ns, s),
        "retracts": True,
    }


def downgrade() -> None:
    conn = op.get_bind()
    op.create_table(
        "retraction",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("version_id", sa.String(length=32), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("retraction", schema=None) as batch_op:
        batch_op.create_index("ix_retraction_key_id", ["key_id"], unique=False)
    # The first form knows no attribution: every active retraction ends what it covers.
    conn.execute(
        sa.text(
            "INSERT INTO retraction (key_id, version_id, at, recorded_at, reason) "
            "SELECT key_id, CASE WHEN version_id = '' THEN NULL ELSE version_id END, "
            "valid_from, recorded_at, source FROM evidence "
            "WHERE retracts = :yes AND status = 'ACTIVE' ORDER BY recorded_at, evidence_id"
        ),
        {"yes": True},
    )
    conn.execute(sa.text("DELETE FROM evidence WHERE retracts = :yes"), {"yes": True})
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.drop_index("ix_evidence_corrects")
        batch_op.drop_index("ix_evidence_contradicts_key_id")
        batch_op.drop_column("contradicts_key_id")
        batch_op.drop_column("retracts")
    _bump_generation(conn)
