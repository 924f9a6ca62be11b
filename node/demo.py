"""`factnode demo`: a small local federation that walks through a conflict, a consensus
and a contested key, over the real gRPC API and mutual TLS, in a temporary directory.

Each step prints the numbers that decided it: anchors and event times for a rule, vote
weights and shares for consensus. With `--keep` the nodes stay up afterwards so a
newcomer can try `factnode review` on them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from factnode._grpc_quiet import rerun_quietly
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.certs import issue_node_cert
from factnode.config import Peer, Settings
from factnode.core import Policy
from factnode.server.app import Node

NODES = ("alpha", "beta", "gamma")
TIMEOUT = 10.0
# The walkthrough syncs on demand; nodes kept for the user sync on their own as well, so
# their peers' lag in `factnode status` stays a few seconds however long they run.
WALKTHROUGH_SYNC_SECONDS = 3600.0
KEPT_SYNC_SECONDS = 5.0


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
        fact = pb.FactInput(key=key, object=value, anchor=anchor, source=source, confidence=0.9)
        fact.valid_from.CopyFrom(_when(days_ago))
        return await self.facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=TIMEOUT)

    async def belief(self, key: pb.Key) -> pb.Belief:
        return await self.facts.GetBelief(pb.GetBeliefRequest(key=key), timeout=TIMEOUT)


def _tallies(tallies: Sequence[pb.VersionTally]) -> list[str]:
    """One line per version: its share of the counted weight, the weight, and who voted."""
    lines = []
    for t in sorted(tallies, key=lambda t: (-t.weight, t.object)):
        voters = ", ".join(t.voters) or "no vote"
        lines.append(
            f"    {t.object or t.version_id[:12]!r:8} {t.share_milli / 10:5.1f}%"
            f"  weight {t.weight:>15,}  votes: {voters}"
        )
    return lines


def _days(days: float) -> str:
    return f"{days:g} day" + ("" if days == 1 else "s")


def _leader(tallies: Sequence[pb.VersionTally]) -> str:
    best = max(tallies, key=lambda t: (t.weight, t.object))
    return f"{best.object!r} has {best.share_milli / 10:.1f}%"


def _threshold() -> str:
    threshold = Policy().consensus_threshold
    return f"{float(threshold) * 100:g}%"


async def run_demo(say: Callable[[str], None] = print, keep: asyncio.Event | None = None) -> None:
    """Starts three nodes and walks through the scenarios; then, with `keep`, leaves them
    serving until that event is set, and stops them."""
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
                sync_interval_seconds=(
                    KEPT_SYNC_SECONDS if keep is not None else WALKTHROUGH_SYNC_SECONDS
                ),
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

            anchors = Policy().anchors

            def fact(who: str, value: str, anchor: str, days_ago: float) -> str:
                return f"{who}: {value!r} ({anchor}, anchor {anchors[anchor]}, event time {_days(days_ago)} ago)"

            say("\n1. A conflict on one node, decided by rule (no LLM, no votes)")
            home = pb.Key(namespace="user:ana", subject="ana", predicate="lives_in")
            r = await clients["alpha"].submit(home, "Porto", "user_stated", "ana", 200)
            say(
                f"  alpha: {fact('Ana says she lives in', 'Porto', 'user_stated', 200)}\n"
                f"    -> {pb.Outcome.Name(r.decision.outcome)[8:]} by rule {r.decision.rule}"
            )
            r = await clients["alpha"].submit(home, "Lisbon", "llm_generated", "scraper", 10)
            say(
                f"  alpha: {fact('a scraper guesses', 'Lisbon', 'llm_generated', 10)}\n"
                f"    -> {pb.Outcome.Name(r.decision.outcome)[8:]} by rule {r.decision.rule}"
            )
            r = await clients["alpha"].submit(home, "Faro", "user_stated", "ana", 5)
            say(
                f"  alpha: {fact('Ana says she moved to', 'Faro', 'user_stated', 5)}\n"
                f"    -> {pb.Outcome.Name(r.decision.outcome)[8:]} by rule {r.decision.rule}"
            )
            explained = await clients["alpha"].facts.Explain(
                pb.ExplainRequest(key=home), timeout=TIMEOUT
            )
            for comparison in explained.comparisons:
                say(f"  why not {comparison.object!r}? {comparison.rule}: {comparison.reason}")
            say("  (votes play no part here: one node, one key, the rule order decides)")

            say("\n2. Consensus: three agents observe the build target; two agree")
            say(
                "  each node votes for its own belief, weighted anchor x worth (thousandths)"
                f" x freshness;\n  a version needs more than {_threshold()} of the weight"
            )
            build = pb.Key(namespace="team:infra", subject="build", predicate="python_version")
            for n, value, anchor, source in (
                ("alpha", "3.12", "agent_observed", "ci-log"),
                ("beta", "3.12", "api_response", "pypi-metadata"),
                ("gamma", "3.11", "agent_observed", "old-readme"),
            ):
                await clients[n].submit(build, value, anchor, source, 1)
                say(f"  {n}: {fact(source, value, anchor, 1)}")
            await sync()
            await show(build)
            tallies = (await clients["alpha"].belief(build)).tallies
            say("  the tally on alpha (every node counts the same votes):")
            for line in _tallies(tallies):
                say(line)
            say(
                f"  {_leader(tallies)}, more than {_threshold()}: every node serves it"
                " (rule federation_consensus)"
            )
            say("\n3. A contested key: independent evidence split with no >66% supermajority")
            team = pb.Key(namespace="team:infra", subject="oncall", predicate="lead")
            for n, value, anchor, source in (
                ("alpha", "Ravi", "agent_observed", "calendar"),
                ("beta", "Mei", "agent_observed", "pager"),
                ("gamma", "Mei", "agent_inferred", "chat"),
            ):
                await clients[n].submit(team, value, anchor, source, 1)
                say(f"  {n}: {fact(source, value, anchor, 1)}")
            await sync()
            await show(team)
            contested = await clients["alpha"].review.GetContested(
                pb.GetContestedRequest(key=team), timeout=TIMEOUT
            )
            say("  the tally on alpha:")
            for line in _tallies(contested.versions):
                say(line)
            say(
                f"  {_leader(contested.versions)}, not more than {_threshold()}: the key is"
                " CONTESTED, each node serves its own belief, and it waits for review"
            )
            queue = await clients["alpha"].review.ListContested(
                pb.ListContestedRequest(), timeout=TIMEOUT
            )
            queued = ", ".join(
                f"{k.key.namespace} / {k.key.subject} / {k.key.predicate}"
                f" ({pb.BeliefState.Name(k.state).removeprefix('BELIEF_STATE_')})"
                for k in queue.keys
            )
            say(f"  alpha's review queue holds: {queued or 'nothing'}")
            say(
                "  an operator would now run: factnode review resolve team:infra oncall lead --value Mei --reason ..."
            )
            if keep is not None:
                say("\nThe nodes keep running (no tokens: loopback only, you are an operator):")
                for n, node in nodes.items():
                    say(f"  {n:6} 127.0.0.1:{node.port}")
                alpha = f"127.0.0.1:{nodes['alpha'].port}"
                say(f"  try:  factnode review list --address {alpha}")
                say(f"        factnode review show team:infra oncall lead --address {alpha}")
                say(
                    f"        factnode review resolve team:infra oncall lead --value Mei --reason 'asked the team' --address {alpha}"
                )
                say(
                    f"  stop: Ctrl-C (or kill -TERM {os.getpid()}); the demo's data is then removed"
                )
                await keep.wait()
        finally:
            for c in clients.values():
                await c.channel.close(None)
            for node in nodes.values():
                await node.stop(0)
        say("\nstopped the demo nodes and removed their data")


async def _run_and_keep() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await run_demo(lambda line: print(line, flush=True), keep=stop)


def main(argv: Sequence[str] | None = None) -> None:
    """`factnode demo [--keep]`."""
    parser = argparse.ArgumentParser(prog="factnode demo")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the nodes running after the walkthrough (stop with Ctrl-C)",
    )
    args = parser.parse_args(argv)
    # gRPC's own log lines (connection errors while peers start and stop, a user's
    # GRPC_TRACE) must not interleave with the walkthrough.
    rerun_quietly(["-m", "factnode.demo", *(["--keep"] if args.keep else [])])
    # Peers that are not up yet, or already stopped, are expected here: keep the walkthrough readable.
    for name in ("factnode.federation", "grpc", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if args.keep:
        asyncio.run(_run_and_keep())
    else:
        asyncio.run(run_demo(lambda line: print(line, flush=True)))


if __name__ == "__main__":
    main()
