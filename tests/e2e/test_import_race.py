"""Two imports at once into one store (issue 41, finding 11): `factnode import` started
together on two replicas of one empty PostgreSQL database. One import claims the store in
the transaction that finds it empty; the other exits 8 naming it, and the decision log holds
every decision once."""

from __future__ import annotations

import threading
from pathlib import Path

from _e2e import Cli, CliResult, isolated_env, open_channel
from _replicas import fresh_database, start_replicas, stop_all

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import Submission
from factnode.testing import FakeClock, memory_ledger

NODE = "node-race"
FACTS = 300
ROUNDS = 3  # the race lost in one of two runs before the fix


def _export(path: Path) -> Path:
    """An export of node-race holding FACTS facts, each decided at its own instant (so a
    replay takes one transaction each: long enough for two imports to overlap)."""
    clock = FakeClock()
    ledger = memory_ledger(clock=clock, node_id=NODE)
    for n in range(FACTS):
        clock.advance(1_000_000)
        ledger.submit(Submission("race", f"s{n}", "lives_in", "Oslo", "user_stated", "ana",
                                 0.5, 0.9, clock.now()))  # fmt: skip
    path.write_bytes(b"".join(ledger.export()))
    return path


def _decisions(address: str) -> int:
    with open_channel(address) as channel:
        status = pb_grpc.AdminServiceStub(channel).GetStatus(pb.GetStatusRequest(), timeout=10)
    return int(status.counts.decisions)


def _race(backup: Path, clis: list[Cli]) -> list[CliResult | None]:
    """`factnode import` of `backup` through each CLI, started together (a barrier)."""
    start = threading.Barrier(len(clis))
    results: list[CliResult | None] = [None] * len(clis)

    def run(i: int) -> None:
        start.wait(timeout=30)
        results[i] = clis[i].run("import", str(backup), "--force-policy", check=None)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clis))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


def test_two_imports_at_once_on_two_replicas_one_wins(tmp_path: Path) -> None:
    """Repeated: two `factnode import` of one file, started together on two replicas of one
    empty PostgreSQL database: exactly one exits 0, the other exits 8 naming the import that
    came first (its replica), and the store holds each decision once."""
    backup = _export(tmp_path / "race.jsonl")
    for attempt in range(ROUNDS):
        work = tmp_path / f"run-{attempt}"
        with fresh_database() as url:
            replicas = start_replicas(work, url, 2, env={"FACTNODE_NODE_ID": NODE})
            try:
                results = _race(
                    backup, [Cli(r.address, isolated_env(work / "cli")) for r in replicas]
                )
                done = [r for r in results if r is not None]
                assert len(done) == 2, "an import did not finish"
                codes = sorted(r.code for r in done)
                assert codes == [0, 8], [r.describe() for r in done]
                loser = next(r for r in done if r.code == 8)
                assert "imported by replica" in loser.stderr, loser.describe()
                assert "not empty" in loser.stderr or "came first" in loser.stderr
                assert _decisions(replicas[0].address) == FACTS
            finally:
                stop_all(replicas)
