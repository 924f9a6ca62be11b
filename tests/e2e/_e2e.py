"""Helpers for the e2e tests: real `factnode serve` processes and the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from _processes import STOP_TIMEOUT, kill_process, stop_process

START_TIMEOUT = 20.0  # seconds for `serve` to announce its port
CLI_TIMEOUT = 30.0  # seconds for one CLI subprocess
RPC_TIMEOUT = 10.0  # seconds for one gRPC call from a test


def isolated_env(home: Path) -> dict[str, str]:
    """The test's environment without FACTNODE_* settings, with every per-user dir under `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACTNODE_")}
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        USER="e2e-operator",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def factnode_command(*args: str) -> list[str]:
    """The CLI of the environment running the tests."""
    return [sys.executable, "-m", "factnode.cli", *args]


def unique_ns(prefix: str) -> str:
    """A namespace no other test uses."""
    return f"{prefix}:{uuid.uuid4().hex[:10]}"


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    """One `factnode serve` subprocess; its stdout is drained into `lines` by a thread."""

    proc: subprocess.Popen[str]
    data_dir: Path
    stderr_path: Path
    port: int = 0
    node_id: str = ""
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _reader: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "factnode.db"

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_until_listening(self, timeout: float = START_TIMEOUT) -> None:
        """Parses the port from the `listening on` line; fails with the output after `timeout`."""
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                pytest.fail(f"serve announced no port within {timeout}s: {self.output()}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(timeout=STOP_TIMEOUT)
                self._close()
                pytest.fail(f"factnode serve exited with {self.proc.returncode}: {self.output()}")
            if " listening on " in line:
                first, _, host_port = line.partition(" listening on ")
                self.node_id = first.removeprefix("factnode ").strip()
                self.port = int(host_port.rsplit(":", 1)[1])
                return

    def output(self) -> str:
        """Everything the process printed so far (stdout, then stderr)."""
        err = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return "stdout:\n" + "\n".join(self.lines) + "\nstderr:\n" + err

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int | None:
        """Sends `sig`, waits up to `timeout`: the exit code, or None when it needed SIGKILL."""
        code = stop_process(self.proc, sig, timeout)
        self._close()
        return code

    def kill(self) -> None:
        """SIGKILL, and reap."""
        kill_process(self.proc)
        self._close()

    def _close(self) -> None:
        # The process is gone: let the reader see EOF before closing the pipe under it.
        if self._reader is not None:
            self._reader.join(timeout=STOP_TIMEOUT)
        if self.proc.stdout is not None and (self._reader is None or not self._reader.is_alive()):
            self.proc.stdout.close()


def start_server(
    workdir: Path,
    *extra: str,
    data_dir: Path | None = None,
    listen: str | None = "127.0.0.1:0",
    env: dict[str, str] | None = None,
) -> ServerProcess:
    """Starts `factnode serve` with its data dir (and everything else) under `workdir`."""
    data_dir = data_dir or workdir / "data"
    args = ["serve", "--data-dir", str(data_dir), *extra]
    if listen is not None:
        args += ["--listen", listen]
    stderr_path = workdir / f"serve-{uuid.uuid4().hex[:8]}.stderr"
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen(
            factnode_command(*args),
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env or isolated_env(workdir / "home"),
            cwd=workdir,
        )
    server = ServerProcess(proc, data_dir, stderr_path)
    server.wait_until_listening()
    return server


def open_channel(address: str) -> grpc.Channel:
    """An insecure channel, ready within the RPC timeout."""
    channel = grpc.insecure_channel(address)
    grpc.channel_ready_future(channel).result(timeout=RPC_TIMEOUT)
    return channel


@dataclass
class CliResult:
    """A finished CLI run."""

    args: Sequence[str]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.describe()
        return json.loads(self.stdout)

    def describe(self) -> str:
        return (
            f"factnode {' '.join(self.args)} -> exit {self.code}\n"
            f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )


class Cli:
    """Runs the `factnode` CLI as a subprocess against one node."""

    def __init__(self, address: str, env: dict[str, str]) -> None:
        self.address = address
        self.env = env

    def run(
        self,
        *args: str,
        address: str | None = None,
        with_address: bool = True,
        check: int | None = 0,
    ) -> CliResult:
        """Runs one command with `--address`; asserts the exit code and that no traceback shows."""
        argv = [*args]
        if with_address:
            argv += ["--address", address or self.address]
        done = subprocess.run(
            factnode_command(*argv),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=CLI_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        result = CliResult(argv, done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, result.describe()
        if check is not None:
            assert done.returncode == check, result.describe()
        return result

    def json(self, *args: str, **kwargs: Any) -> Any:
        """Runs one command with `--json` and parses its output."""
        return self.run(*args, "--json", **kwargs).json()
