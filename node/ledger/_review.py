"""Review: an operator settles a contested or ambiguous key by pinning one of its versions."""

from __future__ import annotations

from collections.abc import Sequence

from factnode.core import (
    BeliefState,
    Decision,
    Evidence,
    FieldViolation,
    InvalidInput,
    Key,
    ids,
)
from factnode.core.plan import ResolutionLoad, plan_resolution
from factnode.core.refresh import StoredBelief
from factnode.core.validation import (
    MAX_NODE_ID_BYTES,
    MAX_OBJECT_BYTES,
    MAX_REASON_BYTES,
    check_id,
    check_text,
)
from factnode.ledger._model import (
    Belief,
    Committed,
    NotFound,
    NotUnderReview,
    Resolution,
    Submitted,
)
from factnode.ledger._serving import Component, check_key_input
from factnode.store.repository import Writes


class Review(Component):
    """Operators' resolutions."""

    def resolve(
        self, key: Key, *, version_id: str | None, obj: str | None, reason: str, operator: str
    ) -> Resolution:
        """Pins the operator's choice among a key's versions, with the reason, in the decision
        log. While the key is AMBIGUOUS or CONTESTED the pinned version is served BELIEVED by
        rule operator_resolution (and, where the key is locally ambiguous, is this node's
        vote); evidence that makes a version win on the rules takes over. A key the rules
        settle (served BELIEVED by another rule, or with no belief) is NotUnderReview and
        nothing is written: a pin there would only wait, unseen, for the key to split again."""
        chosen = _chosen(key, version_id, obj, reason, operator)
        operator = operator.strip()
        what = f"version {version_id}" if version_id is not None else f"value {obj!r}"
        now = self.clock.now()
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.announce(tx, fx)
            self._serving.materialise(tx, [key], now, fx)
            state = tx.key_states([key])[key].holding(self.policy, now)
            load = ResolutionLoad(state, tx.beliefs([key]).get(key, []))
            plan = plan_resolution(
                key, chosen, load, operator=operator, reason=reason, now=now, what=what
            )
            if plan.not_held:
                raise NotFound(plan.not_held)
            if plan.settled:
                raise NotUnderReview(plan.settled)
            assert plan.decision is not None
            pin = (key, chosen, operator, reason, now)
            self._serving.apply(tx, Writes(pins=[pin], decisions=[plan.decision]), fx)
            served = self._serving.refresh(tx, {key: load.state}, now, fx)
            rows = served.get(key, [])
            held = {e.evidence_id: e for e in plan.held}
            belief = self._serving.beliefs(tx, [key], held).get(key)
            [seq] = tx.logged_seqs([plan.decision])
        return _resolution(
            key, plan.decision, seq, plan.held, rows[0] if rows else None, belief, operator
        )


def _chosen(key: Key, version_id: str | None, obj: str | None, reason: str, operator: str) -> str:
    """The version a resolution names; raises InvalidInput naming each bad field."""
    check_key_input(key)
    out: list[FieldViolation] = []
    if (version_id is None) == (obj is None):
        out.append(FieldViolation("choice", "give exactly one of version_id or object"))
    if version_id is not None:
        check_id(out, "version_id", version_id)
    if obj is not None:
        check_text(out, "object", obj, MAX_OBJECT_BYTES, required=True)
    check_text(out, "operator", operator, MAX_NODE_ID_BYTES, required=True)
    check_text(out, "reason", reason, MAX_REASON_BYTES, required=True)
    if out:
        raise InvalidInput(out)
    return version_id if version_id is not None else ids.version_id(key, obj or "")


def _resolution(
    key: Key,
    decision: Decision,
    seq: int,
    held: Sequence[Evidence],
    row: StoredBelief | None,
    belief: Belief | None,
    operator: str,
) -> Resolution:
    """What a resolution answers, from the row the key serves after it."""
    chosen = decision.version_id
    # The evidence the served row names, or else the version's least id: never the
    # first in the key's state, whose order depends on where the state was read from.
    evidence_id = (
        row.evidence_id
        if row is not None and row.version_id == chosen
        else min(e.evidence_id for e in held)
    )
    assert chosen is not None
    submitted = Submitted(decision, evidence_id, chosen, belief, seq)
    value = held[0].object
    if row is not None and row.version_id == chosen and row.state is BeliefState.BELIEVED:
        return Resolution(submitted, True, f"{key} now believes {value!r} (rule {row.rule})")
    keeper = f"{row.version_id} by rule {row.rule}" if row is not None else "none"
    return Resolution(
        submitted,
        False,
        f"{key} is not under review: the rules decide it ({keeper}), so the pin waits "
        "until it is AMBIGUOUS or CONTESTED again; to overrule the rules, submit evidence "
        f"as user_confirmed with source operator:{operator}",
    )
