"""decision log: drop the index on evidence_id

Only an erasure looks decisions up by evidence, and it finds them through the key index;
the extra index cost every write a random insert into a table that only grows.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("decision", schema=None) as batch_op:
        batch_op.drop_index("ix_decision_evidence_id")


def downgrade() -> None:
    with op.batch_alter_table("decision", schema=None) as batch_op:
        batch_op.create_index("ix_decision_evidence_id", ["evidence_id"], unique=False)
