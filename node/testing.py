"""Fakes shared by the tests and by users who embed factnode: a clock and a store."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from google.protobuf.message import Message

from factnode.api.v1 import factnode_pb2 as pb
from factnode.certs import ensure_ca, issue_node_cert
from factnode.config import Peer
from factnode.core import MICROS_PER_DAY, Instant, Policy
from factnode.federation.members import Roster
from factnode.federation.sync import FederationEndpoint, Syncer
from factnode.federation.trust import Authority, Signer, sign_revocation_list
from factnode.ledger import Ledger
from factnode.store import Repository, SqlRepository

M = TypeVar("M", bound=Message)


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

    def __init__(self, caller: str, endpoint: FederationEndpoint) -> None:
        self.caller = caller
        self.endpoint = endpoint
        self.up = True
        self.calls = 0
        self.bytes = 0
        # Messages left before the link breaks mid-round (None: it does not).
        self.breaks_after: int | None = None
        # Seconds each call waits before it is answered, as a slow network would.
        self.latency = 0.0

    async def _delay(self) -> None:
        if self.latency:
            await asyncio.sleep(self.latency)

    def _send(self, msg: Message, kind: type[M]) -> M:
        if self.breaks_after is not None:
            if self.breaks_after <= 0:
                self.up = False
            self.breaks_after -= 1
        if not self.up:
            raise ConnectionError("link down")
        raw = msg.SerializeToString()
        self.calls += 1
        self.bytes += len(raw)
        return kind.FromString(raw)

    async def get_digest(self, request: pb.DigestRequest) -> pb.Digest:
        await self._delay()
        req = self._send(request, pb.DigestRequest)
        return self._send(self.endpoint.get_digest(self.caller, req), pb.Digest)

    async def pull_delta(self, request: pb.DeltaRequest) -> pb.Delta:
        await self._delay()
        req = self._send(request, pb.DeltaRequest)
        return self._send(
            await asyncio.to_thread(self.endpoint.pull_delta, self.caller, req), pb.Delta
        )

    async def push_delta(self, delta: pb.Delta) -> pb.PushDeltaResponse:
        await self._delay()
        req = self._send(delta, pb.Delta)
        reply = await asyncio.to_thread(self.endpoint.push_delta, self.caller, req)
        return self._send(reply, pb.PushDeltaResponse)


class Credentials:
    """A federation CA and a certificate and key per node id, made in memory for tests."""

    def __init__(self, node_ids: Iterable[str]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            self._ca_cert, self._ca_key = ensure_ca(out)
            self.ca = (out / "ca.crt").read_bytes()
            self.nodes: dict[str, tuple[bytes, bytes]] = {}
            for n in node_ids:
                crt, key = issue_node_cert(out, n)
                self.nodes[n] = (crt.read_bytes(), key.read_bytes())
        self.authority = Authority(self.ca)

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
        roster = Roster(
            ledger, self.authority, signer.identity, "", peers, lambda: None, lambda _b: None
        )
        ledger.sign = signer.sign
        ledger.verify_vote = roster.verify_vote
        ledger.verify_evidence = roster.verify_evidence
        ledger.verify_tombstone = roster.verify_tombstone
        return roster


class Federation:
    """Several in-process nodes, fully meshed over `InProcessLink`s, for simulations. With
    `signed` (the default) each node holds a certificate from one CA and signs its votes,
    as a served node does (DESIGN §7)."""

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
