"""Every submission outcome of specification §4, and the named conflict scenarios."""

from __future__ import annotations

from dataclasses import replace

import pytest
from _facts import DAY, NS, POLICY, fact, outcomes, replay, retraction

from factnode.core import (
    Evidence,
    Key,
    Outcome,
    Rule,
    arbitrate,
    belief_at,
    decide,
    explain,
    history,
    policy_from_mapping,
    visible,
)
from factnode.core.arbitration import describe

SPEAKS = Key(NS, "ana", "speaks")
WORKS_AT = Key(NS, "ana", "works_at")
EMPLOYER = Key(NS, "ana", "employer")

R, D, C, A, S, H, X, M = (
    Outcome.REJECTED,
    Outcome.DUPLICATE,
    Outcome.CORROBORATED,
    Outcome.ACCEPTED,
    Outcome.SUPERSEDED,
    Outcome.HISTORICAL,
    Outcome.DISBELIEVED,
    Outcome.AMBIGUOUS,
)

PORTO = fact("Porto", day=1)
FED = "federation_received"

# (id, evidence already held, new evidence, erased, outcome, rule, candidate)
CASES: list[tuple[str, list[Evidence], Evidence, bool, Outcome, Rule, bool | None]] = [
    (
        "below-min-confidence",
        [],
        fact("Porto", confidence=0.399),
        False,
        R,
        Rule.MIN_CONFIDENCE,
        False,
    ),
    ("no-source", [], fact("Porto", source=""), False, R, Rule.NO_PROVENANCE, False),
    ("blank-source", [], fact("Porto", source="   "), False, R, Rule.NO_PROVENANCE, False),
    ("erased", [], fact("Porto"), True, R, Rule.ERASED, None),
    ("duplicate", [PORTO], fact("Porto", day=1, at=9), False, D, Rule.DUPLICATE, None),
    # The same statement with another worth is other evidence for the same version (specification §2).
    (
        "same-statement-other-worth",
        [PORTO],
        fact("Porto", day=1, at=9, worth=0.9),
        False,
        C,
        Rule.CORROBORATION,
        True,
    ),
    ("corroborated", [PORTO], fact("Porto", source="bob"), False, C, Rule.CORROBORATION, True),
    ("first-version", [], fact("Porto", confidence=0.4), False, A, Rule.FIRST_VERSION, True),
    (
        "multi-valued",
        [fact("English", key=SPEAKS)],
        fact("Portuguese", key=SPEAKS, anchor="llm_generated"),
        False,
        A,
        Rule.MULTI_VALUED,
        True,
    ),
    (
        "superseded-trust-anchor",
        [fact("Lisbon", day=5, anchor="llm_generated")],
        fact("Porto", day=1, at=6),
        False,
        S,
        Rule.TRUST_ANCHOR,
        True,
    ),
    ("superseded-recency", [PORTO], fact("Lisbon", day=5), False, S, Rule.RECENCY, True),
    ("superseded-worth", [PORTO], fact("Lisbon", worth=0.8), False, S, Rule.WORTH, True),
    (
        "superseded-confidence",
        [fact("Porto", confidence=0.8)],
        fact("Lisbon", worth=0.6, confidence=0.81),
        False,
        S,
        Rule.CONFIDENCE,
        True,
    ),
    (
        "historical",
        [fact("Lisbon", day=5)],
        fact("Porto", day=1, at=6),
        False,
        H,
        Rule.RECENCY,
        True,
    ),
    (
        "disbelieved-trust-anchor",
        [PORTO],
        fact("Lisbon", day=5, anchor="api_response"),
        False,
        X,
        Rule.TRUST_ANCHOR,
        True,
    ),
    ("disbelieved-worth", [PORTO], fact("Lisbon", worth=0.29), False, X, Rule.WORTH, True),
    (
        "disbelieved-confidence",
        [PORTO],
        fact("Lisbon", worth=0.65, confidence=0.899),
        False,
        X,
        Rule.CONFIDENCE,
        True,
    ),
    ("ambiguous", [PORTO], fact("Lisbon"), False, M, Rule.TIEBREAK, True),
    # specification §5 rule 1: a cap lowers a peer's claims as a whole and never reorders them; where
    # the capped values tie, the anchors as stated decide, before recency.
    (
        "relayed-user-stated-supersedes-newer-relayed-llm",
        [fact("Lisbon", day=5, anchor="llm_generated", cap=FED)],
        fact("Porto", day=1, at=6, cap=FED),
        False,
        S,
        Rule.TRUST_ANCHOR,
        True,
    ),
    (
        "newer-relayed-llm-disbelieved-against-relayed-user-stated",
        [fact("Porto", day=1, cap=FED)],
        fact("Lisbon", day=5, anchor="llm_generated", cap=FED),
        False,
        X,
        Rule.TRUST_ANCHOR,
        True,
    ),
    # Capped values decide first: 40 first-party against codebase_verified capped at 20.
    (
        "first-party-agent-inferred-beats-relayed-codebase-verified",
        [fact("Lisbon", day=5, anchor="codebase_verified", cap=FED)],
        fact("Porto", day=1, at=6, anchor="agent_inferred"),
        False,
        S,
        Rule.TRUST_ANCHOR,
        True,
    ),
    (
        "relayed-codebase-verified-disbelieved-against-first-party-llm",
        [fact("Porto", day=1, anchor="llm_generated")],
        fact("Lisbon", day=5, anchor="codebase_verified", cap=FED),
        False,
        X,
        Rule.TRUST_ANCHOR,
        True,
    ),
    # The spec's words taken as they stand: a first-party federation_received counts 20, as
    # does a relayed user_stated under the default cap; the stated 90 then decides.
    (
        "relayed-user-stated-beats-first-party-federation-received",
        [fact("Lisbon", day=5, anchor="federation_received")],
        fact("Porto", day=1, at=6, cap=FED),
        False,
        S,
        Rule.TRUST_ANCHOR,
        True,
    ),
    # Same stated anchor under the same cap: nothing to reorder, recency decides as before.
    (
        "relayed-alike-newer-supersedes-by-recency",
        [fact("Porto", day=1, cap=FED)],
        fact("Lisbon", day=5, cap=FED),
        False,
        S,
        Rule.RECENCY,
        True,
    ),
    # A cap above the attribution lowers nothing.
    (
        "high-cap-lowers-nothing",
        [fact("Porto", day=1, anchor="api_response", cap="codebase_verified")],
        fact("Lisbon", day=5, anchor="api_response"),
        False,
        S,
        Rule.RECENCY,
        True,
    ),
]


@pytest.mark.parametrize(
    ("held", "new", "erased", "outcome", "rule", "candidate"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_outcome(
    held: list[Evidence],
    new: Evidence,
    erased: bool,
    outcome: Outcome,
    rule: Rule,
    candidate: bool | None,
) -> None:
    """Each valid submission gets exactly the outcome and rule specification §4 names."""
    run = replay(held)
    before = run.state(new.key).belief(POLICY)
    ruling = decide(
        new, run.state(new.key), POLICY, duplicate=new.evidence_id in run.stored, erased=erased
    )
    assert (ruling.decision.outcome, ruling.decision.rule) == (outcome, rule)
    assert ruling.candidate is candidate
    assert ruling.decision.evidence_id == new.evidence_id
    assert ruling.decision.decided_at == new.recorded_at
    if outcome is S:
        assert before is not None
        assert ruling.decision.supersedes == before.version_id
        assert ruling.after is not None and ruling.after.version_id == new.version_id
    if outcome in (C, H, X):
        # The belief keeps its version.
        assert before is not None and ruling.after is not None
        assert ruling.after.version_id == before.version_id


def test_min_confidence_is_inclusive() -> None:
    """Confidence exactly at min_confidence (0.4) is a candidate; 0.399 is not."""
    assert decide(fact("Porto", confidence=0.4), replay([]).state(), POLICY).candidate is True
    assert decide(fact("Porto", confidence=0.399), replay([]).state(), POLICY).candidate is False


@pytest.mark.parametrize("reverse", [False, True], ids=["lower-first", "higher-first"])
def test_tiebreak_believes_lowest_version_id_provisionally(reverse: bool) -> None:
    """With no discriminating rule, either arrival is AMBIGUOUS; the lowest version id wins."""
    porto, lisbon = fact("Porto"), fact("Lisbon")
    items = [lisbon, porto] if reverse else [porto, lisbon]
    run = replay(items)
    assert outcomes(run)[1] == (M, "tiebreak")
    belief = run.state().belief(POLICY)
    assert belief is not None
    assert belief.ambiguous and belief.rule is Rule.TIEBREAK
    assert belief.version_id == min(porto.version_id, lisbon.version_id)
    loser = max(porto.version_id, lisbon.version_id)
    assert belief.beaten_by == ((loser, Rule.TIEBREAK),)


def test_low_anchor_newer_claim_is_disbelieved_by_trust_anchor() -> None:
    """A low-anchor claim newer than a first-party fact is DISBELIEVED by trust_anchor."""
    first = fact("Porto", day=1, anchor="user_stated")
    claim = fact("Lisbon", day=300, anchor="llm_generated", source="gpt")
    run = replay([first, claim])
    assert outcomes(run) == [(A, "first_version"), (X, "trust_anchor")]
    belief = run.state().belief(POLICY)
    assert belief is not None and belief.version_id == first.version_id
    assert belief.rule_against(claim.version_id) is Rule.TRUST_ANCHOR
    # Stored and visible, not believed.
    assert claim in visible(run.state().evidence)


@pytest.mark.parametrize("late_first", [False, True], ids=["in-event-order", "reversed"])
def test_same_ingestion_moment_ordered_by_event_time(late_first: bool) -> None:
    """Two facts ingested at one moment about different event times are ordered by event time."""
    early = fact("Porto", day=3, at=10)
    late = fact("Lisbon", day=7, at=10)
    run = replay([late, early] if late_first else [early, late])
    expected = (H, "recency") if late_first else (S, "recency")
    assert outcomes(run)[1] == expected
    belief = run.state().belief(POLICY)
    assert belief is not None
    assert (belief.version_id, belief.rule) == (late.version_id, Rule.RECENCY)


def test_fact_learned_today_about_last_year_loses_to_one_about_this_month() -> None:
    """Recency compares event times, not ingestion times."""
    this_month = fact("Lisbon", day=360, at=364)
    last_year = fact("Porto", day=0, at=365)
    run = replay([this_month, last_year])
    assert outcomes(run)[1] == (H, "recency")
    belief = run.state().belief(POLICY)
    assert belief is not None and belief.version_id == this_month.version_id


def test_backfilled_older_fact_is_historical_and_answers_as_of() -> None:
    """A backfilled older fact is HISTORICAL and answers as-of queries for its period."""
    lisbon = fact("Lisbon", day=100)
    porto = fact("Porto", day=10, at=200)
    run = replay([lisbon, porto])
    assert outcomes(run)[1] == (H, "recency")
    state = run.state()

    def obj(as_of: int, known_at: int | None = None) -> str | None:
        v = belief_at(
            state.evidence,
            state.retractions,
            POLICY,
            as_of=as_of * DAY,
            known_at=None if known_at is None else known_at * DAY,
        )
        return (
            None
            if v is None
            else {lisbon.version_id: "Lisbon", porto.version_id: "Porto"}[v.version_id]
        )

    assert obj(5) is None
    assert obj(50) == "Porto"
    assert obj(99) == "Porto"
    assert obj(100) == "Lisbon"
    assert obj(150) == "Lisbon"
    # Before the backfill was ingested, the node knew nothing about that period.
    assert obj(50, known_at=150) is None


def test_weaker_contradicting_fact_is_decided_on_its_own_key_and_old_fact_remains() -> None:
    """A weaker fact naming `contradicts` is decided on its own key; the other key's stronger
    belief is not ended (the retraction it counts as is outranked)."""
    old = fact("Acme", key=WORKS_AT, day=1)
    weak = fact("Initech", key=EMPLOYER, day=5, anchor="llm_generated", contradicts=WORKS_AT)
    run = replay([old, weak])
    assert outcomes(run)[1] == (A, "first_version")
    assert weak in run.state(WORKS_AT).retractions
    old_belief = run.state(WORKS_AT).belief(POLICY)
    assert old_belief is not None and old_belief.version_id == old.version_id
    new_belief = run.state(EMPLOYER).belief(POLICY)
    assert new_belief is not None and new_belief.version_id == weak.version_id


def test_stronger_contradicting_fact_ends_the_other_key_from_its_event_time() -> None:
    """A fact that moved keys and outranks the old belief ends it from its event time on."""
    old = fact("Acme", key=WORKS_AT, day=1)
    moved = fact("Initech", key=EMPLOYER, day=5, contradicts=WORKS_AT)
    run = replay([old, moved])
    assert outcomes(run)[1] == (A, "first_version")
    new_belief = run.state(EMPLOYER).belief(POLICY)
    assert new_belief is not None and new_belief.version_id == moved.version_id
    works = run.state(WORKS_AT)
    assert works.belief(POLICY) is None
    before = belief_at(works.evidence, works.retractions, POLICY, as_of=4 * DAY)
    assert before is not None and before.version_id == old.version_id
    assert belief_at(works.evidence, works.retractions, POLICY, as_of=5 * DAY) is None
    # Nothing is deleted: the old evidence stays stored.
    assert old in works.evidence


def test_contradicting_fact_does_not_end_a_later_statement_on_the_other_key() -> None:
    """A `contradicts` dated before the other key's belief leaves it: the belief was stated
    after it, whatever the anchors (it was an event at arrival before issue 9)."""
    old = fact("Acme", key=WORKS_AT, day=5, anchor="agent_inferred")
    moved = fact("Initech", key=EMPLOYER, day=1, at=6, contradicts=WORKS_AT)
    run = replay([old, moved])
    assert outcomes(run)[1] == (A, "first_version")
    works = run.state(WORKS_AT).belief(POLICY)
    assert works is not None and works.version_id == old.version_id
    # The same statement dated after the old belief ends it on trust_anchor.
    later = fact("Initech", key=EMPLOYER, day=6, at=7, contradicts=WORKS_AT)
    run.submit(later)
    assert run.state(WORKS_AT).belief(POLICY) is None


def test_disbelieved_claim_corroborated_first_party_becomes_belief() -> None:
    """A disbelieved claim later corroborated first-party is believed, provenance kept."""
    porto = fact("Porto", day=1)
    claim = fact("Lisbon", day=5, anchor="llm_generated", source="gpt")
    confirm = fact("Lisbon", day=6, anchor="user_stated", source="ana")
    run = replay([porto, claim, confirm])
    assert outcomes(run) == [(A, "first_version"), (X, "trust_anchor"), (S, "recency")]
    assert run.rulings[2].decision.supersedes == porto.version_id
    belief = run.state().belief(POLICY)
    assert belief is not None and belief.version_id == claim.version_id
    assert claim in run.state().evidence
    assert (claim.attribution, claim.source) == ("llm_generated", "gpt")
    lisbon = next(
        h for h in history(run.state().evidence, (), POLICY) if h.version_id == claim.version_id
    )
    assert set(lisbon.evidence_ids) == {claim.evidence_id, confirm.evidence_id}
    assert lisbon.status == "BELIEVED"


@pytest.mark.parametrize(
    ("worth", "confidence", "outcome", "rule"),
    [
        (0.7, 0.9, M, Rule.TIEBREAK),
        (0.701, 0.9, S, Rule.WORTH),
        (0.7, 0.901, S, Rule.CONFIDENCE),
        (0.3, 0.9, M, Rule.TIEBREAK),
        (0.299, 0.9, X, Rule.WORTH),
        (0.3, 0.899, X, Rule.CONFIDENCE),
    ],
    ids=["lead-0.2", "lead-0.201", "lead-0.2-conf", "trail-0.2", "trail-0.201", "trail-0.2-conf"],
)
def test_worth_margin_boundary(
    worth: float, confidence: float, outcome: Outcome, rule: Rule
) -> None:
    """A worth lead of exactly 0.2 does not discriminate; 0.201 does."""
    run = replay([fact("Porto", worth=0.5), fact("Lisbon", worth=worth, confidence=confidence)])
    ruling = run.rulings[1]
    assert (ruling.decision.outcome, ruling.decision.rule) == (outcome, rule)


def test_correction_leaves_as_of_answers_but_not_the_past_knowledge() -> None:
    """`corrects` takes evidence out of as-of answers; an earlier known_at still sees it."""
    wrong = fact("Porto", day=1, at=2)
    right = fact("Lisbon", day=20, at=30, corrects=wrong.evidence_id)
    run = replay([wrong, right])
    assert outcomes(run)[1] == (S, "correction")
    assert run.rulings[1].decision.supersedes == wrong.version_id
    state = run.state()
    assert wrong in state.evidence  # kept in the audit trail
    assert belief_at(state.evidence, (), POLICY, as_of=10 * DAY) is None
    known_then = belief_at(state.evidence, (), POLICY, as_of=10 * DAY, known_at=29 * DAY)
    assert known_then is not None and known_then.version_id == wrong.version_id
    now = belief_at(state.evidence, (), POLICY)
    assert now is not None and now.version_id == right.version_id
    statuses = {h.version_id: h.status for h in history(state.evidence, (), POLICY)}
    assert statuses[wrong.version_id] == "CORRECTED"


def test_evidence_arriving_after_its_correction_is_kept_but_never_believed() -> None:
    """Evidence arriving after its correction is kept as HISTORICAL (correction), never believed."""
    wrong = fact("Porto", day=1, at=2)
    right = fact("Lisbon", day=1, at=3, corrects=wrong.evidence_id)
    run = replay([right, wrong])
    assert outcomes(run)[1] == (H, "correction")
    assert run.rulings[1].candidate is True
    belief = run.state().belief(POLICY)
    assert belief is not None and belief.version_id == right.version_id
    # The same holdings, and so the same history, as in arrival order.
    in_order = replay([wrong, right])
    assert set(run.state().evidence) == set(in_order.state().evidence)
    assert history(run.state().evidence, (), POLICY) == history(
        in_order.state().evidence, (), POLICY
    )


def test_retraction_ends_the_belief() -> None:
    """A retraction that outranks the belief ends it from its time on (RETRACTED): no belief
    after, the old belief before."""
    porto = fact("Porto", day=1)
    gone = retraction("Porto", day=10, at=11)
    run = replay([porto, gone])
    assert outcomes(run)[-1] == (Outcome.RETRACTED, "retract")
    state = run.state()
    assert state.belief(POLICY) is None
    assert belief_at(state.evidence, state.retractions, POLICY, as_of=10 * DAY) is None
    earlier = belief_at(state.evidence, state.retractions, POLICY, as_of=9 * DAY)
    assert earlier is not None and earlier.version_id == porto.version_id
    unaware = belief_at(state.evidence, state.retractions, POLICY, known_at=10 * DAY)
    assert unaware is not None and unaware.version_id == porto.version_id
    # Evidence dated inside the retracted period stays ended; later evidence starts afresh.
    run.submit(fact("Porto", day=5, at=12, source="bob"))
    run.submit(fact("Lisbon", day=20))
    assert outcomes(run)[-2:] == [(H, "retract"), (A, "first_version")]


def test_multi_valued_predicate_keeps_every_value() -> None:
    """Values of a multi-valued predicate never contradict: every one is believed."""
    english = fact("English", key=SPEAKS, day=1, anchor="user_stated")
    portuguese = fact("Portuguese", key=SPEAKS, day=2, anchor="llm_generated", worth=0.1)
    spanish = fact("Spanish", key=SPEAKS, day=3, anchor="agent_observed", confidence=0.5)
    again = fact("English", key=SPEAKS, day=4, source="bob")
    run = replay([english, portuguese, spanish, again])
    assert outcomes(run) == [(A, "multi_valued")] * 3 + [(C, "corroboration")]
    belief = run.state(SPEAKS).belief(POLICY)
    assert belief is not None and belief.rule is Rule.MULTI_VALUED
    assert set(belief.believed) == {english.version_id, portuguese.version_id, spanish.version_id}
    assert belief.beaten_by == ()
    # Retracting one value leaves the others.
    run.submit(retraction("Portuguese", key=SPEAKS, day=10))
    state = run.state(SPEAKS)
    after = arbitrate(visible(state.evidence, state.retractions, policy=POLICY), POLICY)
    assert after is not None
    assert set(after.believed) == {english.version_id, spanish.version_id}


def test_contradicting_fact_counts_on_the_other_key_even_when_it_loses_on_its_own() -> None:
    """A `contradicts` fact counts on the other key whether or not its own key believes it
    (depending on that would tie the two keys' beliefs in a cycle); it was ignored there
    before issue 9."""
    old = fact("Acme", key=WORKS_AT, day=1, anchor="agent_observed", source="crm")
    strong_local = fact("Globex", key=EMPLOYER, day=1, at=2)
    mover = fact("Initech", key=EMPLOYER, day=3, at=4, anchor="api_response", contradicts=WORKS_AT)
    run = replay([old, strong_local, mover])
    assert outcomes(run)[-1] == (X, "trust_anchor")  # lost to Globex on its own key
    assert run.state(WORKS_AT).belief(POLICY) is None  # and outranks Acme on the other


def test_trust_anchor_reason_names_a_peers_cap_where_it_lowers_the_anchor() -> None:
    """The reason reads "agent_observed capped at federation_received (20)" for relayed
    evidence counted below its attribution, and the plain anchor otherwise."""
    local = fact("Ravi", anchor="agent_observed")
    relayed = replace(fact("Mei", anchor="agent_observed"), anchor_cap="federation_received")
    reason = describe(Rule.TRUST_ANCHOR, local, relayed, POLICY)
    assert reason == (
        "anchor agent_observed (60) outranks agent_observed capped at federation_received (20)"
    )
    # A cap above the attribution lowers nothing, so it goes unnamed.
    high_cap = replace(local, anchor_cap="user_stated")
    low = fact("Mei", anchor="llm_generated")
    assert describe(Rule.TRUST_ANCHOR, high_cap, low, POLICY) == (
        "anchor agent_observed (60) outranks llm_generated (30)"
    )


def test_trust_anchor_reason_says_when_the_stated_anchors_decided_a_capped_tie() -> None:
    """Where both count alike here, the reason says so and names the anchors as stated that
    decided; explain gives that reason for a relayed user_stated over a relayed llm_generated."""
    porto = fact("Porto", day=1, cap=FED)
    lisbon = fact("Lisbon", day=5, anchor="llm_generated", cap=FED)
    tied = (
        "both count as federation_received (20) here; "
        "user_stated (90) outranks llm_generated (30) as stated"
    )
    assert describe(Rule.TRUST_ANCHOR, porto, lisbon, POLICY) == tied
    verdict, [comparison] = explain([porto, lisbon], POLICY)
    assert verdict is not None and verdict.version_id == porto.version_id
    assert (comparison.object, comparison.rule, comparison.reason) == (
        "Lisbon",
        Rule.TRUST_ANCHOR,
        tied,
    )
    # Counted alike through different anchors: both names are given.
    policy = policy_from_mapping({"anchors": {"internal_note": 30}})
    note = fact("Lisbon", anchor="internal_note", policy=policy)
    capped = fact("Porto", cap="llm_generated", policy=policy)
    assert describe(Rule.TRUST_ANCHOR, capped, note, policy) == (
        "both count as 30 (internal_note and llm_generated) here; "
        "user_stated (90) outranks internal_note (30) as stated"
    )
