"""Start-up failures of `factnode serve`: one clean line on stderr and exit 2, no traceback."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from _e2e import CLI_TIMEOUT, factnode_command, isolated_env

EXIT_USAGE = 2


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Runs `factnode serve` expecting it to refuse to start; returns its one stderr line."""
    full_env = isolated_env(tmp_path / "home")
    full_env.update(env or {})
    proc = subprocess.run(
        factnode_command("serve", "--data-dir", str(tmp_path / "data"), *args),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        env=full_env,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("factnode serve: setting "), lines
    return lines[0]


def test_busy_port_is_one_line_naming_listen(tmp_path: Path) -> None:
    """A port another process holds is refused as setting 'listen', in one line."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line = serve(tmp_path, "--listen", f"127.0.0.1:{port}")
    assert "'listen'" in line and str(port) in line


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_certificate_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    """A TLS certificate that cannot be read names its setting and path, in one line."""
    cert = tmp_path / "node.crt"
    if kind == "directory":
        cert.mkdir()
    key = tmp_path / "node.key"
    key.write_text("not read: the certificate fails first or alone\n")
    env = {"FACTNODE_TLS_CERT": str(cert), "FACTNODE_TLS_KEY": str(key)}
    line = serve(tmp_path, "--listen", "127.0.0.1:0", env=env)
    assert "'tls_cert'" in line and str(cert) in line


def test_unreachable_database_is_one_line_without_credentials(tmp_path: Path) -> None:
    """A database that refuses connections is one line naming database_url, password hidden."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://factnode:s3cret@127.0.0.1:{port}/factnode"
    line = serve(tmp_path, "--listen", "127.0.0.1:0", "--database-url", url)
    assert "'database_url'" in line and "s3cret" not in line


@pytest.mark.parametrize(
    "config",
    [
        ["listen = "],  # not TOML
        ['listen = "127.0.0.1:0"', "max_message_bytes = -1"],
    ],
)
def test_bad_config_is_one_line(tmp_path: Path, config: Sequence[str]) -> None:
    """A config file that does not parse or holds a bad value is one line naming the setting."""
    path = tmp_path / "factnode.toml"
    path.write_text("\n".join(config) + "\n")
    serve(tmp_path, "--config", str(path))
