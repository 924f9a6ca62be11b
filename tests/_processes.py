"""Stopping a node subprocess in tests: a signal, a bounded wait, SIGKILL as the last resort."""

from __future__ import annotations

import signal
import subprocess

STOP_TIMEOUT = 15.0  # seconds for a graceful stop before SIGKILL


def stop_process(
    proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT
) -> int | None:
    """Sends `sig` and waits up to `timeout`: the exit code, or None when it needed SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_process(proc)
            return None
    return proc.returncode


def kill_process(proc: subprocess.Popen[str]) -> None:
    """SIGKILL, and reap."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT)
