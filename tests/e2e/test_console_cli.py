"""`factnode console` as a process: it announces its URL, serves the pages of a real node,
refuses a bad --listen, and stops on SIGTERM."""

from __future__ import annotations

import queue
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from _e2e import CLI_TIMEOUT, START_TIMEOUT, ServerProcess, factnode_command, isolated_env
from _processes import stop_process

EXIT_USAGE = 2


def first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The process's first stdout line, waiting at most `timeout` seconds."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        raise AssertionError(f"no announcement within {timeout}s") from None


def test_console_serves_a_node_and_stops_on_sigterm(server: ServerProcess, tmp_path: Path) -> None:
    """The console prints where it serves, shows the node's id on /node, and exits 0 on SIGTERM."""
    proc = subprocess.Popen(
        factnode_command("console", "--address", server.address, "--listen", "127.0.0.1:0"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=isolated_env(tmp_path / "home"),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = first_line(proc, START_TIMEOUT)
        assert line.startswith("factnode console on http://127.0.0.1:"), line
        url = line.split()[3]
        assert line.endswith(f"for the node at {server.address}")
        page = httpx.get(f"{url}/node", timeout=CLI_TIMEOUT)
        assert page.status_code == 200 and server.node_id in page.text
        assert httpx.get(f"{url}/static/htmx.min.js", timeout=CLI_TIMEOUT).status_code == 200
    finally:
        code = stop_process(proc, signal.SIGTERM)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert code == 0


@pytest.mark.parametrize("listen", ["7480", "localhost:http", ":7480"])
def test_console_refuses_a_listen_address_it_cannot_read(listen: str, tmp_path: Path) -> None:
    """A --listen that is not HOST:PORT exits 2 naming the option, before serving anything."""
    done = subprocess.run(
        factnode_command("console", "--listen", listen), capture_output=True, text=True,
        timeout=CLI_TIMEOUT, env=isolated_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == EXIT_USAGE
    assert "--listen must be HOST:PORT" in done.stderr


def test_console_on_a_taken_port_says_so(tmp_path: Path) -> None:
    """A port already in use exits 2 with the reason, not a traceback."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            factnode_command("console", "--listen", f"127.0.0.1:{port}"), capture_output=True,
            text=True, timeout=CLI_TIMEOUT, env=isolated_env(tmp_path / "home"),
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == EXIT_USAGE
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_wildcard_listen_without_host_names_refuses_to_start(tmp_path: Path) -> None:
    """--listen 0.0.0.0 names no host a browser sends: without --allow-host the console exits
    2 naming the option, before asking the node anything."""
    done = subprocess.run(
        factnode_command("console", "--listen", "0.0.0.0:0", "--address", "127.0.0.1:1"),
        capture_output=True, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL,
        env=isolated_env(tmp_path / "home"),
    )  # fmt: skip
    assert done.returncode == EXIT_USAGE
    assert "--allow-host" in done.stderr and "FACTNODE_CONSOLE_ALLOW_HOSTS" in done.stderr


def test_a_public_listen_in_front_of_a_node_without_tokens_refuses_to_start(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Beyond loopback, in front of a node that answers without a token, the console exits 2
    naming the node's `tokens` setting (it used to serve the node's operator rights)."""
    done = subprocess.run(
        factnode_command("console", "--address", server.address, "--listen", "0.0.0.0:0",
                         "--allow-host", "console.example"),
        capture_output=True, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL,
        env=isolated_env(tmp_path / "home"),
    )  # fmt: skip
    assert done.returncode == EXIT_USAGE
    assert "0.0.0.0:0 is not loopback" in done.stderr and "`tokens`" in done.stderr


@pytest.mark.parametrize("how", ["none", "flag", "env"])
def test_on_loopback_the_host_check_accepts_only_configured_names(
    how: str, server: ServerProcess, tmp_path: Path
) -> None:
    """A console on 127.0.0.1 answers `Host: localhost` only when that name is configured,
    by --allow-host or FACTNODE_CONSOLE_ALLOW_HOSTS (it used to accept every loopback name)."""
    env = isolated_env(tmp_path / "home")
    extra = ["--allow-host", "localhost"] if how == "flag" else []
    if how == "env":
        env["FACTNODE_CONSOLE_ALLOW_HOSTS"] = "console.example, localhost"
    proc = subprocess.Popen(
        factnode_command("console", "--address", server.address, "--listen", "127.0.0.1:0",
                         *extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=env,
    )  # fmt: skip
    try:
        url = first_line(proc, START_TIMEOUT).split()[3]
        own = httpx.get(f"{url}/node", timeout=CLI_TIMEOUT)
        assert own.status_code == 200 and server.node_id in own.text
        other = httpx.get(f"{url}/node", headers={"Host": "localhost"}, timeout=CLI_TIMEOUT)
        assert other.status_code == (400 if how == "none" else 200)
    finally:
        code = stop_process(proc, signal.SIGTERM)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    assert code == 0


def test_a_session_lifetime_that_is_not_a_positive_number_of_hours_is_refused(
    tmp_path: Path,
) -> None:
    """--session-hours 0 (or more than 720) exits 2 naming the option."""
    for hours in ("0", "721", "soon"):
        done = subprocess.run(
            factnode_command("console", "--session-hours", hours), capture_output=True,
            text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL,
            env=isolated_env(tmp_path / "home"),
        )  # fmt: skip
        assert done.returncode == EXIT_USAGE and "--session-hours" in done.stderr, hours


# gRPC's C core logs as `I1201 01:09:50.025 25793 file.cc:110] ...`; absl adds a banner.
GRPC_LOG_LINE = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d|absl::|grpc_init|\.cc:\d+\]", re.M)


def test_no_grpc_log_line_reaches_the_consoles_output(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Even with GRPC_VERBOSITY=DEBUG and GRPC_TRACE set, and a node it cannot reach, the
    console's stdout and stderr carry no line of gRPC's C core."""
    env = {**isolated_env(tmp_path / "home"), "GRPC_VERBOSITY": "DEBUG", "GRPC_TRACE": "api,http"}
    gone = socket.create_server(("127.0.0.1", 0))
    unreachable = f"127.0.0.1:{gone.getsockname()[1]}"
    gone.close()
    outputs = []
    for address in (server.address, unreachable):
        proc = subprocess.Popen(
            factnode_command("console", "--address", address, "--listen", "127.0.0.1:0"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env=env,
        )  # fmt: skip
        try:
            url = first_line(proc, START_TIMEOUT).split()[3]
            httpx.get(f"{url}/node", timeout=CLI_TIMEOUT)
            httpx.get(f"{url}/queue", timeout=CLI_TIMEOUT)
        finally:
            code = stop_process(proc, signal.SIGTERM)
            out, err = proc.communicate(timeout=CLI_TIMEOUT)
        assert code == 0, err
        outputs.append(out + err)
    for text in outputs:
        assert not GRPC_LOG_LINE.search(text), text
