"""FactService: agents submit facts and read beliefs, history, explanations and the log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from factnode import _wire as wire
from factnode import tokens
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import Evidence, FieldViolation, InvalidInput, recall
from factnode.core.recall import Embedding
from factnode.core.validation import DEFAULT_RETRACTION_ANCHOR, DEFAULT_UNIT
from factnode.ledger import DEFAULT_PAGE_SIZE, Submitted
from factnode.server._auth import (
    caller_identity,
    current_grant,
    require_write,
    require_write_submission,
)
from factnode.server._bulk import ReplyBudget, ReplyTooLarge, drain_refused
from factnode.server._context import (
    STREAM_BATCH,
    NodeContext,
    believed_again_by,
    maybe_belief,
    run,
    with_peer_tallies,
)
from factnode.server._errors import (
    Context,
    PermissionDenied,
    abort,
    status_for,
    streaming,
    unary,
)
from factnode.server._requests import check

# A stream's checked item: its index, evidence, idempotency key and the caller's vectors.
Pending = tuple[int, Evidence, str | None, tuple[Embedding, ...]]


def _items(
    pending: Sequence[Pending],
) -> tuple[list[tuple[Evidence, str | None]], dict[str, tuple[Embedding, ...]]]:
    """A stream's checked items as `ingest` takes them: (evidence, key) pairs, and vectors."""
    vectors = {e.evidence_id: v for _, e, _, v in pending if v}
    return [(e, k) for _, e, k, _ in pending], vectors


class FactServicer(pb_grpc.FactServiceServicer):
    """Agents submit facts and read beliefs, history and explanations."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    @unary
    async def SubmitFact(
        self, request: pb.SubmitFactRequest, context: Context
    ) -> pb.SubmitFactResponse:
        sub = wire.submission(request)
        require_write_submission(sub)
        evidence = self.ctx.ledger.evidence_of(sub)
        done = await self.ctx.writer.submit(evidence, sub.idempotency_key, wire.embeddings(request))
        reply = pb.SubmitFactResponse(
            decision=wire.decision_pb(done.decision, done.seq),
            evidence_id=done.evidence_id,
            version_id=done.version_id,
        )
        if done.belief:
            wire.fill_belief(reply.belief, done.belief)
        return reply

    @unary
    async def SubmitFacts(
        self,
        request_iterator: AsyncIterator[pb.SubmitFactRequest],
        context: Context,
    ) -> pb.SubmitFactsResponse:
        # Each item's outcome by its index in the stream: a decision, or why it was refused.
        results: list[tuple[int, Submitted | pb.ItemError]] = []
        pending: list[Pending] = []
        # The whole stream is read and checked before anything is written: one that goes past
        # what its reply can carry is refused, nothing of it stored (specification §9).
        budget = ReplyBudget(self.ctx.max_reply_bytes)
        index = 0
        whole: bool | None = None  # all or nothing: the first item's `all_or_nothing`
        try:
            async for item in request_iterator:
                if whole is None:
                    whole = item.all_or_nothing
                try:
                    check(item)
                    sub = wire.submission(item)
                    require_write_submission(sub)
                    evidence = self.ctx.ledger.evidence_of(sub)
                except (InvalidInput, PermissionDenied) as exc:
                    if whole:
                        raise ItemRefused(index, exc) from None
                    error = _item_error(exc)
                    budget.take_error(index, error)
                    results.append((index, error))
                else:
                    budget.take_decision(index, evidence.key)
                    pending.append((index, evidence, sub.idempotency_key, wire.embeddings(item)))
                index += 1
            if whole:
                await self._commit_whole(pending, results)
                pending.clear()
            # Then committed in batches, in stream order, each its own write transaction; an
            # item whose data the database refused is that item's error alone.
            while pending:
                batch = pending[:STREAM_BATCH]
                done = await run(self.ctx.ledger.ingest_each, *_items(batch))
                del pending[:STREAM_BATCH]
                self.ctx.metrics.decided([d.decision for d in done if isinstance(d, Submitted)])
                results.extend(
                    (i, d if isinstance(d, Submitted) else _item_error(d))
                    for (i, *_), d in zip(batch, done, strict=True)
                )
                self.ctx.changes.notify()
        except ItemRefused as refused:
            # Refused while the client may still be sending: see ReplyTooLarge below.
            await drain_refused(request_iterator)
            reply = pb.SubmitFactsResponse(invalid_count=1)
            reply.results.add(index=refused.index).error.CopyFrom(_item_error(refused.cause))
            await abort(context, refused.cause, [reply])
        except Exception as exc:
            if isinstance(exc, ReplyTooLarge):
                # Refused while the client may still be sending: what it sends is read first
                # (within bounds), so that it gets this refusal, not INTERNAL.
                await drain_refused(request_iterator)
            # What was not committed is dropped. Every item before it was decided or refused,
            # and the status says how many of each; nothing from it on was written.
            written = pending[0][0] if pending else index
            counts = _report([r for r in results if r[0] < written])
            del counts.results[:]  # counts only: a status must fit in the trailers
            await abort(context, exc, [counts])
        return _report(results)

    async def _commit_whole(
        self,
        pending: list[Pending],
        results: list[tuple[int, Submitted | pb.ItemError]],
    ) -> None:
        """An all-or-nothing stream's items, every one valid, decided in one transaction.
        Data the database refuses (RefusedData) fails that transaction, so nothing is written
        and the call ends INVALID_ARGUMENT with counts of zero."""
        if not pending:
            return
        done = await run(self.ctx.ledger.ingest, *_items(pending))
        self.ctx.metrics.decided([d.decision for d in done])
        results.extend((i, d) for (i, *_), d in zip(pending, done, strict=True))
        self.ctx.changes.notify()

    @unary
    async def GetBelief(self, request: pb.GetBeliefRequest, context: Context) -> pb.Belief:
        as_of, known_at = wire.time_travel(request)
        if as_of is not None or known_at is not None:
            belief = await self.ctx.read(
                self.ctx.ledger.belief, wire.key(request.key), as_of, known_at
            )
            return wire.belief_pb(belief)
        key = wire.key(request.key)
        hot = self.ctx.ledger.served_in_memory(key)
        if hot is not None:
            return wire.belief_pb(hot)  # no thread hop, no read transaction
        # One read: the served belief, and the tallies only where peers have voted.
        belief, explanation = await run(self.ctx.ledger.served, key)
        return with_peer_tallies(
            wire.belief_pb(belief), belief, explanation, self.ctx.ledger.policy.consensus_threshold
        )

    @unary
    async def ListBeliefs(
        self, request: pb.ListBeliefsRequest, context: Context
    ) -> pb.ListBeliefsResponse:
        subject = request.subject if request.HasField("subject") else None
        page = await self.ctx.read(
            self.ctx.ledger.list_beliefs,
            request.namespace,
            subject,
            request.page_size,
            request.page_token,
            request.subject_prefix,
            bounded=request.page_size <= DEFAULT_PAGE_SIZE,
        )
        reply = pb.ListBeliefsResponse(next_page_token=page.next_page_token)
        for b in page.items:
            wire.fill_belief(reply.beliefs.add(), b)
        return reply

    @unary
    async def ListSubjects(
        self, request: pb.ListSubjectsRequest, context: Context
    ) -> pb.ListSubjectsResponse:
        page = await self.ctx.read(
            self.ctx.ledger.reading.subjects,
            request.namespace,
            request.subject_prefix,
            request.page_size,
            request.page_token,
            bounded=request.page_size <= DEFAULT_PAGE_SIZE,
        )
        return pb.ListSubjectsResponse(subjects=page.items, next_page_token=page.next_page_token)

    @unary
    async def SearchBeliefs(
        self, request: pb.SearchBeliefsRequest, context: Context
    ) -> pb.SearchBeliefsResponse:
        as_of, known_at = wire.time_travel(request)
        search = recall.search(
            request.query,
            namespace_prefix=request.namespace_prefix,
            subject=request.subject if request.HasField("subject") else None,
            predicate=request.predicate if request.HasField("predicate") else None,
            states=wire.state_names(request.states),
            anchors=request.anchors,
            known_anchors=self.ctx.ledger.policy.anchors,
            as_of=as_of,
            known_at=known_at,
            limit=request.page_size,
            embedding=wire.optional_embedding(request),
        )
        page = await run(
            self.ctx.ledger.reading.search, search, current_grant().may_read, request.page_token
        )
        reply = pb.SearchBeliefsResponse(next_page_token=page.next_page_token)
        for hit in page.items:
            wire.fill_hit(reply.hits.add(), hit)
        return reply

    @unary
    async def GetHistory(
        self, request: pb.GetHistoryRequest, context: Context
    ) -> pb.GetHistoryResponse:
        out: list[FieldViolation] = []
        known_at = wire.optional_instant(request, "known_at", "known_at", out)
        wire.raise_if(out)
        key = wire.key(request.key)
        versions = await run(self.ctx.ledger.history, key, known_at)
        evidence = await run(
            self.ctx.ledger.evidence_by_ids,
            [i for v in versions for i in (*v.evidence_ids, *v.ended_by)],
        )
        return pb.GetHistoryResponse(
            key=wire.key_pb(key), versions=[wire.history_pb(v, evidence) for v in versions]
        )

    @unary
    async def Explain(self, request: pb.ExplainRequest, context: Context) -> pb.ExplainResponse:
        as_of, known_at = wire.time_travel(request)
        explanation = await run(self.ctx.ledger.explain, wire.key(request.key), as_of, known_at)
        belief = None
        if explanation.belief is not None:
            belief = with_peer_tallies(
                wire.belief_pb(explanation.belief),
                explanation.belief,
                explanation,
                self.ctx.ledger.policy.consensus_threshold,
            )
        again = explanation.believed_again
        return pb.ExplainResponse(
            belief=belief,
            comparisons=[wire.comparison_pb(c) for c in explanation.comparisons],
            review=explanation.review,
            believed_again=wire.believed_again_pb(again) if again else None,
        )

    @unary
    async def Retract(self, request: pb.RetractRequest, context: Context) -> pb.RetractResponse:
        key = wire.key(request.key)
        require_write(key.namespace)
        out: list[FieldViolation] = []
        at = wire.optional_instant(request, "at", "at", out)
        wire.raise_if(out)
        obj = request.object if request.HasField("object") else None
        logged = await run(
            self.ctx.ledger.retract,
            key,
            obj,
            at,
            request.reason,
            # Unset: a user's own statement, from whoever the token says is calling.
            attribution=(
                request.anchor if request.HasField("anchor") else DEFAULT_RETRACTION_ANCHOR
            ),
            source=request.source if request.HasField("source") else caller_identity(),
            worth=request.worth if request.HasField("worth") else DEFAULT_UNIT,
            confidence=request.confidence if request.HasField("confidence") else DEFAULT_UNIT,
        )
        self.ctx.metrics.decided([logged.decision])
        self.ctx.changes.notify()
        belief = await run(maybe_belief, self.ctx.ledger, key)
        again = await run(believed_again_by, self.ctx.ledger, key, logged.decision)
        return pb.RetractResponse(
            decision=wire.decision_pb(logged.decision, logged.seq),
            belief=wire.belief_pb(belief) if belief else None,
            believed_again=wire.believed_again_pb(again) if again else None,
        )

    @unary
    async def ListDecisions(
        self, request: pb.ListDecisionsRequest, context: Context
    ) -> pb.ListDecisionsResponse:
        key = wire.key(request.key) if request.HasField("key") else None
        page = await run(
            self.ctx.ledger.decisions, key, request.namespace, request.page_size, request.page_token
        )
        return pb.ListDecisionsResponse(
            decisions=[wire.decision_pb(d.decision, d.seq) for d in page.items],
            next_page_token=page.next_page_token,
        )

    @streaming
    async def WatchBeliefs(
        self, request: pb.WatchBeliefsRequest, context: Context
    ) -> AsyncIterator[pb.BeliefChange]:
        namespace = request.namespace if request.HasField("namespace") else ""
        after = (
            tokens.decode_seq_position(request.resume_token, tokens.CHANGES, "resume_token")
            if request.resume_token
            else 0
        )
        grant = current_grant()
        with self.ctx.watch_quota.hold(grant, f"token {grant.name or 'unnamed'}"):
            while not context.done():
                seen = self.ctx.changes.head  # read before the log: no later change is missed
                changes = await run(self.ctx.ledger.changes, namespace, after, 100)
                for change in changes:
                    belief = await run(maybe_belief, self.ctx.ledger, change.key)
                    after = change.seq
                    yield pb.BeliefChange(
                        key=wire.key_pb(change.key),
                        belief=wire.belief_pb(belief) if belief else None,
                        resume_token=tokens.seq_position(change.seq, tokens.CHANGES),
                    )
                if not changes:
                    await self.ctx.changes.wait_beyond(seen)


class ItemRefused(Exception):
    """An all-or-nothing SubmitFacts stream's item that was refused: nothing is written."""

    def __init__(self, index: int, cause: InvalidInput | PermissionDenied) -> None:
        super().__init__(f"item {index}: {cause}")
        self.index = index
        self.cause = cause


def _report(results: list[tuple[int, Submitted | pb.ItemError]]) -> pb.SubmitFactsResponse:
    """The results so far, in stream order, with their counts. Filled in place: building
    each ItemResult and its Decision, then copying them into the reply, cost several times
    as much (bench/README.md)."""
    reply = pb.SubmitFactsResponse()
    invalid = 0
    for index, outcome in sorted(results, key=lambda r: r[0]):
        item = reply.results.add()
        item.index = index
        if isinstance(outcome, Submitted):
            wire.fill_decision(item.decision, outcome.decision, outcome.seq)
        else:
            item.error.CopyFrom(outcome)
            invalid += 1
    reply.decided_count = len(results) - invalid
    reply.invalid_count = invalid
    return reply


def _item_error(exc: Exception) -> pb.ItemError:
    status = status_for(exc)
    violations = (
        [pb.FieldViolation(field=v.field, description=v.reason) for v in exc.violations]
        if isinstance(exc, InvalidInput)
        else []
    )
    return pb.ItemError(
        code=status.code.value[0], message=status.details, field_violations=violations
    )
