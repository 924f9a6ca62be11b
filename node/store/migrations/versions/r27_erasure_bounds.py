"""erasure_bound: the signed bounds of erasures dated beyond a node's clock (specification §6)

Revision ID: r27_erasure_bounds
Revises: r26_served_touch
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r27_erasure_bounds"
down_revision = "r26_served_touch"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Tombstones a node bounded before this revision keep the erased_at it re-dated them to
    # (and no signature): their origin's copy is not known here any more.
    op.create_table(
        "erasure_bound",
        sa.Column("erasure_id", sa.String(length=32), nullable=False),
        sa.Column("node_id", sa.String(length=256), nullable=False),
        sa.Column("bound_at", sa.BigInteger(), nullable=False),
        sa.Column("signature", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("erasure_id", "node_id"),
    )


def downgrade() -> None:
    op.drop_table("erasure_bound")
