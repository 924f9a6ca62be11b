"""Thin servicers: decode, call the ledger (off the event loop), encode."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from google.rpc import code_pb2

import factnode
from factnode import _wire as cv
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import BeliefState, Evidence, FieldViolation, InvalidInput, Key, Outcome
from factnode.core.consensus import Tally
from factnode.federation.sync import Syncer
from factnode.ledger import Belief, Explanation, Ledger, NotFound
from factnode.metrics import Metrics
from factnode.server._auth import require_write, require_write_submission
from factnode.server._errors import Context, PermissionDenied, status_for, streaming, unary

T = TypeVar("T")

STREAM_BATCH = 256  # SubmitFacts commits in batches of this many valid items
WATCH_POLL_SECONDS = 1.0


async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # The store is synchronous; keep it off the event loop.
    return await asyncio.to_thread(fn, *args, **kwargs)


class Changes:
    """Wakes belief watchers when this node writes."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        event = self._event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)


@dataclass
class NodeContext:
    """What every servicer shares."""

    ledger: Ledger
    metrics: Metrics
    changes: Changes
    listen: str
    database: str
    syncer: Syncer | None = None


class FactServicer(pb_grpc.FactServiceServicer):
    """Agents submit facts and read beliefs, history and explanations."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    @unary
    async def SubmitFact(
        self, request: pb.SubmitFactRequest, context: Context
    ) -> pb.SubmitFactResponse:
        sub = cv.submission(request)
        require_write_submission(sub)
        evidence = self.ctx.ledger.evidence_of(sub)
        [done] = await _run(self.ctx.ledger.ingest, [(evidence, sub.idempotency_key)])
        self.ctx.metrics.decided([done.decision])
        self.ctx.changes.notify()
        return pb.SubmitFactResponse(
            decision=cv.decision_pb(done.decision),
            evidence_id=done.evidence_id,
            version_id=done.version_id,
            belief=cv.belief_pb(done.belief) if done.belief else None,
        )

    @unary
    async def SubmitFacts(
        self,
        request_iterator: AsyncIterator[pb.SubmitFactRequest],
        context: Context,
    ) -> pb.SubmitFactsResponse:
        results: list[pb.ItemResult] = []
        pending: list[tuple[int, Evidence, str | None]] = []
        invalid = 0

        async def flush() -> None:
            if not pending:
                return
            done = await _run(self.ctx.ledger.ingest, [(e, k) for _, e, k in pending])
            self.ctx.metrics.decided([d.decision for d in done])
            results.extend(
                pb.ItemResult(index=i, decision=cv.decision_pb(d.decision))
                for (i, _, _), d in zip(pending, done, strict=True)
            )
            pending.clear()
            self.ctx.changes.notify()

        index = 0
        async for item in request_iterator:
            try:
                sub = cv.submission(item)
                require_write_submission(sub)
                pending.append((index, self.ctx.ledger.evidence_of(sub), sub.idempotency_key))
            except (InvalidInput, PermissionDenied) as exc:
                invalid += 1
                results.append(pb.ItemResult(index=index, error=_item_error(exc)))
            index += 1
            if len(pending) >= STREAM_BATCH:
                await flush()
        await flush()
        results.sort(key=lambda r: r.index)
        return pb.SubmitFactsResponse(
            results=results, decided_count=index - invalid, invalid_count=invalid
        )

    @unary
    async def GetBelief(self, request: pb.GetBeliefRequest, context: Context) -> pb.Belief:
        as_of, known_at = cv.time_travel(request)
        belief = await _run(self.ctx.ledger.belief, cv.key(request.key), as_of, known_at)
        msg = cv.belief_pb(belief)
        if as_of is None and known_at is None:
            # Tallies only where peers have voted (the API says so), and only then the cost.
            result = await _run(self.ctx.ledger.tally_of, belief.key)
            if result is not None and result.peer_voted:
                explanation = await _run(self.ctx.ledger.explain, belief.key)
                msg.tallies.extend(version_tallies(belief, explanation, result))
        return msg

    @unary
    async def ListBeliefs(
        self, request: pb.ListBeliefsRequest, context: Context
    ) -> pb.ListBeliefsResponse:
        subject = request.subject if request.HasField("subject") else None
        page = await _run(
            self.ctx.ledger.list_beliefs,
            request.namespace,
            subject,
            request.page_size,
            request.page_token,
        )
        return pb.ListBeliefsResponse(
            beliefs=[cv.belief_pb(b) for b in page.items], next_page_token=page.next_page_token
        )

    @unary
    async def GetHistory(
        self, request: pb.GetHistoryRequest, context: Context
    ) -> pb.GetHistoryResponse:
        out: list[FieldViolation] = []
        known_at = cv.optional_instant(request, "known_at", "known_at", out)
        cv.raise_if(out)
        key = cv.key(request.key)
        versions = await _run(self.ctx.ledger.history, key, known_at)
        evidence = await _run(
            self.ctx.ledger.evidence_by_ids, [i for v in versions for i in v.evidence_ids]
        )
        return pb.GetHistoryResponse(
            key=cv.key_pb(key), versions=[cv.history_pb(v, evidence) for v in versions]
        )

    @unary
    async def Explain(self, request: pb.ExplainRequest, context: Context) -> pb.ExplainResponse:
        as_of, known_at = cv.time_travel(request)
        explanation = await _run(self.ctx.ledger.explain, cv.key(request.key), as_of, known_at)
        belief = cv.belief_pb(explanation.belief) if explanation.belief else None
        result = explanation.tally
        if belief is not None and explanation.belief and result is not None and result.peer_voted:
            belief.tallies.extend(version_tallies(explanation.belief, explanation, result))
        return pb.ExplainResponse(
            belief=belief,
            comparisons=[cv.comparison_pb(c) for c in explanation.comparisons],
        )

    @unary
    async def Retract(self, request: pb.RetractRequest, context: Context) -> pb.RetractResponse:
        key = cv.key(request.key)
        require_write(key.namespace)
        out: list[FieldViolation] = []
        at = cv.optional_instant(request, "at", "at", out)
        cv.raise_if(out)
        obj = request.object if request.HasField("object") else None
        decision = await _run(self.ctx.ledger.retract, key, obj, at, request.reason)
        self.ctx.metrics.decided([decision])
        self.ctx.changes.notify()
        belief = await _run(_maybe_belief, self.ctx.ledger, key)
        return pb.RetractResponse(
            decision=cv.decision_pb(decision), belief=cv.belief_pb(belief) if belief else None
        )

    @unary
    async def ListDecisions(
        self, request: pb.ListDecisionsRequest, context: Context
    ) -> pb.ListDecisionsResponse:
        key = cv.key(request.key) if request.HasField("key") else None
        page = await _run(
            self.ctx.ledger.decisions, key, request.namespace, request.page_size, request.page_token
        )
        return pb.ListDecisionsResponse(
            decisions=[cv.decision_pb(d.decision, d.seq) for d in page.items],
            next_page_token=page.next_page_token,
        )

    @streaming
    async def WatchBeliefs(
        self, request: pb.WatchBeliefsRequest, context: Context
    ) -> AsyncIterator[pb.BeliefChange]:
        namespace = request.namespace if request.HasField("namespace") else ""
        after = 0
        if request.resume_token:
            if not request.resume_token.isdigit():
                raise InvalidInput(
                    [FieldViolation("resume_token", "is not a token this node issued")]
                )
            after = int(request.resume_token)
        while not context.done():
            changes = await _run(self.ctx.ledger.changes, namespace, after, 100)
            for change in changes:
                belief = await _run(_maybe_belief, self.ctx.ledger, change.key)
                after = change.seq
                yield pb.BeliefChange(
                    key=cv.key_pb(change.key),
                    belief=cv.belief_pb(belief) if belief else None,
                    resume_token=str(change.seq),
                )
            if not changes:
                await self.ctx.changes.wait(WATCH_POLL_SECONDS)


def version_tallies(
    belief: Belief, explanation: Explanation, result: Tally | None
) -> list[pb.VersionTally]:
    """Every version of a key: the local winner and the versions it beats, with the votes
    behind each (weight, share, voters) where the key has votes."""
    local_winner = (
        explanation.local_comparisons[0].winner.version_id
        if explanation.local_comparisons
        else belief.version_id
    )
    objects = {c.version_id: c.object for c in explanation.local_comparisons}
    rules = {c.version_id: c.rule.value for c in explanation.local_comparisons}
    objects.setdefault(belief.version_id, belief.object)
    if explanation.local_comparisons:
        objects.setdefault(local_winner, explanation.local_comparisons[0].winner.object)
    votes = {t.version_id: t for t in result.versions} if result and result.peer_voted else {}
    order = [
        local_winner,
        *(v for v in objects if v != local_winner),
        *(v for v in votes if v not in objects),
    ]
    out = []
    for vid in order:
        t = votes.get(vid)
        out.append(
            pb.VersionTally(
                version_id=vid,
                object=objects.get(vid, ""),
                weight=t.weight if t else 0,
                share_milli=result.share_milli(vid) if t and result else 0,
                voters=list(t.voters) if t else [],
                local_belief=vid == local_winner,
                local_rule=rules.get(
                    vid, explanation.belief.rule.value if explanation.belief else ""
                ),
            )
        )
    return out


def _maybe_belief(ledger: Ledger, key: Key) -> Belief | None:
    try:
        return ledger.belief(key)
    except NotFound:
        return None


def _item_error(exc: Exception) -> pb.ItemError:
    status = status_for(exc)
    violations = (
        [pb.FieldViolation(field=v.field, description=v.reason) for v in exc.violations]
        if isinstance(exc, InvalidInput)
        else []
    )
    code = (
        code_pb2.INVALID_ARGUMENT if isinstance(exc, InvalidInput) else code_pb2.PERMISSION_DENIED
    )
    return pb.ItemError(code=code, message=status.details, field_violations=violations)


class ReviewServicer(pb_grpc.ReviewServiceServicer):
    """Operators review contested and ambiguous keys and resolve them."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    def _contested(self, belief: Belief) -> pb.ContestedKey:
        explanation = self.ctx.ledger.explain(belief.key)
        tallies = version_tallies(belief, explanation, self.ctx.ledger.tally_of(belief.key))
        return pb.ContestedKey(
            key=cv.key_pb(belief.key),
            state=cv.state_pb(belief.state),
            served_version_id=belief.version_id,
            detail="; ".join(
                f"{c.object!r}: {c.rule.value} ({c.reason})" for c in explanation.comparisons
            ),
            versions=tallies,
        )

    @unary
    async def ListContested(
        self, request: pb.ListContestedRequest, context: Context
    ) -> pb.ListContestedResponse:
        page = await _run(
            self.ctx.ledger.review_queue, request.namespace, request.page_size, request.page_token
        )
        keys = [await _run(self._contested, b) for b in page.items]
        return pb.ListContestedResponse(keys=keys, next_page_token=page.next_page_token)

    @unary
    async def GetContested(
        self, request: pb.GetContestedRequest, context: Context
    ) -> pb.ContestedKey:
        key = cv.key(request.key)
        belief = await _run(self.ctx.ledger.belief, key)
        if belief.state is BeliefState.BELIEVED:
            raise NotFound(f"{key} is not under review (its belief is settled)")
        return await _run(self._contested, belief)

    @unary
    async def ResolveContested(
        self, request: pb.ResolveContestedRequest, context: Context
    ) -> pb.ResolveContestedResponse:
        choice = request.WhichOneof("choice")
        resolution = await _run(
            self.ctx.ledger.resolve,
            cv.key(request.key),
            version_id=request.version_id if choice == "version_id" else None,
            obj=request.object if choice == "object" else None,
            reason=request.reason,
            operator=request.operator,
        )
        self.ctx.metrics.decided([resolution.submitted.decision])
        self.ctx.changes.notify()
        belief = resolution.submitted.belief
        return pb.ResolveContestedResponse(
            decision=cv.decision_pb(resolution.submitted.decision),
            belief=cv.belief_pb(belief) if belief else None,
            note=resolution.note,
        )


class AdminServicer(pb_grpc.AdminServiceServicer):
    """Operators erase personal data, run decay and read the node's status."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    @unary
    async def Erase(self, request: pb.EraseRequest, context: Context) -> pb.EraseResponse:
        scope = request.WhichOneof("scope")
        if scope is None:
            raise InvalidInput([FieldViolation("scope", "give one of evidence_id, key or subject")])
        report = await _run(
            self.ctx.ledger.erase,
            evidence_id=request.evidence_id if scope == "evidence_id" else None,
            key=cv.key(request.key) if scope == "key" else None,
            subject=(request.subject.namespace, request.subject.subject)
            if scope == "subject"
            else None,
            operator=request.operator,
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
        report = await _run(self.ctx.ledger.run_decay, now)
        self.ctx.metrics.decay(report.decayed, report.tombstoned)
        self.ctx.changes.notify()
        return pb.RunDecayResponse(decayed=report.decayed, tombstoned=report.tombstoned)

    @unary
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Context
    ) -> pb.GetStatusResponse:
        counts = await _run(self.ctx.ledger.counts)
        peers = []
        now = time.time()
        for state in self.ctx.syncer.states.values() if self.ctx.syncer else ():
            peer = pb.PeerStatus(
                node_id=state.peer.node_id,
                address=state.peer.address,
                last_error=state.last_error,
                max_anchor=state.peer.max_anchor or self.ctx.ledger.policy.default_max_anchor,
            )
            if state.last_sync is not None:
                peer.last_sync.FromNanoseconds(int(state.last_sync * 1e9))
                peer.lag_seconds = int(now - state.last_sync)
            peers.append(peer)
        return pb.GetStatusResponse(
            peers=peers,
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
        )

    @unary
    async def SyncNow(self, request: pb.SyncNowRequest, context: Context) -> pb.SyncNowResponse:
        syncer = self.ctx.syncer
        if syncer is None:
            return pb.SyncNowResponse(results=[])
        if request.peer_node_id and request.peer_node_id not in syncer.states:
            raise NotFound(f"no configured peer {request.peer_node_id!r}")
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
                )
                for r in results
            ]
        )


__all__ = ["AdminServicer", "Changes", "FactServicer", "NodeContext", "Outcome", "ReviewServicer"]
