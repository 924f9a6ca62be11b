"""served_touch: the keys each write changed, for PostgreSQL replicas' memories (issue 26)

Revision ID: r26_served_touch
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r26_served_touch"
down_revision = "0009_members"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "served_touch",
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
    )


def downgrade() -> None:
    op.drop_table("served_touch")
