"""Alembic migrations: a newer factnode opens an older database without losing data."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

_HERE = Path(__file__).parent

# The advisory lock key held while a PostgreSQL database is migrated.
MIGRATION_LOCK = 7210433


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """What schema comparisons look at: all but SQLite's FTS5 table of recall's words
    (`search_text` and its shadow tables), which migration r29 makes by hand and no SQLModel
    table stands for."""
    return not (type_ == "table" and name is not None and name.startswith("search_text"))


def alembic_config() -> Config:
    """Alembic configuration pointing at this package's scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Brings the schema at `engine` up to `revision`."""
    cfg = alembic_config()
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            # Replicas starting together on a new database migrate it one at a time: the
            # others wait, then find it at head. Released at the commit below.
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        conn.commit()
