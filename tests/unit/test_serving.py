"""The one decision of what a key serves from a point of view (`core.serving`): pins and
votes as a view counts them, the present, what ended a key, history, tally changes."""

from __future__ import annotations

from dataclasses import replace

from _facts import DAY, LIVES_IN, POLICY, fact, retraction

from factnode.core import BeliefState, Evidence, KeyState, Rule
from factnode.core.consensus import Served, Tally, VersionTally, Vote, retallied
from factnode.core.serving import Pin, is_present, nothing_served, own_vote, served_history, view

NODE = "n1"
NOW = 10 * DAY
OSLO = fact("Oslo", day=1, at=2)
BERGEN = fact("Bergen", day=1, at=3)
TIED = KeyState([OSLO, BERGEN])


def story(
    state: KeyState, pin: Pin | None = None, votes: list[Vote] | None = None, **at: int
) -> tuple[str, BeliefState, Rule] | None:
    answer = view(LIVES_IN, state, votes or [], pin, POLICY, NODE, NOW, **at)
    first = answer.first
    return None if first is None else (first.evidence.object, first.state, first.rule)


def test_a_pin_serves_its_tied_version_in_every_view_that_knows_of_it() -> None:
    """A pin recorded on day 4 settles the tie at present, as of any time the tie holds and as
    known from day 4 on; as known before day 4 the tie is AMBIGUOUS by tiebreak."""
    pin = Pin(OSLO.version_id, 4 * DAY)
    pinned = ("Oslo", BeliefState.BELIEVED, Rule.OPERATOR_RESOLUTION)
    assert story(TIED, pin) == pinned
    assert story(TIED, pin, as_of=NOW) == pinned
    assert story(TIED, pin, known_at=4 * DAY) == pinned
    before = story(TIED, pin, known_at=3 * DAY)
    assert before is not None and before[1:] == (BeliefState.AMBIGUOUS, Rule.TIEBREAK)


def test_a_pin_does_not_apply_where_the_view_is_decided_by_the_rules() -> None:
    """As known on day 2 only Oslo exists: it is the sole version, pinned or not."""
    pin = Pin(BERGEN.version_id, 1 * DAY)
    assert story(TIED, pin, known_at=2 * DAY) == ("Oslo", BeliefState.BELIEVED, Rule.SOLE_VERSION)


def test_a_view_is_the_present_only_when_it_sees_all_evidence_and_the_pin() -> None:
    """`is_present` holds for unset times and for times after every record and event time,
    and not for a known_at before the pin or before some evidence was recorded."""
    pin = Pin(OSLO.version_id, 4 * DAY)
    assert is_present(TIED, pin, None, None, POLICY, NOW)
    assert is_present(TIED, pin, NOW, NOW, POLICY, NOW)
    assert not is_present(TIED, pin, None, 3 * DAY, POLICY, NOW)
    assert not is_present(TIED, None, None, 2 * DAY, POLICY, NOW)
    assert not is_present(TIED, None, 0, None, POLICY, NOW)


def test_a_view_with_an_expired_claim_is_not_the_stored_present() -> None:
    """Once a claim has expired (or will have, at a later as_of), the stored rows may be
    older than its expiry: the view works itself out, and leaves the claim out from its
    expiry on while an earlier event time still sees it (specification §6)."""
    porto = fact("Porto", day=1, anchor="llm_generated", confidence=0.8)
    state = KeyState((porto,))
    ends = 31 * DAY + 1  # one half-life of 30 days, from its recording on day 1
    assert is_present(state, None, None, None, POLICY, ends - 1)
    assert not is_present(state, None, None, None, POLICY, ends)
    assert not is_present(state, None, ends, None, POLICY, 2 * DAY)
    stored = [(porto.version_id, porto.evidence_id, Rule.SOLE_VERSION, BeliefState.BELIEVED)]
    gone = view(LIVES_IN, state, [], None, POLICY, NODE, ends, present=stored)
    assert gone.values == ()
    then = view(LIVES_IN, state, [], None, POLICY, NODE, ends, as_of=ends - 1, present=stored)
    assert then.first is not None and then.first.version_id == porto.version_id


def test_the_present_answers_what_is_stored_and_a_past_view_recomputes() -> None:
    """Given the stored rows, a present view answers them (whatever the tally's hour); a past
    view answers from its own evidence."""
    stored = [
        (BERGEN.version_id, BERGEN.evidence_id, Rule.FEDERATION_CONSENSUS, BeliefState.BELIEVED)
    ]
    now_view = view(LIVES_IN, TIED, [], None, POLICY, NODE, NOW, as_of=NOW, present=stored)
    assert now_view.first is not None and now_view.first.rule is Rule.FEDERATION_CONSENSUS
    past = view(LIVES_IN, TIED, [], None, POLICY, NODE, NOW, known_at=2 * DAY, present=stored)
    assert past.first is not None and past.first.rule is Rule.SOLE_VERSION


def peer_vote(voter: str, e: Evidence) -> Vote:
    return Vote(voter, LIVES_IN, e.version_id, e.evidence_id, 60, 500, e.valid_from, NOW)


def test_a_peer_vote_counts_only_in_views_that_see_its_evidence() -> None:
    """Two peers voting Bergen make it the consensus at present; as known before Bergen's
    evidence was recorded the votes wait and Oslo is served alone."""
    oslo = replace(OSLO, attribution="agent_observed")
    b1, b2 = (
        fact("Bergen", day=1, at=3, anchor="agent_inferred", worth=1.0, source=s)
        for s in ("p1", "p2")
    )
    state = KeyState([oslo, b1, b2])
    votes = [peer_vote("p1", b1), peer_vote("p2", b2)]
    assert story(state, votes=votes) == ("Bergen", BeliefState.BELIEVED, Rule.FEDERATION_CONSENSUS)
    assert story(state, votes=votes, known_at=2 * DAY) == (
        "Oslo",
        BeliefState.BELIEVED,
        Rule.SOLE_VERSION,
    )


def test_own_vote_follows_the_pin_only_on_a_tie() -> None:
    """On a tie the node abstains unless a tied version is pinned; then it votes for it."""
    answer = view(LIVES_IN, TIED, [], None, POLICY, NODE, NOW)
    reps = {e.version_id: e for e in TIED.evidence}
    abstain = own_vote(NODE, LIVES_IN, answer.verdict, reps.get, POLICY, NOW)
    assert abstain is not None and abstain.version_id is None
    voted = own_vote(NODE, LIVES_IN, answer.verdict, reps.get, POLICY, NOW, OSLO.version_id)
    assert voted is not None and voted.version_id == OSLO.version_id


def test_nothing_served_names_the_retraction_that_ended_each_value() -> None:
    """A retracted key's explanation names the retraction, its anchor and source; as of a
    time before any evidence it says when the evidence starts."""
    ended = retraction("Oslo", day=2, source="hr")
    state = KeyState([OSLO], [ended])
    text = nothing_served(LIVES_IN, state, POLICY)
    assert f"'Oslo' was ended by retraction {ended.evidence_id} (user_stated from hr" in text
    assert "earliest evidence is valid from" in nothing_served(LIVES_IN, state, POLICY, as_of=0)
    assert story(state) is None


def test_history_shows_the_pinned_version_served_and_the_other_not() -> None:
    """After a pin the pinned version's row is BELIEVED by operator_resolution with an open
    interval; the tied rival is DISBELIEVED and never served."""
    from factnode.core import history

    pin = Pin(OSLO.version_id, 4 * DAY)
    local = history(TIED.evidence, TIED.retractions, POLICY)
    rows = {
        h.object: h
        for h in served_history(
            local, TIED, lambda t: view(LIVES_IN, TIED, [], pin, POLICY, NODE, NOW, as_of=t)
        )
    }
    assert (rows["Oslo"].status, rows["Oslo"].rule) == ("BELIEVED", Rule.OPERATOR_RESOLUTION)
    assert rows["Oslo"].intervals[-1].end is None
    assert (rows["Bergen"].status, rows["Bergen"].intervals) == ("DISBELIEVED", ())


def tally_of(*versions: tuple[str, int, tuple[str, ...]], consensus: str | None = None) -> Tally:
    return Tally(
        consensus,
        sum(w for _, w, _ in versions),
        tuple(VersionTally(v, w, voters) for v, w, voters in versions),
        True,
    )


def test_a_changed_tally_under_the_same_served_version_is_logged() -> None:
    """A new voter joining while CONTESTED gives an entry with the new tally; the same voters
    with other weights (the hour moved) give none."""
    served = Served("v1", BeliefState.CONTESTED, Rule.TRUST_ANCHOR)
    before = tally_of(("v1", 5, ("a",)), ("v2", 5, ("b",)))
    after = tally_of(("v1", 7, ("a", "c")), ("v2", 5, ("b",)))
    logged = retallied(LIVES_IN, before, after, served, NOW)
    assert logged is not None and logged.rule is Rule.FEDERATION_CONSENSUS
    assert logged.detail.startswith("tally changed, v1 still served CONTESTED by trust_anchor")
    assert "v1: 58.3% by a, c; v2: 41.6% by b" in logged.detail
    drifted = tally_of(("v1", 6, ("a",)), ("v2", 4, ("b",)))
    assert retallied(LIVES_IN, before, drifted, served, NOW) is None


def test_nothing_served_names_an_expiry() -> None:
    """A key whose only claim expired says so, with when it was last stated; at an earlier
    event time it serves the claim, so nothing is said."""
    porto = fact("Porto", day=1, anchor="llm_generated", confidence=0.8)
    state = KeyState((porto,))
    ends = 31 * DAY + 1
    told = nothing_served(LIVES_IN, state, POLICY, now=ends)
    assert "'Porto' expired at" in told and "last stated" in told
    assert "expired" not in nothing_served(LIVES_IN, state, POLICY, now=ends - 1)
