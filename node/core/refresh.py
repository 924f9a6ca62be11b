"""Refreshing keys after their evidence or votes changed, as a plan (specification §7).

Pure, like `core.plan`: each key's loaded state in (its evidence as stored, the served rows
stored for it, the votes held on it and those held before the transaction changed them,
its pin, what was arbitrated already), and out what to write and log: this node's votes to
cast (unnumbered: the shell numbers and signs them), the keys whose vote it drops, the
served rows that changed, the decisions that log a transition or a change of tally, and
each key's tally. The ledger's `Serving.refresh` loads, plans with `plan_refresh` and applies.

Reading pins is the one load that depends on the plan: only a key whose local belief is
AMBIGUOUS or on which a peer votes can be pinned (`may_be_pinned`), so most writes read no
pin at all."""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from factnode.core._model import BeliefState, Decision, Evidence, Instant, Key, Rule, Verdict
from factnode.core.arbitration import arbitrate, representatives
from factnode.core.consensus import Served, Tally, Vote, retallied, same_vote, tally, transition
from factnode.core.decide import Arbitrated, KeyState
from factnode.core.policy import Policy
from factnode.core.serving import counted_votes, decayed_since, own_vote, peer_voted, serve
from factnode.core.signed import withdrawn


@dataclass(frozen=True, slots=True)
class StoredBelief:
    """One served belief row, with the value of its representative evidence."""

    key: Key
    version_id: str
    object: str
    evidence_id: str
    rule: Rule
    state: BeliefState
    updated_at: Instant


def served_of(row: StoredBelief | None) -> Served | None:
    """A stored belief row as the core's served answer."""
    return None if row is None else Served(row.version_id, row.state, row.rule)


@dataclass(frozen=True, slots=True)
class RefreshLoad:
    """What refreshing one key reads: its evidence as stored (assertions past their expiry
    included: the plan leaves them out itself), its stored served rows, every vote held on
    it now (this node's included), those held before this transaction changed them (None:
    the same), and whether it changes without announcing (an erased key)."""

    state: KeyState
    served: Sequence[StoredBelief] = ()
    votes: Sequence[Vote] = ()
    votes_before: Sequence[Vote] | None = None
    quiet: bool = False


@dataclass(frozen=True, slots=True)
class Refreshing:
    """Whom a refresh is for: this node, its policy, the present, whether it signs its
    votes, and the evidence ids this transaction added (a tally before the transaction
    counts without them)."""

    node_id: str
    policy: Policy
    now: Instant
    signs: bool = False
    added: Collection[str] = frozenset()


class Local:
    """A key's local arbitration at present: its live state (expired assertions left out),
    its verdict, and each version's strongest evidence, worked out only when a version
    other than the verdict's is asked for (the verdict names its own) and not known."""

    __slots__ = ("_all", "_policy", "state", "verdict")

    def __init__(
        self,
        state: KeyState,
        verdict: Verdict | None,
        policy: Policy,
        known: Mapping[str, Evidence] | None = None,
    ):
        self.state = state
        self.verdict = verdict
        self._policy = policy
        self._all = known

    def of(self, version_id: str) -> Evidence | None:
        """The strongest visible evidence for `version_id` (None: no such version)."""
        v = self.verdict
        if v is not None and version_id == v.version_id:
            for e in self.state.evidence:  # the verdict's own evidence is visible
                if e.evidence_id == v.evidence_id:
                    return e
        if self._all is None:
            self._all = representatives(self.state.visible(self._policy), self._policy)
        return self._all.get(version_id)


def local_verdicts(
    states: Mapping[Key, KeyState],
    policy: Policy,
    now: Instant,
    known: Mapping[Key, Arbitrated] | None = None,
) -> dict[Key, Local]:
    """Each key's local arbitration at `now`: assertions past their expiry count no more
    (specification §6), so a state that lost some is arbitrated again; `known` holds the
    states this transaction arbitrated already."""
    out = {}
    for key, stored in states.items():
        live = stored.holding(policy, now)
        memo = known.get(key) if known is not None and live is stored else None
        verdict = memo.verdict if memo is not None else arbitrate(live.visible(policy), policy)
        out[key] = Local(live, verdict, policy, memo.reps if memo else None)
    return out


def may_be_pinned(
    local: Mapping[Key, Local], votes: Mapping[Key, Sequence[Vote]], node_id: str
) -> list[Key]:
    """The keys a pin could apply to, the only ones whose pins a refresh reads: those whose
    local belief is AMBIGUOUS or on which a peer votes."""
    return [
        k
        for k, loc in local.items()
        if (loc.verdict is not None and loc.verdict.ambiguous)
        or peer_voted(list(votes.get(k, ())), node_id)
    ]


def plan_refresh(
    loads: Mapping[Key, RefreshLoad],
    local: Mapping[Key, Local],
    pins: Mapping[Key, str],
    who: Refreshing,
    earlier: Mapping[Key, Tally | None] | None = None,
) -> RefreshPlan:
    """What refreshing `loads` writes and logs (`RefreshPlan`): for each key, this node's
    vote (its local belief, `serving.own_vote`), the served rows (`serving.serve` over the
    votes as counted here), and the decision logging a transition of what it serves, else
    a change of tally alone. `local` is `local_verdicts` of the loads' states, `pins` the
    pinned version of each pinned key, and `earlier` the tallies this transaction counted
    already (a change is logged against those, so once)."""
    plan = RefreshPlan()
    for key, load in loads.items():
        loc = local[key]
        pin = pins.get(key)
        mine, change = _my_vote(key, loc, load.votes, pin, who)
        if change is _VoteChange.PUT:
            assert mine is not None
            plan.votes.append(mine)
        elif change is _VoteChange.REMOVE:
            plan.votes_dropped.append(key)
        others = counted_votes(list(load.votes), _held(loc.state), who.policy, who.node_id)
        rows, result = _served_rows(key, loc, [*others, *([mine] if mine else [])], pin, who)
        plan.served[key] = rows
        old = load.served
        changed = _served_differ(old, rows) or bool(load.quiet and old)
        # What the stored rows were worked out from: the evidence live when they were.
        since = worked_out(old)
        expired = decayed_since(load.state, who.policy, since, who.now)
        was = load.state.holding(who.policy, since) if expired and since is not None else loc.state
        if changed:
            plan.beliefs.append((key, rows, not load.quiet))
        elif expired:
            # Evidence expired since: the same rows, worked out again now (not announced:
            # what the key serves is unchanged), so the next refresh counts from here.
            plan.beliefs.append((key, rows, False))
        logged = None
        if changed:
            logged = transition(
                key,
                served_of(old[0] if old else None),
                served_of(rows[0] if rows else None),
                result,
                who.now,
            )
        if logged is None and result is not None and result.peer_voted and rows:
            if earlier is not None and key in earlier:
                before = earlier[key]
            else:
                held_before = load.votes if load.votes_before is None else load.votes_before
                before = _tally_before(held_before, was, who)
            logged = retallied(key, before, result, served_of(rows[0]), who.now)
        if logged is not None:
            plan.decisions.append(logged)
        plan.tallies[key] = result
    return plan


class _VoteChange(enum.Enum):
    """What a refresh does with this node's vote on a key."""

    KEEP = "keep"  # the held vote stands
    PUT = "put"  # a new or changed vote
    REMOVE = "remove"  # none now, and none signed to withdraw


def _my_vote(
    key: Key, loc: Local, held: Sequence[Vote], pin: str | None, who: Refreshing
) -> tuple[Vote | None, _VoteChange]:
    """This node's vote on `key` now, beside what to do with it."""
    mine = own_vote(who.node_id, key, loc.verdict, loc.of, who.policy, who.now, pin)
    old_mine = next((v for v in held if v.voter == who.node_id), None)
    if mine is None and old_mine is not None and who.signs:
        # A signed vote is withdrawn by a later signed one that votes for nothing:
        # a relay may hold the old one, and only a higher number replaces it.
        mine = old_mine if old_mine.version_id is None else withdrawn(old_mine, who.now)
    if same_vote(old_mine, mine):
        return old_mine, _VoteChange.KEEP
    if mine is None:
        return None, _VoteChange.REMOVE
    if old_mine is not None and mine.cast_at <= old_mine.cast_at:
        # Peers keep the latest cast: a changed vote must be cast later.
        mine = replace(mine, cast_at=old_mine.cast_at + 1)
    return mine, _VoteChange.PUT


def _served_rows(
    key: Key, loc: Local, votes: Sequence[Vote], pin: str | None, who: Refreshing
) -> tuple[list[StoredBelief], Tally | None]:
    """The rows to store for what a key serves at present (`serving.serve`)."""
    values, result = serve(loc.verdict, loc.of, votes, who.policy, who.node_id, who.now, pin)
    rows = [
        StoredBelief(
            key, v.version_id, v.evidence.object, v.evidence.evidence_id, v.rule, v.state, who.now
        )
        for v in values
    ]
    return rows, result


def _held(state: KeyState) -> dict[str, Evidence]:
    return {e.evidence_id: e for e in state.evidence}


def _tally_before(votes: Sequence[Vote], state: KeyState, who: Refreshing) -> Tally | None:
    """The tally `votes` gave before this transaction: counted against the key's evidence
    as it was then, without what the transaction added."""
    held = {e.evidence_id: e for e in state.evidence if e.evidence_id not in who.added}
    mine = [v for v in votes if v.voter == who.node_id]
    return tally(
        [*mine, *counted_votes(list(votes), held, who.policy, who.node_id)],
        now=who.now,
        threshold=who.policy.consensus_threshold,
        half_life_days=who.policy.vote_half_life_days,
        self_id=who.node_id,
    )


def worked_out(rows: Sequence[StoredBelief]) -> Instant | None:
    """When a key's served rows were worked out (None: it serves nothing)."""
    return min(b.updated_at for b in rows) if rows else None


def _served_differ(old: Sequence[StoredBelief], rows: Sequence[StoredBelief]) -> bool:
    """Whether a key's served rows differ in what they serve (version, evidence, rule, state)."""
    return [(b.version_id, b.evidence_id, b.rule, b.state) for b in old] != [
        (b.version_id, b.evidence_id, b.rule, b.state) for b in rows
    ]


@dataclass
class RefreshPlan:
    """What a refresh writes and logs."""

    votes: list[Vote] = field(default_factory=list)  # this node's, to number and sign
    votes_dropped: list[Key] = field(default_factory=list)  # this node's, none to sign
    beliefs: list[tuple[Key, Sequence[StoredBelief], bool]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    tallies: dict[Key, Tally | None] = field(default_factory=dict)
    # Every key's served rows as the refresh leaves them.
    served: dict[Key, list[StoredBelief]] = field(default_factory=dict)
