"""Arbitration: which version of a key a node believes, and by which rule.

The belief is a function of the *set* of evidence: the rules are applied as
filters over the versions (each represented by its strongest evidence), so the
same evidence in any arrival order gives the same verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from factnode.core._model import (
    Evidence,
    Instant,
    Interval,
    Key,
    Rule,
    Verdict,
    VersionHistory,
)
from factnode.core._rules import BY_RULE, RULES, TIEBREAK_REASON, Metric, leads
from factnode.core.policy import Policy


def retracted_key(r: Evidence) -> Key | None:
    """The key a piece of evidence ends assertions on: its own for a retraction, the other
    key for an assertion naming `contradicts` (specification §5), None otherwise."""
    return r.key if r.retracts else r.contradicts


def covers(r: Evidence, e: Evidence) -> bool:
    """Whether retraction-like evidence `r` is about assertion `e`: a retraction of `e`'s
    version or of its whole key, or a `contradicts` naming `e`'s key."""
    if r.retracts:
        return r.key == e.key and (not r.version_id or r.version_id == e.version_id)
    return r.contradicts == e.key


def pairwise(a: Evidence, b: Evidence, policy: Policy) -> tuple[int, Rule]:
    """The rule order applied to two pieces of evidence: (1 if `a` comes first, -1 if `b`
    does, 0 on a tie) and the rule that decided (TIEBREAK on a tie)."""
    for row in RULES:
        ma, mb = row.metric(a, policy), row.metric(b, policy)
        margin = row.margin_milli(policy)
        if leads(ma, mb, margin):
            return 1, row.rule
        if leads(mb, ma, margin):
            return -1, row.rule
    return 0, Rule.TIEBREAK


def ends(r: Evidence, e: Evidence, policy: Policy) -> bool:
    """Whether retraction-like evidence `r` ends assertion `e`: it covers `e`, `e` was stated
    at or before the retraction's time, and `r` beats `e` under the rule order (a tie does
    not end it: a retraction by `llm_generated` cannot end a `user_stated` belief)."""
    return covers(r, e) and e.valid_from <= r.valid_from and pairwise(r, e, policy)[0] > 0


def counted_retractions(
    evidence: Iterable[Evidence],
    retractions: Iterable[Evidence],
    *,
    as_of: Instant | None = None,
    known_at: Instant | None = None,
) -> list[Evidence]:
    """The retraction-like evidence that counts as of `as_of`, as known at `known_at`: known,
    dated at or before `as_of`, and not corrected (by evidence of its key or, for a
    `contradicts`, of the key it was stated on; `retractions` holds those correctors too)."""
    known = [r for r in retractions if known_at is None or r.recorded_at <= known_at]
    corrected = {r.corrects for r in known if r.corrects}
    corrected.update(
        e.corrects
        for e in evidence
        if e.corrects and (known_at is None or e.recorded_at <= known_at)
    )
    return [
        r
        for r in known
        if retracted_key(r) is not None
        and r.evidence_id not in corrected
        and (as_of is None or r.valid_from <= as_of)
    ]


def visible(
    evidence: Iterable[Evidence],
    retractions: Iterable[Evidence] = (),
    *,
    policy: Policy | None = None,
    as_of: Instant | None = None,
    known_at: Instant | None = None,
) -> list[Evidence]:
    """The assertions that count as of event time `as_of`, as known at ingestion time `known_at`.

    Corrected evidence was never true, so it leaves every as-of answer once the
    correction is known; a retraction (or a `contradicts` from another key) ends the
    assertions it covers and outranks from its time on (`ends`). `retractions` holds the
    key's retraction-like evidence; `policy` is needed to weigh it.
    """
    retractions = list(retractions)
    if as_of is None and known_at is None and not retractions:
        # The write path's common case: only corrections can hide anything.
        evidence = list(evidence)
        corrected = {e.corrects for e in evidence if e.corrects}
        if not corrected:
            return evidence
        return [e for e in evidence if e.evidence_id not in corrected]
    known = [e for e in evidence if known_at is None or e.recorded_at <= known_at]
    corrected = {e.corrects for e in known if e.corrects}
    counted = counted_retractions(known, retractions, as_of=as_of, known_at=known_at)
    if counted and policy is None:
        raise ValueError("weighing retractions needs the policy")
    out = []
    for e in known:
        if as_of is not None and e.valid_from > as_of:
            continue
        if e.evidence_id in corrected:
            continue
        if counted and any(ends(r, e, policy) for r in counted):  # type: ignore[arg-type]
            continue
        out.append(e)
    return out


def strength(e: Evidence, policy: Policy) -> tuple[Metric, ...]:
    """Evidence's metric under each rule of `RULES`, in order: the strongest evidence of a
    version is the greatest (margins aside, which only matter between versions)."""
    return tuple([row.metric(e, policy) for row in RULES])


def representatives(evidence: Iterable[Evidence], policy: Policy) -> dict[str, Evidence]:
    """Each version's strongest evidence: the greatest `strength`, ties to the lowest
    evidence id. Found rule by rule like the verdict (without margins), so a rule's metric
    is read only for the evidence still tied under the rules before it."""
    by_version: dict[str, list[Evidence]] = defaultdict(list)
    for e in evidence:
        by_version[e.version_id].append(e)
    return {vid: _strongest(by_version[vid], policy) for vid in sorted(by_version)}


def _strongest(evs: list[Evidence], policy: Policy) -> Evidence:
    for row in RULES:
        if len(evs) == 1:
            return evs[0]
        metrics = [row.metric(e, policy) for e in evs]
        best = max(metrics)
        evs = [e for e, m in zip(evs, metrics, strict=True) if m == best]
    return min(evs, key=lambda e: e.evidence_id)


def arbitrate_reps(reps: Mapping[str, Evidence], policy: Policy) -> Verdict | None:
    """Applies the rules in order as filters over the versions' representatives."""
    if not reps:
        return None
    survivors = sorted(reps)
    if len(survivors) == 1:
        only = survivors[0]
        return Verdict(only, reps[only].evidence_id, Rule.SOLE_VERSION, False)
    beaten: list[tuple[str, Rule]] = []
    decided: Rule | None = None
    for row in RULES:
        metrics = {v: row.metric(reps[v], policy) for v in survivors}
        margin = row.margin_milli(policy)
        best = max(metrics.values())
        kept = []
        for v in survivors:
            if leads(best, metrics[v], margin):
                beaten.append((v, row.rule))
            else:
                kept.append(v)
        survivors = kept
        if len(survivors) == 1:
            decided = row.rule
            break
    if decided is None:
        # Nothing discriminates: the lowest version id is the provisional belief.
        winner = survivors[0]
        beaten.extend((v, Rule.TIEBREAK) for v in survivors[1:])
        return Verdict(winner, reps[winner].evidence_id, Rule.TIEBREAK, True, tuple(sorted(beaten)))
    winner = survivors[0]
    return Verdict(winner, reps[winner].evidence_id, decided, False, tuple(sorted(beaten)))


def with_evidence(
    reps: Mapping[str, Evidence], new: Evidence, policy: Policy
) -> Mapping[str, Evidence]:
    """`representatives([*evidence, new])`, given `reps == representatives(evidence)`:
    only `new` is looked at. `reps` is not changed (it is returned when `new` adds nothing)."""
    held = reps.get(new.version_id)
    if held is not None:
        s_new, s_held = strength(new, policy), strength(held, policy)
        if s_new < s_held or (s_new == s_held and new.evidence_id > held.evidence_id):
            return reps
    return {**reps, new.version_id: new}


def verdict_of(key: Key, reps: Mapping[str, Evidence], policy: Policy) -> Verdict | None:
    """The belief for a key, given each visible version's representative."""
    if not reps:
        return None
    if policy.is_multi_valued(key.predicate):
        believed = tuple(sorted(reps))
        first = believed[0]
        return Verdict(first, reps[first].evidence_id, Rule.MULTI_VALUED, False, (), believed)
    return arbitrate_reps(reps, policy)


def arbitrate(evidence: Iterable[Evidence], policy: Policy) -> Verdict | None:
    """The belief for one key's visible evidence, or None when there is none."""
    evidence = list(evidence)
    if not evidence:
        return None
    return verdict_of(evidence[0].key, representatives(evidence, policy), policy)


def believed_versions(verdict: Verdict | None) -> tuple[str, ...]:
    """Every version a verdict believes: one for single-valued keys, all for multi-valued."""
    if verdict is None:
        return ()
    return verdict.believed or (verdict.version_id,)


def belief_at(
    evidence: Iterable[Evidence],
    retractions: Iterable[Evidence],
    policy: Policy,
    *,
    as_of: Instant | None = None,
    known_at: Instant | None = None,
) -> Verdict | None:
    """Time travel: the same arbitration over the evidence known at `known_at`, valid at `as_of`."""
    return arbitrate(
        visible(evidence, retractions, policy=policy, as_of=as_of, known_at=known_at), policy
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """Why the belief beats one other version."""

    version_id: str
    object: str
    rule: Rule
    winner: Evidence
    loser: Evidence
    reason: str
    # Where votes or an operator's pin chose the belief: the first rule that separates the
    # two versions' evidence (TIEBREAK where none does), whichever way it goes, and that
    # comparison in words. None where local arbitration chose the belief (`rule` is it).
    evidence_rule: Rule | None = None
    evidence_reason: str = ""


def describe(rule: Rule, winner: Evidence, loser: Evidence, policy: Policy) -> str:
    """A one-line human reason for `winner` beating `loser` by `rule`."""
    row = BY_RULE.get(rule)
    return TIEBREAK_REASON if row is None else row.reason(winner, loser, policy)


def explain(
    evidence: Iterable[Evidence], policy: Policy
) -> tuple[Verdict | None, tuple[Comparison, ...]]:
    """The verdict over visible evidence and, for every other version, the rule that beat it."""
    evidence = list(evidence)
    verdict = arbitrate(evidence, policy)
    if verdict is None:
        return None, ()
    reps = representatives(evidence, policy)
    winner = reps[verdict.version_id]
    comparisons = tuple(
        Comparison(
            vid,
            reps[vid].object,
            rule,
            winner,
            reps[vid],
            describe(rule, winner, reps[vid], policy),
        )
        for vid, rule in verdict.beaten_by
    )
    return verdict, comparisons


def history(
    evidence: Sequence[Evidence],
    retractions: Sequence[Evidence],
    policy: Policy,
    *,
    known_at: Instant | None = None,
    lineage: Iterable[tuple[str, str]] = (),
) -> list[VersionHistory]:
    """Each version of a key with the event-time intervals in which it was believed.

    `lineage` holds (winner, loser) version pairs from the decision log.
    """
    known = [e for e in evidence if known_at is None or e.recorded_at <= known_at]
    rets = [r for r in retractions if known_at is None or r.recorded_at <= known_at]
    points = sorted({e.valid_from for e in known} | {r.valid_from for r in rets})
    open_since: dict[str, Instant] = {}
    intervals: dict[str, list[Interval]] = defaultdict(list)
    for t in points:
        now_believed = set(believed_versions(belief_at(known, rets, policy, as_of=t)))
        for vid in sorted(set(open_since) - now_believed):
            intervals[vid].append(Interval(open_since.pop(vid), t))
        for vid in sorted(now_believed - set(open_since)):
            open_since[vid] = t
    for vid, start in open_since.items():
        intervals[vid].append(Interval(start, None))

    current = visible(known, rets, policy=policy)
    counted = counted_retractions(known, rets)
    verdict = arbitrate(current, policy)
    current_ids = {e.evidence_id for e in current}
    corrected = {e.corrects for e in known if e.corrects}
    by_version: dict[str, list[Evidence]] = defaultdict(list)
    for e in known:
        by_version[e.version_id].append(e)
    supersedes: dict[str, set[str]] = defaultdict(set)
    superseded_by: dict[str, set[str]] = defaultdict(set)
    for winner, loser in lineage:
        supersedes[winner].add(loser)
        superseded_by[loser].add(winner)

    out = []
    for vid in sorted(by_version):
        evs = by_version[vid]
        out.append(
            VersionHistory(
                version_id=vid,
                object=evs[0].object,
                intervals=tuple(intervals.get(vid, ())),
                evidence_ids=tuple(sorted(e.evidence_id for e in evs)),
                status=_status(vid, evs, verdict, current_ids, corrected),
                supersedes=tuple(sorted(supersedes[vid])),
                superseded_by=tuple(sorted(superseded_by[vid])),
                ended_by=tuple(
                    sorted({r.evidence_id for r in counted for e in evs if ends(r, e, policy)})
                ),
            )
        )
    return out


def _status(
    vid: str,
    evs: Sequence[Evidence],
    verdict: Verdict | None,
    current_ids: set[str],
    corrected: set[str],
) -> str:
    if vid in believed_versions(verdict):
        assert verdict is not None
        return "AMBIGUOUS" if verdict.ambiguous else "BELIEVED"
    if all(e.evidence_id in corrected for e in evs):
        return "CORRECTED"
    if not any(e.evidence_id in current_ids for e in evs):
        return "RETRACTED"
    rule = verdict.rule_against(vid) if verdict else None
    if rule is Rule.RECENCY:
        return "HISTORICAL"
    if rule is Rule.TIEBREAK:
        return "AMBIGUOUS"
    return "DISBELIEVED"


def serves_alike(a: Verdict | None, b: Verdict | None) -> bool:
    """Whether two local verdicts on a single-valued key give it the same served row and the
    same own vote when no peer votes: the same winner, resting on the same evidence, by the
    same rule, equally (un)ambiguous. Only the losers differ."""
    if a is None or b is None:
        return a is b
    return (a.version_id, a.evidence_id, a.rule, a.ambiguous) == (
        b.version_id,
        b.evidence_id,
        b.rule,
        b.ambiguous,
    )
