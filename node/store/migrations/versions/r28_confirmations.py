"""confirmation: decay closes a claim from its last confirmation (specification §6)

Revision ID: r28_confirmations
Revises: r27_erasure_bounds

Before this revision the decay job marked evidence whose age, counted from its event time,
had decayed below min_confidence as DECAYED: it left beliefs, votes, history and time
travel, but its row was kept whole. Decay is now a pure function of the evidence and its
confirmations, so that status means nothing any more: upgrading makes such evidence ACTIVE
again (every view then counts it up to its expiry, counted from when it was recorded), and
nothing was lost. Downgrading drops the confirmations (restatements are no longer told
apart from duplicates) and leaves every row ACTIVE; the older version's decay job marks
again what it counts as cold the next time it runs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r28_confirmations"
down_revision = "r27_erasure_bounds"
branch_labels = None
depends_on = None

# Set when evidence the old decay marked is held again: its keys are recomputed at open.
RECOUNT_META = "recount_after_r28"


def upgrade() -> None:
    op.create_table(
        "confirmation",
        sa.Column("evidence_id", sa.String(length=32), nullable=False),
        sa.Column("signer", sa.String(length=256), nullable=False),
        sa.Column("confirmed_at", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("signature", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("evidence_id", "signer", "confirmed_at"),
    )
    with op.batch_alter_table("evidence") as batch:
        batch.add_column(sa.Column("confirmed_at", sa.BigInteger(), nullable=True))
    # The old decay also emptied the served rows of what it marked: the node works them out
    # again when it next opens the store (`Forgetting.recount_after_upgrade`).
    op.execute(
        f"INSERT INTO node_meta (name, value) SELECT '{RECOUNT_META}', '1' "
        "WHERE EXISTS (SELECT 1 FROM evidence WHERE status = 'DECAYED')"
    )
    op.execute("UPDATE evidence SET status = 'ACTIVE' WHERE status = 'DECAYED'")


def downgrade() -> None:
    op.execute(f"DELETE FROM node_meta WHERE name = '{RECOUNT_META}'")
    with op.batch_alter_table("evidence") as batch:
        batch.drop_column("confirmed_at")
    op.drop_table("confirmation")
