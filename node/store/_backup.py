"""A consistent physical copy of a SQLite store, taken while the node serves."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from sqlalchemy import Engine


def copy_sqlite(engine: Engine, destination: Path) -> int:
    """Copies the store behind `engine` to `destination` with SQLite's online backup API and
    returns the copy's size in bytes. The copy is made in one step, so it is the database as
    one read transaction saw it: every write committed before the copy began, none after.
    In WAL mode writers carry on meanwhile. It is written beside `destination` and renamed
    into place, so a copy that fails half way never looks complete."""
    partial = destination.with_name(destination.name + ".partial")
    raw = engine.raw_connection()
    try:
        source = raw.driver_connection
        assert isinstance(source, sqlite3.Connection)
        target = sqlite3.connect(partial)
        try:
            source.backup(target)  # pages=-1: every page in one step, one snapshot
        finally:
            target.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        raw.close()
    os.replace(partial, destination)
    return destination.stat().st_size
