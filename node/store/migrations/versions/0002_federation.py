"""federation: votes, subject ids and origin times of relayed evidence

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from factnode.core import ids

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vote",
        sa.Column("voter", sa.String(length=256), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=256), nullable=False),
        sa.Column("subject", sa.String(length=256), nullable=False),
        sa.Column("predicate", sa.String(length=256), nullable=False),
        sa.Column("version_id", sa.String(length=32), nullable=True),
        sa.Column("evidence_id", sa.String(length=32), nullable=False),
        sa.Column("anchor", sa.Integer(), nullable=False),
        sa.Column("worth_milli", sa.Integer(), nullable=False),
        sa.Column("fresh_since", sa.BigInteger(), nullable=False),
        sa.Column("cast_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("voter", "key_id"),
    )
    with op.batch_alter_table("vote", schema=None) as batch_op:
        batch_op.create_index("ix_vote_evidence", ["evidence_id"], unique=False)
        batch_op.create_index("ix_vote_key", ["key_id"], unique=False)

    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.add_column(sa.Column("subject_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("origin_recorded_at", sa.BigInteger(), nullable=True))
        batch_op.create_index("ix_evidence_subject_id", ["subject_id"], unique=False)

    # Backfill subject ids so erasures by subject can match rows by hash.
    conn = op.get_bind()
    evidence = sa.table(
        "evidence",
        sa.column("namespace", sa.String),
        sa.column("subject", sa.String),
        sa.column("subject_id", sa.String),
    )
    pairs = conn.execute(sa.select(evidence.c.namespace, evidence.c.subject).distinct()).all()
    for namespace, subject in pairs:
        conn.execute(
            evidence.update()
            .where(evidence.c.namespace == namespace, evidence.c.subject == subject)
            .values(subject_id=ids.subject_id(namespace, subject))
        )


def downgrade() -> None:
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.drop_index("ix_evidence_subject_id")
        batch_op.drop_column("origin_recorded_at")
        batch_op.drop_column("subject_id")
    with op.batch_alter_table("vote", schema=None) as batch_op:
        batch_op.drop_index("ix_vote_key")
        batch_op.drop_index("ix_vote_evidence")
    op.drop_table("vote")
