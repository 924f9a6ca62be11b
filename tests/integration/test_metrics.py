"""Prometheus metrics: counted by outcome and rule, never labelled with keys or values."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from pathlib import Path

import grpc

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import Settings
from factnode.server.app import Node


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_metrics_count_decisions_and_decay_without_keys_or_values(tmp_path: Path) -> None:
    """/metrics counts decisions by outcome and rule and decay runs, and names no key or value."""
    metrics_port = _free_port()
    node = Node(
        Settings(
            listen="127.0.0.1:0", data_dir=tmp_path, metrics_listen=f"127.0.0.1:{metrics_port}"
        )
    )
    port = await node.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            facts = pb_grpc.FactServiceStub(channel)
            key = pb.Key(namespace="user:secret-ns", subject="secret-subject", predicate="lives_in")
            fact = pb.FactInput(
                key=key, object="Rua-Secreta-99", anchor="user_stated", source="ana"
            )
            await facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=10)
            await pb_grpc.AdminServiceStub(channel).RunDecay(pb.RunDecayRequest(), timeout=10)

        def scrape() -> str:
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode())

        body = await asyncio.to_thread(scrape)
    finally:
        await node.stop(0)
    assert 'factnode_decisions_total{outcome="ACCEPTED",rule="first_version"} 1.0' in body
    assert "memory_decayed_total" in body and "memory_tombstoned_total" in body
    for secret in ("Rua-Secreta-99", "secret-subject", "secret-ns", "ana"):
        assert secret not in body
