"""fewer index entries per fact: partial indexes where most rows are NULL, one unused dropped

Every index left is named by a query plan (bench/index_plans.py; bench/README.md, issue 25):
- evidence (namespace, subject) goes: erasure by subject now finds evidence by its
  subject_id, which ix_evidence_subject_id serves;
- belief (namespace, subject, predicate) becomes (namespace, subject, key_id, version_id):
  a ListBeliefs page of one subject is read in its own order (SQLite used ix_belief_page
  and filtered the whole namespace by subject; PostgreSQL sorted the subject's rows);
- evidence's idempotency_key, contradicts_key_id and corrects indexes become partial
  (WHERE ... IS NOT NULL): most evidence has none of them, and such a row then writes no
  entry in them; every lookup compares the column, which implies NOT NULL, so the plans
  still use them.

Revision ID: 0009_rows
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_rows"
down_revision = "0008"
branch_labels = None
depends_on = None

# (index, column, unique) made partial on the evidence table.
_PARTIAL = (
    ("ix_evidence_idempotency", "idempotency_key", True),
    ("ix_evidence_contradicts_key_id", "contradicts_key_id", False),
    ("ix_evidence_corrects", "corrects", False),
)


def upgrade() -> None:
    op.drop_index("ix_evidence_subject", table_name="evidence")
    op.drop_index("ix_belief_subject", table_name="belief")
    op.create_index(
        "ix_belief_subject_page", "belief", ["namespace", "subject", "key_id", "version_id"]
    )
    for name, column, unique in _PARTIAL:
        op.drop_index(name, table_name="evidence")
        where = sa.text(f"{column} IS NOT NULL")
        op.create_index(
            name,
            "evidence",
            [column],
            unique=unique,
            sqlite_where=where,
            postgresql_where=where,
        )


def downgrade() -> None:
    for name, column, unique in _PARTIAL:
        op.drop_index(name, table_name="evidence")
        op.create_index(name, "evidence", [column], unique=unique)
    op.drop_index("ix_belief_subject_page", table_name="belief")
    op.create_index("ix_belief_subject", "belief", ["namespace", "subject", "predicate"])
    op.create_index("ix_evidence_subject", "evidence", ["namespace", "subject"])
