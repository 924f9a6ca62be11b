"""Consensus: nodes' beliefs as weighted votes, adopted only on a supermajority.

Pure: votes in, outcome out. Weights are integers (`anchor x worth_milli x
freshness_ppm`) and the threshold is an exact fraction, so no float rounding
decides; the same vote set in any order gives the same outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from factnode.core._model import (
    BeliefState,
    Decision,
    Instant,
    Key,
    Outcome,
    Rule,
    Verdict,
)
from factnode.core.decay import freshness_ppm

MICROS_PER_HOUR = 3600 * 1_000_000


@dataclass(frozen=True, slots=True)
class Vote:
    """One node's local belief for a key; `version_id` None means it abstains.

    `seq` is the number its voter signed it with (specification §7): a voter's current vote on a key
    is its highest number, whatever the clocks say; `signature` is the voter's signature of
    `signed.vote_payload` (empty on a node without a federation certificate)."""

    voter: str
    key: Key
    version_id: str | None
    evidence_id: str
    anchor: int
    worth_milli: int
    fresh_since: Instant
    cast_at: Instant
    seq: int = 0
    signature: bytes = b""
    # A marker, never signed nor sent: its voter is proven to have equivocated on the key
    # (specification §7), so it counts zero there and the key is contested (`tally`).
    equivocated: bool = False


@dataclass(frozen=True, slots=True)
class VersionTally:
    """The weight behind one version and the nodes whose votes carry it."""

    version_id: str
    weight: int
    voters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Tally:
    """The outcome for one key: the consensus version, or none (contested)."""

    consensus: str | None
    total: int
    versions: tuple[VersionTally, ...]
    peer_voted: bool
    # Voters proven to have equivocated on the key: they count zero, and no version has
    # consensus while the proof is held, so the key waits in the review queue.
    equivocators: tuple[str, ...] = ()

    def share_milli(self, version_id: str) -> int:
        """A version's share of the total weight in thousandths (for display only)."""
        for v in self.versions:
            if v.version_id == version_id and self.total:
                return v.weight * 1000 // self.total
        return 0


def hour_of(now: Instant) -> Instant:
    """The start of the UTC hour: every node evaluating in the same hour agrees."""
    return now - now % MICROS_PER_HOUR


def vote_weight(vote: Vote, now: Instant, half_life_days: int) -> int:
    """anchor x worth_milli x freshness_ppm, the age counted in whole hours up to the start
    of the current UTC hour; never zero for a vote with anchor and worth."""
    age_hours = max(0, (hour_of(now) - vote.fresh_since) // MICROS_PER_HOUR)
    return vote.anchor * vote.worth_milli * freshness_ppm(age_hours, half_life_days * 24)


def latest_votes(votes: Iterable[Vote]) -> dict[str, Vote]:
    """One vote per node: its latest (ties broken by content, so order never matters)."""
    out: dict[str, Vote] = {}
    for v in votes:
        cur = out.get(v.voter)
        if cur is None or newer(v, cur):
            out[v.voter] = v
    return out


def newer(a: Vote, b: Vote) -> bool:
    """Whether vote `a` supersedes `b`: a higher signed sequence number, never the clock
    (specification §7); between unnumbered votes (seq 0, from before votes were signed) the later
    cast. Ties are broken by content, so arrival order never matters."""
    return _vote_order(a) > _vote_order(b)


def _vote_order(v: Vote) -> tuple[int, int, str, str, int, int, int]:
    # Every field that can differ between one node's votes on a key, so no tie is left to
    # order. cast_at only orders votes of equal number: for signed votes, that is one
    # voter's equivocation, which `signed.equivocates` finds and the count sets to zero.
    return (
        v.seq,
        v.cast_at,
        v.version_id or "",
        v.evidence_id,
        v.anchor,
        v.worth_milli,
        v.fresh_since,
    )


def over_threshold(weight: int, total: int, threshold: Fraction) -> bool:
    """A version's weight is a supermajority: 100·W_v > 66·W_total, in integers (never floats)."""
    return weight * threshold.denominator > threshold.numerator * total


def tally(
    votes: Iterable[Vote],
    *,
    now: Instant,
    threshold: Fraction,
    half_life_days: int,
    self_id: str = "",
) -> Tally | None:
    """Consensus for one key's votes, or None when no node votes for any version.

    Votes resting on the same evidence id count once, at the highest weight
    among them: relays and echoes add nothing, only independent evidence adds.
    """
    current = latest_votes(votes).values()
    equivocators = tuple(sorted(v.voter for v in current if v.equivocated))
    latest = [v for v in current if v.version_id is not None and not v.equivocated]
    if not latest and not equivocators:
        return None
    by_evidence: dict[str, tuple[int, Vote]] = {}
    voters: dict[str, set[str]] = {}
    for v in sorted(latest, key=lambda v: v.voter):
        assert v.version_id is not None
        voters.setdefault(v.version_id, set()).add(v.voter)
        w = vote_weight(v, now, half_life_days)
        cur = by_evidence.get(v.evidence_id)
        if cur is None or (w, v.version_id) > (cur[0], cur[1].version_id or ""):
            by_evidence[v.evidence_id] = (w, v)
    weights: dict[str, int] = dict.fromkeys(voters, 0)
    for w, v in by_evidence.values():
        assert v.version_id is not None
        weights[v.version_id] += w
    total = sum(weights.values())
    consensus = None
    for vid, w in weights.items():
        if over_threshold(w, total, threshold) and not equivocators:
            consensus = vid
    versions = tuple(
        VersionTally(vid, weights[vid], tuple(sorted(voters[vid])))
        for vid in sorted(weights, key=lambda vid: (-weights[vid], vid))
    )
    peer_voted = bool(equivocators) or any(v.voter != self_id for v in latest)
    return Tally(consensus, total, versions, peer_voted, equivocators)


@dataclass(frozen=True, slots=True)
class Served:
    """What a node answers for a key once votes are counted."""

    version_id: str
    state: BeliefState
    rule: Rule


def served(
    local_version: str | None,
    local_rule: Rule | None,
    local_ambiguous: bool,
    local_protected: bool,
    result: Tally | None,
) -> Served | None:
    """The served belief: consensus where there is one, unless it would overwrite protected
    first-party truth; otherwise the local belief, marked CONTESTED where votes disagree."""
    local = None
    if local_version is not None:
        assert local_rule is not None
        local_state = BeliefState.AMBIGUOUS if local_ambiguous else BeliefState.BELIEVED
        local = Served(local_version, local_state, local_rule)
    if result is None or not result.peer_voted:
        return local
    if result.consensus is not None:
        if local is not None and local.version_id != result.consensus and local_protected:
            # A relayed majority never overwrites first-party truth.
            return Served(local.version_id, BeliefState.CONTESTED, local.rule)
        return Served(result.consensus, BeliefState.BELIEVED, Rule.FEDERATION_CONSENSUS)
    if local is not None:
        return Served(local.version_id, BeliefState.CONTESTED, local.rule)
    if not result.versions:
        return None  # an equivocator's marker alone, on a key this node believes nothing for
    top = result.versions[0]
    return Served(top.version_id, BeliefState.CONTESTED, Rule.TIEBREAK)


def same_vote(a: Vote | None, b: Vote | None) -> bool:
    """Whether two votes say the same thing: re-casting an unchanged vote is no change."""
    if a is None or b is None:
        return a is b
    return (a.version_id, a.evidence_id, a.anchor, a.worth_milli, a.fresh_since) == (
        b.version_id,
        b.evidence_id,
        b.anchor,
        b.worth_milli,
        b.fresh_since,
    )


def transition(
    key: Key,
    before: Served | None,
    after: Served | None,
    result: Tally | None,
    now: Instant,
) -> Decision | None:
    """The decision-log entry, with the tallies, when votes change what a key serves:
    entering consensus or contest, moving within it, and leaving consensus."""
    if after is None:
        return None
    if (
        before is not None
        and before.rule is Rule.FEDERATION_CONSENSUS
        and after.rule is not Rule.FEDERATION_CONSENSUS
        and after.state is not BeliefState.CONTESTED
    ):
        moved = before.version_id != after.version_id
        return Decision(
            key=key,
            outcome=Outcome.SUPERSEDED if moved else Outcome.CORROBORATED,
            rule=after.rule,
            decided_at=now,
            version_id=after.version_id,
            supersedes=before.version_id if moved else None,
            detail="left federation consensus; "
            + (f"tally: {describe_tally(result)}" if result is not None else "no peer votes"),
        )
    if result is None or not result.peer_voted:
        return None
    if after.state is BeliefState.CONTESTED:
        if (
            before is not None
            and before.state is BeliefState.CONTESTED
            and before.version_id == after.version_id
        ):
            return None
        outcome = Outcome.CONTESTED
    elif after.rule is Rule.FEDERATION_CONSENSUS:
        if (
            before is not None
            and before.rule is Rule.FEDERATION_CONSENSUS
            and before.version_id == after.version_id
        ):
            return None
        outcome = (
            Outcome.SUPERSEDED
            if before and before.version_id != after.version_id
            else Outcome.CORROBORATED
        )
    else:
        return None
    return Decision(
        key=key,
        outcome=outcome,
        rule=Rule.FEDERATION_CONSENSUS,
        decided_at=now,
        version_id=after.version_id,
        supersedes=before.version_id if before and before.version_id != after.version_id else None,
        detail=f"tally: {describe_tally(result)}",
    )


def composition(result: Tally | None) -> tuple[str | None, tuple[tuple[str, tuple[str, ...]], ...]]:
    """Who votes for what, and the consensus version: what a vote-set change can change
    (weights alone also move with the hour, which is no transition)."""
    if result is None or not result.peer_voted:
        return None, ()
    voted = tuple((t.version_id, t.voters) for t in result.versions)
    return result.consensus, voted + ((("", result.equivocators),) if result.equivocators else ())


def retallied(
    key: Key, before: Tally | None, after: Tally | None, served_now: Served | None, now: Instant
) -> Decision | None:
    """The decision-log entry for a tally that changed while what the key serves did not
    (specification §7: every transition is logged): a node's vote moved, arrived or was withdrawn,
    or the consensus version changed under a protected local belief. None when the voters and
    their versions are as they were, or when no peer votes now."""
    if served_now is None or after is None or not after.peer_voted:
        return None
    if composition(before) == composition(after):
        return None
    contested = served_now.state is BeliefState.CONTESTED
    return Decision(
        key=key,
        outcome=Outcome.CONTESTED if contested else Outcome.CORROBORATED,
        rule=Rule.FEDERATION_CONSENSUS,
        decided_at=now,
        version_id=served_now.version_id,
        detail=f"tally changed, {served_now.version_id} still served {served_now.state} by "
        f"{served_now.rule}; tally: {describe_tally(after)}",
    )


def describe_tally(result: Tally) -> str:
    """Each version's share and voters, for the decision log."""
    parts = [
        f"{t.version_id}: {result.share_milli(t.version_id) / 10:.1f}% by {', '.join(t.voters)}"
        for t in result.versions
    ]
    if result.equivocators:
        parts.append(f"equivocated, counted zero: {', '.join(result.equivocators)}")
    return "; ".join(parts)


def tied_versions(verdict: Verdict | None) -> frozenset[str]:
    """The versions no rule separates from an ambiguous verdict's pick (itself included)."""
    if verdict is None or not verdict.ambiguous:
        return frozenset()
    tied = {vid for vid, rule in verdict.beaten_by if rule is Rule.TIEBREAK}
    return frozenset({verdict.version_id, *tied})


def pinned(
    answer: Served | None, pin: str | None, verdict: Verdict | None, result: Tally | None
) -> Served | None:
    """An operator's pin settles a key under review: while the served answer is AMBIGUOUS or
    CONTESTED and the pinned version is among the competitors (the versions tied locally,
    or those the votes name), the pinned version is served BELIEVED by operator_resolution.
    Once the rules or the votes decide the key, the pin no longer applies."""
    if pin is None or answer is None or answer.state is BeliefState.BELIEVED:
        return answer
    competing = set(tied_versions(verdict))
    if verdict is not None:
        competing.add(verdict.version_id)
    if result is not None:
        competing.update(v.version_id for v in result.versions)
    if pin not in competing:
        return answer
    return Served(pin, BeliefState.BELIEVED, Rule.OPERATOR_RESOLUTION)


def consensus_reason(result: Tally, winner: str, loser: str, threshold: Fraction) -> str:
    """Why the consensus version is served over another: the vote shares and the threshold."""
    voters = {t.version_id: ", ".join(t.voters) or "no node" for t in result.versions}
    return (
        f"{result.share_milli(winner) / 10:.1f}% of the counted vote weight "
        f"({voters.get(winner, 'no node')}) against {result.share_milli(loser) / 10:.1f}% "
        f"({voters.get(loser, 'no node')}); adopting needs more than "
        f"{float(threshold) * 100:.0f}%"
    )


def review_reason(
    result: Tally | None,
    threshold: Fraction,
    tied: Iterable[str],
    objects: Mapping[str, str],
) -> str:
    """Why a key waits for an operator, in one line: the votes split below the threshold,
    the federation adopted a version this node does not serve, or no rule separates the tied
    versions. `objects` names versions by value where this node holds them."""

    def name(version_id: str) -> str:
        return repr(objects[version_id]) if version_id in objects else version_id[:12]

    if result is not None and result.equivocators:
        return (
            f"{', '.join(result.equivocators)} signed two different votes with one sequence "
            "number on this key (equivocation): its votes here count zero"
        )
    if result is not None and result.peer_voted and result.versions:
        if result.consensus is not None:
            return (
                f"the federation adopted {name(result.consensus)} "
                f"({result.share_milli(result.consensus) / 10:.1f}% of the counted vote "
                "weight), but this node keeps its own belief"
            )
        best = max(result.versions, key=lambda t: (t.weight, t.version_id))
        return (
            f"no version has more than {float(threshold) * 100:g}% of the counted vote "
            f"weight; the most is {name(best.version_id)} with "
            f"{result.share_milli(best.version_id) / 10:.1f}%"
        )
    names = sorted(name(v) for v in tied)
    if len(names) > 1:
        return "no rule discriminates between " + ", ".join(names)
    return "waiting for review"
