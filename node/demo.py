"""`factnode demo`: a small local federation that walks through a conflict, a consensus
and a contested key, over the real gRPC API and mutual TLS, in a temporary directory."""

from __future__ import annotations

import asyncio
import logging
import socket
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.certs import issue_node_cert
from factnode.config import Peer, Settings
from factnode.server.app import Node

NODES = ("alpha", "beta", "gamma")
TIMEOUT = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _when(days_ago: float) -> Timestamp:
    ts = Timestamp()
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    ts.FromDatetime(hour - timedelta(days=days_ago))
    return ts


class _Client:
    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.facts = pb_grpc.FactServiceStub(self.channel)
        self.admin = pb_grpc.AdminServiceStub(self.channel)
        self.review = pb_grpc.ReviewServiceStub(self.channel)

    async def submit(
        self, key: pb.Key, value: str, anchor: str, source: str, days_ago: float
    ) -> pb.SubmitFactResponse:
        fact = pb.FactInput(
            key=key, object=value, attribution=anchor, source=source, confidence=0.9
        )
        fact.valid_from.CopyFrom(_when(days_ago))
        return await self.facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=TIMEOUT)

    async def belief(self, key: pb.Key) -> pb.Belief:
        return await self.facts.GetBelief(pb.GetBeliefRequest(key=key), timeout=TIMEOUT)


async def run_demo(say: Callable[[str], None] = print) -> None:
    """Starts three nodes, walks through the scenarios, and stops them."""
    with tempfile.TemporaryDirectory(prefix="factnode-demo-") as tmp:
        root = Path(tmp)
        fed_ports = {n: _free_port() for n in NODES}
        nodes: dict[str, Node] = {}
        clients: dict[str, _Client] = {}
        for n in NODES:
            crt, key = issue_node_cert(root / "certs", n)
            settings = Settings(
                listen="127.0.0.1:0",
                data_dir=root / n,
                node_id=n,
                federation_listen=f"127.0.0.1:{fed_ports[n]}",
                federation_cert=crt,
                federation_key=key,
                federation_ca=root / "certs" / "ca.crt",
                peers=tuple(Peer(f"127.0.0.1:{fed_ports[p]}", p) for p in NODES if p != n),
                sync_interval_seconds=3600,  # the demo syncs on demand
                grace_seconds=1,
            )
            nodes[n] = Node(settings)
        try:
            for n, node in nodes.items():
                port = await node.start()
                clients[n] = _Client(port)
                say(
                    f"started node {n} on 127.0.0.1:{port} (peers over mTLS on port {fed_ports[n]})"
                )

            async def sync() -> None:
                for _ in range(2):
                    for c in clients.values():
                        await c.admin.SyncNow(pb.SyncNowRequest(), timeout=TIMEOUT)

            async def show(key: pb.Key) -> None:
                for n, c in clients.items():
                    b = await c.belief(key)
                    state = pb.BeliefState.Name(b.state).removeprefix("BELIEF_STATE_")
                    say(f"  {n:6} believes {b.object!r:10} {state:10} rule {b.rule}")

            say("\n1. A conflict on one node, decided by rule (no LLM, no votes)")
            home = pb.Key(namespace="user:ana", subject="ana", predicate="lives_in")
            r = await clients["alpha"].submit(home, "Porto", "user_stated", "ana", 200)
            say(
                f"  alpha: Ana says she lives in Porto -> {pb.Outcome.Name(r.decision.outcome)[8:]} ({r.decision.rule})"
            )
            r = await clients["alpha"].submit(home, "Lisbon", "llm_generated", "scraper", 10)
            say(
                f"  alpha: a scraper's newer guess: Lisbon -> {pb.Outcome.Name(r.decision.outcome)[8:]} ({r.decision.rule})"
            )
            r = await clients["alpha"].submit(home, "Faro", "user_stated", "ana", 5)
            say(
                f"  alpha: Ana says she moved to Faro -> {pb.Outcome.Name(r.decision.outcome)[8:]} ({r.decision.rule})"
            )
            explained = await clients["alpha"].facts.Explain(
                pb.ExplainRequest(key=home), timeout=TIMEOUT
            )
            for comparison in explained.comparisons:
                say(f"  why not {comparison.object!r}? {comparison.rule}: {comparison.reason}")

            say("\n2. Consensus: three agents observe the build target; two agree")
            build = pb.Key(namespace="team:infra", subject="build", predicate="python_version")
            await clients["alpha"].submit(build, "3.12", "agent_observed", "ci-log", 1)
            await clients["beta"].submit(build, "3.12", "api_response", "pypi-metadata", 1)
            await clients["gamma"].submit(build, "3.11", "agent_observed", "old-readme", 1)
            await sync()
            await show(build)

            say("\n3. A contested key: independent evidence split with no >66% supermajority")
            team = pb.Key(namespace="team:infra", subject="oncall", predicate="lead")
            await clients["alpha"].submit(team, "Ravi", "agent_observed", "calendar", 1)
            await clients["beta"].submit(team, "Mei", "agent_observed", "pager", 1)
            await clients["gamma"].submit(team, "Mei", "agent_inferred", "chat", 1)
            await sync()
            await show(team)
            queue = await clients["alpha"].review.ListContested(
                pb.ListContestedRequest(), timeout=TIMEOUT
            )
            say(
                f"  alpha's review queue: {', '.join(k.key.predicate + ' of ' + k.key.subject for k in queue.keys)}"
            )
            say(
                "  an operator would now run: factnode review resolve team:infra oncall lead --value Mei --reason ..."
            )
        finally:
            for c in clients.values():
                await c.channel.close(None)
            for node in nodes.values():
                await node.stop(0)
        say("\nstopped the demo nodes and removed their data")


def main() -> None:
    # Peers that are not up yet, or already stopped, are expected here: keep the walkthrough readable.
    logging.getLogger("factnode.federation").setLevel(logging.CRITICAL)
    asyncio.run(run_demo())
