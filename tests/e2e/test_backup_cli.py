"""Backing a node up (issue 28): `factnode export` / `import` move a node's evidence to a
fresh node through real processes with the CLI's exit codes, and `factnode backup` copies a
serving node's SQLite store so that the copy serves every fact acknowledged before it began."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

from _e2e import Cli, ServerProcess, isolated_env, start_server, unique_ns

from factnode.client import Client, NotFound

ANA = ("ana", "lives_in")


def _cli(server: ServerProcess, workdir: Path) -> Cli:
    return Cli(server.address, isolated_env(workdir / "home"))


def _start(workdir: Path, **kwargs: Any) -> ServerProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    return start_server(workdir, **kwargs)


def test_export_then_import_into_a_fresh_node(tmp_path: Path) -> None:
    """A node's export, imported into a fresh node started with its node id, serves the same
    belief; a second import (the node is no longer empty) exits 8, a damaged file exits 6,
    and the file's node id must match (exit 8, naming it)."""
    first = _start(tmp_path / "a")
    ns = unique_ns("user")
    try:
        cli = _cli(first, tmp_path / "a")
        cli.run("submit", ns, *ANA, "Porto", "--anchor", "user_stated", "--source", "ana",
                "--valid-from", "2025-01-10", "--confidence", "0.9")  # fmt: skip
        cli.run("submit", ns, *ANA, "Faro", "--anchor", "user_stated", "--source", "ana",
                "--valid-from", "2025-09-01", "--confidence", "0.9")  # fmt: skip
        exported = tmp_path / "node.jsonl"
        done = cli.json("export", str(exported))
        assert done["destination"] == str(exported) and done["bytes"] == exported.stat().st_size
        node_id = first.node_id
    finally:
        first.stop()
    (tmp_path / "b").mkdir()
    env = isolated_env(tmp_path / "b" / "home")
    env["FACTNODE_NODE_ID"] = node_id
    second = _start(tmp_path / "b", env=env)
    try:
        cli = _cli(second, tmp_path / "b")
        damaged = tmp_path / "damaged.jsonl"
        damaged.write_bytes(exported.read_bytes().replace(b"Faro", b"Fara"))
        bad = cli.run("import", str(damaged), check=6)
        assert "evidence_id: does not match" in bad.stderr
        restored = cli.json("import", str(exported))
        assert restored["evidence"] == 2 and restored["node_id"] == node_id
        got = cli.json("get", ns, *ANA)
        assert got["object"] == "Faro" and got["rule"] == "recency"
        again = cli.run("import", str(exported), check=8)
        assert "not empty" in again.stderr
    finally:
        second.stop()
    other = _start(tmp_path / "c")
    try:
        refused = _cli(other, tmp_path / "c").run("import", str(exported), check=8)
        assert f"node_id = '{node_id}'" in refused.stderr
    finally:
        other.stop()


def test_a_backup_under_write_load_serves_every_fact_acknowledged_before_it(
    tmp_path: Path,
) -> None:
    """While a writer keeps submitting, `factnode backup` copies the store; a node started on
    the copy serves every fact whose submission was acknowledged before the backup began."""
    server = _start(tmp_path / "a")
    ns = unique_ns("load")
    acknowledged: list[tuple[str, float]] = []  # (subject, when its ack arrived)
    stop = threading.Event()

    def write() -> None:
        with Client(server.address, timeout=10.0) as client:
            n = 0
            while not stop.is_set():
                subject = f"s{n}"
                client.submit((ns, subject, "value_is"), str(n), "user_stated", source="load")
                acknowledged.append((subject, time.monotonic()))
                n += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while len(acknowledged) < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        began = time.monotonic()
        before = [s for s, at in acknowledged if at < began]
        done = _cli(server, tmp_path / "a").json("backup", "under-load.db")
        time.sleep(0.5)  # writes carry on after the copy
    finally:
        stop.set()
        writer.join(timeout=30)
        server.stop()
    made = server.data_dir / "backups" / "under-load.db"
    assert done["destination"] == str(made) and done["bytes"] == made.stat().st_size
    assert len(before) >= 50 and len(acknowledged) > len(before)
    # The original is gone: only the copy remains, as the store of a new data directory.
    (tmp_path / "copy").mkdir()
    shutil.move(made, tmp_path / "copy" / "factnode.db")
    shutil.rmtree(server.data_dir)
    restored = _start(tmp_path / "b", data_dir=tmp_path / "copy")
    try:
        assert restored.node_id == server.node_id
        with Client(restored.address, timeout=10.0) as client:
            missing = []
            for subject in before:
                try:
                    client.belief((ns, subject, "value_is"))
                except NotFound:
                    missing.append(subject)
        assert missing == []
    finally:
        restored.stop()


def test_backup_refuses_a_name_that_is_taken_or_names_a_directory(tmp_path: Path) -> None:
    """`factnode backup` exits 6 naming `name` for a name already in the backup directory
    (which it leaves as it was) and for a name with a directory in it."""
    server = _start(tmp_path / "a")
    try:
        cli = _cli(server, tmp_path / "a")
        cli.run("backup", "first.db")
        taken = server.data_dir / "backups" / "first.db"
        size = taken.stat().st_size
        result = cli.run("backup", "first.db", check=6)
        assert "name" in result.stderr and "exists" in result.stderr
        assert taken.stat().st_size == size
        outside = cli.run("backup", "../outside.db", check=6)
        assert "without a directory" in outside.stderr
        assert not (server.data_dir / "outside.db").exists()
    finally:
        server.stop()
