"""Prometheus metrics: counted by outcome and rule, never labelled with keys or values."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import ConfigError, Settings, check_exposure, load_settings
from factnode.core import MICROS_PER_SECOND
from factnode.core.members import MemberRecord
from factnode.core.receipts import Receipt
from factnode.server.app import Node
from factnode.store import StoredMember, Writes
from factnode.testing import FakeClock


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


METRICS_TOKEN = "metrics-scraper-token-01"


def test_a_non_loopback_metrics_listen_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    """metrics_listen on 0.0.0.0 without metrics_token is refused naming the setting, as a
    non-loopback listen without client tokens is; nothing is created."""
    settings = Settings(listen="127.0.0.1:0", data_dir=tmp_path / "d", metrics_listen="0.0.0.0:0")
    with pytest.raises(ConfigError) as refused:
        Node(settings)
    assert refused.value.setting == "metrics_listen"
    assert "no metrics_token is configured" in refused.value.reason
    assert not (tmp_path / "d").exists()
    check_exposure(replace(settings, metrics_token=METRICS_TOKEN))  # with a token it may


def test_a_metrics_token_follows_the_token_rule() -> None:
    """metrics_token is checked by the node's token rule when the settings load."""
    with pytest.raises(ConfigError) as refused:
        load_settings(None, env={"FACTNODE_METRICS_TOKEN": "short"})
    assert refused.value.setting == "metrics_token"
    assert "give at least 16" in refused.value.reason
    loaded = load_settings(None, env={"FACTNODE_METRICS_TOKEN": METRICS_TOKEN})
    assert loaded.metrics_token == METRICS_TOKEN


async def test_with_a_metrics_token_metrics_asks_for_it(tmp_path: Path) -> None:
    """With metrics_token set, /metrics answers 401 without `Authorization: Bearer <token>`
    (or with another) and the metrics with it."""
    metrics_port = _free_port()
    node = Node(
        Settings(
            listen="127.0.0.1:0", data_dir=tmp_path, metrics_listen=f"127.0.0.1:{metrics_port}",
            metrics_token=METRICS_TOKEN,
        )
    )  # fmt: skip
    await node.start()

    def scrape(token: str | None) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{metrics_port}/metrics")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    try:
        answers = [await asyncio.to_thread(scrape, t) for t in (None, "wrong", METRICS_TOKEN)]
    finally:
        await node.stop(0)
    assert [code for code, _ in answers[:2]] == [401, 401]
    assert METRICS_TOKEN not in answers[0][1]
    assert answers[2][0] == 200 and "factnode_decisions_total" in answers[2][1]


async def test_erasure_gauges_count_erasures_a_current_member_has_not_confirmed(
    tmp_path: Path,
) -> None:
    """factnode_erasures_unconfirmed counts the erasures some current member has sent no
    receipt for, and the oldest one's age grows with the clock between refreshes; a member's
    receipt, or its revocation, ends the wait (issue 45)."""
    metrics_port = _free_port()
    clock = FakeClock()
    node = Node(
        Settings(
            listen="127.0.0.1:0", data_dir=tmp_path, node_id="n1",
            metrics_listen=f"127.0.0.1:{metrics_port}",
        ),
        clock=clock,
    )  # fmt: skip
    port = await node.start()

    def scrape() -> dict[str, float]:
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
        return {
            name: float(value)
            for name, value in (line.split() for line in body.splitlines() if line[:1] != "#")
            if name.startswith("factnode_erasures_unconfirmed")
        }

    async def gauges() -> tuple[float, float]:
        await node.refresh_erasure_gauges()
        got = await asyncio.to_thread(scrape)
        return (
            got["factnode_erasures_unconfirmed"],
            got["factnode_erasures_unconfirmed_oldest_age_seconds"],
        )

    n2 = MemberRecord("n2", "n2.example:7421", b"pem", 1, b"\x01")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            admin = pb_grpc.AdminServiceStub(channel)
            key = pb.Key(namespace="user:ana", subject="ana", predicate="lives_in")
            erased = await admin.Erase(pb.EraseRequest(key=key, reason="GDPR art. 17"), timeout=10)
        assert await gauges() == (0, 0)  # n1 alone, and n1 applied it
        with node.repo.write() as tx:
            tx.apply(Writes(members=[StoredMember(n2, revoked=False)]))
        clock.advance(90 * MICROS_PER_SECOND)
        assert await gauges() == (1, 90)
        clock.advance(10 * MICROS_PER_SECOND)
        assert (await asyncio.to_thread(scrape))[
            "factnode_erasures_unconfirmed_oldest_age_seconds"
        ] == 100  # without a refresh: the age is the clock's at the scrape
        receipt = Receipt(erased.erasure_id, "n2", clock.now(), 0, b"\x02")
        with node.repo.write() as tx:
            tx.apply(Writes(receipts=[receipt]))
        assert await gauges() == (0, 0)
        with node.repo.write() as tx:
            tx.apply(Writes(members=[StoredMember(replace(n2, node_id="n3"), revoked=True)]))
        assert await gauges() == (0, 0)  # a revoked member is not waited for
    finally:
        await node.stop(0)
