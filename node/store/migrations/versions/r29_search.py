"""search_doc: recall's index of every active assertion's words (specification §8)

Revision ID: r29_search
Revises: r28_confirmations

SearchBeliefs finds beliefs by the words of their key, value and source, and by the
vectors callers send with their facts (search_vector, empty at first). Each active
assertion gets a search_doc row; on SQLite its words go into the FTS5 table search_text
(rowid = doc_id), on PostgreSQL into the weighted tsvector column `document` with a GIN
index. Upgrading indexes every active assertion held; downgrading drops the index (nothing
else refers to it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "r29_search"
down_revision = "r28_confirmations"
branch_labels = None
depends_on = None

# Kept here as written on the day, not imported: a migration must not change with the code.
_FTS = (
    "CREATE VIRTUAL TABLE search_text USING fts5("
    "namespace, subject, predicate, object, source, "
    "tokenize = 'porter unicode61 remove_diacritics 2')"
)
# Words split as a query's are (letters and digits), then weighted.
_PG_DOCUMENT = " || ".join(
    f"setweight(to_tsvector('english', regexp_replace(e.{part}, '[^[:alnum:]]+', ' ', 'g')), "
    f"'{weight}')"
    for part, weight in (
        ("object", "A"),
        ("subject", "A"),
        ("predicate", "B"),
        ("namespace", "C"),
        ("source", "D"),
    )
)
_HELD = "e.status = 'ACTIVE' AND NOT e.retracts"


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "search_doc",
        sa.Column("doc_id", sa.Integer(), nullable=False),
        sa.Column("evidence_id", sa.String(length=32), nullable=False),
        sa.Column(
            "document", sa.Text().with_variant(postgresql.TSVECTOR(), "postgresql"), nullable=True
        ),
        sa.PrimaryKeyConstraint("doc_id"),
    )
    op.create_table(
        "search_vector",
        sa.Column("vector_id", sa.Integer(), nullable=False),
        sa.Column("evidence_id", sa.String(length=32), nullable=False),
        sa.Column("space", sa.String(length=128), nullable=False),
        sa.Column(
            "vector",
            sa.LargeBinary().with_variant(postgresql.ARRAY(postgresql.REAL()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("vector_id"),
    )
    op.create_index("ix_search_vector_space", "search_vector", ["space", "vector_id"])
    op.create_index("ix_search_vector_evidence", "search_vector", ["evidence_id"])
    op.create_index("ix_search_doc_evidence", "search_doc", ["evidence_id"], unique=True)
    op.create_index(
        "ix_search_doc_document",
        "search_doc",
        ["document"],
        postgresql_using="gin",
        sqlite_where=sa.text("document IS NOT NULL"),
    )
    if sqlite:
        op.execute(_FTS)
        # `rank` is BM25 with these column weights: the value and the subject say most of
        # what a belief is about, the source least (namespace, subject, predicate, object,
        # source).
        op.execute(
            "INSERT INTO search_text (search_text, rank) "
            "VALUES ('rank', 'bm25(1.0, 3.0, 2.0, 4.0, 0.5)')"
        )
        op.execute(
            "INSERT INTO search_doc (evidence_id) SELECT e.evidence_id FROM evidence e "
            f"WHERE {_HELD} ORDER BY e.recorded_at, e.evidence_id"
        )
        op.execute(
            "INSERT INTO search_text (rowid, namespace, subject, predicate, object, source) "
            "SELECT d.doc_id, e.namespace, e.subject, e.predicate, e.object, e.source "
            "FROM search_doc d JOIN evidence e ON e.evidence_id = d.evidence_id"
        )
    else:
        op.execute(
            "INSERT INTO search_doc (evidence_id, document) "
            f"SELECT e.evidence_id, {_PG_DOCUMENT} FROM evidence e WHERE {_HELD} "
            "ORDER BY e.recorded_at, e.evidence_id"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE search_text")
    op.drop_index("ix_search_vector_evidence", table_name="search_vector")
    op.drop_index("ix_search_vector_space", table_name="search_vector")
    op.drop_table("search_vector")
    op.drop_index("ix_search_doc_document", table_name="search_doc")
    op.drop_index("ix_search_doc_evidence", table_name="search_doc")
    op.drop_table("search_doc")
