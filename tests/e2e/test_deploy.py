"""What can be checked of deploy/ without a Docker engine: its configuration and its script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from _deploy import DEPLOY, compose_env, read_until

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import ConfigError, check_exposure, load_settings


@pytest.mark.parametrize("name", ["node-a", "node-b", "node-c"])
def test_compose_node_configs_load_and_are_safe_to_expose(name: str) -> None:
    """Each compose node config loads, names its peers, serves TLS and needs tokens from outside."""
    toml = DEPLOY / "cluster" / f"{name}.toml"
    assert "change-me" not in toml.read_text()
    settings = load_settings(toml, env={})
    assert settings.node_id == name
    assert settings.federated and settings.tls_enabled
    assert {p.node_id for p in settings.peers} == {"node-a", "node-b", "node-c"} - {name}
    with pytest.raises(ConfigError, match="no client tokens"):
        check_exposure(settings)  # listens on 0.0.0.0: refused until tokens come in
    check_exposure(load_settings(toml, env=compose_env(name)))


def _factnode_bin() -> str:
    candidate = Path(sys.executable).with_name("factnode")
    if not candidate.exists():
        pytest.skip("the factnode console script is not installed next to this Python")
    return str(candidate)


def _wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def _free_base_port() -> int:
    import socket

    # Seven consecutive free ports starting at an OS-chosen one (3 nodes x 2 + 1).
    for _ in range(20):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1]) - 1
        if base + 8 > 65535:
            continue
        ok = True
        for port in range(base + 2, base + 8):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    pytest.skip("could not find consecutive free loopback ports")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_local_cluster_script_removes_its_temporary_directory(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Without DIR the script works in a mktemp directory, and Ctrl-C or SIGTERM stops the
    node and removes that directory: nothing is left in TMPDIR."""
    base = _free_base_port()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "FACTNODE_BIN": _factnode_bin(), "FACTNODE_BASE_PORT": str(base),
           "TMPDIR": str(tmp)}  # fmt: skip
    proc = subprocess.Popen(
        ["bash", str(DEPLOY / "local-cluster.sh"), "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        ready = read_until(proc, "nodes serving", 90)
        assert "and removes it" in ready[-1], ready
        assert len(list(tmp.iterdir())) == 1
        os.killpg(proc.pid, sig)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    assert list(tmp.iterdir()) == []


def test_local_cluster_script_starts_a_converging_federation(tmp_path: Path) -> None:
    """deploy/local-cluster.sh starts three nodes, says so once all serve, and they sync a fact to each other."""
    base = _free_base_port()
    env = {
        **os.environ,
        "FACTNODE_BIN": _factnode_bin(),
        "FACTNODE_BASE_PORT": str(base),
        "FACTNODE_SYNC_INTERVAL": "0.5",
    }
    proc = subprocess.Popen(
        ["bash", str(DEPLOY / "local-cluster.sh"), "3", str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    addresses = [f"127.0.0.1:{base + 2 * i}" for i in (1, 2, 3)]
    key = pb.Key(namespace="team:infra", subject="build", predicate="python_version")
    try:
        ready = read_until(proc, "nodes serving", 90)
        assert "all 3 nodes serving" in ready[-1]
        channels = [grpc.insecure_channel(a) for a in addresses]
        for ch in channels:
            grpc.channel_ready_future(ch).result(timeout=30)
        fact = pb.FactInput(key=key, object="3.12", anchor="codebase_verified", source="ci")
        pb_grpc.FactServiceStub(channels[0]).SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=10)

        def everywhere() -> bool:
            for ch in channels:
                try:
                    b = pb_grpc.FactServiceStub(ch).GetBelief(
                        pb.GetBeliefRequest(key=key), timeout=5
                    )
                except grpc.RpcError:
                    return False
                if b.object != "3.12":
                    return False
            return True

        assert _wait_for(everywhere, 30), "the fact did not reach every node"
        for ch in channels:
            ch.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
