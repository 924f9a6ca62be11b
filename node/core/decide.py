"""The write path's core: every valid submission gets exactly one recorded decision.

Pure: the shell loads what the key already holds, calls `decide`, and persists
the returned `Ruling` (the decision, whether the evidence is stored as a
candidate, and any retraction a winning `contradicts` implies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from factnode.core._model import Decision, Evidence, Outcome, Retraction, Rule, Verdict
from factnode.core.arbitration import (
    arbitrate,
    believed_versions,
    compare,
    describe,
    representatives,
    verdict_of,
    visible,
    with_evidence,
)
from factnode.core.policy import Policy


@dataclass(frozen=True, slots=True)
class KeyState:
    """What one key holds: its active evidence and retractions."""

    evidence: Sequence[Evidence] = ()
    retractions: Sequence[Retraction] = ()

    def belief(self, policy: Policy) -> Verdict | None:
        """The current belief over this state."""
        return arbitrate(visible(self.evidence, self.retractions), policy)


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
    retractions: tuple[Retraction, ...] = field(default=())
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
    contradicted: KeyState | None = None,
    known: Arbitrated | None = None,
) -> Ruling:
    """The one outcome of `new` against what its key holds (and the key it contradicts).

    `known`, where the caller holds it, is `state` arbitrated (a previous ruling's
    `arbitrated`): with it the state is not arbitrated again, and for a plain state only
    `new` is weighed against the versions' representatives."""
    gated = _gate(new, policy, duplicate=duplicate, erased=erased)
    if gated is not None:
        return gated

    retractions: tuple[Retraction, ...] = ()
    moved_from: tuple[str, Rule] | None = None
    if new.contradicts is not None and contradicted is not None:
        other = contradicted.belief(policy)
        if other is not None:
            incumbent = representatives(
                visible(contradicted.evidence, contradicted.retractions), policy
            )[other.version_id]
            wins, rule = compare(new, incumbent, policy)
            if not wins:
                return Ruling(
                    _decision(
                        new,
                        Outcome.REJECTED,
                        rule,
                        detail=f"contradicts {new.contradicts}: "
                        + describe(rule, incumbent, new, policy),
                    ),
                    False,
                )
            # The loser is closed at the cutover where it lost on recency, ended otherwise.
            at = new.valid_from if rule is Rule.RECENCY else incumbent.valid_from
            retractions = (
                Retraction(
                    new.contradicts,
                    other.version_id,
                    at,
                    new.recorded_at,
                    f"contradicted by {new.evidence_id}",
                ),
            )
            moved_from = (other.version_id, rule)

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
        after_visible = visible(after_state.evidence, after_state.retractions)
        if _plain(after_state):
            reps = representatives(after_visible, policy)
            arbitrated = Arbitrated(verdict_of(new.key, reps, policy), reps)
        else:
            arbitrated = Arbitrated(arbitrate(after_visible, policy))
        after = arbitrated.verdict
        versions_before = None
        new_visible = new.evidence_id in {e.evidence_id for e in after_visible}
    if after is None or new.version_id not in believed_versions(after):
        # A fact that is not believed on its own key moves nothing away from the other key.
        retractions = ()

    def ruling(
        outcome: Outcome, rule: Rule, supersedes: str | None = None, detail: str = ""
    ) -> Ruling:
        return Ruling(
            _decision(new, outcome, rule, supersedes=supersedes, detail=detail),
            True,
            retractions,
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
            versions_before = {e.version_id for e in visible(state.evidence, state.retractions)}
        if new.version_id in versions_before:
            return ruling(Outcome.CORROBORATED, Rule.CORROBORATION)
        return ruling(Outcome.ACCEPTED, Rule.MULTI_VALUED)

    if after.version_id == new.version_id:
        if after.ambiguous:
            return ruling(Outcome.AMBIGUOUS, Rule.TIEBREAK)
        if before is not None and before.version_id == new.version_id:
            return ruling(Outcome.CORROBORATED, Rule.CORROBORATION)
        if before is None:
            if moved_from is not None:
                return ruling(Outcome.SUPERSEDED, moved_from[1], supersedes=moved_from[0])
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
