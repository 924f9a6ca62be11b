"""One process per SQLite store: a second `factnode serve` on a data directory in use refuses
to start, naming the holder; the lock goes with its holder, kill -9 included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from _e2e import CLI_TIMEOUT, factnode_command, isolated_env, start_server

EXIT_USAGE = 2


def test_a_second_serve_on_one_store_exits_2_naming_the_holder_until_it_dies(
    tmp_path: Path,
) -> None:
    """The second `serve` exits 2 with one line naming the data directory and the first's
    pid and listen address; after kill -9 of the first, `serve` starts again on the store
    (the same node) without any clean-up."""
    data_dir = tmp_path / "data"
    first = start_server(tmp_path, data_dir=data_dir)
    try:
        second = subprocess.run(
            factnode_command("serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0"),
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            env=isolated_env(tmp_path / "home"),
        )
        lines = second.stderr.strip().splitlines()
        assert second.returncode == EXIT_USAGE, second.stderr
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        line = lines[0]
        assert line.startswith("factnode serve: setting 'data_dir': "), line
        assert str(data_dir.resolve()) in line
        assert f"pid {first.proc.pid}" in line and first.address in line, line
        assert "listening on" not in second.stdout  # it never served
        first.kill()
    finally:
        first.kill()  # a no-op once killed
    # The dead holder's record is still in the file; its lock went with it.
    lock_file = data_dir / "factnode.db.lock"
    assert json.loads(lock_file.read_text())["pid"] == first.proc.pid
    again = start_server(tmp_path, data_dir=data_dir)
    try:
        assert again.node_id == first.node_id
        held = json.loads(lock_file.read_text())
        assert held == {"pid": again.proc.pid, "listen": again.address}
    finally:
        code = again.stop()
    assert code == 0, again.output()
