"""belief: an index for ListBeliefs pages (namespace, key_id, version_id)

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_belief_page", "belief", ["namespace", "key_id", "version_id"])


def downgrade() -> None:
    op.drop_index("ix_belief_page", table_name="belief")
