"""signed data: votes carry their voter's sequence number and signature; relayed evidence's
signature by its origin; tombstones' by theirs; equivocation proofs

Votes stored before this revision have seq 0 and no signature: a node re-signs its own on
open (`Ledger.sign_own_votes`), and peers' unsigned votes stop counting on their next
round, when the signed ones replace them (specification §7).

Revision ID: 0009_signed
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_signed"
down_revision = "0009_rows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("vote") as batch:
        batch.add_column(sa.Column("seq", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("signature", sa.LargeBinary(), nullable=True))
        batch.add_column(
            sa.Column("equivocated", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("erasure") as batch:
        batch.add_column(sa.Column("signature", sa.LargeBinary(), nullable=True))
    op.create_table(
        "evidence_signature",
        sa.Column("evidence_id", sa.String(length=32), nullable=False),
        sa.Column("signature", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("evidence_id"),
    )
    op.create_table(
        "equivocation",
        sa.Column("voter", sa.String(length=256), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=256), nullable=False),
        sa.Column("subject", sa.String(length=256), nullable=False),
        sa.Column("predicate", sa.String(length=256), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("first", sa.Text(), nullable=False),
        sa.Column("second", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("voter", "key_id"),
    )


def downgrade() -> None:
    op.drop_table("equivocation")
    op.drop_table("evidence_signature")
    with op.batch_alter_table("erasure") as batch:
        batch.drop_column("signature")
    with op.batch_alter_table("vote") as batch:
        batch.drop_column("equivocated")
        batch.drop_column("signature")
        batch.drop_column("seq")
