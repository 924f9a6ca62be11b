"""Retractions as evidence (specification §5): which assertions a retraction (or a `contradicts` from
another key) ends, by the rule order, as a function of the key's evidence set."""

from __future__ import annotations

import pytest
from _facts import DAY, NS, POLICY, fact, outcomes, replay, retraction

from factnode.core import Evidence, Key, Outcome, Rule, belief_at, decide, history, visible
from factnode.core.arbitration import ends, pairwise
from factnode.core.decide import KeyState

SPEAKS = Key(NS, "ana", "speaks")
WORKS_AT = Key(NS, "ana", "works_at")
EMPLOYER = Key(NS, "ana", "employer")
PORTO = fact("Porto", day=1, anchor="agent_observed", worth=0.5, confidence=0.8)


@pytest.mark.parametrize(
    ("r", "ended", "rule"),
    [
        pytest.param(retraction("Porto", day=5, anchor="user_stated"), True, Rule.TRUST_ANCHOR,
                     id="higher-anchor-ends"),
        pytest.param(retraction("Porto", day=5, anchor="llm_generated"), False,
                     Rule.TRUST_ANCHOR, id="lower-anchor-cannot-end"),
        pytest.param(retraction("Porto", day=5, anchor="agent_observed"), True, Rule.RECENCY,
                     id="same-anchor-later-ends-by-recency"),
        pytest.param(retraction("Porto", day=1, anchor="agent_observed", worth=0.9), True,
                     Rule.WORTH, id="same-instant-worth-beyond-margin-ends"),
        pytest.param(retraction("Porto", day=1, anchor="agent_observed", worth=0.7, confidence=0.8),
                     False,
                     Rule.TIEBREAK, id="worth-within-margin-and-equal-confidence-is-a-tie"),
        pytest.param(retraction("Porto", day=1, anchor="agent_observed", worth=0.1), False,
                     Rule.WORTH, id="same-instant-lower-worth-cannot-end"),
        pytest.param(retraction("Porto", day=1, anchor="agent_observed", confidence=0.9), True,
                     Rule.CONFIDENCE, id="same-instant-higher-confidence-ends"),
        pytest.param(retraction("Porto", day=1, anchor="agent_observed", confidence=0.5), False,
                     Rule.CONFIDENCE, id="same-instant-lower-confidence-cannot-end"),
        pytest.param(retraction("Porto", day=1, anchor="agent_observed", confidence=0.8), False,
                     Rule.TIEBREAK, id="a-tie-on-every-rule-does-not-end"),
        pytest.param(retraction(None, day=5, anchor="user_stated"), True, Rule.TRUST_ANCHOR,
                     id="whole-key-ends"),
        pytest.param(retraction("Lisbon", day=5, anchor="user_stated"), False,
                     Rule.TRUST_ANCHOR, id="another-version-is-not-covered"),
        pytest.param(retraction("Porto", day=0, anchor="user_stated"), False,
                     Rule.TRUST_ANCHOR, id="a-later-assertion-is-unaffected"),
    ],
)  # fmt: skip
def test_a_retraction_ends_an_assertion_only_when_it_covers_and_outranks_it(
    r: Evidence, ended: bool, rule: Rule
) -> None:
    """A retraction ends the assertion of its version (or, whole-key, of any version) stated
    at or before its time iff it beats it under the rule order; a tie does not end it."""
    assert ends(r, PORTO, POLICY) is ended
    assert pairwise(r, PORTO, POLICY)[1] is rule
    unretracted = belief_at([PORTO], [], POLICY)
    assert unretracted is not None
    assert belief_at([PORTO], [r], POLICY) == (None if ended else unretracted)


@pytest.mark.parametrize(
    ("r", "outcome", "rule"),
    [
        (retraction("Porto", day=5, anchor="user_stated"), Outcome.RETRACTED, Rule.RETRACT),
        (retraction("Porto", day=5, anchor="llm_generated"), Outcome.DISBELIEVED,
         Rule.TRUST_ANCHOR),
        (retraction("Porto", day=1, anchor="agent_observed", confidence=0.5),
         Outcome.DISBELIEVED, Rule.CONFIDENCE),
        (retraction("Porto", day=1, anchor="agent_observed", confidence=0.8),
         Outcome.DISBELIEVED, Rule.TIEBREAK),
        (retraction("Porto", day=0, anchor="user_stated"), Outcome.HISTORICAL, Rule.RECENCY),
    ],
)  # fmt: skip
def test_a_retraction_is_decided_by_what_it_does_to_the_belief(
    r: Evidence, outcome: Outcome, rule: Rule
) -> None:
    """RETRACTED where it ends the belief; DISBELIEVED by the outranking rule (the detail names
    the stronger evidence); HISTORICAL where the belief was stated after it. Always stored."""
    ruling = decide(r, KeyState([PORTO]), POLICY)
    assert (ruling.decision.outcome, ruling.decision.rule) == (outcome, rule)
    assert ruling.candidate is True
    assert ruling.decision.evidence_id == r.evidence_id
    if outcome is Outcome.DISBELIEVED:
        assert PORTO.evidence_id in ruling.decision.detail


def test_a_retraction_ends_each_piece_of_evidence_it_outranks_not_the_whole_version() -> None:
    """The version stays believed on the evidence the retraction cannot outrank."""
    strong = fact("Porto", day=1, anchor="user_stated", source="ana")
    r = retraction("Porto", day=5, anchor="api_response")
    assert visible([PORTO, strong], [r], policy=POLICY) == [strong]
    run = replay([PORTO, strong, r])
    assert outcomes(run)[-1] == (Outcome.DISBELIEVED, "trust_anchor")
    verdict = run.state().belief(POLICY)
    assert verdict is not None and verdict.evidence_id == strong.evidence_id


def test_a_whole_key_retraction_ends_every_value_of_a_multi_valued_key_it_outranks() -> None:
    """On a multi-valued key, a whole-key retraction ends each value it outranks; a one-value
    retraction only that value."""
    en = fact("en", key=SPEAKS, day=1, anchor="agent_observed")
    pt = fact("pt", key=SPEAKS, day=1, anchor="user_stated")
    es = fact("es", key=SPEAKS, day=1, anchor="agent_observed")
    whole = retraction(None, key=SPEAKS, day=3, anchor="api_response")
    v = belief_at([en, pt, es], [whole], POLICY)
    assert v is not None and v.believed == (pt.version_id,)
    one = retraction("en", key=SPEAKS, day=3, anchor="api_response")
    v = belief_at([en, pt, es], [one], POLICY)
    assert v is not None and set(v.believed) == {pt.version_id, es.version_id}


def test_a_retraction_counts_only_as_of_its_time_and_once_known() -> None:
    """Time travel: before its event time, or as known before it was recorded, it ends nothing."""
    r = retraction("Porto", day=5, at=8, anchor="user_stated")
    assert belief_at([PORTO], [r], POLICY, as_of=4 * DAY) == belief_at([PORTO], [], POLICY)
    assert belief_at([PORTO], [r], POLICY, as_of=5 * DAY) is None
    assert belief_at([PORTO], [r], POLICY, known_at=7 * DAY) == belief_at([PORTO], [], POLICY)
    assert belief_at([PORTO], [r], POLICY, known_at=8 * DAY) is None
    [h] = history([PORTO], [r], POLICY)
    assert (h.status, [(i.start, i.end) for i in h.intervals]) == ("RETRACTED", [(DAY, 5 * DAY)])


def test_a_corrected_retraction_stops_counting() -> None:
    """Evidence naming a retraction in `corrects` (it was never true) makes it count no more."""
    r = retraction("Porto", day=5, anchor="user_stated")
    fix = fact("Porto", day=1, at=6, anchor="agent_observed", source="bob", corrects=r.evidence_id)
    v = belief_at([PORTO, fix], [r], POLICY)
    assert v is not None and v.version_id == PORTO.version_id
    assert belief_at([PORTO, fix], [r], POLICY, known_at=5 * DAY) is None


def test_contradicts_counts_on_the_other_key_as_a_whole_key_retraction_in_any_order() -> None:
    """An assertion naming `contradicts` ends the other key's assertions it outranks from its
    event time, whichever key's evidence arrives first; corrected on its own key, it stops."""
    old = fact("Acme", key=WORKS_AT, day=1, anchor="agent_observed", source="crm")
    moved = fact("Initech", key=EMPLOYER, day=5, contradicts=WORKS_AT)
    fix = fact("Globex", key=EMPLOYER, day=5, at=7, corrects=moved.evidence_id)
    for order in ([old, moved], [moved, old]):
        run = replay(order)
        assert run.state(WORKS_AT).belief(POLICY) is None
        run.submit(fix)
        v = run.state(WORKS_AT).belief(POLICY)
        assert v is not None and v.version_id == old.version_id
    run = replay([fix, moved, old])  # the correction first: it never counted
    v = run.state(WORKS_AT).belief(POLICY)
    assert v is not None and v.version_id == old.version_id


def test_history_names_what_ended_each_version_and_only_what_outranks_it() -> None:
    """A version's history lists the retractions and the contradicting facts from other keys
    that end its evidence now; an outranked retraction, or one not known yet, is not named."""
    weak = retraction("Porto", day=3, anchor="llm_generated")
    strong = retraction("Porto", day=5, anchor="user_stated")
    moved = fact("Acme", day=6, anchor="user_stated", key=WORKS_AT, contradicts=EMPLOYER)
    employer = fact("Initech", day=2, anchor="agent_observed", key=EMPLOYER)

    (porto,) = history([PORTO], [weak, strong], POLICY)
    assert porto.ended_by == (strong.evidence_id,)
    (initech,) = history([employer], [moved], POLICY)
    assert initech.ended_by == (moved.evidence_id,)
    # Known at a time before the strong retraction was recorded, nothing had ended Porto.
    (before,) = history([PORTO], [weak, strong], POLICY, known_at=4 * DAY)
    assert before.ended_by == ()


def test_a_relayed_retraction_is_weighed_by_its_stated_anchor_where_the_caps_tie() -> None:
    """Under the same cap a relayed llm_generated retraction cannot end a relayed user_stated
    belief, and a relayed user_stated retraction ends a relayed agent_observed one, by
    trust_anchor (a cap never reorders a peer's claims), whatever the dates."""
    fed = "federation_received"
    stated = fact("Porto", day=1, cap=fed)
    guess = retraction("Porto", day=5, anchor="llm_generated", cap=fed)
    assert pairwise(guess, stated, POLICY) == (-1, Rule.TRUST_ANCHOR)
    assert not ends(guess, stated, POLICY)
    observed = fact("Porto", day=4, anchor="agent_observed", cap=fed)
    firm = retraction("Porto", day=5, anchor="user_stated", cap=fed)
    assert pairwise(firm, observed, POLICY) == (1, Rule.TRUST_ANCHOR)
    assert belief_at([observed], [firm], POLICY) is None
