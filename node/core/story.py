"""The whole story of a key's belief where the rules alone do not tell it: a version served by an
operator's pin or by the votes (what each other version loses by on the evidence, and then by
the pin), whether the key is under review, a version believed again because what outranked it
was retracted or erased, and a version served until an operator's resolution chose another.

Pure: the views `serving.view` answers, the key's evidence and the policy in; values and
sentences out. An erased value never appears in a sentence made here: an erasure's story
names what went only by the rule it had won by (specification §6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from factnode.core._model import (
    BeliefState,
    Decision,
    Evidence,
    Instant,
    Key,
    Outcome,
    Rule,
    VersionHistory,
    iso,
)
from factnode.core.arbitration import (
    Comparison,
    counted_retractions,
    describe,
    ends,
    pairwise,
    representatives,
    verdict_of,
    visible,
)
from factnode.core.consensus import Tally, consensus_reason, tied_versions
from factnode.core.decay import expiry
from factnode.core.decide import KeyState
from factnode.core.policy import Policy
from factnode.core.serving import Answer, Pin

RETRACTED = "retracted"
ERASED = "erased"
# How the decision log's entry for an erasure's story begins.
BELIEVED_AGAIN = "believed again: "


@dataclass(frozen=True, slots=True)
class BelievedAgain:
    """A version believed again because what had outranked (or ended) it went: retracted, or
    erased. `text` tells it in one line; `ended_by` names the retractions (cause retracted)."""

    key: Key
    version_id: str
    object: str
    # RETRACTED or ERASED.
    cause: str
    text: str
    ended_by: tuple[str, ...] = ()
    # The decision log's detail for an erasure's story: the same without any value.
    logged: str = ""


def _pin_words(pin: Pin | None) -> str:
    when = f" (recorded {iso(pin.pinned_at)})" if pin is not None else ""
    return f"an operator's resolution{when}"


def _evidence_words(
    rule: Rule, sign: int, served: Evidence, loser: Evidence, policy: Policy
) -> str:
    """The two versions' evidence compared, from the losing version's side."""
    if sign > 0:
        return f"it loses on the evidence by {rule}: {describe(rule, served, loser, policy)}"
    if sign < 0:
        return f"it leads on the evidence by {rule}: {describe(rule, loser, served, policy)}"
    return f"it ties with {served.object!r} on the evidence: no rule discriminates"


def overruled_comparisons(
    served_version: str,
    served_rule: Rule,
    evidence: Sequence[Evidence],
    policy: Policy,
    tally: Tally | None = None,
    pin: Pin | None = None,
) -> tuple[Comparison, ...]:
    """Why the served version beats each other visible version where the votes
    (`federation_consensus`) or an operator's pin (`operator_resolution`) chose it: the rule
    each loses by on the evidence (or leads by, or that they tie), then the votes or the pin."""
    reps = representatives(evidence, policy)
    served = reps.get(served_version)
    if served is None:
        return ()
    out = []
    for vid, rep in sorted(reps.items()):
        if vid == served_version:
            continue
        sign, rule = pairwise(served, rep, policy)
        words = _evidence_words(rule, sign, served, rep, policy)
        if served_rule is Rule.FEDERATION_CONSENSUS and tally is not None:
            reason = consensus_reason(tally, served_version, vid, policy.consensus_threshold)
        else:
            reason = (
                f"{words}; then {_pin_words(pin)} chose {served.object!r} while the key was "
                "under review (the decision log says who and why)"
            )
        evidence_reason = (
            describe(rule, served, rep, policy)
            if sign >= 0
            else describe(rule, rep, served, policy)
        )
        out.append(
            Comparison(vid, rep.object, served_rule, served, rep, reason, rule, evidence_reason)
        )
    return tuple(out)


def review_note(answer: Answer, pin: Pin | None) -> str:
    """Whether the key is under review in this view, and why, where it is or where an
    operator's pin bears on it; empty otherwise."""
    first = answer.first
    if first is None:
        return ""
    reps = {e.version_id: e.object for e in answer.evidence}
    counted = pin if answer.pin is not None else None
    if first.rule is Rule.OPERATOR_RESOLUTION:
        verdict = answer.verdict
        if verdict is not None and verdict.ambiguous:
            tied = sorted(repr(reps[v]) for v in tied_versions(verdict) if v in reps)
            why = f"the evidence still ties {' and '.join(tied)}"
        else:
            why = "the votes still leave it contested"
        return (
            f"not under review: {_pin_words(counted)} settles it while {why}; evidence that "
            "decides the key on the rules takes over from the pin"
        )
    if first.state in (BeliefState.AMBIGUOUS, BeliefState.CONTESTED):
        if counted is not None:
            return (
                f"under review again ({first.state}): {_pin_words(counted)} chose a version "
                "that is no longer among the competing ones"
            )
        return f"under review ({first.state}): an operator can resolve it"
    if counted is not None:
        return (
            f"not under review: the rules decide the key ({first.rule}); {_pin_words(counted)} "
            "no longer applies and stays in the decision log"
        )
    return ""


def _ender_words(r: Evidence) -> str:
    said = f"{r.attribution} from {r.source}"
    if r.retracts:
        return f"retraction {r.evidence_id} ({said})"
    return f"evidence {r.evidence_id} on {r.key} naming this key in contradicts ({said})"


def believed_again_by_retraction(
    key: Key,
    answer: Answer,
    state: KeyState,
    policy: Policy,
    *,
    as_of: Instant | None = None,
    known_at: Instant | None = None,
) -> BelievedAgain | None:
    """The served version of a single-valued key in a view, where without the retractions
    that count in it another version would be believed over it, and that version is ended by
    them: "'Milan' is believed again: 'Rome', which outranked it by trust_anchor, was
    retracted (...)". None otherwise."""
    first = answer.first
    if first is None or answer.verdict is None or answer.verdict.believed:
        return None
    counted = counted_retractions(state.evidence, state.retractions, as_of=as_of, known_at=known_at)
    if not counted:
        return None
    unended = visible(state.evidence, (), policy=policy, as_of=as_of, known_at=known_at)
    reps = representatives(unended, policy)
    verdict = verdict_of(key, reps, policy)
    if verdict is None or verdict.version_id == first.version_id:
        return None
    top = verdict.version_id
    if any(e.version_id == top for e in answer.evidence):
        return None  # it still counts: the votes or a pin, not a retraction, decided
    enders = {
        r.evidence_id: r
        for r in counted
        for e in unended
        if e.version_id == top and ends(r, e, policy)
    }
    rule = verdict.rule_against(first.version_id)
    if not enders or rule is None:
        return None
    how = ", ".join(_ender_words(enders[i]) for i in sorted(enders))
    obj = first.evidence.object
    text = (
        f"{obj!r} is believed again: {reps[top].object!r}, which outranked it by {rule}, "
        f"was ended by {how}"
    )
    return BelievedAgain(key, first.version_id, obj, RETRACTED, text, tuple(sorted(enders)))


@dataclass(frozen=True, slots=True)
class ServedBefore:
    """What a key served before a write: each value's version and rule."""

    version_id: str
    rule: Rule


def believed_again_by_erasure(
    key: Key,
    before: KeyState,
    served_before: Sequence[ServedBefore],
    after: KeyState,
    served_after: Sequence[tuple[str, Evidence]],
    policy: Policy,
    erasure_id: str,
) -> BelievedAgain | None:
    """A version an erasure made believed again: one served after it and not before, which the
    key held before. What went is named by the rule it had won by, never by its value (it may
    be erased): "'Milan' is believed again: the version that outranked it by trust_anchor was
    erased". `served_after` holds (version_id, evidence) of each value served after."""
    was = {s.version_id for s in served_before}
    fresh = [(vid, e) for vid, e in served_after if vid not in was]
    if not fresh:
        return None
    vid, rep = fresh[0]
    before_visible = visible(before.evidence, before.retractions, policy=policy)
    if not any(e.version_id == vid for e in before.evidence):
        return None
    where = f" (erasure {erasure_id})"
    if not any(e.version_id == vid for e in before_visible):
        clause = "the evidence that had ended it was erased" + where
        return _erased(key, vid, rep.object, clause, clause)
    if not served_before:
        return None
    top = served_before[0]
    verdict = verdict_of(key, representatives(before_visible, policy), policy)
    rule: Rule | None = top.rule
    if verdict is not None and verdict.version_id == top.version_id:
        rule = verdict.rule_against(vid) or top.rule
    still = [e for e in after.evidence if e.version_id == top.version_id]
    if not still:
        clause = f"the version that outranked it by {rule} was erased" + where
        return _erased(key, vid, rep.object, clause, clause)
    # The version that outranked it is still held (only some of its evidence went), so its
    # value is not erased and the reply names it; the log does not, as it never names a
    # value another erasure could take away later.
    said = f"the evidence by which {{}} outranked it by {rule} was erased" + where
    return _erased(
        key, vid, rep.object, said.format(repr(still[0].object)), said.format("another version")
    )


def _erased(key: Key, vid: str, obj: str, told: str, logged: str) -> BelievedAgain:
    return BelievedAgain(
        key,
        vid,
        obj,
        ERASED,
        f"{obj!r} is believed again: {told}",
        logged=f"{BELIEVED_AGAIN}{logged}",
    )


def erasure_story(obj: str, detail: str) -> str:
    """An erasure's story as the decision log keeps it (`BelievedAgain.logged`), told for the
    value `obj` it made believed again."""
    return f"{obj!r} is believed again: {detail.removeprefix(BELIEVED_AGAIN)}"


def served_until_resolution(
    now: Sequence[VersionHistory],
    before_pin: Callable[[], Sequence[VersionHistory]],
    pin: Pin | None,
) -> list[VersionHistory]:
    """`now` (a key's served history) with, for each version served at no event time now but
    served as known just before the operator's resolution (`before_pin` tells that history),
    `served_until` set to the resolution's time: it was believed until then."""
    if pin is None or all(h.intervals for h in now):
        return list(now)
    earlier: Mapping[str, VersionHistory] = {h.version_id: h for h in before_pin()}
    out = []
    for h in now:
        then = earlier.get(h.version_id)
        if not h.intervals and then is not None and then.intervals:
            h = replace(h, served_until=pin.pinned_at)
        out.append(h)
    return out


def decayed_decision(
    key: Key,
    state: KeyState,
    before: Sequence[tuple[str, BeliefState]],
    after: Sequence[tuple[str, BeliefState]],
    policy: Policy,
    now: Instant,
) -> Decision | None:
    """The decay job's entry for a key whose served (version, state) pairs went from
    `before` to `after` because claims expired by `now`: outcome DECAYED, rule decay, naming
    the claim that expired last (ids and times only, as every logged decision). None when
    what it serves did not change."""
    if sorted(before) == sorted(after):
        return None
    served_before = {v for v, _ in before}
    expired = [(t, e) for e in state.evidence if (t := expiry(e, policy)) is not None and t <= now]
    if not expired:
        return None
    # A claim of a version served before, the last to expire (ties: the greatest id).
    at, claim = max(
        expired, key=lambda te: (te[1].version_id in served_before, te[0], te[1].evidence_id)
    )
    first_before = before[0][0] if before else None
    first_after = after[0][0] if after else None
    now_serving = (
        f"version {first_after} is served" if first_after else "nothing is served any more"
    )
    return Decision(
        key=key,
        outcome=Outcome.DECAYED,
        rule=Rule.DECAY,
        decided_at=now,
        evidence_id=claim.evidence_id,
        version_id=first_after,
        # Lineage: only a version that now serves supersedes the one that expired.
        supersedes=first_before
        if first_after is not None and first_before != first_after
        else None,
        detail=f"evidence {claim.evidence_id} (version {claim.version_id}) expired at "
        f"{iso(at)}, decayed from confirmed_at {iso(claim.confirmed)}; {now_serving}",
    )
