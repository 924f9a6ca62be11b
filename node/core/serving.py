"""What a key serves: its believed value(s), state and rule, from one point of view.

Pure: a key's evidence, the votes this node holds on it, an operator's pin and the view's
times in; the served values, the tally and this node's own vote out. The write path stores
what `serve` gives for the present; every read view (GetBelief with or without `as_of` /
`known_at`, Explain, GetHistory, ListBeliefs, the review queue) answers from `view`, which
asks `serve` too, so no two views of a key tell different stories.

How a view treats what is not evidence (specification §7 leaves it open; decided here):

- A **pin** recorded at time P counts in every view with `known_at` unset or at or after P,
  whatever `as_of`: in such a view, where the view's own answer is AMBIGUOUS or CONTESTED
  and the pinned version is among its competitors, the pinned version is served BELIEVED
  by `operator_resolution`, exactly as at present. Before P nobody knew of the pin.
- **Votes**: the node keeps each voter's latest vote, not a history of votes. A view
  counts the votes held now as they rest on the evidence the view sees (a vote naming
  evidence not yet known at `known_at`, or valid only after `as_of`, waits, as it does on
  a node that does not hold its evidence), and this node's own vote is recomputed from the
  view's local belief. So a past view is the current votes recounted over the past
  evidence, not a record of what was served then (that record is the decision log).
- A view that sees every piece of evidence the node holds, and the pin if there is one,
  is the present: it answers what the node stores for the present, i.e. what GetBelief
  says, whatever hour the tally was last counted in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from factnode.core._model import (
    BeliefState,
    Confirmation,
    Evidence,
    Instant,
    Interval,
    Key,
    Rule,
    Verdict,
    VersionHistory,
    iso,
)
from factnode.core.arbitration import (
    counted_retractions,
    ends,
    representatives,
    verdict_of,
    visible,
)
from factnode.core.consensus import Served, Tally, Vote, pinned, served, tally, tied_versions
from factnode.core.decay import confirmed_at, expiry, holds
from factnode.core.decide import KeyState
from factnode.core.peer_checks import counted_vote
from factnode.core.policy import Policy

# Rules by which a key serves another version than its local arbitration's winner.
_OVERRULING = frozenset({Rule.FEDERATION_CONSENSUS, Rule.OPERATOR_RESOLUTION})

RepOf = Callable[[str], Evidence | None]
"""Each version's strongest visible evidence, by version id (None for a version not held)."""


@dataclass(frozen=True, slots=True)
class Pin:
    """An operator's resolution of a key under review: the chosen version, and when."""

    version_id: str
    pinned_at: Instant


@dataclass(frozen=True, slots=True)
class ServedValue:
    """One value a key serves: its version, the evidence it rests on, its rule and state."""

    version_id: str
    evidence: Evidence
    rule: Rule
    state: BeliefState


@dataclass(frozen=True, slots=True)
class Answer:
    """What a key serves from one point of view, with what decided it."""

    # Empty when nothing is believed (no evidence, or every version ended).
    values: tuple[ServedValue, ...]
    # Local arbitration over the evidence the view sees.
    verdict: Verdict | None
    # The votes as counted in the view (None without a vote for any version).
    tally: Tally | None
    # The assertions the view sees.
    evidence: tuple[Evidence, ...]
    # The pin that counts in the view, if any.
    pin: str | None = None

    @property
    def first(self) -> ServedValue | None:
        """The served value (the first of a multi-valued key's), or None."""
        return self.values[0] if self.values else None


def peer_voted(votes: Sequence[Vote], node_id: str) -> bool:
    """Whether any node but this one votes among `votes`."""
    return any(v.voter != node_id for v in votes)


def own_vote(
    node_id: str,
    key: Key,
    verdict: Verdict | None,
    rep_of: RepOf,
    policy: Policy,
    now: Instant,
    pin: str | None = None,
) -> Vote | None:
    """This node's vote is its local belief; where that is AMBIGUOUS it abstains, unless an
    operator pinned one of the tied versions: then it votes for that one. Multi-valued keys
    and keys without a belief get no vote."""
    if verdict is None or policy.is_multi_valued(key.predicate):
        return None
    chosen = verdict.version_id
    if verdict.ambiguous:
        if pin is None or pin not in tied_versions(verdict):
            return Vote(node_id, key, None, "", 0, 0, 0, now)
        chosen = pin
    rep = rep_of(chosen)
    assert rep is not None
    return Vote(
        node_id,
        key,
        chosen,
        rep.evidence_id,
        policy.anchor_value(rep.attribution, rep.anchor_cap),
        rep.worth_milli,
        rep.valid_from,
        now,
    )


def serve(
    verdict: Verdict | None,
    rep_of: RepOf,
    votes: Sequence[Vote],
    policy: Policy,
    node_id: str,
    now: Instant,
    pin: str | None = None,
) -> tuple[tuple[ServedValue, ...], Tally | None]:
    """The served values of a key and the tally behind them: every believed value of a
    multi-valued key; otherwise the consensus version, the local belief (marked CONTESTED or
    AMBIGUOUS where it is) or an applicable pin (specification §7). `votes` are the votes as this
    node counts them, its own included."""
    if verdict is not None and verdict.believed:
        out = []
        for vid in verdict.believed:
            rep = rep_of(vid)
            if rep is not None:
                out.append(ServedValue(vid, rep, verdict.rule, BeliefState.BELIEVED))
        return tuple(out), None
    result = None
    if peer_voted(votes, node_id):
        # Without a peer's vote the count cannot change what is served (`served`).
        result = tally(
            votes,
            now=now,
            threshold=policy.consensus_threshold,
            half_life_days=policy.vote_half_life_days,
            self_id=node_id,
        )
    local_rep = rep_of(verdict.version_id) if verdict else None
    protected = (
        local_rep is not None
        and policy.anchor_value(local_rep.attribution, local_rep.anchor_cap)
        >= policy.anchors[policy.protect_anchor]
    )
    answer = served(
        verdict.version_id if verdict else None,
        verdict.rule if verdict else None,
        verdict.ambiguous if verdict else False,
        protected,
        result,
    )
    answer = pinned(answer, pin, verdict, result)
    rep = rep_of(answer.version_id) if answer is not None else None
    if answer is not None and rep is None and verdict is not None:
        # The consensus version's evidence has not reached this node yet.
        answer = Served(verdict.version_id, BeliefState.CONTESTED, verdict.rule)
        rep = local_rep
    if answer is None or rep is None:
        return (), result
    return (ServedValue(answer.version_id, rep, answer.rule, answer.state),), result


def counted_votes(
    votes: Sequence[Vote], held: Mapping[str, Evidence], policy: Policy, node_id: str
) -> list[Vote]:
    """The peers' votes on a key as this node counts them against the evidence `held`:
    each weighed from that evidence; a vote whose evidence is not held waits."""
    out = []
    for v in votes:
        if v.voter != node_id:
            counted = counted_vote(v, held, policy)
            if counted is not None:
                out.append(counted)
    return out


def is_present(
    state: KeyState,
    pin: Pin | None,
    as_of: Instant | None,
    known_at: Instant | None,
    policy: Policy,
    now: Instant,
) -> bool:
    """Whether a view at (`as_of`, `known_at`) sees every piece of evidence the key holds
    and its pin, and no assertion of it has expired by then (by `now`, as far as the stored
    present goes): then it is the present, and answers what GetBelief does."""
    at = now if as_of is None else max(as_of, now)
    if state.holding(policy, at) is not state:
        return False
    if as_of is None and known_at is None:
        return True
    if known_at is not None and pin is not None and pin.pinned_at > known_at:
        return False
    for e in (*state.evidence, *state.retractions):
        if known_at is not None and (e.recorded_at > known_at or e.confirmed > known_at):
            return False
        if as_of is not None and e.valid_from > as_of:
            return False
    return True


def view(
    key: Key,
    state: KeyState,
    votes: Sequence[Vote],
    pin: Pin | None,
    policy: Policy,
    node_id: str,
    now: Instant,
    *,
    as_of: Instant | None = None,
    known_at: Instant | None = None,
    present: Sequence[tuple[str, str, Rule, BeliefState]] | None = None,
    confirmations: Sequence[Confirmation] = (),
) -> Answer:
    """What `key` serves at event time `as_of` (unset: `now`) as known at `known_at` (unset:
    now), from its state, the votes held on it and its pin (see the module's notes for how
    pins and votes count in a past view). An assertion counts only before its expiry as
    known at `known_at` (`confirmations`: those held on the key's evidence; a view as known
    now reads `Evidence.confirmed_at`). `present` is what the node stores for the present,
    as (version_id, evidence_id, rule, state) rows; a view that is the present answers it."""
    held = [
        e
        for e in state.evidence
        if (known_at is None or e.recorded_at <= known_at)
        and (as_of is None or e.valid_from <= as_of)
        and holds(
            e,
            policy,
            now if as_of is None else as_of,
            # As known now the evidence carries its confirmed_at; earlier, count then.
            None if known_at is None else confirmed_at(e, confirmations, policy, node_id, known_at),
        )
    ]
    seen = tuple(visible(held, state.retractions, policy=policy, as_of=as_of, known_at=known_at))
    reps = representatives(seen, policy)
    verdict = verdict_of(key, reps, policy)
    applies = pin is not None and (known_at is None or pin.pinned_at <= known_at)
    pin_version = pin.version_id if applies and pin is not None else None
    mine = own_vote(node_id, key, verdict, reps.get, policy, now, pin_version)
    counted = counted_votes(votes, {e.evidence_id: e for e in held}, policy, node_id)
    values, result = serve(
        verdict, reps.get, [*counted, *([mine] if mine else [])], policy, node_id, now, pin_version
    )
    if present is not None and is_present(state, pin, as_of, known_at, policy, now):
        by_id = {e.evidence_id: e for e in state.evidence}
        stored = tuple(
            ServedValue(vid, by_id[eid], rule, st) for vid, eid, rule, st in present if eid in by_id
        )
        if len(stored) == len(present):
            values = stored
    return Answer(values, verdict, result, seen, pin_version)


def decayed_since(state: KeyState, policy: Policy, since: Instant | None, now: Instant) -> bool:
    """Whether what a key served when worked out at `since` (None: it served nothing) may
    be different at `now` because evidence expired in between: then the stored present is
    not the present any more."""
    if since is None:
        return False  # an expiry only takes away: what serves nothing keeps serving nothing
    return state.expired_between(policy, since, now)


def _where(as_of: Instant | None, known_at: Instant | None) -> str:
    parts = []
    if as_of is not None:
        parts.append(f" as of {iso(as_of)}")
    if known_at is not None:
        parts.append(f" as known at {iso(known_at)}")
    return "".join(parts)


def _ender(r: Evidence) -> str:
    """Retraction-like evidence in words: what it is, who said it and from when."""
    said = f"{r.attribution} from {r.source}, from {iso(r.valid_from)}"
    if r.retracts:
        return f"retraction {r.evidence_id} ({said})"
    return f"evidence {r.evidence_id} on {r.key}, which names this key in contradicts ({said})"


def nothing_served(
    key: Key,
    state: KeyState,
    policy: Policy,
    as_of: Instant | None = None,
    known_at: Instant | None = None,
    now: Instant | None = None,
) -> str:
    """Why a key serves nothing in a view: no evidence, none valid yet, or what ended each
    version (the retractions and `contradicts` that outrank it, its corrections, or its
    expiry at `as_of`, else `now`: when it was last stated, as known now)."""
    head = f"no belief for {key}{_where(as_of, known_at)}"
    known = [e for e in state.evidence if known_at is None or e.recorded_at <= known_at]
    if not known:
        return head
    dated = [e for e in known if as_of is None or e.valid_from <= as_of]
    if not dated:
        return (
            f"{head}: its earliest evidence is valid from {iso(min(e.valid_from for e in known))}"
        )
    counted = counted_retractions(known, state.retractions, as_of=as_of, known_at=known_at)
    corrected = {e.corrects for e in known if e.corrects}
    by_version: dict[str, list[Evidence]] = {}
    for e in dated:
        by_version.setdefault(e.version_id, []).append(e)
    parts = []
    at = as_of if as_of is not None else now
    for vid in sorted(by_version, key=lambda v: by_version[v][0].object):
        evs = by_version[vid]
        enders = {r.evidence_id: r for r in counted for e in evs if ends(r, e, policy)}
        what = repr(evs[0].object)
        if enders:
            parts.append(
                f"{what} was ended by " + ", ".join(_ender(enders[i]) for i in sorted(enders))
            )
        elif all(e.evidence_id in corrected for e in evs):
            parts.append(f"{what} was corrected (never true)")
        elif at is not None and all(not holds(e, policy, at) for e in evs):
            last = max(evs, key=lambda e: expiry(e, policy) or 0)
            parts.append(
                f"{what} expired at {iso(expiry(last, policy) or 0)} (decay: last stated "
                f"{iso(last.confirmed)}; state it again to renew it)"
            )
    return f"{head}: {'; '.join(parts)}" if parts else head


def served_history(
    local: Sequence[VersionHistory],
    state: KeyState,
    at: Callable[[Instant | None], Answer],
    known_at: Instant | None = None,
    lives: Mapping[str, tuple[Instant, Instant]] | None = None,
    now: Instant | None = None,
) -> list[VersionHistory]:
    """`local` (arbitration's history of a key) with what the key served: each version's
    intervals are the event times at which `at` (the view at that event time, as known at
    `known_at`) serves it, and the served version's status and rule are the present view's,
    so history, GetBelief and its as-of answers agree. `lives` holds, by evidence id, the
    (expiry, confirmed_at) of each decaying assertion as known at `known_at`: a version not
    served at `now` whose every claim has expired by then is DECAYED (rule decay), its
    believed intervals ending at the expiries."""
    lives = lives or {}
    known = [e for e in state.evidence if known_at is None or e.recorded_at <= known_at]
    rets = [r for r in state.retractions if known_at is None or r.recorded_at <= known_at]
    ends_at = {lives[e.evidence_id][0] for e in known if e.evidence_id in lives}
    points = sorted({e.valid_from for e in known} | {r.valid_from for r in rets} | ends_at)
    open_since: dict[str, Instant] = {}
    intervals: dict[str, list[Interval]] = {}
    for t in points:
        now_served = {v.version_id for v in at(t).values}
        for vid in sorted(set(open_since) - now_served):
            intervals.setdefault(vid, []).append(Interval(open_since.pop(vid), t))
        for vid in sorted(now_served - set(open_since)):
            open_since[vid] = t
    for vid, start in open_since.items():
        intervals.setdefault(vid, []).append(Interval(start, None))
    present = at(None)
    served_now = {v.version_id: v for v in present.values}
    first = present.first
    out = []
    for h in local:
        value = served_now.get(h.version_id)
        decayed = _decayed(h, known, lives, now) if value is None else None
        if value is not None:
            status, rule = str(value.state), value.rule
        elif decayed is not None and h.status not in ("RETRACTED", "CORRECTED"):
            out.append(
                replace(
                    h,
                    intervals=tuple(intervals.get(h.version_id, ())),
                    status="DECAYED",
                    rule=Rule.DECAY,
                    decayed_at=decayed[0],
                    confirmed_at=decayed[1],
                )
            )
            continue
        else:
            status, rule = h.status, None
            if status in ("BELIEVED", "AMBIGUOUS") and first is not None:
                # The local winner (or a version tied with it) that a pin or the votes did
                # not choose: stored and visible, not believed.
                status = "DISBELIEVED" if first.rule in _OVERRULING else status
            if status == "RETRACTED":
                rule = Rule.RETRACT
            elif status == "CORRECTED":
                rule = Rule.CORRECTION
            elif first is not None and first.rule in _OVERRULING:
                rule = first.rule
            elif present.verdict is not None:
                rule = present.verdict.rule_against(h.version_id)
        out.append(
            replace(h, intervals=tuple(intervals.get(h.version_id, ())), status=status, rule=rule)
        )
    return out


def _decayed(
    h: VersionHistory,
    known: Sequence[Evidence],
    lives: Mapping[str, tuple[Instant, Instant]],
    now: Instant | None,
) -> tuple[Instant, Instant] | None:
    """(decayed_at, confirmed_at) of a version whose every known claim has expired by
    `now`: the last expiry, and the confirmation it counted from. None otherwise."""
    if now is None:
        return None
    mine = [lives.get(e.evidence_id) for e in known if e.version_id == h.version_id]
    if not mine or any(life is None or life[0] > now for life in mine):
        return None
    return max(life for life in mine if life is not None)
