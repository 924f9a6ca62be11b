"""Refreshing keys as a plan (`core.refresh.plan_refresh`): given these loaded states,
served rows, votes and pins, exactly these votes, rows, decisions and tallies."""

from __future__ import annotations

from dataclasses import replace

from factnode.core import BeliefState, Evidence, Key, KeyState, Outcome, Rule
from factnode.core.consensus import Tally, Vote
from factnode.core.decay import expiry
from factnode.core.refresh import (
    Refreshing,
    RefreshLoad,
    RefreshPlan,
    StoredBelief,
    local_verdicts,
    may_be_pinned,
    plan_refresh,
)
from tests.unit._facts import DAY, LIVES_IN, POLICY, fact

ME = "n1"
NOW = 10 * DAY
WORKS_AT = Key(LIVES_IN.namespace, "ana", "works_at")


def refresh(
    loads: dict[Key, RefreshLoad],
    *,
    now: int = NOW,
    signs: bool = False,
    pins: dict[Key, str] | None = None,
    earlier: dict[Key, Tally | None] | None = None,
    added: frozenset[str] = frozenset(),
) -> RefreshPlan:
    """The plan for `loads` at `now` on node n1, as `Serving.refresh` asks for it."""
    local = local_verdicts({k: ld.state for k, ld in loads.items()}, POLICY, now)
    who = Refreshing(ME, POLICY, now, signs, added)
    return plan_refresh(loads, local, pins or {}, who, earlier)


def vote(voter: str, e: Evidence, *, cast_at: int = NOW, key: Key = LIVES_IN) -> Vote:
    """`voter`'s vote for `e`'s version resting on `e`, as its node counts its own evidence."""
    return Vote(
        voter,
        key,
        e.version_id,
        e.evidence_id,
        POLICY.anchor_value(e.attribution),
        e.worth_milli,
        e.valid_from,
        cast_at,
    )


def row(e: Evidence, rule: Rule, state: BeliefState, at: int = NOW) -> StoredBelief:
    return StoredBelief(e.key, e.version_id, e.object, e.evidence_id, rule, state, at)


def test_a_first_fact_casts_this_nodes_vote_and_serves_it_without_logging() -> None:
    """A key's first evidence: this node votes for it, serves it by sole_version, and logs
    nothing (the submission's own decision logs it); without a peer's vote there is no tally."""
    porto = fact("Porto")
    plan = refresh({LIVES_IN: RefreshLoad(KeyState((porto,)))})
    assert plan.votes == [vote(ME, porto)]
    assert plan.votes_dropped == []
    want = [row(porto, Rule.SOLE_VERSION, BeliefState.BELIEVED)]
    assert plan.beliefs == [(LIVES_IN, want, True)]
    assert plan.served == {LIVES_IN: want}
    assert plan.decisions == []
    assert plan.tallies == {LIVES_IN: None}


def test_an_unchanged_key_writes_nothing() -> None:
    """The held vote and served rows are what the plan would write: nothing to write."""
    porto = fact("Porto")
    load = RefreshLoad(
        KeyState((porto,)),
        [row(porto, Rule.SOLE_VERSION, BeliefState.BELIEVED, at=NOW - DAY)],
        [vote(ME, porto, cast_at=NOW - DAY)],
    )
    plan = refresh({LIVES_IN: load})
    assert (plan.votes, plan.votes_dropped, plan.beliefs, plan.decisions) == ([], [], [], [])


def test_a_changed_vote_is_cast_after_the_one_it_replaces() -> None:
    """Peers keep a voter's latest cast: a changed vote held with cast_at at (or after) now is
    cast one microsecond after it."""
    porto, lisbon = fact("Porto", day=1), fact("Lisbon", day=2)
    held = vote(ME, porto, cast_at=NOW)
    plan = refresh({LIVES_IN: RefreshLoad(KeyState((porto, lisbon)), votes=[held])})
    assert plan.votes == [vote(ME, lisbon, cast_at=NOW + 1)]


def test_a_signed_vote_is_withdrawn_and_an_unsigned_one_dropped() -> None:
    """With nothing left to believe, a signing node casts a withdrawal (a later vote for
    nothing, so relays holding the old one give way); an unsigned node drops its vote."""
    porto = fact("Porto")
    held = vote(ME, porto, cast_at=NOW - DAY)
    load = RefreshLoad(
        KeyState(()), [row(porto, Rule.SOLE_VERSION, BeliefState.BELIEVED, NOW - DAY)], [held]
    )
    signed = refresh({LIVES_IN: load}, signs=True)
    assert [(v.voter, v.version_id, v.cast_at) for v in signed.votes] == [(ME, None, NOW)]
    assert signed.votes_dropped == []
    unsigned = refresh({LIVES_IN: load})
    assert (unsigned.votes, unsigned.votes_dropped) == ([], [LIVES_IN])
    # What it served goes, announced.
    assert unsigned.beliefs == [(LIVES_IN, [], True)]


def test_a_peer_vote_waits_for_its_evidence() -> None:
    """A peer's vote naming evidence this node does not hold counts nothing yet: no tally."""
    porto, lisbon = fact("Porto", day=1), fact("Lisbon", day=2)
    plan = refresh(
        {LIVES_IN: RefreshLoad(KeyState((porto,)), votes=[vote("n2", lisbon), vote("n3", lisbon)])}
    )
    assert plan.tallies == {LIVES_IN: None}
    assert plan.served[LIVES_IN] == [row(porto, Rule.SOLE_VERSION, BeliefState.BELIEVED)]


def test_peers_outvoting_the_local_belief_move_what_is_served_and_log_the_tally() -> None:
    """Two peers' votes for another version of an unprotected key, their evidence held: the
    consensus version is served by federation_consensus, and the transition is logged with
    the tally."""
    mine = fact("Porto", day=2, anchor="agent_observed")
    theirs = fact("Lisbon", day=1, anchor="agent_observed", source="bo")
    also = fact("Lisbon", day=1, anchor="agent_observed", source="cy")
    load = RefreshLoad(
        KeyState((mine, theirs, also)),
        [row(mine, Rule.RECENCY, BeliefState.BELIEVED, NOW - DAY)],
        [vote(ME, mine, cast_at=NOW - DAY), vote("n2", theirs), vote("n3", also)],
    )
    plan = refresh({LIVES_IN: load})
    ((key, (served,), announced),) = plan.beliefs
    assert (key, announced) == (LIVES_IN, True)
    assert (served.version_id, served.rule, served.state) == (
        theirs.version_id,
        Rule.FEDERATION_CONSENSUS,
        BeliefState.BELIEVED,
    )
    assert served.evidence_id in {theirs.evidence_id, also.evidence_id}
    assert plan.votes == []  # its own vote stays its local belief
    (logged,) = plan.decisions
    assert (logged.outcome, logged.rule, logged.version_id, logged.supersedes) == (
        Outcome.SUPERSEDED,
        Rule.FEDERATION_CONSENSUS,
        theirs.version_id,
        mine.version_id,
    )
    tally = plan.tallies[LIVES_IN]
    assert tally is not None and tally.consensus == theirs.version_id
    assert logged.detail.startswith("tally: ")


def test_a_change_of_tally_alone_is_logged_once_per_transaction() -> None:
    """A third voter joins a consensus that stays: one "tally changed" entry; refreshed
    again in the same transaction (`earlier` holds the tally counted), nothing more."""
    mine = fact("Porto", day=2, anchor="agent_observed")
    lisbon = [fact("Lisbon", day=1, anchor="agent_observed", source=s) for s in ("bo", "cy", "di")]
    before = [vote(ME, mine, cast_at=NOW - DAY), vote("n2", lisbon[0]), vote("n3", lisbon[1])]
    load = RefreshLoad(
        KeyState((mine, *lisbon)),
        [row(lisbon[0], Rule.FEDERATION_CONSENSUS, BeliefState.BELIEVED, NOW - DAY)],
        [*before, vote("n4", lisbon[2])],
        votes_before=before,
    )
    first = refresh({LIVES_IN: load})
    (logged,) = first.decisions
    assert logged.detail.startswith("tally changed, ")
    assert "n4" in logged.detail
    again = refresh({LIVES_IN: load}, earlier=first.tallies)
    assert again.decisions == []


def test_a_vote_on_evidence_that_expired_since_is_logged_as_a_change_of_tally() -> None:
    """A peer's vote rests on a claim that expired after the key's rows were worked out:
    the rows are worked out again (unannounced, they serve the same) and the tally that lost
    the vote is logged, counted from the evidence as it was then (not as it is now)."""
    mine = fact("Porto", day=1, anchor="user_stated")
    fading = fact("Porto", day=1, anchor="agent_observed", source="bo")
    steady = fact("Porto", day=1, anchor="user_stated", source="cy")
    ends = expiry(fading, POLICY)
    assert ends is not None
    worked = ends - DAY
    now = ends + DAY
    votes = [vote(ME, mine, cast_at=worked), vote("n2", fading), vote("n3", steady)]
    load = RefreshLoad(
        KeyState((mine, fading, steady)),
        [row(mine, Rule.FEDERATION_CONSENSUS, BeliefState.BELIEVED, worked)],
        votes,
    )
    plan = refresh({LIVES_IN: load}, now=now)
    assert plan.beliefs == [
        (LIVES_IN, [row(mine, Rule.FEDERATION_CONSENSUS, BeliefState.BELIEVED, now)], False)
    ]
    (logged,) = plan.decisions
    assert logged.detail.startswith("tally changed, ")
    tally = plan.tallies[LIVES_IN]
    assert tally is not None
    assert [t.voters for t in tally.versions] == [(ME, "n3")]


def test_a_pin_settles_a_tie_and_becomes_this_nodes_vote() -> None:
    """Only a key whose local belief is AMBIGUOUS (or that a peer votes on) may be pinned;
    pinned, it is served by operator_resolution and the node votes for the pinned version."""
    a = fact("Porto", day=1, source="ana")
    b = replace(fact("Lisbon", day=1, source="ana"))
    other = fact("Acme", key=WORKS_AT)
    states = {LIVES_IN: KeyState((a, b)), WORKS_AT: KeyState((other,))}
    local = local_verdicts(states, POLICY, NOW)
    assert may_be_pinned(local, {}, ME) == [LIVES_IN]
    assert may_be_pinned(local, {WORKS_AT: [vote("n2", other, key=WORKS_AT)]}, ME) == [
        LIVES_IN,
        WORKS_AT,
    ]
    unpinned = refresh({LIVES_IN: RefreshLoad(states[LIVES_IN])})
    assert [v.version_id for v in unpinned.votes] == [None]  # it abstains
    pinned = refresh({LIVES_IN: RefreshLoad(states[LIVES_IN])}, pins={LIVES_IN: b.version_id})
    assert [v.version_id for v in pinned.votes] == [b.version_id]
    assert pinned.served[LIVES_IN] == [row(b, Rule.OPERATOR_RESOLUTION, BeliefState.BELIEVED)]


def test_a_quiet_key_changes_without_announcing() -> None:
    """An erased key's rows go without a change announced to watchers."""
    porto = fact("Porto")
    load = RefreshLoad(
        KeyState(()), [row(porto, Rule.SOLE_VERSION, BeliefState.BELIEVED, NOW - DAY)], quiet=True
    )
    assert refresh({LIVES_IN: load}).beliefs == [(LIVES_IN, [], False)]
