"""member_record: the signed records of the federation's members (specification §7)

Revision ID: 0009_members
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_members"
down_revision = "0009_signed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "member_record",
        sa.Column("node_id", sa.String(length=256), nullable=False),
        sa.Column("address", sa.String(length=256), nullable=False),
        sa.Column("certificate", sa.Text(), nullable=False),
        sa.Column("incarnation", sa.BigInteger(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("node_id"),
    )


def downgrade() -> None:
    op.drop_table("member_record")
