"""Clock skew between real nodes over mTLS: a peer whose clock runs two hours ahead fails its
rounds with the skew as the error, and GetStatus, `factnode status` and the console's node page
show the skew per peer (issue 22, item 10)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from starlette.testclient import TestClient

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.certs import ensure_ca, issue_node_cert
from factnode.cli._output import status as status_text
from factnode.config import Peer, Settings
from factnode.console import ConsoleSettings, create_app
from factnode.core import Instant
from factnode.server.app import Node

HOUR_MS = 3_600_000
RPC_TIMEOUT = 30.0


class AheadClock:
    """The wall clock, `micros` ahead."""

    def __init__(self, micros: int) -> None:
        self.micros = micros

    def now(self) -> Instant:
        return time.time_ns() // 1000 + self.micros


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Node, Node]]:
    """Node `honest` on the wall clock and its peer `fast`, two hours ahead."""
    certs = tmp_path / "certs"
    ensure_ca(certs)
    ports = {"honest": _free_port(), "fast": _free_port()}
    nodes = {}
    for name, other, clock in (
        ("honest", "fast", None),
        ("fast", "honest", AheadClock(2 * HOUR_MS * 1000)),
    ):
        cert, key = issue_node_cert(certs, name)
        settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp_path / name,
            node_id=name,
            peers=(Peer(address=f"127.0.0.1:{ports[other]}", node_id=other),),
            federation_listen=f"127.0.0.1:{ports[name]}",
            federation_cert=cert,
            federation_key=key,
            federation_ca=certs / "ca.crt",
            sync_interval_seconds=3600.0,
            grace_seconds=0.0,
        )
        nodes[name] = Node(settings, clock=clock)
    for n in nodes.values():
        await n.start()
    try:
        yield nodes["honest"], nodes["fast"]
    finally:
        for n in nodes.values():
            await n.stop(0)


async def test_a_peer_two_hours_ahead_fails_its_round_and_status_shows_the_skew(
    pair: tuple[Node, Node],
) -> None:
    """SyncNow with a peer two hours ahead reports the round as failed with the skew as its
    error and the measured skew; GetStatus then carries the skew and that error for the
    peer, and `factnode status` and the console's node page show it."""
    honest, _fast = pair
    async with grpc.aio.insecure_channel(f"127.0.0.1:{honest.port}") as channel:
        admin = pb_grpc.AdminServiceStub(channel)
        synced = await admin.SyncNow(pb.SyncNowRequest(), timeout=RPC_TIMEOUT)
        [result] = synced.results
        assert not result.ok
        assert result.error.startswith("clock skew: the peer's clock runs 2h00m0")
        assert " ahead (allowance 5m00s" in result.error
        assert abs(result.clock_skew_ms - 2 * HOUR_MS) < 2000
        status = await admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT)
    [peer] = status.peers
    assert peer.node_id == "fast"
    assert abs(peer.clock_skew_ms - 2 * HOUR_MS) < 2000
    assert peer.last_error == result.error
    assert not peer.HasField("last_sync")  # no ok round yet
    text = status_text(status)
    assert "clock skew" in text and "2h00m0" in text and "ahead" in text

    def node_page() -> str:
        app = create_app(ConsoleSettings(f"127.0.0.1:{honest.port}", token=None, timeout=5))
        with TestClient(app, base_url="http://127.0.0.1") as console:
            return console.get("/node").text

    html = await asyncio.to_thread(node_page)  # the node answers on this test's event loop
    assert re.search(r'<td class="clock-skew">2h00m0\ds ahead</td>', html)
