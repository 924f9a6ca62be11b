"""One process per SQLite store: the node holds its store's lock file while it runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from factnode.config import ConfigError, Settings
from factnode.server.app import Node, start_node
from factnode.store import StoreInUse, StoreLock


async def test_a_second_node_on_a_store_in_use_is_refused_until_the_first_stops(
    tmp_path: Path,
) -> None:
    """A second node on a running node's data directory fails to start with a ConfigError
    naming data_dir and the holder (pid and bound address); once the first stops it starts."""
    settings = Settings(listen="127.0.0.1:0", data_dir=tmp_path)
    first, port = await start_node(settings)
    try:
        with pytest.raises(ConfigError) as refused:
            await start_node(settings)
        assert refused.value.setting == "data_dir"
        assert str(tmp_path.resolve()) in refused.value.reason
        assert f"pid {os.getpid()}, listening on 127.0.0.1:{port}" in refused.value.reason
    finally:
        await first.stop(0)
    again = Node(settings)
    try:
        assert again.node_id == first.node_id
    finally:
        await again.stop(0)


def test_the_lock_names_a_holder_that_has_not_written_its_record_yet(tmp_path: Path) -> None:
    """A holder caught between taking the lock and writing its pid is still refused clearly."""
    database = tmp_path / "factnode.db"
    held = StoreLock(database, "127.0.0.1:1")
    try:
        os.truncate(tmp_path / "factnode.db.lock", 0)  # as just after its flock
        with pytest.raises(StoreInUse) as refused:
            StoreLock(database, "127.0.0.1:2")
        assert "has not written its pid yet" in str(refused.value)
    finally:
        held.release()
    mine = StoreLock(database, "127.0.0.1:3")
    try:
        record = json.loads((tmp_path / "factnode.db.lock").read_text())
        assert record == {"pid": os.getpid(), "listen": "127.0.0.1:3"}
    finally:
        mine.release()
        mine.release()  # a second release does nothing


def test_an_in_memory_store_takes_no_lock(tmp_path: Path) -> None:
    """Only a SQLite file is a store another process could open."""
    node = Node(Settings(listen="127.0.0.1:0", data_dir=tmp_path, database_url="sqlite://"))
    try:
        assert node.store_lock is None
        assert not list(tmp_path.glob("*.lock"))
    finally:
        node.repo.close()
