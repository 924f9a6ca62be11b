"""Alembic environment: runs on the connection the node hands it (never at import)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import factnode.store._tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from factnode.store.migrations import include_name

connection = context.config.attributes["connection"]


context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    include_name=include_name,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
