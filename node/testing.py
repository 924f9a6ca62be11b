"""Fakes shared by the tests and by users who embed factnode: a clock, a store, in-process
peer links, a meshed federation and a fleet of members with real certificates."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from cryptography.hazmat.primitives import serialization
from google.protobuf.message import Message
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from factnode.api.v1 import factnode_pb2 as pb
from factnode.certs import ensure_ca, issue_node_cert
from factnode.config import Peer
from factnode.core import MICROS_PER_DAY, Instant, Policy
from factnode.federation.members import Roster
from factnode.federation.sync import FederationEndpoint, Syncer
from factnode.federation.trust import Authority, Signer, sign_revocation_list
from factnode.ledger import Ledger, Signing
from factnode.store import Repository, SqlRepository

M = TypeVar("M", bound=Message)


@contextmanager
def fresh_postgres_database(base: str, prefix: str = "factnode") -> Iterator[str]:
    """A URL on a new database on the PostgreSQL server `base` names, dropped on exit (with
    whatever is still connected to it): replicas' tests and benches each get their own,
    since advisory locks, unlike tables, are per database rather than per schema."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(base).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: Instant = 20_000 * MICROS_PER_DAY) -> None:
        self.current = start

    def now(self) -> Instant:
        return self.current

    def advance(self, micros: Instant) -> Instant:
        self.current += micros
        return self.current


def memory_repository() -> SqlRepository:
    """A private in-memory SQLite store.

    The real SQL code path on an in-memory database, rather than a second
    hand-written store: fast enough for tests and it cannot drift from the real one.
    """
    return SqlRepository("sqlite://")


def memory_ledger(
    policy: Policy | None = None, clock: FakeClock | None = None, node_id: str = "node-test"
) -> Ledger:
    """A ledger on a fresh in-memory store with a fake clock."""
    return Ledger(memory_repository(), policy or Policy(), node_id, clock or FakeClock())


class InProcessLink:
    """A fake peer transport: calls the peer's endpoint directly, through real serialization.

    Messages are serialized and parsed on the way, so byte counts are honest and
    the wire format is exercised; `calls` and `bytes` tally the traffic. A link can
    be cut (`up = False`) to simulate a partition.
    """

    def __init__(self, caller: str, endpoint: FederationEndpoint | _Guarded) -> None:
        self.caller = caller
        self.endpoint = endpoint
        self.up = True
        self.calls = 0
        self.bytes = 0
        self.requested = 0  # bytes the caller sent (requests and pushes)
        self.answered = 0  # bytes the peer sent back (answers)
        # Messages left before the link breaks mid-round (None: it does not).
        self.breaks_after: int | None = None
        # Seconds each call waits before it is answered, as a slow network would.
        self.latency = 0.0

    async def _delay(self) -> None:
        if self.latency:
            await asyncio.sleep(self.latency)

    def _send(self, msg: Message, kind: type[M], answer: bool = False) -> M:
        if self.breaks_after is not None:
            if self.breaks_after <= 0:
                self.up = False
            self.breaks_after -= 1
        if not self.up:
            raise ConnectionError("link down")
        raw = msg.SerializeToString()
        self.calls += 1
        self.bytes += len(raw)
        if answer:
            self.answered += len(raw)
        else:
            self.requested += len(raw)
        return kind.FromString(raw)

    async def get_digest(self, request: pb.DigestRequest) -> pb.Digest:
        await self._delay()
        req = self._send(request, pb.DigestRequest)
        return self._send(self.endpoint.get_digest(self.caller, req), pb.Digest, True)

    async def pull_delta(self, request: pb.DeltaRequest) -> pb.Delta:
        await self._delay()
        req = self._send(request, pb.DeltaRequest)
        return self._send(
            await asyncio.to_thread(self.endpoint.pull_delta, self.caller, req), pb.Delta, True
        )

    async def push_delta(self, delta: pb.Delta) -> pb.PushDeltaResponse:
        await self._delay()
        req = self._send(delta, pb.Delta)
        reply = await asyncio.to_thread(self.endpoint.push_delta, self.caller, req)
        return self._send(reply, pb.PushDeltaResponse, True)


class Credentials:
    """A federation CA and a certificate and key per node id, made in memory for tests."""

    def __init__(self, node_ids: Iterable[str]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            self._ca_cert, self._ca_key = ensure_ca(out)
            self.ca = (out / "ca.crt").read_bytes()
            self._ca_files = {p.name: p.read_bytes() for p in (out / "ca.crt", out / "ca.key")}
            self.nodes: dict[str, tuple[bytes, bytes]] = {}
            for n in node_ids:
                crt, key = issue_node_cert(out, n)
                self.nodes[n] = (crt.read_bytes(), key.read_bytes())
        self.authority = Authority(self.ca)

    def reissue(self, node_id: str) -> Signer:
        """A new certificate and key for `node_id` from the same CA (as `factnode certs` makes
        when a certificate is renewed); its signer. The earlier one stays valid."""
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            for name, data in self._ca_files.items():
                (out / name).write_bytes(data)
            crt, key = issue_node_cert(out, node_id)
            self.nodes[node_id] = (crt.read_bytes(), key.read_bytes())
        return self.signer(node_id)

    def revocation_list(self, node_ids: Iterable[str]) -> bytes:
        """A revocation list the CA signs now, revoking the certificates of `node_ids`."""
        serials = [self.authority.identity(self.nodes[n][0]).serial for n in node_ids]
        now = dt.datetime.now(dt.UTC)
        return sign_revocation_list(self._ca_cert, self._ca_key, serials, None, now)

    def signer(self, node_id: str) -> Signer:
        cert, key = self.nodes[node_id]
        return Signer(self.authority, cert, key)

    def roster(self, ledger: Ledger, peers: list[Peer]) -> Roster:
        """`ledger`'s roster, knowing only its own certificate; it signs and checks votes."""
        signer = self.signer(ledger.node_id)
        roster = Roster(ledger, self.authority, signer, peers)
        ledger.signing = roster.signing()
        ledger.resign_own_votes(f"{signer.identity.serial:x}")  # as the composition root does
        return roster


class Federation:
    """Several in-process nodes, fully meshed over `InProcessLink`s, for simulations. With
    `signed` (the default) each node holds a certificate from one CA and signs its votes,
    as a served node does (specification §7)."""

    def __init__(
        self,
        node_ids: list[str],
        clock: FakeClock | None = None,
        policy: Policy | None = None,
        fanout: int = 0,
        seed: int = 0,
        repositories: Mapping[str, Repository] | None = None,
        clocks: dict[str, FakeClock] | None = None,
        signed: bool = True,
    ) -> None:
        self.clock = clock or FakeClock()
        stores = repositories or {}
        # A node named in `clocks` keeps its own (skewed) clock; the others share `clock`.
        self.clocks = {n: (clocks or {}).get(n, self.clock) for n in node_ids}
        self.ledgers = {
            n: Ledger(stores[n], policy or Policy(), n, self.clocks[n])
            if n in stores
            else memory_ledger(policy, self.clocks[n], n)
            for n in node_ids
        }
        peers = {n: [Peer(f"inproc:{p}", p) for p in node_ids if p != n] for n in node_ids}
        self.credentials = Credentials(node_ids) if signed else None
        self.rosters: dict[str, Roster | None] = {
            n: self.credentials.roster(self.ledgers[n], peers[n]) if self.credentials else None
            for n in node_ids
        }
        self.endpoints = {
            n: FederationEndpoint(self.ledgers[n], peers[n], roster=self.rosters[n])
            for n in node_ids
        }
        self.links = {
            (a, b): InProcessLink(a, self.endpoints[b])
            for a in node_ids
            for b in node_ids
            if a != b
        }
        self.syncers = {
            n: Syncer(
                self.ledgers[n],
                peers[n],
                lambda peer, n=n: self.links[(n, peer.node_id)],  # type: ignore[misc]
                fanout=fanout,
                interval=0.0,
                rng=random.Random(f"{seed}:{n}"),
                roster=self.rosters[n],
            )
            for n in node_ids
        }

    def partition(self, *groups: list[str]) -> None:
        """Cuts every link between different groups."""
        group_of = {n: i for i, g in enumerate(groups) for n in g}
        for (a, b), link in self.links.items():
            link.up = group_of.get(a) == group_of.get(b)

    def heal(self) -> None:
        for link in self.links.values():
            link.up = True

    async def round(self) -> None:
        """Every node runs one sync round (in node id order)."""
        for n in sorted(self.syncers):
            syncer = self.syncers[n]
            for state in syncer.states.values():
                state.next_attempt = 0.0  # no backoff between simulated rounds
            await syncer.sync_round()

    def close(self) -> None:
        for ledger in self.ledgers.values():
            ledger.repo.close()


class Fleet:
    """In-process members of one federation, each with a real certificate from one CA and a
    roster, each knowing only its seeds (addresses): they learn the others from the member
    records that gossip. Links are `InProcessLink`s through real serialization, so byte
    counts are honest; `rng` seeds each member's choice of partners."""

    def __init__(
        self,
        node_ids: Sequence[str],
        seeds: Mapping[str, Sequence[str]],
        *,
        fanout: int = 3,
        seed: int = 0,
        clock: FakeClock | None = None,
        policy: Policy | None = None,
        certs_dir: Path | None = None,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory() if certs_dir is None else None
        out = certs_dir or Path(self._tmp.name if self._tmp else ".")
        ca_cert, _ = ensure_ca(out)
        self.ca_dir = out
        self.authority = Authority(ca_cert.public_bytes(serialization.Encoding.PEM))
        self.clock = clock or FakeClock()
        self.ledgers: dict[str, Ledger] = {}
        self.rosters: dict[str, Roster] = {}
        self.endpoints: dict[str, FederationEndpoint] = {}
        self.syncers: dict[str, Syncer] = {}
        self.links: dict[tuple[str, str], InProcessLink] = {}
        self.down: set[str] = set()  # members that answer nothing
        self._policy = policy or Policy()
        self._seed = seed
        self._fanout = fanout
        for node_id in node_ids:
            self.add(node_id, seeds.get(node_id, ()))

    @staticmethod
    def address(node_id: str) -> str:
        """Where a member of the fleet listens (in name only: links are in-process)."""
        return f"{node_id}.fleet:7421"

    def add(self, node_id: str, seeds: Sequence[str]) -> None:
        """Starts a member knowing only `seeds` (addresses): its certificate, the CA and them."""
        cert, key = issue_node_cert(self.ca_dir, node_id)
        signer = Signer(self.authority, cert.read_bytes(), key.read_bytes())
        ledger = memory_ledger(self._policy, self.clock, node_id)
        roster = Roster(ledger, self.authority, signer)
        roster.publish(self.address(node_id))
        # Each member signs its votes and checks others', as a served node does (specification §7).
        ledger.signing = Signing(sign=signer.sign, verify_vote=roster.verify_vote)
        self.ledgers[node_id], self.rosters[node_id] = ledger, roster
        self.endpoints[node_id] = FederationEndpoint(ledger, [], roster=roster)
        self.syncers[node_id] = Syncer(
            ledger,
            [],
            lambda peer, n=node_id: self._link(n, peer.node_id),  # type: ignore[misc]
            fanout=self._fanout,
            interval=0.0,
            rng=random.Random(f"{self._seed}:{node_id}"),
            refused=roster.is_revoked,
            roster=roster,
            seeds=seeds,
            identify=self._identify,
        )

    def _link(self, caller: str, node_id: str) -> InProcessLink:
        link = self.links.get((caller, node_id))
        if link is None:
            link = self.links[(caller, node_id)] = InProcessLink(
                caller, _Guarded(self, caller, self.endpoints[node_id])
            )
        link.up = node_id not in self.down
        return link

    async def _identify(self, address: str) -> bytes:
        node_id = address.removesuffix(".fleet:7421")
        if node_id not in self.rosters or node_id in self.down:
            raise ConnectionError(f"nothing answers at {address}")
        return self.rosters[node_id].own.pem

    def knows_everyone(self) -> bool:
        """Every member holds a record of every member (itself included)."""
        everyone = set(self.rosters)
        return all(
            {v.node_id for v in r.members(dt.datetime.now(dt.UTC)) if v.incarnation} >= everyone
            for r in self.rosters.values()
        )

    async def round(self, concurrent: bool = True) -> None:
        """Every running member runs one sync round: all at once (`concurrent`), or one after
        another in node id order, which is deterministic."""
        running = [n for n in sorted(self.syncers) if n not in self.down]
        for n in running:
            for state in [*self.syncers[n].states.values(), *self.syncers[n].seeds.values()]:
                state.next_attempt = 0.0  # no backoff between simulated rounds
        # Every exchange shares this process's threads: no step may time out waiting for one.
        if concurrent:
            await asyncio.gather(*(self.syncers[n].sync_round(timeout=3600) for n in running))
        else:
            for n in running:
                await self.syncers[n].sync_round(timeout=3600)

    def close(self) -> None:
        for ledger in self.ledgers.values():
            ledger.repo.close()
        if self._tmp is not None:
            self._tmp.cleanup()


class _Guarded:
    """An endpoint as a caller reaches it: refused, as `proven_peer` refuses it over mTLS,
    when the callee's roster does not admit the caller's certificate now."""

    def __init__(self, fleet: Fleet, caller: str, endpoint: FederationEndpoint) -> None:
        self._fleet, self._caller, self._endpoint = fleet, caller, endpoint

    def _check(self) -> None:
        roster = self._endpoint.roster
        assert roster is not None
        identity = roster.seen(self._fleet.rosters[self._caller].own.pem)
        refusal = roster.refusal(identity, dt.datetime.now(dt.UTC))
        if refusal:
            raise PermissionError(f"{refusal}: not a member of this federation")

    def get_digest(self, caller: str, request: pb.DigestRequest) -> pb.Digest:
        self._check()
        return self._endpoint.get_digest(caller, request)

    def pull_delta(self, caller: str, request: pb.DeltaRequest) -> pb.Delta:
        self._check()
        return self._endpoint.pull_delta(caller, request)

    def push_delta(self, caller: str, delta: pb.Delta) -> pb.PushDeltaResponse:
        self._check()
        return self._endpoint.push_delta(caller, delta)
