"""The write plan of a batch of submissions (`core.plan.plan_ingest`): given this loaded state
and these inputs, exactly these rows, decisions and keys to recompute."""

from __future__ import annotations

from dataclasses import replace

from factnode.core import (
    Arbitrated,
    BeliefState,
    Confirmation,
    Decision,
    Evidence,
    EvidenceStatus,
    Key,
    KeyState,
    Outcome,
    Rule,
)
from factnode.core.consensus import Vote
from factnode.core.plan import (
    ErasureLoad,
    IngestLoad,
    ResolutionLoad,
    ResolutionPlan,
    erased_key,
    plan_erasure,
    plan_ingest,
    plan_resolution,
)
from factnode.core.refresh import StoredBelief
from tests.unit._facts import DAY, LIVES_IN, NS, POLICY, fact, retraction

ACTIVE = EvidenceStatus.ACTIVE
WORKS_AT = Key(NS, "ana", "works_at")
SPEAKS = Key(NS, "ana", "speaks")


def _decision(
    e: Evidence, outcome: Outcome, rule: Rule, supersedes: str | None = None, detail: str = ""
) -> Decision:
    """The decision logged for `e` itself."""
    return Decision(
        key=e.key,
        outcome=outcome,
        rule=rule,
        decided_at=e.recorded_at,
        evidence_id=e.evidence_id,
        version_id=e.version_id,
        supersedes=supersedes,
        detail=detail,
    )


def test_a_first_fact_on_an_empty_key_is_one_row_one_decision_and_one_key_to_serve() -> None:
    """A new key: the evidence stored active, ACCEPTED by first_version, the key recomputed
    with the new evidence as its whole state, and its arbitration remembered."""
    e = fact("Lisbon")
    plan = plan_ingest(IngestLoad(states={LIVES_IN: KeyState()}), [(e, None)], POLICY)
    assert plan.evidence == ((e, ACTIVE, None),)
    assert plan.decisions == (_decision(e, Outcome.ACCEPTED, Rule.FIRST_VERSION),)
    assert plan.bears_on == ()
    assert plan.refresh == {LIVES_IN}
    assert list(plan.states[LIVES_IN].evidence) == [e]
    assert set(plan.remember) == {LIVES_IN}
    assert plan.remember[LIVES_IN].verdict is not None
    assert plan.remember[LIVES_IN].verdict.version_id == e.version_id
    assert plan.arbitrated[LIVES_IN] is plan.remember[LIVES_IN]


def test_a_corroboration_writes_its_row_and_decision_but_recomputes_nothing() -> None:
    """Same version as the belief, no peer votes: the served belief cannot move, so no key is
    recomputed; the grown state's arbitration is remembered."""
    held = fact("Lisbon")
    again = fact("Lisbon", source="bob")
    load = IngestLoad(states={LIVES_IN: KeyState((held,))})
    plan = plan_ingest(load, [(again, "retry-1")], POLICY)
    assert plan.evidence == ((again, ACTIVE, "retry-1"),)
    assert plan.decisions == (_decision(again, Outcome.CORROBORATED, Rule.CORROBORATION),)
    assert plan.refresh == frozenset()
    assert plan.states == {}
    assert set(plan.remember) == {LIVES_IN}
    assert plan.remember[LIVES_IN].reps == {held.version_id: held}


def test_a_corroboration_on_a_key_peers_vote_on_is_recounted() -> None:
    """Where a peer votes on the key, new evidence may count for a version the votes favour:
    the key is recomputed though the local belief stands."""
    held = fact("Lisbon")
    again = fact("Lisbon", source="bob")
    load = IngestLoad(states={LIVES_IN: KeyState((held,))}, peer_voted=frozenset({LIVES_IN}))
    plan = plan_ingest(load, [(again, None)], POLICY)
    assert plan.refresh == {LIVES_IN}
    assert list(plan.states[LIVES_IN].evidence) == [held, again]


def test_duplicates_by_id_and_by_idempotency_key_write_only_their_decisions() -> None:
    """Evidence already stored, or a retry under a stored idempotency key, writes no evidence
    and recomputes nothing; the retry's decision names the evidence first stored."""
    held = fact("Lisbon")
    retried = fact("Porto")
    load = IngestLoad(
        states={LIVES_IN: KeyState((held,))},
        stored=frozenset({held.evidence_id}),
        by_idempotency={"k1": "f" * 32},
    )
    plan = plan_ingest(load, [(held, None), (retried, "k1")], POLICY)
    assert plan.evidence == ()
    assert plan.decisions == (
        _decision(
            held, Outcome.DUPLICATE, Rule.DUPLICATE, detail="this evidence is already stored"
        ),
        Decision(
            key=LIVES_IN,
            outcome=Outcome.DUPLICATE,
            rule=Rule.DUPLICATE,
            decided_at=retried.recorded_at,
            evidence_id="f" * 32,
            version_id=retried.version_id,
            detail="this evidence is already stored",
        ),
    )
    assert plan.refresh == frozenset()
    assert plan.remember == {}


def test_a_repeat_within_one_batch_is_a_duplicate_of_the_first() -> None:
    """The same evidence twice in a batch: one row, then a DUPLICATE decision; the same
    idempotency key twice: the second answers with the first's evidence."""
    e = fact("Lisbon")
    other = fact("Porto", day=2)
    plan = plan_ingest(
        IngestLoad(states={LIVES_IN: KeyState()}), [(e, "k"), (e, None), (other, "k")], POLICY
    )
    assert plan.evidence == ((e, ACTIVE, "k"),)
    assert [d.outcome for d in plan.decisions] == [Outcome.ACCEPTED, *[Outcome.DUPLICATE] * 2]
    assert plan.decisions[2].evidence_id == e.evidence_id


def test_a_rejection_is_stored_rejected_and_moves_nothing() -> None:
    """Confidence below min_confidence: stored REJECTED (logged and countable), not a
    candidate, not offered to peers, nothing recomputed or remembered."""
    low = fact("Lisbon", confidence=0.1)
    plan = plan_ingest(IngestLoad(states={LIVES_IN: KeyState()}), [(low, None)], POLICY)
    assert plan.evidence == ((low, EvidenceStatus.REJECTED, None),)
    assert plan.decisions == (
        _decision(
            low,
            Outcome.REJECTED,
            Rule.MIN_CONFIDENCE,
            detail="confidence 0.100 is below min_confidence 0.400",
        ),
    )
    assert plan.refresh == frozenset()


def test_erased_evidence_is_logged_under_a_hashed_key_and_not_stored() -> None:
    """Evidence an erasure covers: no row, and the decision names the key's hash, never its
    text."""
    e = fact("Lisbon")
    load = IngestLoad(states={LIVES_IN: KeyState()}, erased=frozenset({e.evidence_id}))
    plan = plan_ingest(load, [(e, None)], POLICY)
    assert plan.evidence == ()
    assert plan.decisions == (
        Decision(
            key=erased_key(LIVES_IN),
            outcome=Outcome.REJECTED,
            rule=Rule.ERASED,
            decided_at=e.recorded_at,
            evidence_id=e.evidence_id,
            version_id=e.version_id,
            detail="covered by an erasure",
        ),
    )
    assert "ana" not in repr(plan.decisions)


def test_a_later_fact_in_the_same_batch_is_decided_against_the_earlier() -> None:
    """Two values of one single-valued key in one batch: the second supersedes the first on
    recency; both rows, both decisions, the key recomputed once over both."""
    first = fact("Lisbon", day=1)
    second = fact("Porto", day=2)
    plan = plan_ingest(
        IngestLoad(states={LIVES_IN: KeyState()}), [(first, None), (second, None)], POLICY
    )
    assert plan.evidence == ((first, ACTIVE, None), (second, ACTIVE, None))
    assert plan.decisions == (
        _decision(first, Outcome.ACCEPTED, Rule.FIRST_VERSION),
        _decision(second, Outcome.SUPERSEDED, Rule.RECENCY, supersedes=first.version_id),
    )
    assert plan.refresh == {LIVES_IN}
    assert list(plan.states[LIVES_IN].evidence) == [first, second]


def test_a_contradiction_counts_as_a_retraction_on_the_other_key() -> None:
    """An assertion naming `contradicts`: decided on its own key, joined to the other key's
    retractions (`bears_on`), and both keys recomputed; the other's arbitration is not
    remembered, as it changed without being worked out."""
    old = fact("Acme", key=WORKS_AT)
    moved = fact("Lisbon", day=2, contradicts=WORKS_AT)
    load = IngestLoad(
        states={LIVES_IN: KeyState(), WORKS_AT: KeyState((old,))},
        remembered={WORKS_AT: Arbitrated(None)},
    )
    plan = plan_ingest(load, [(moved, None)], POLICY)
    assert plan.evidence == ((moved, ACTIVE, None),)
    assert plan.bears_on == ((WORKS_AT, moved),)
    assert plan.refresh == {LIVES_IN, WORKS_AT}
    assert list(plan.states[WORKS_AT].retractions) == [moved]
    assert WORKS_AT not in plan.arbitrated and set(plan.remember) == {LIVES_IN}


def test_a_retraction_is_a_retraction_row_with_the_callers_reason() -> None:
    """A Retract: stored active as retraction evidence, RETRACTED, the key recomputed, and the
    caller's reason before the decision's detail."""
    held = fact("Lisbon")
    r = retraction("Lisbon", day=3)
    load = IngestLoad(states={LIVES_IN: KeyState((held,))})
    plan = plan_ingest(load, [(r, None)], POLICY, reasons={r.evidence_id: "moved away"})
    assert plan.evidence == ((r, ACTIVE, None),)
    assert plan.decisions == (
        Decision(
            key=LIVES_IN,
            outcome=Outcome.RETRACTED,
            rule=Rule.RETRACT,
            decided_at=3 * DAY,
            evidence_id=r.evidence_id,
            version_id=held.version_id,
            supersedes=held.version_id,
            detail="moved away; ended the belief",
        ),
    )
    assert plan.refresh == {LIVES_IN}
    assert list(plan.states[LIVES_IN].retractions) == [r]


def test_a_new_value_of_a_multi_valued_key_is_always_recomputed() -> None:
    """A multi-valued key serves every value: a new one is ACCEPTED by multi_valued and the
    key recomputed."""
    en = fact("en", key=SPEAKS)
    pt = fact("pt", key=SPEAKS)
    load = IngestLoad(states={SPEAKS: KeyState((en,))})
    plan = plan_ingest(load, [(pt, None)], POLICY)
    assert plan.decisions == (_decision(pt, Outcome.ACCEPTED, Rule.MULTI_VALUED),)
    assert plan.refresh == {SPEAKS}


def test_the_plan_leaves_its_load_unchanged() -> None:
    """Planning is pure: the loaded states and maps are the same after it."""
    held = fact("Lisbon")
    state = KeyState((held,))
    by_idempotency = {"k": held.evidence_id}
    load = IngestLoad(states={LIVES_IN: state}, by_idempotency=by_idempotency)
    plan_ingest(load, [(fact("Porto", day=2), "k2")], POLICY)
    assert load.states[LIVES_IN] is state and list(state.evidence) == [held]
    assert by_idempotency == {"k": held.evidence_id}


def _vote(voter: str, key: Key, evidence_id: str) -> Vote:
    return Vote(voter, key, "v" * 32, evidence_id, 4, 500, 0, 1)


def test_an_erasure_by_evidence_id_destroys_it_and_recomputes_the_keys_that_held_it() -> None:
    """By evidence id: that evidence (and an id the tombstone names that is not held) goes,
    the votes resting on it go, and its key, the key it contradicts and any key a removed
    vote was on are recomputed; no key is forgotten whole."""
    doomed = fact("Braga", contradicts=WORKS_AT)
    on_it = _vote("peer", SPEAKS, doomed.evidence_id)
    load = ErasureLoad(
        doomed=(doomed,), bearing=frozenset({WORKS_AT}), votes_on_evidence=(on_it, on_it)
    )
    plan = plan_erasure("evidence", ["0" * 32], load)
    assert plan.evidence_ids == tuple(sorted({doomed.evidence_id, "0" * 32}))
    assert plan.held_by == {LIVES_IN}
    assert plan.forget == frozenset()
    assert plan.refresh == {LIVES_IN, WORKS_AT, SPEAKS}
    assert plan.votes_removed == (("peer", SPEAKS),)


def test_an_erasure_by_key_forgets_the_key_and_every_vote_on_it_once() -> None:
    """By key: the key (named though it may hold nothing) is forgotten whole, with every
    vote on it, abstentions too; a vote both on erased evidence and on the key is removed
    once."""
    held = fact("Lisbon")
    mine = _vote("node", LIVES_IN, held.evidence_id)
    abstains = Vote("peer", LIVES_IN, None, "", 0, 0, 0, 1)
    load = ErasureLoad(
        doomed=(held,),
        votes_on_evidence=(mine,),
        votes_on_keys={LIVES_IN: (mine, abstains)},
    )
    plan = plan_erasure("key", [], load, also={LIVES_IN})
    assert plan.evidence_ids == (held.evidence_id,)
    assert plan.forget == {LIVES_IN} and plan.refresh == {LIVES_IN}
    assert plan.votes_removed == (("node", LIVES_IN), ("peer", LIVES_IN))


def _served(e: Evidence, state: BeliefState, rule: Rule) -> StoredBelief:
    return StoredBelief(e.key, e.version_id, e.object, e.evidence_id, rule, state, 0)


def test_a_resolution_of_a_contested_key_pins_the_version_and_logs_what_it_replaces() -> None:
    """A key served CONTESTED: the pin's decision is RESOLVED by operator_resolution, names
    the version served before as superseded, and carries the operator and reason; the
    chosen version's held evidence comes with it."""
    lisbon, porto, porto_again = fact("Lisbon"), fact("Porto"), fact("Porto", source="bob")
    state = KeyState((lisbon, porto, porto_again))
    load = ResolutionLoad(
        state, [_served(lisbon, BeliefState.CONTESTED, Rule.FEDERATION_CONSENSUS)]
    )
    plan = plan_resolution(
        LIVES_IN, porto.version_id, load, operator="op", reason="checked", now=5 * DAY
    )
    assert plan == ResolutionPlan(
        Decision(
            key=LIVES_IN,
            outcome=Outcome.RESOLVED,
            rule=Rule.OPERATOR_RESOLUTION,
            decided_at=5 * DAY,
            version_id=porto.version_id,
            supersedes=lisbon.version_id,
            detail="pinned by op: checked",
        ),
        (porto, porto_again),
    )


def test_a_resolution_choosing_the_served_version_or_repinning_supersedes_nothing() -> None:
    """Choosing what is served already (an ambiguous key, or one held by an earlier pin)
    supersedes nothing."""
    lisbon = fact("Lisbon")
    for row in (
        _served(lisbon, BeliefState.AMBIGUOUS, Rule.RECENCY),
        _served(lisbon, BeliefState.BELIEVED, Rule.OPERATOR_RESOLUTION),
    ):
        load = ResolutionLoad(KeyState((lisbon,)), [row])
        plan = plan_resolution(
            LIVES_IN, lisbon.version_id, load, operator="op", reason="r", now=DAY
        )
        assert plan.decision is not None and plan.decision.supersedes is None


def test_a_resolution_of_a_version_not_held_or_of_a_settled_key_writes_nothing() -> None:
    """A version with no evidence held is not_held (named as the operator named it); a key
    the rules settle (BELIEVED by a rule, or nothing served) is settled, with its standing."""
    lisbon = fact("Lisbon")
    believed = ResolutionLoad(
        KeyState((lisbon,)), [_served(lisbon, BeliefState.BELIEVED, Rule.FIRST_VERSION)]
    )
    missing = plan_resolution(
        LIVES_IN, "f" * 32, believed, operator="op", reason="r", now=DAY, what="value 'Faro'"
    )
    assert missing == ResolutionPlan(
        None, not_held=f"no value 'Faro' for {LIVES_IN}: a pin chooses among held versions"
    )
    settled = plan_resolution(
        LIVES_IN, lisbon.version_id, believed, operator="op", reason="r", now=DAY
    )
    assert settled == ResolutionPlan(
        None,
        (lisbon,),
        settled=f"{LIVES_IN} is not under review (BELIEVED by rule first_version): the rules "
        "decide it; to overrule them, submit evidence as user_confirmed with source operator:op",
    )
    unserved = plan_resolution(
        LIVES_IN,
        lisbon.version_id,
        ResolutionLoad(KeyState((lisbon,))),
        operator="op",
        reason="r",
        now=DAY,
    )
    assert unserved.decision is None and "(no belief)" in unserved.settled


def test_an_expired_claim_does_not_count_when_a_batch_decides() -> None:
    """agent_inferred 0.9 lasts about 35 days from its recording: at day 40 'Porto' (recorded
    day 1) has expired, so a new 'Lisbon' is the key's only version, decided by
    first_version, and the key is recomputed without the expired claim."""
    porto = fact("Porto", day=1, anchor="agent_inferred")
    lisbon = fact("Lisbon", day=40, anchor="agent_inferred")
    load = IngestLoad(states={LIVES_IN: KeyState((porto,))}, at=40 * DAY)
    plan = plan_ingest(load, [(lisbon, None)], POLICY)
    assert plan.decisions == (_decision(lisbon, Outcome.ACCEPTED, Rule.FIRST_VERSION),)
    assert list(plan.states[LIVES_IN].evidence) == [lisbon]


def test_a_restatement_confirms_held_evidence_and_revives_an_expired_claim() -> None:
    """A client's DUPLICATE of held evidence is a restatement: a confirmation signed by the
    node that took it, the evidence with its confirmed_at moved, and the key recomputed with
    the claim holding again. A peer's relay (no `restated_by`) confirms nothing."""
    porto = fact("Porto", day=1, anchor="agent_inferred")
    again = fact("Porto", day=1, at=40, anchor="agent_inferred")
    assert again.evidence_id == porto.evidence_id
    load = IngestLoad(
        states={LIVES_IN: KeyState((porto,))},
        stored=frozenset({porto.evidence_id}),
        at=40 * DAY,
        restated_by="n1",
    )
    plan = plan_ingest(load, [(again, None)], POLICY)
    [decision] = plan.decisions
    assert decision.outcome is Outcome.DUPLICATE and "restated" in decision.detail
    assert plan.evidence == ()
    assert plan.confirmations == (Confirmation(porto.evidence_id, "n1", 40 * DAY, 40 * DAY),)
    assert plan.confirmed == (replace(porto, confirmed_at=40 * DAY),)
    assert plan.refresh == {LIVES_IN}
    assert list(plan.states[LIVES_IN].evidence) == [replace(porto, confirmed_at=40 * DAY)]
    relayed = plan_ingest(replace(load, restated_by=None), [(again, None)], POLICY)
    assert relayed.confirmations == () and relayed.refresh == frozenset()
    # A restatement older than the last confirmation moves nothing.
    confirmed = replace(porto, confirmed_at=50 * DAY)
    late = replace(load, states={LIVES_IN: KeyState((confirmed,))})
    assert plan_ingest(late, [(again, None)], POLICY).confirmations == ()
