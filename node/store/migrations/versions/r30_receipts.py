"""erasure_receipt: every member's signed receipt of the erasures it applied (specification §6)

Revision ID: r30_receipts
Revises: r29_search

A member that applies a tombstone signs a receipt (the erasure, itself, when, how many pieces
of evidence it removed) that gossips like votes, so an operator sees which members have
confirmed an erasure. Upgrading adds the table with this node's own receipt of every erasure
it already holds, dated when the erasure was made and counting the evidence ids its
tombstone lists (the best count the node kept; it signs them as it offers them), so old
erasures show this node as confirmed rather than waited for. Downgrading drops the table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r30_receipts"
down_revision = "r29_search"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "erasure_receipt",
        sa.Column("erasure_id", sa.String(length=32), nullable=False),
        sa.Column("node_id", sa.String(length=256), nullable=False),
        sa.Column("applied_at", sa.BigInteger(), nullable=False),
        sa.Column("removed", sa.BigInteger(), nullable=False),
        sa.Column("signature", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("erasure_id", "node_id"),
    )
    op.execute(
        "INSERT INTO erasure_receipt (erasure_id, node_id, applied_at, removed) "
        "SELECT e.erasure_id, m.value, e.erased_at, e.evidence_count "
        "FROM erasure e JOIN node_meta m ON m.name = 'node_id'"
    )


def downgrade() -> None:
    op.drop_table("erasure_receipt")
