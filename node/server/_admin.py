"""AdminService: operators erase personal data, run decay, read the status and sync, and
back the node up (export, import, a physical copy)."""

from __future__ import annotations

import asyncio
import datetime as dt
import queue
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import IO

import factnode
from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import FieldViolation, InvalidInput
from factnode.federation.members import Roster
from factnode.federation.trust import NotAMember
from factnode.ledger import BadExport, ImportRefused, NotFound, Restored
from factnode.server._auth import caller_identity
from factnode.server._context import NodeContext, run
from factnode.server._errors import Context, FailedPrecondition, streaming, unary
from factnode.store import SqlRepository
from factnode.store._backup import copy_sqlite

# Where Backup writes its copies: beside the SQLite file, never where a request says.
BACKUP_DIRECTORY = "backups"
# An export travels in pieces of about this many bytes (whole lines; a longer line alone).
EXPORT_CHUNK_BYTES = 256 * 1024


class AdminServicer(pb_grpc.AdminServiceServicer):
    """Operators erase personal data, run decay and read the node's status."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self._importing = asyncio.Lock()  # one import at a time: each checks emptiness first

    @unary
    async def Erase(self, request: pb.EraseRequest, context: Context) -> pb.EraseResponse:
        scope = request.WhichOneof("scope")
        report = await run(
            self.ctx.ledger.erase,
            evidence_id=request.evidence_id if scope == "evidence_id" else None,
            key=wire.key(request.key) if scope == "key" else None,
            subject=(request.subject.namespace, request.subject.subject)
            if scope == "subject"
            else None,
            operator=request.operator or caller_identity(),
            reason=request.reason,
        )
        self.ctx.changes.notify()
        return pb.EraseResponse(
            erasure_id=report.erasure_id,
            evidence_erased=report.evidence_erased,
            keys_affected=report.keys_affected,
            erased_at=wire.timestamp(report.erased_at),
            believed_again=[wire.believed_again_pb(b) for b in report.believed_again],
        )

    @unary
    async def ListErasures(
        self, request: pb.ListErasuresRequest, context: Context
    ) -> pb.ListErasuresResponse:
        page = await run(
            self.ctx.ledger.reading.erasures,
            self._membership(),
            request.page_size,
            request.page_token,
        )
        reply = pb.ListErasuresResponse(next_page_token=page.next_page_token)
        reply.erasures.extend(wire.erasure_coverage_pb(e) for e in page.items)
        return reply

    @unary
    async def GetErasure(
        self, request: pb.GetErasureRequest, context: Context
    ) -> pb.ErasureCoverage:
        status = await run(self.ctx.ledger.reading.erasure, request.erasure_id, self._membership())
        return wire.erasure_coverage_pb(status)

    @unary
    async def RunDecay(self, request: pb.RunDecayRequest, context: Context) -> pb.RunDecayResponse:
        out: list[FieldViolation] = []
        now = wire.optional_instant(request, "now", "now", out)
        wire.raise_if(out)
        report = await run(self.ctx.ledger.run_decay, now)
        self.ctx.metrics.decay(report.decayed, report.tombstoned)
        self.ctx.changes.notify()
        return pb.RunDecayResponse(decayed=report.decayed, tombstoned=report.tombstoned)

    @unary
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Context
    ) -> pb.GetStatusResponse:
        counts = await run(self.ctx.ledger.counts)
        quarantined = await run(self.ctx.ledger.quarantined_now)
        background = self.ctx.background
        holder = await run(background.holder) if background is not None else None
        peers = []
        now = time.time()
        for state in self.ctx.syncer.states.values() if self.ctx.syncer else ():
            peer = pb.PeerStatus(
                node_id=state.peer.node_id,
                address=state.peer.address,
                last_error=state.last_error,
                max_anchor=self.ctx.ledger.policy.cap_for(state.peer.node_id),
            )
            if state.clock_skew is not None:
                peer.clock_skew_ms = state.clock_skew // 1000
            if state.last_sync is not None:
                peer.last_sync.FromNanoseconds(int(state.last_sync * 1e9))
                peer.lag_seconds = int(now - state.last_sync)
            peers.append(peer)
        return pb.GetStatusResponse(
            peers=peers,
            members=self._members() if self.ctx.roster is not None else [],
            node_id=self.ctx.ledger.node_id,
            version=factnode.__version__,
            listen_address=self.ctx.listen,
            database=self.ctx.database,
            counts=pb.StatusCounts(
                evidence=counts.evidence,
                keys=counts.keys,
                decisions=counts.decisions,
                contested=counts.contested,
                ambiguous=counts.ambiguous,
                rejected=counts.rejected,
                quarantined=len(quarantined),
            ),
            replica=self.ctx.replica,
            lease_holder=holder or "",
            quarantined=[
                pb.QuarantinedItem(
                    evidence_id=q.evidence_id,
                    key=wire.key_pb(q.key),
                    field=q.field,
                    reason=q.reason,
                )
                for q in quarantined
            ],
        )

    @unary
    async def SyncNow(self, request: pb.SyncNowRequest, context: Context) -> pb.SyncNowResponse:
        syncer = self.ctx.syncer
        if syncer is None:
            return pb.SyncNowResponse(results=[])
        if request.peer_node_id and request.peer_node_id not in {
            s.peer.node_id for s in syncer.members()
        }:
            raise NotFound(f"no member {request.peer_node_id!r} this node may dial")
        results = await syncer.sync_round(only=request.peer_node_id or None, force=True)
        self.ctx.changes.notify()
        return pb.SyncNowResponse(
            results=[
                pb.PeerSyncResult(
                    node_id=r.node_id,
                    address=r.address,
                    ok=r.ok,
                    error=r.error,
                    differing_buckets=r.differing_buckets,
                    evidence_received=r.evidence_received,
                    evidence_sent=r.evidence_sent,
                    votes_received=r.votes_received,
                    votes_sent=r.votes_sent,
                    tombstones_received=r.tombstones_received,
                    tombstones_sent=r.tombstones_sent,
                    clock_skew_ms=None if r.clock_skew is None else r.clock_skew // 1000,
                )
                for r in results
            ]
        )

    def _membership(self) -> dict[str, bool]:
        """Every member the roster knows, by whether it is revoked (on a node without a
        federation: none but itself, which the ledger adds)."""
        return self.ctx.roster.membership() if self.ctx.roster is not None else {}

    def _roster(self) -> Roster:
        if self.ctx.roster is None:
            raise FailedPrecondition(
                "this node does not federate (no federation.listen): it has no members"
            )
        return self.ctx.roster

    def _members(self) -> list[pb.Member]:
        """Every member the roster knows, with when this node last completed a round with it."""
        synced = {
            s.peer.node_id: s.last_sync
            for s in (self.ctx.syncer.states.values() if self.ctx.syncer else ())
            if s.last_sync is not None
        }
        members = []
        for m in self._roster().members(dt.datetime.now(dt.UTC)):
            member = pb.Member(
                node_id=m.node_id,
                address=m.address,
                revoked=m.revoked,
                max_anchor=m.max_anchor,
                self=m.is_self,
                refused=m.refused,
                incarnation=m.incarnation,
            )
            if m.node_id in synced:
                member.last_heard.FromNanoseconds(int(synced[m.node_id] * 1e9))
            if m.certificate_expires is not None:
                member.certificate_expires.FromDatetime(m.certificate_expires)
            members.append(member)
        return members

    @unary
    async def ListMembers(
        self, request: pb.ListMembersRequest, context: Context
    ) -> pb.ListMembersResponse:
        members = self._members()
        return pb.ListMembersResponse(members=members, revocation_list_number=self._roster().number)

    @unary
    async def Revoke(self, request: pb.RevokeRequest, context: Context) -> pb.RevokeResponse:
        roster = self._roster()
        try:
            done = await run(roster.revoke, request.revocation_list)
        except NotAMember as exc:
            raise InvalidInput([FieldViolation("revocation_list", str(exc))]) from None
        self.ctx.changes.notify()
        return pb.RevokeResponse(applied=done.applied, number=done.number, revoked=done.revoked)

    @streaming
    async def Export(
        self, request: pb.ExportRequest, context: Context
    ) -> AsyncIterator[pb.ExportChunk]:
        size = min(EXPORT_CHUNK_BYTES, self.ctx.max_reply_bytes // 2)
        async for data in _from_thread(self.ctx.ledger.export, size):
            yield pb.ExportChunk(data=data)

    @unary
    async def Import(
        self, requests: AsyncIterator[pb.ImportChunk], context: Context
    ) -> pb.ImportResponse:
        # Spooled first: the checksum is at the end, and nothing is written before it checks.
        with tempfile.TemporaryFile() as spool:
            force: bool | None = None
            async for chunk in requests:
                force = chunk.force_policy if force is None else force
                spool.write(chunk.data)
            spool.seek(0)
            async with self._importing:
                try:
                    done = await run(self._restore, spool, bool(force))
                except BadExport as exc:
                    raise InvalidInput([FieldViolation("data", str(exc))]) from None
                except ImportRefused as exc:
                    raise FailedPrecondition(str(exc)) from None
        self.ctx.changes.notify()
        return pb.ImportResponse(
            node_id=done.node_id,
            evidence=done.evidence,
            tombstones=done.tombstones,
            pins=done.pins,
            decisions=done.decisions,
            policy_differed=done.policy_differed,
        )

    def _restore(self, spool: IO[bytes], force: bool) -> Restored:
        """The import, and what it carried of the federation handed to the running roster
        (which checks each item, takes a later list and later records, and re-signs this
        node's own record above the file's); the node then holds its data back until its
        next round (`_restore.RestoreGate`)."""
        roster = self.ctx.roster
        check = None if roster is None else _revocation_check(roster)
        done = self.ctx.ledger.restore(spool, force_policy=force, check_revocations=check)
        if roster is not None:
            if done.revocation_list is not None:
                roster.revoke(done.revocation_list)
            if done.members:
                roster.take(list(done.members), by="import")
        self.ctx.restored()
        return done

    @unary
    async def Backup(self, request: pb.BackupRequest, context: Context) -> pb.BackupResponse:
        repo = self.ctx.ledger.repo
        if not isinstance(repo, SqlRepository) or not repo.is_sqlite_file:
            raise FailedPrecondition(
                "Backup copies a SQLite store; this node's store is "
                + ("PostgreSQL: back it up with pg_dump (see the operations guide, Backup)"
                   if isinstance(repo, SqlRepository) and not repo.is_sqlite
                   else "in memory: it has no file to copy; use Export")
            )  # fmt: skip
        folder = Path(repo.engine.url.database or "").absolute().parent / BACKUP_DIRECTORY
        destination = folder / request.name
        if destination.exists():
            raise InvalidInput([FieldViolation("name", f"{destination} exists; give a new name")])
        folder.mkdir(mode=0o700, exist_ok=True)
        size = await run(copy_sqlite, repo.engine, destination)
        return pb.BackupResponse(destination=str(destination), bytes=size)


def _revocation_check(roster: Roster) -> Callable[[bytes], str]:
    """Why a revocation list an export carries is not the federation CA's, or ""."""

    def check(der: bytes) -> str:
        try:
            roster.authority.revocation_list(der)
        except NotAMember as exc:
            return str(exc)
        return ""

    return check


async def _from_thread(lines: Callable[[], Iterator[bytes]], size: int) -> AsyncIterator[bytes]:
    """The lines `lines()` yields, joined into pieces of about `size` bytes. The generator runs
    in a thread of its own from start to end (it holds one read transaction, which must stay
    on one thread), at most a few pieces ahead of the reader; it stops when the reader does."""
    ready: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def put(item: bytes | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            piece = bytearray()
            for line in lines():
                piece += line
                if len(piece) >= size:
                    if not put(bytes(piece)):
                        return
                    piece.clear()
            if piece and not put(bytes(piece)):
                return
            put(None)
        except BaseException as exc:  # handed to the reader, which raises it
            put(exc)

    threading.Thread(target=produce, name="factnode-export", daemon=True).start()

    def take() -> bytes | BaseException | bool | None:
        # Bounded, so no executor thread waits on for ever once the reader has gone.
        try:
            return ready.get(timeout=0.5)
        except queue.Empty:
            return False

    try:
        while True:
            item = await asyncio.to_thread(take)
            if item is False:
                continue
            if item is None or isinstance(item, bool):
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
