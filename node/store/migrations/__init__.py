"""Alembic migrations: a newer factnode opens an older database without losing data."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

_HERE = Path(__file__).parent


def alembic_config() -> Config:
    """Alembic configuration pointing at this package's scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Brings the schema at `engine` up to `revision`."""
    cfg = alembic_config()
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        conn.commit()
