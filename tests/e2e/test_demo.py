"""`factnode demo`: its walkthrough's numbers, its quiet output, and `--keep`."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _deploy import read_until
from _e2e import CLI_TIMEOUT, Cli, factnode_command, isolated_env

# gRPC's C core logs as `I1201 01:09:50.025 25793 file.cc:110] ...`; absl adds a banner.
GRPC_LOG_LINE = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d|absl::|grpc_init|\.cc:\d+\]", re.M)
DEMO_TIMEOUT = 90.0
# Kept demo nodes sync every few seconds (factnode.demo.KEPT_SYNC_SECONDS), so this is ample.
KEPT_SYNC_WAIT = 30.0


def _env(tmp_path: Path) -> dict[str, str]:
    """The user's environment at its noisiest for gRPC, with temporary files under tmp_path."""
    env = isolated_env(tmp_path / "home")
    (tmp_path / "tmp").mkdir()
    env.update(GRPC_VERBOSITY="DEBUG", GRPC_TRACE="api,http", TMPDIR=str(tmp_path / "tmp"))
    return env


@pytest.mark.slow
def test_demo_shows_the_deciding_numbers_and_no_grpc_log_lines(tmp_path: Path) -> None:
    """Each step prints its numbers (anchors, shares, weights); gRPC logs nothing, even asked to."""
    done = subprocess.run(
        factnode_command("demo"),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=DEMO_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert not GRPC_LOG_LINE.search(done.stdout + done.stderr), done.stdout + done.stderr
    assert done.stderr == ""
    out = done.stdout
    assert "anchor user_stated (90) outranks llm_generated (30)" in out
    assert re.search(r"'3\.12'\s+70\.0%\s+weight\s+[\d,]+\s+votes: alpha, beta", out), out
    assert "'3.12' has 70.0%, more than 66%" in out
    assert re.search(r"'Mei'\s+62\.5%\s+weight\s+[\d,]+\s+votes: beta, gamma", out), out
    assert "'Mei' has 62.5%, not more than 66%" in out
    assert "alpha's review queue holds: team:infra / oncall / lead (CONTESTED)" in out
    assert "stopped the demo nodes and removed their data" in out
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.slow
def test_demo_keep_leaves_nodes_to_review_until_interrupted(tmp_path: Path) -> None:
    """With --keep the nodes serve after the walkthrough: the contested key can be listed and
    resolved with the printed commands; Ctrl-C stops them and removes their data."""
    env = _env(tmp_path)
    proc = subprocess.Popen(
        factnode_command("demo", "--keep"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        lines = read_until(proc, "stop: Ctrl-C", DEMO_TIMEOUT)
        text = "".join(lines)
        address = re.search(r"review list --address (127\.0\.0\.1:\d+)", text)
        assert address, text
        cli = Cli(address.group(1), isolated_env(tmp_path / "cli-home"))
        # Kept nodes sync on their own: each peer's last sync moves on without `factnode sync`.
        first = {p["node_id"]: p["last_sync"] for p in cli.json("status")["peers"]}
        deadline = time.monotonic() + KEPT_SYNC_WAIT
        while True:
            now = {p["node_id"]: p["last_sync"] for p in cli.json("status")["peers"]}
            if all(now[n] is not None and now[n] != first[n] for n in first):
                break
            assert time.monotonic() < deadline, f"no periodic sync: {first} -> {now}"
            time.sleep(0.5)
        queue = cli.json("review", "list")
        assert [k["key"]["subject"] for k in queue["keys"]] == ["oncall"]
        resolve = re.search(r"(review resolve team:infra oncall lead .*) --address", text)
        assert resolve, text
        cli.run(
            "review",
            "resolve",
            "team:infra",
            "oncall",
            "lead",
            "--value",
            "Mei",
            "--reason",
            "asked",
        )
        assert cli.json("review", "list").get("keys", []) == []
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=CLI_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=CLI_TIMEOUT)
    assert proc.returncode == 0, rest
    assert "stopped the demo nodes and removed their data" in rest
    assert not GRPC_LOG_LINE.search(text + rest), text + rest
    assert "Traceback" not in rest
    assert list((tmp_path / "tmp").iterdir()) == []
