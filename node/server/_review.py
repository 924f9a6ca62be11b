"""ReviewService: operators review contested and ambiguous keys and resolve them."""

from __future__ import annotations

from fractions import Fraction

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import BeliefState, Rule
from factnode.core.consensus import review_reason
from factnode.ledger import Belief, Explanation, NotFound
from factnode.server._auth import caller_identity
from factnode.server._context import NodeContext, run, version_objects, version_tallies
from factnode.server._errors import Context, unary


class ReviewServicer(pb_grpc.ReviewServiceServicer):
    """Operators review contested and ambiguous keys and resolve them."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    def _contested(self, beliefs: list[Belief]) -> list[pb.ContestedKey]:
        details = self.ctx.ledger.explain_many([b.key for b in beliefs])
        threshold = self.ctx.ledger.policy.consensus_threshold
        return [_contested_pb(b, details[b.key], threshold) for b in beliefs if b.key in details]

    @unary
    async def ListContested(
        self, request: pb.ListContestedRequest, context: Context
    ) -> pb.ListContestedResponse:
        page = await run(
            self.ctx.ledger.review_queue, request.namespace, request.page_size, request.page_token
        )
        keys = await run(self._contested, page.items)
        return pb.ListContestedResponse(keys=keys, next_page_token=page.next_page_token)

    @unary
    async def GetContested(
        self, request: pb.GetContestedRequest, context: Context
    ) -> pb.ContestedKey:
        key = wire.key(request.key)
        belief = await run(self.ctx.ledger.belief, key)
        if belief.state is BeliefState.BELIEVED:
            raise NotFound(f"{key} is not under review (its belief is settled)")
        found = await run(self._contested, [belief])
        if not found:
            raise NotFound(f"{key} is not under review (it has no belief)")
        return found[0]

    @unary
    async def ResolveContested(
        self, request: pb.ResolveContestedRequest, context: Context
    ) -> pb.ResolveContestedResponse:
        choice = request.WhichOneof("choice")
        resolution = await run(
            self.ctx.ledger.resolve,
            wire.key(request.key),
            version_id=request.version_id if choice == "version_id" else None,
            obj=request.object if choice == "object" else None,
            reason=request.reason,
            operator=request.operator or caller_identity(),
        )
        self.ctx.metrics.decided([resolution.submitted.decision])
        self.ctx.changes.notify()
        belief = resolution.submitted.belief
        return pb.ResolveContestedResponse(
            decision=wire.decision_pb(resolution.submitted.decision, resolution.submitted.seq),
            belief=wire.belief_pb(belief) if belief else None,
            note=resolution.note,
        )


def _contested_pb(belief: Belief, explanation: Explanation, threshold: Fraction) -> pb.ContestedKey:
    local = explanation.local_comparisons
    tied = {c.version_id for c in local if c.rule is Rule.TIEBREAK}
    if tied:
        tied.add(local[0].winner.version_id)
    objects = version_objects(belief, explanation)
    return pb.ContestedKey(
        key=wire.key_pb(belief.key),
        state=wire.state_pb(belief.state),
        served_version_id=belief.version_id,
        detail=review_reason(explanation.tally, threshold, tied, objects),
        versions=version_tallies(belief, explanation, explanation.tally),
        consensus_threshold=wire.threshold_pb(threshold),
    )
