"""The write path's core: every valid submission gets exactly one recorded decision.

Pure: the shell loads what the key already holds, calls `decide`, and persists
the returned `Ruling` (the decision, and whether the evidence is stored as a
candidate). A retraction is decided here like an assertion; an assertion naming
`contradicts` is decided on its own key only, and counts for the other key as a
retraction there (`arbitration.ends`), so neither depends on arrival order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from factnode.core._model import Decision, Evidence, Instant, Outcome, Rule, Verdict
from factnode.core.arbitration import (
    arbitrate,
    believed_versions,
    covers,
    describe,
    pairwise,
    representatives,
    strength,
    verdict_of,
    visible,
    with_evidence,
)
from factnode.core.decay import expiry, holds
from factnode.core.policy import Policy


@dataclass(frozen=True, slots=True)
class KeyState:
    """What one key holds: its active assertions and the retraction-like evidence that
    bears on them (its own retractions, active assertions of other keys naming it in
    `contradicts`, and whatever corrects those)."""

    evidence: Sequence[Evidence] = ()
    retractions: Sequence[Evidence] = ()

    def visible(self, policy: Policy) -> list[Evidence]:
        """The assertions that count now."""
        return visible(self.evidence, self.retractions, policy=policy)

    def belief(self, policy: Policy) -> Verdict | None:
        """The current belief over this state."""
        return arbitrate(self.visible(policy), policy)

    def holding(self, policy: Policy, at: Instant) -> KeyState:
        """The state at event time `at` as far as decay goes: assertions past their expiry
        left out (specification §6). Retraction-like evidence never expires: it ends a
        validity at its event time, so what it ended stays ended (a delete does not come
        undone by time). The same object when nothing has expired."""
        kept = tuple(e for e in self.evidence if holds(e, policy, at))
        if len(kept) == len(self.evidence):
            return self
        return KeyState(kept, self.retractions)

    def next_expiry(self, policy: Policy, after: Instant) -> Instant | None:
        """The first expiry of an assertion later than `after`: until then, what the state
        serves at the present cannot change by decay (None: no such expiry)."""
        ends = [t for e in self.evidence if (t := expiry(e, policy)) is not None and t > after]
        return min(ends, default=None)

    def expired_between(self, policy: Policy, since: Instant, until: Instant) -> bool:
        """Whether an assertion expires in (`since`, `until`]."""
        for e in self.evidence:
            t = expiry(e, policy)
            if t is not None and since < t <= until:
                return True
        return False


@dataclass(frozen=True, slots=True)
class Arbitrated:
    """What arbitrating a key's state found: its belief and, where the state is plain (no
    retractions, nothing corrected, so every piece of evidence is visible), each version's
    representative. A caller holding this for a state passes it to `decide` on that state."""

    verdict: Verdict | None
    reps: Mapping[str, Evidence] | None = None


def _plain(state: KeyState) -> bool:
    return not state.retractions and not any(e.corrects for e in state.evidence)


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the shell must persist for one submission."""

    decision: Decision
    # True: store as an active belief candidate; False: store as rejected; None: store nothing.
    candidate: bool | None
    before: Verdict | None = None
    after: Verdict | None = None
    # The key's state with the new evidence, arbitrated (for a candidate).
    arbitrated: Arbitrated | None = None


def _gate(new: Evidence, policy: Policy, *, duplicate: bool, erased: bool) -> Ruling | None:
    def reject(rule: Rule, detail: str, candidate: bool | None = False) -> Ruling:
        outcome = Outcome.DUPLICATE if rule is Rule.DUPLICATE else Outcome.REJECTED
        return Ruling(_decision(new, outcome, rule, detail=detail), candidate)

    if duplicate:
        return reject(Rule.DUPLICATE, "this evidence is already stored", None)
    if erased:
        return reject(Rule.ERASED, "covered by an erasure", None)
    if not new.source:
        return reject(Rule.NO_PROVENANCE, "evidence without a source is not a belief candidate")
    if new.confidence_milli < policy.min_confidence_milli:
        return reject(
            Rule.MIN_CONFIDENCE,
            f"confidence {new.confidence_milli / 1000:.3f} is below "
            f"min_confidence {policy.min_confidence_milli / 1000:.3f}",
        )
    return None


def _decision(
    new: Evidence,
    outcome: Outcome,
    rule: Rule,
    *,
    supersedes: str | None = None,
    detail: str = "",
) -> Decision:
    return Decision(
        key=new.key,
        outcome=outcome,
        rule=rule,
        decided_at=new.recorded_at,
        evidence_id=new.evidence_id,
        version_id=new.version_id,
        supersedes=supersedes,
        detail=detail,
    )


def decide(
    new: Evidence,
    state: KeyState,
    policy: Policy,
    *,
    duplicate: bool = False,
    erased: bool = False,
    known: Arbitrated | None = None,
) -> Ruling:
    """The one outcome of `new` against what its key holds.

    `known`, where the caller holds it, is `state` arbitrated (a previous ruling's
    `arbitrated`): with it the state is not arbitrated again, and for a plain state only
    `new` is weighed against the versions' representatives."""
    gated = _gate(new, policy, duplicate=duplicate, erased=erased)
    if gated is not None:
        return gated

    if new.retracts:
        return _decide_retraction(new, state, policy, known)

    before = state.belief(policy) if known is None else known.verdict
    if known is not None and known.reps is not None and new.corrects is None:
        # A plain state stays plain: the new evidence is visible and hides nothing.
        after_reps = with_evidence(known.reps, new, policy)
        after = verdict_of(new.key, after_reps, policy)
        arbitrated = Arbitrated(after, after_reps)
        versions_before: set[str] | None = set(known.reps)
        new_visible = True
    else:
        after_state = KeyState([*state.evidence, new], state.retractions)
        after_visible = after_state.visible(policy)
        if _plain(after_state):
            reps = representatives(after_visible, policy)
            arbitrated = Arbitrated(verdict_of(new.key, reps, policy), reps)
        else:
            arbitrated = Arbitrated(arbitrate(after_visible, policy))
        after = arbitrated.verdict
        versions_before = None
        new_visible = new.evidence_id in {e.evidence_id for e in after_visible}

    def ruling(
        outcome: Outcome, rule: Rule, supersedes: str | None = None, detail: str = ""
    ) -> Ruling:
        return Ruling(
            _decision(new, outcome, rule, supersedes=supersedes, detail=detail),
            True,
            before,
            after,
            arbitrated,
        )

    if not new_visible:
        # Kept (never believed) just as if it had arrived before its correction, so what a
        # key holds, and its history, does not depend on arrival order.
        if any(e.corrects == new.evidence_id for e in state.evidence):
            return ruling(Outcome.HISTORICAL, Rule.CORRECTION, detail="already corrected")
        return ruling(Outcome.HISTORICAL, Rule.RETRACT, detail="ended by a retraction")

    assert after is not None
    if policy.is_multi_valued(new.key.predicate):
        if versions_before is None:
            versions_before = {e.version_id for e in state.visible(policy)}
        if new.version_id in versions_before:
            return ruling(Outcome.CORROBORATED, Rule.CORROBORATION)
        return ruling(Outcome.ACCEPTED, Rule.MULTI_VALUED)

    if after.version_id == new.version_id:
        if after.ambiguous:
            return ruling(Outcome.AMBIGUOUS, Rule.TIEBREAK)
        if before is not None and before.version_id == new.version_id:
            return ruling(Outcome.CORROBORATED, Rule.CORROBORATION)
        if before is None:
            return ruling(Outcome.ACCEPTED, Rule.FIRST_VERSION)
        rule = after.rule_against(before.version_id) or Rule.CORRECTION
        return ruling(Outcome.SUPERSEDED, rule, supersedes=before.version_id)

    lost_by = after.rule_against(new.version_id)
    if lost_by is Rule.RECENCY:
        return ruling(Outcome.HISTORICAL, Rule.RECENCY)
    if lost_by is Rule.TIEBREAK:
        return ruling(Outcome.AMBIGUOUS, Rule.TIEBREAK)
    assert lost_by is not None
    return ruling(Outcome.DISBELIEVED, lost_by)


def _decide_retraction(
    new: Evidence, state: KeyState, policy: Policy, known: Arbitrated | None
) -> Ruling:
    """A retraction's one outcome: RETRACTED where it changes the belief; DISBELIEVED by the
    rule of the believed evidence it does not outrank (stored all the same: it may act
    later, after an erasure or a correction); HISTORICAL where the belief was stated after
    the retraction's time."""
    before = state.belief(policy) if known is None else known.verdict
    after_state = KeyState(state.evidence, [*state.retractions, new])
    after_visible = after_state.visible(policy)
    after = arbitrate(after_visible, policy)
    believed_before = believed_versions(before)
    retracted = new.version_id or (believed_before[0] if believed_before else None)

    def ruling(outcome: Outcome, rule: Rule, detail: str, supersedes: str | None = None) -> Ruling:
        decision = Decision(
            key=new.key,
            outcome=outcome,
            rule=rule,
            decided_at=new.recorded_at,
            evidence_id=new.evidence_id,
            version_id=retracted,
            supersedes=supersedes,
            detail=detail,
        )
        return Ruling(decision, True, before, after, Arbitrated(after))

    if believed_versions(after) != believed_before:
        ended = sorted(set(believed_before) - set(believed_versions(after)))
        return ruling(
            Outcome.RETRACTED,
            Rule.RETRACT,
            "ended the belief" if ended else "changed the belief",
            supersedes=ended[0] if ended else None,
        )
    # The belief stands: say which of its evidence the retraction could not end.
    standing = [e for e in after_visible if e.version_id in believed_before and covers(new, e)]
    earlier = [e for e in standing if e.valid_from <= new.valid_from]
    if earlier:
        strongest = max(earlier, key=lambda e: (strength(e, policy), e.evidence_id))
        _, rule = pairwise(new, strongest, policy)
        if rule is Rule.TIEBREAK:
            reason = "no rule discriminates, and a tie does not end a belief"
        else:
            reason = describe(rule, strongest, new, policy)
        return ruling(
            Outcome.DISBELIEVED, rule, f"outranked by evidence {strongest.evidence_id}: {reason}"
        )
    if standing:
        return ruling(
            Outcome.HISTORICAL,
            Rule.RECENCY,
            "the belief was stated after the retraction's time, so it stands",
        )
    return ruling(Outcome.RETRACTED, Rule.RETRACT, "the belief does not rest on what it ends")
