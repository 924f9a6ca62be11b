"""erasure: the node where it was made

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("erasure", schema=None) as batch_op:
        batch_op.add_column(sa.Column("origin_node", sa.String(length=256), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("erasure", schema=None) as batch_op:
        batch_op.drop_column("origin_node")
