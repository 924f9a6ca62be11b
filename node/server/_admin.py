"""AdminService: operators erase personal data, run decay, read the status and sync."""

from __future__ import annotations

import datetime as dt
import time

import factnode
from factnode import _wire as cv
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import FieldViolation, InvalidInput
from factnode.federation.members import Roster
from factnode.federation.trust import NotAMember
from factnode.ledger import NotFound
from factnode.server._auth import caller_identity
from factnode.server._context import NodeContext, run
from factnode.server._errors import Context, FailedPrecondition, unary


class AdminServicer(pb_grpc.AdminServiceServicer):
    """Operators erase personal data, run decay and read the node's status."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    @unary
    async def Erase(self, request: pb.EraseRequest, context: Context) -> pb.EraseResponse:
        scope = request.WhichOneof("scope")
        report = await run(
            self.ctx.ledger.erase,
            evidence_id=request.evidence_id if scope == "evidence_id" else None,
            key=cv.key(request.key) if scope == "key" else None,
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
            erased_at=cv.timestamp(report.erased_at),
        )

    @unary
    async def RunDecay(self, request: pb.RunDecayRequest, context: Context) -> pb.RunDecayResponse:
        out: list[FieldViolation] = []
        now = cv.optional_instant(request, "now", "now", out)
        cv.raise_if(out)
        report = await run(self.ctx.ledger.run_decay, now)
        self.ctx.metrics.decay(report.decayed, report.tombstoned)
        self.ctx.changes.notify()
        return pb.RunDecayResponse(decayed=report.decayed, tombstoned=report.tombstoned)

    @unary
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Context
    ) -> pb.GetStatusResponse:
        counts = await run(self.ctx.ledger.counts)
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
            ),
            replica=self.ctx.replica,
            lease_holder=holder or "",
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
