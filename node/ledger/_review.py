"""Review: an operator settles a contested or ambiguous key by pinning one of its versions."""

from __future__ import annotations

from factnode.core import (
    BeliefState,
    Decision,
    FieldViolation,
    InvalidInput,
    Key,
    KeyState,
    Outcome,
    Rule,
    ids,
)
from factnode.core.validation import (
    MAX_NODE_ID_BYTES,
    MAX_OBJECT_BYTES,
    MAX_REASON_BYTES,
    check_id,
    check_text,
)
from factnode.ledger._model import Committed, NotFound, NotUnderReview, Resolution, Submitted
from factnode.ledger._serving import Component, check_key_input


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
        chosen = version_id if version_id is not None else ids.version_id(key, obj or "")
        now = self.clock.now()
        fx = Committed()
        with self.repo.write() as tx:
            state = tx.key_states([key])[key]
            held = [e for e in state.evidence if e.version_id == chosen]
            if not held:
                what = f"version {version_id}" if version_id is not None else f"value {obj!r}"
                raise NotFound(f"no {what} for {key}: a pin chooses among held versions")
            before = tx.beliefs([key]).get(key, [])
            if not any(
                b.state is not BeliefState.BELIEVED or b.rule is Rule.OPERATOR_RESOLUTION
                for b in before
            ):
                standing = ", ".join(f"{b.state.name} by rule {b.rule}" for b in before)
                raise NotUnderReview(
                    f"{key} is not under review ({standing or 'no belief'}): the rules decide it; "
                    "to overrule them, submit evidence as user_confirmed with source "
                    f"operator:{operator.strip()}"
                )
            tx.put_pin(key, chosen, operator.strip(), reason, now)
            decision = Decision(
                key=key,
                outcome=Outcome.RESOLVED,
                rule=Rule.OPERATOR_RESOLUTION,
                decided_at=now,
                version_id=chosen,
                supersedes=before[0].version_id
                if before and before[0].version_id != chosen
                else None,
                detail=f"pinned by {operator.strip()}: {reason}",
            )
            tx.add_decisions([decision])
            served = self._serving.refresh(
                tx, {key: KeyState(state.evidence, state.retractions)}, now, fx
            )
            rows = served.get(key, [])
            belief = self._serving.beliefs(tx, [key], {e.evidence_id: e for e in held}).get(key)
        self._serving.announce(fx)
        row = rows[0] if rows else None
        # The evidence the served row names, or else the version's least id: never the
        # first in the key's state, whose order depends on where the state was read from.
        evidence_id = (
            row.evidence_id
            if row is not None and row.version_id == chosen
            else min(e.evidence_id for e in held)
        )
        submitted = Submitted(decision, evidence_id, chosen, belief)
        value = held[0].object
        if row is not None and row.version_id == chosen and row.state is BeliefState.BELIEVED:
            return Resolution(submitted, True, f"{key} now believes {value!r} (rule {row.rule})")
        keeper = f"{row.version_id} by rule {row.rule}" if row is not None else "none"
        return Resolution(
            submitted,
            False,
            f"{key} is not under review: the rules decide it ({keeper}), so the pin waits "
            "until it is AMBIGUOUS or CONTESTED again; to overrule the rules, submit evidence "
            f"as user_confirmed with source operator:{operator.strip()}",
        )
