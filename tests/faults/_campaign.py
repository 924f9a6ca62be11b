"""A fault campaign: N real nodes, clients drawn from a seed, a nemesis on a schedule drawn
from the same seed, then heal, converge, stop, and judge the whole history.

`run_campaign` is shared by tests/faults/test_campaign.py and bench/faults.py.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from _checker import Judge, NodeStore, Violation, failing_history, read_store
from _cluster import (
    Cluster,
    FaultNode,
    StartError,
    faketime_library,
    fill,
    peer_channel,
    postgres_databases,
)
from _history import Client, History, event_base
from _proxy import LinkState
from _schedule import Fault, draw_schedule

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

CLIENTS = 2
PACE = 0.03  # seconds each client waits between calls
SWEEP_TIMEOUT = 60.0
MAX_SWEEPS = 10  # SyncNow on every node, in turn, before convergence counts as failed


@dataclass
class Report:
    """What a campaign did and found."""

    seed: int
    nodes: int
    postgres: bool
    schedule: list[Fault]
    ops: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    skipped: dict[str, str] = field(default_factory=dict)  # fault kind -> why it could not run
    rounds_to_converge: int | None = None
    violations: list[Violation] = field(default_factory=list)
    failing: str = ""
    checked: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.injected.items()))
        ops = ", ".join(f"{k} {n}" for k, n in sorted(self.ops.items()))
        lines = [
            f"fault campaign seed={self.seed} nodes={self.nodes} "
            f"store={'postgresql' if self.postgres else 'sqlite'} ({self.seconds:.0f}s)",
            f"  operations: {sum(self.ops.values())} ({ops})",
            f"  acknowledged facts: {self.acknowledged}",
            f"  faults injected: {sum(self.injected.values())} ({kinds})",
            f"  rounds to converge after the last heal: {self.rounds_to_converge}",
            f"  violations: {len(self.violations)}",
            "  checked: " + ", ".join(f"{k} {n}" for k, n in sorted(self.checked.items())),
        ]
        lines += [f"  skipped {k}: {why}" for k, why in sorted(self.skipped.items())]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def schedule_text(self) -> str:
        return "\n".join(f.describe() for f in self.schedule)


class Nemesis:
    """Applies the schedule's faults at their times and heals each after it lasted."""

    def __init__(self, cluster: Cluster, schedule: list[Fault], report: Report, t0: float) -> None:
        self.cluster = cluster
        self.report = report
        self.t0 = t0
        self.rng = random.Random(f"{report.seed}:nemesis-hands")
        self.schedule = schedule
        events = [(f.at, 1, i, f) for i, f in enumerate(schedule)]
        events += [(f.at + f.lasts, 0, i, f) for i, f in enumerate(schedule)]
        self.events = sorted(events, key=lambda e: (e[0], e[1], e[2]))
        self.active: dict[int, Fault] = {}
        self.applied: dict[int, float] = {}
        self.healed: dict[int, float] = {}

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self, stop: threading.Event) -> None:
        for at, starts, i, fault in self.events:
            if stop.wait(max(0.0, at - self.now())):
                return
            try:
                if starts:
                    self.active[i] = fault
                    if self._apply(fault):
                        self.applied[i] = self.now()
                    else:
                        del self.active[i]
                elif i in self.active:
                    self._heal(self.active.pop(i))
                    self.healed[i] = self.now()
            except Exception as exc:  # a node that will not restart, say
                # Said in the report; `heal_all` restarts whatever is down afterwards.
                what = "applying" if starts else "healing"
                self.report.notes.append(f"{what} {fault.describe()} failed: {exc!r}"[:2000])

    def heal_all(self) -> None:
        """Ends every fault still active: the network first, then the processes."""
        for i in list(self.active):
            self._heal(self.active.pop(i))
            self.healed[i] = self.now()
        self.cluster.heal_network()
        for node in self.cluster.nodes.values():
            node.signal(signal.SIGCONT)
            if not node.running:
                node.restart()

    def faults_log(self) -> list[tuple[float, float | None, Fault]]:
        """Each fault applied: when, when healed (None: not yet), what."""
        return [
            (self.applied[i], self.healed.get(i), f)
            for i, f in enumerate(self.schedule)
            if i in self.applied
        ]

    def _skip(self, fault: Fault, why: str) -> bool:
        self.report.skipped[fault.kind] = why
        return False

    def _links(self) -> None:
        """Sets every link from the network faults active now."""
        states: dict[tuple[str, str], LinkState] = {
            p: LinkState() for p in self.cluster.proxy.links
        }
        for f in self.active.values():
            for pair in f.cut_pairs():
                states[pair].cut = True
            if f.kind == "flaky":
                for pair in self.cluster.links_of(f.nodes[0]):
                    states[pair].delay, states[pair].drop = f.delay, f.drop
        for pair, state in states.items():
            self.cluster.proxy.set([pair], state)

    def _apply(self, f: Fault) -> bool:
        node = self.cluster[f.nodes[0]]
        if f.kind in ("isolate", "halves", "bridge", "flaky"):
            self._links()
        elif f.kind == "kill":
            node.kill()
        elif f.kind == "kill-sync":
            self._kill_mid_sync(node)
        elif f.kind == "pause":
            node.signal(signal.SIGSTOP)
        elif f.kind.startswith("clock"):
            if faketime_library() is None:
                return self._skip(f, "libfaketime is not installed (apt-get install faketime)")
            self._restart(node, f.offset)
        elif f.kind == "disk":
            if self.cluster.disk_point is None:
                return self._skip(f, self.cluster.disk_skip or "no disk node (PostgreSQL stores)")
            fill(self.cluster.disk_point)
        self.report.injected[f.kind] += 1
        return True

    def _heal(self, f: Fault) -> None:
        node = self.cluster[f.nodes[0]]
        if f.kind in ("isolate", "halves", "bridge", "flaky"):
            self._links()
        elif f.kind in ("kill", "kill-sync"):
            node.restart()
        elif f.kind == "pause":
            node.signal(signal.SIGCONT)
        elif f.kind.startswith("clock"):
            self._restart(node, 0)
        elif f.kind == "disk":
            assert self.cluster.disk_point is not None
            (self.cluster.disk_point / "ballast").unlink(missing_ok=True)

    def _restart(self, node: FaultNode, offset: int) -> None:
        node.signal(signal.SIGCONT)
        node.stop()
        node.clock_offset = offset
        node.restart()

    def _kill_mid_sync(self, node: FaultNode) -> None:
        """Starts a sync round on the node and kills it a moment later, mid-round."""
        try:
            call = node.admin.SyncNow.future(pb.SyncNowRequest(), timeout=SWEEP_TIMEOUT)
        except grpc.FutureTimeoutError:
            call = None
        time.sleep(self.rng.uniform(0.0, 0.2))
        node.kill()
        if call is not None:
            call.cancel()


def converge(cluster: Cluster) -> tuple[int | None, list[str]]:
    """SyncNow on every node in turn until a whole sweep moves nothing: the number of sweeps
    that still moved something, or None (with the last sweep's differences) when MAX_SWEEPS
    were not enough."""
    last: list[str] = []
    for sweep in range(1, MAX_SWEEPS + 1):
        last = []
        for node in cluster.nodes.values():
            reply = node.admin.SyncNow(pb.SyncNowRequest(), timeout=SWEEP_TIMEOUT)
            for r in reply.results:
                if not r.ok or r.differing_buckets:
                    last.append(f"{node.node_id}->{r.node_id}: {r.error or r.differing_buckets}")
        if not last:
            return sweep - 1, []
    return None, last


def digest_roots(cluster: Cluster) -> list[str]:
    """Each node's root digests as a peer sees them (GetDigest over the peer link, with
    another node's certificate): which sets differ, and by how many items."""
    out = []
    for node in cluster.nodes.values():
        caller = next(n for n in cluster.nodes.values() if n is not node)
        channel = peer_channel(caller.tls, node)
        try:
            stub = pb_grpc.FederationServiceStub(channel)
            digest = stub.GetDigest(pb.DigestRequest(), timeout=SWEEP_TIMEOUT)
        finally:
            channel.close()
        roots = ", ".join(
            f"{pb.DigestSet.Name(b.set).removeprefix('DIGEST_SET_')}={b.count}:{b.hash.hex()[:8]}"
            for b in digest.buckets
        )
        out.append(f"{node.node_id} (asked by {caller.node_id}): {roots}")
    return out


def diagnose(cluster: Cluster) -> list[str]:
    """What still differs when sweeps never go quiet: the root digests, then whether a
    restart of every node (digests rebuilt from the stores) lets them converge."""
    out = ["root digests: " + " | ".join(digest_roots(cluster))]
    for node in cluster.nodes.values():
        node.stop()
        node.restart()
    rounds, still = converge(cluster)
    out.append(f"after restarting every node: rounds {rounds}, still differing {still}")
    return out


Sabotage = Callable[[Cluster, History], None]


def plan(
    seed: int, nodes: int, seconds: float, beyond_allowance: bool = True
) -> tuple[list[str], str, list[Fault]]:
    """The node ids, the node whose data dir sits on the small disk, and the schedule."""
    ids = [f"n{i + 1}" for i in range(nodes)]
    rng = random.Random(f"{seed}:roles")
    disk_node, clock_node = rng.choice(ids), rng.choice(ids)
    schedule = draw_schedule(
        seed,
        ids,
        seconds,
        disk_node=disk_node,
        clock_node=clock_node,
        beyond_allowance=beyond_allowance,
    )
    return ids, disk_node, schedule


def run_campaign(
    root: Path,
    seed: int,
    *,
    nodes: int = 3,
    seconds: float = 25.0,
    postgres: bool = False,
    beyond_allowance: bool = True,
    sabotage: Sabotage | None = None,
) -> Report:
    """Runs one campaign under `root`; the report holds the counts and any violations.
    `sabotage` (for showing that the checker can fail) runs on the stopped cluster before
    its stores are read."""
    started = time.monotonic()
    ids, disk_node, schedule = plan(seed, nodes, seconds, beyond_allowance)
    report = Report(seed, nodes, postgres, schedule)
    if postgres:
        with postgres_databases(nodes) as urls:
            _run(root, ids, seed, seconds, report, urls, None, sabotage)
    else:
        _run(root, ids, seed, seconds, report, None, disk_node, sabotage)
    report.seconds = time.monotonic() - started
    return report


def _run(
    root: Path,
    ids: list[str],
    seed: int,
    seconds: float,
    report: Report,
    urls: list[str] | None,
    disk_node: str | None,
    sabotage: Sabotage | None,
) -> None:
    cluster = Cluster(root, ids, seed, database_urls=urls, disk_node=disk_node)
    try:
        _start(cluster)
        history, nemesis = _exercise(cluster, seed, seconds, report)
        report.rounds_to_converge, differing = converge(cluster)
        if report.rounds_to_converge is None:
            differing += diagnose(cluster)
        killed = cluster.stop()
        if killed:
            report.notes.append(f"needed SIGKILL to stop: {killed}")
        if sabotage is not None:
            sabotage(cluster, history)
        stores = _stores(cluster)
        judge = Judge(history.ops)
        report.violations = judge.check(stores)
        if report.rounds_to_converge is None:
            report.violations.append(
                Violation(
                    "no-convergence",
                    "*",
                    (),
                    f"no quiet sweep after {MAX_SWEEPS} sweeps of SyncNow; the last: {differing}",
                )
            )
        report.acknowledged = len(judge.acks)
        report.checked = judge.checked
        spared = judge.spared_by_skew()
        if spared:
            report.notes.append(
                f"{len(spared)} acknowledged facts were recorded after a later erasure's erased_at "
                "by a clock running ahead, so the erasure did not cover them (specification §6 "
                "coverage is by recorded time)"
            )
        report.ops.update(o.kind for o in history.ops if o.status != "skipped")
        if report.violations:
            report.failing = failing_history(history.ops, nemesis.faults_log(), report.violations)
    finally:
        cluster.close()


def _start(cluster: Cluster) -> None:
    for attempt in range(3):
        try:
            cluster.start()
            return
        except StartError:
            for node in cluster.nodes.values():
                node.kill()
            if attempt == 2:
                raise


def _exercise(
    cluster: Cluster, seed: int, seconds: float, report: Report
) -> tuple[History, Nemesis]:
    """Clients and the nemesis for `seconds`; then every fault healed."""
    t0 = time.monotonic()
    history = History(t0)
    ports = {n.node_id: n.client_port for n in cluster.nodes.values()}
    base = event_base()
    clients = [Client(c, seed, ports, history, base, PACE) for c in range(CLIENTS)]
    nemesis = Nemesis(cluster, report.schedule, report, t0)
    stop = threading.Event()
    threads = [threading.Thread(target=c.run, args=(stop,), daemon=True) for c in clients]
    threads.append(threading.Thread(target=nemesis.run, args=(stop,), daemon=True))
    for t in threads:
        t.start()
    threads[-1].join(timeout=seconds + 120)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    for c in clients:
        c.close()
        if c.errors:
            report.notes.append(f"client {c.client}: {len(c.errors)} calls raised: {c.errors[:3]}")
    nemesis.heal_all()
    return history, nemesis


def _stores(cluster: Cluster) -> dict[str, NodeStore]:
    now = time.time_ns() // 1000
    out = {}
    for node in cluster.nodes.values():
        url = node.database_url or f"sqlite:///{node.data_dir / 'factnode.db'}"
        out[node.node_id] = read_store(node.node_id, url, now)
    return out
