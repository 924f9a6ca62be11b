"""One node, several processes (specification §9, §10): replicas of `factnode serve` on one
PostgreSQL database serve every read with every write acknowledged before it started, on
any replica; the lease holder's kill -9 loses nothing and moves background work."""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from _e2e import ServerProcess, start_server
from _replicas import (
    LEASE_SECONDS,
    fresh_database,
    lease_holder,
    start_replicas,
    stop_all,
    wait_for,
)

from factnode import tokens
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.client import Client, ClientError, NotFound, Unavailable
from factnode.core import Key, Policy, arbitrate
from factnode.core.arbitration import believed_versions
from factnode.server._context import WATCH_POLL_SECONDS
from factnode.store import SqlRepository

T = TypeVar("T")

REPLICAS = 3
CLIENTS = 16
# The workload's length: FACTNODE_REPLICA_TEST_SECONDS=30 for the long form.
RUN_SECONDS = float(os.environ.get("FACTNODE_REPLICA_TEST_SECONDS", "12"))
SINGLE_KEYS = 6  # single-valued keys (recency decides: a later write's event time is later)
MULTI_KEYS = 3  # multi-valued keys (every written value stays believed)
BASE = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Record:
    """What the clients did: acknowledged writes and checked reads, with their times."""

    # (time acknowledged, key, write number, evidence id)
    acked: list[tuple[float, Key, int, str]] = field(default_factory=list)
    # (time the read started, key, write numbers the answer holds, or None: not found)
    reads: list[tuple[float, Key, frozenset[int] | None]] = field(default_factory=list)
    retried: int = 0  # calls that failed on one replica and then succeeded on another
    failed: list[str] = field(default_factory=list)  # calls no replica answered
    lock: threading.Lock = field(default_factory=threading.Lock)


class Workload:
    """CLIENTS threads, client i starting on replica i % n, writing and reading a few shared
    keys; a call that a replica does not answer goes to the next replica (a write with its
    idempotency key, so a retry never doubles it)."""

    def __init__(self, replicas: list[ServerProcess], namespace: str) -> None:
        self.addresses = [r.address for r in replicas]
        self.single = [Key(namespace, f"s{i}", "lives_in") for i in range(SINGLE_KEYS)]
        self.multi = [Key(namespace, f"m{i}", "knows") for i in range(MULTI_KEYS)]
        self.record = Record()
        self._numbers = itertools.count(1)
        self._numbers_lock = threading.Lock()
        self._stop = threading.Event()

    def run(
        self, seconds: float, during: threading.Thread | None = None, clients: int = CLIENTS
    ) -> None:
        threads = [threading.Thread(target=self._client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        if during is not None:
            during.start()
        time.sleep(seconds)
        self._stop.set()
        for t in [*threads, *([during] if during else [])]:
            t.join(timeout=60)
            assert not t.is_alive(), "a client did not finish"

    def _client(self, index: int) -> None:
        rng = random.Random(index)
        clients = [Client(a, timeout=10.0, retries=0) for a in self.addresses]
        try:
            home = index % len(clients)
            while not self._stop.is_set():
                key = rng.choice(self.single + self.multi)
                if rng.random() < 0.5:
                    self._write(clients, home, key)
                else:
                    self._read(clients, home, key)
        finally:
            for c in clients:
                c.close()

    def _number(self) -> int:
        with self._numbers_lock:
            return next(self._numbers)

    def _write(self, clients: list[Client], home: int, key: Key) -> None:
        n = self._number()
        obj = f"v{n}" if key.predicate == "lives_in" else f"p{n}"
        idempotency = str(uuid.uuid4())
        done = self._call(
            clients,
            home,
            lambda c: c.submit(
                key,
                obj,
                "user_stated",
                source="replica-test",
                valid_from=BASE + timedelta(seconds=n),
                idempotency_key=idempotency,
            ),
        )
        if done is not None:
            assert done.decision.outcome != "REJECTED", done.decision
            at = time.monotonic()
            with self.record.lock:
                self.record.acked.append((at, key, n, done.evidence_id))

    def _read(self, clients: list[Client], home: int, key: Key) -> None:
        started = time.monotonic()

        def get(c: Client) -> frozenset[int] | None:
            try:
                belief = c.belief(key)
            except NotFound:
                return None
            return frozenset(int(v[1:]) for v in (belief.values or (belief.object,)))

        found = self._call(clients, home, get)
        with self.record.lock:
            self.record.reads.append((started, key, found))

    def _call(self, clients: list[Client], home: int, fn: Callable[[Client], T]) -> T | None:
        """`fn` on the client's home replica, then on the next ones while they are
        unavailable; None (recorded as a failure) when no replica answered."""
        for attempt in range(len(clients) * 2):
            client = clients[(home + attempt) % len(clients)]
            try:
                out = fn(client)
            except Unavailable:
                if self._stop.is_set() and attempt >= len(clients):
                    break
                time.sleep(0.05)
                continue
            except ClientError as exc:
                with self.record.lock:
                    self.record.failed.append(f"{type(exc).__name__}: {exc}")
                return None
            if attempt:
                with self.record.lock:
                    self.record.retried += 1
            return out
        with self.record.lock:
            self.record.failed.append("no replica answered")
        return None


def stale_reads(record: Record) -> list[str]:
    """Every read missing a write acknowledged before it started: a single-valued key must
    answer a write at least as late as the latest acknowledged one, a multi-valued key every
    acknowledged value."""
    by_key: dict[Key, list[tuple[float, int]]] = {}
    for at, key, n, _ in record.acked:
        by_key.setdefault(key, []).append((at, n))
    out = []
    for started, key, found in record.reads:
        before = {n for at, n in by_key.get(key, []) if at < started}
        if not before:
            continue
        if found is None:
            out.append(f"{key}: not found, {len(before)} writes acknowledged before")
        elif key.predicate == "lives_in" and max(found) < max(before):
            out.append(f"{key}: answered write {max(found)}, write {max(before)} acknowledged")
        elif key.predicate == "knows" and not before <= found:
            out.append(f"{key}: missing writes {sorted(before - found)[:5]}")
    return out


def check_final_state(url: str, workload: Workload, replicas: list[ServerProcess]) -> None:
    """Every acknowledged fact is stored, and every replica serves what a fresh replay of the
    stored evidence through the core's arbitration gives."""
    record = workload.record
    policy = Policy()
    repo = SqlRepository(url, cache_keys=0)
    try:
        with repo.read() as tx:
            stored = tx.evidence([eid for *_, eid in record.acked])
            states = tx.key_states(workload.single + workload.multi)
    finally:
        repo.close()
    lost = [eid for *_, eid in record.acked if eid not in stored]
    assert not lost, f"{len(lost)} acknowledged facts are missing"
    for key, state in states.items():
        verdict = arbitrate(state.visible(policy), policy)
        objects = {e.version_id: e.object for e in state.evidence}
        replayed = {objects[v] for v in believed_versions(verdict)}
        for replica in replicas:
            with Client(replica.address, timeout=10.0) as client:
                belief = client.belief(key)
            served = set(belief.values or (belief.object,))
            assert served == replayed, (key, replica.address, served, replayed)


def agreed_holder(replicas: list[ServerProcess]) -> str | None:
    """The lease holder every replica names, or None while they differ or name none."""
    named = {lease_holder(r) for r in replicas}
    holders = {h for _, h in (n for n in named if n is not None)}
    return holders.pop() if None not in named and len(holders) == 1 and "" not in holders else None


def kill_lease_holder(replicas: list[ServerProcess], after: float, out: dict[str, object]) -> None:
    """After `after` seconds: kill -9 of the replica holding the lease, then how long until a
    survivor reports holding it."""
    time.sleep(after)
    holder = wait_for(lambda: agreed_holder(replicas), 4 * LEASE_SECONDS, "no agreed holder")
    victim = next(r for r in replicas if holder.endswith(f":{r.proc.pid}"))
    out["victim"] = victim.address
    victim.kill()
    killed = time.monotonic()
    survivors = [r for r in replicas if r is not victim]

    def moved() -> str | None:
        seen = [lease_holder(r) for r in survivors]
        took = {me for me, holder in (s for s in seen if s is not None) if holder == me}
        return next(iter(took)) if took else None

    out["new_holder"] = wait_for(moved, 6 * LEASE_SECONDS, "no survivor took the lease")
    out["moved_after"] = time.monotonic() - killed


@pytest.mark.postgres
@pytest.mark.slow
def test_replicas_serve_every_acknowledged_write_and_survive_the_lease_holders_kill(
    tmp_path: Path,
) -> None:
    """3 replicas, 16 clients on overlapping keys: no read misses a write acknowledged before
    it started (0 stale reads), the lease holder's kill -9 moves the lease to a survivor
    within two lease intervals, its clients' retries succeed elsewhere, and at the end every
    acknowledged fact is stored and every replica serves the core's replay of the evidence."""
    with fresh_database() as url:
        replicas = start_replicas(tmp_path, url, REPLICAS)
        try:
            workload = Workload(replicas, f"rep:{uuid.uuid4().hex[:8]}")
            killing: dict[str, object] = {}
            killer = threading.Thread(
                target=kill_lease_holder, args=(replicas, RUN_SECONDS / 2, killing)
            )
            workload.run(RUN_SECONDS, during=killer)
            record = workload.record
            stale = stale_reads(record)
            print(
                f"\nreplicas: {len(record.acked)} writes acknowledged, {len(record.reads)} reads "
                f"checked, {len(stale)} stale, {record.retried} retried on another replica; "
                f"lease moved in {killing.get('moved_after', -1.0):.2f}s"
            )
            assert not record.failed, record.failed[:5]
            assert stale == [], stale[:10]
            assert len(record.acked) > 100 and len(record.reads) > 100, "too little work to judge"
            assert "moved_after" in killing, f"the lease did not move: {killing}"
            assert float(killing["moved_after"]) <= 2 * LEASE_SECONDS, killing  # type: ignore[arg-type]
            assert record.retried > 0, "no client was moved off the killed replica"
            alive = [r for r in replicas if r.proc.poll() is None]
            assert len(alive) == REPLICAS - 1
            check_final_state(url, workload, alive)
        finally:
            stop_all(replicas)


def test_status_names_the_replica_answering_and_the_lease_holder_on_sqlite(
    tmp_path: Path,
) -> None:
    """On SQLite the one process is the replica answering and runs the background work;
    on PostgreSQL every replica names itself and the one holder (see the test above)."""
    node = start_server(tmp_path)
    try:
        answering, holder = wait_for(lambda: lease_holder(node), 10.0, "no status")
        assert answering == holder and answering.endswith(f":{node.proc.pid}")
    finally:
        node.stop()


@pytest.mark.postgres
def test_every_replica_is_one_node_and_names_itself_and_the_one_holder(tmp_path: Path) -> None:
    """Replicas on one database share the node id; each names itself (host:pid) as the
    replica answering, and all name the same holder of the lease, one of them."""
    with fresh_database() as url:
        replicas = start_replicas(tmp_path, url, REPLICAS)
        try:
            assert len({r.node_id for r in replicas}) == 1
            seen = [wait_for(lambda r=r: lease_holder(r), 10.0, "no status") for r in replicas]
            assert [me for me, _ in seen] == [
                f"{me.split(':')[0]}:{r.proc.pid}"
                for (me, _), r in zip(seen, replicas, strict=True)
            ]
            one = wait_for(
                lambda: agreed_holder(replicas),
                4 * LEASE_SECONDS,
                "the replicas did not agree on one lease holder",
            )
            assert one in {me for me, _ in seen}
        finally:
            stop_all(replicas)


class Watcher:
    """A WatchBeliefs stream on one replica, read by a thread into `seqs` (the change log
    positions its resume tokens name); `resume` ends the call and opens another from the last
    token, as a client that lost its stream does."""

    def __init__(self, address: str, namespace: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.FactServiceStub(self.channel)
        self.namespace = namespace
        self.seqs: list[int] = []
        self.token = ""
        self.errors: list[str] = []
        self._call: Any = None
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        request = pb.WatchBeliefsRequest(namespace=self.namespace, resume_token=self.token)
        self._call = self.stub.WatchBeliefs(request)
        self._thread = threading.Thread(target=self._read, args=(self._call,))
        self._thread.start()

    def _read(self, call: Any) -> None:
        try:
            for change in call:
                self.seqs.append(tokens.decode_seq_position(change.resume_token, tokens.CHANGES))
                self.token = change.resume_token
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.CANCELLED:
                self.errors.append(str(err.code()))

    def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
        if self._thread is not None:
            self._thread.join(timeout=30)
            assert not self._thread.is_alive(), "the watch did not end"

    def resume(self) -> None:
        self.close()
        self.open()


class DecisionFollower:
    """Follows the decision log of a namespace on one replica as the console's live log
    does: ListDecisions after the last position seen, again and again, into `seqs`."""

    def __init__(self, address: str, namespace: str) -> None:
        self.client = Client(address, timeout=10.0)
        self.namespace = namespace
        self.seqs: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow)

    def _follow(self) -> None:
        while not self._stop.is_set():
            after = tokens.seq_position(self.seqs[-1]) if self.seqs else ""
            page = self.client.decisions(namespace=self.namespace, page_token=after)
            self.seqs.extend(d.seq for d in page.items)
            if not page.items:
                time.sleep(0.05)

    def __enter__(self) -> DecisionFollower:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.client.close()


def logged_decisions(url: str, namespace: str) -> list[int]:
    """The positions of every decision of `namespace`, as the database holds them."""
    repo = SqlRepository(url, cache_keys=0)
    try:
        with repo.read() as tx:
            return [d.seq for d in tx.decisions(None, namespace, 0, 1_000_000)]
    finally:
        repo.close()


def logged_changes(url: str, namespace: str) -> list[int]:
    """The positions of every belief change of `namespace`, as the database holds them."""
    repo = SqlRepository(url, cache_keys=0)
    try:
        with repo.read() as tx:
            return [c.seq for c in tx.belief_changes(namespace, 0, 1_000_000)]
    finally:
        repo.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_a_watch_on_one_replica_sees_every_change_made_through_the_others_once_in_order(
    tmp_path: Path,
) -> None:
    """WatchBeliefs on replica 1, 8 clients writing through replicas 2 and 3: the stream (cut
    and resumed from its last token midway) hands out exactly the change log's positions
    for the namespace, in order: none twice, none skipped, none committed late and missed;
    and following ListDecisions from the last position seen, as the console's live log
    does, on replica 1 during the writes gives exactly the decision log."""
    with fresh_database() as url:
        replicas = start_replicas(tmp_path, url, REPLICAS)
        try:
            namespace = f"watch:{uuid.uuid4().hex[:8]}"
            watcher = Watcher(replicas[0].address, namespace)
            watcher.open()
            workload = Workload(replicas[1:], namespace)
            follower = DecisionFollower(replicas[0].address, namespace)

            def resume_midway() -> None:
                time.sleep(3.0)
                watcher.resume()

            resumer = threading.Thread(target=resume_midway)
            with follower:
                workload.run(6.0, during=resumer, clients=8)
                decided = logged_decisions(url, namespace)
                wait_for(
                    lambda: True if len(follower.seqs) >= len(decided) else None,
                    30.0,
                    f"the decision log follower saw {len(follower.seqs)} of {len(decided)}",
                )
            assert not workload.record.failed, workload.record.failed[:5]
            assert follower.seqs == decided  # the console's live log: none skipped, none twice
            logged = logged_changes(url, namespace)
            wait_for(
                lambda: True if len(watcher.seqs) >= len(logged) else None,
                30.0,
                f"the watch saw {len(watcher.seqs)} of {len(logged)} changes",
            )
            time.sleep(2 * WATCH_POLL_SECONDS)  # nothing more may come
            watcher.close()
            assert watcher.errors == []
            assert len(logged) > 50, "too few changes to judge"
            assert watcher.seqs == logged
        finally:
            stop_all(replicas)
