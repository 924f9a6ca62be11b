"""Retractions and `contradicts` through the real ledger and store (specification §5): the other key's
decision log and served belief follow, erasures and corrections undo them, and peers
replicate retractions as evidence, decided on arrival like any relayed evidence."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from factnode import _wire
from factnode.core import MICROS_PER_DAY, Key, Outcome, Rule, Submission, policy_from_mapping
from factnode.ledger import Ledger, NotFound
from factnode.testing import FakeClock, Federation, memory_ledger

NS = "user:ana"
WORKS_AT = Key(NS, "ana", "works_at")
EMPLOYER = Key(NS, "ana", "employer")
DAY = MICROS_PER_DAY


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    led = memory_ledger(clock=FakeClock())
    try:
        yield led
    finally:
        led.repo.close()


def _sub(key: Key, obj: str, day: int, anchor: str = "user_stated", **kw: object) -> Submission:
    start = FakeClock().now()
    return Submission(*key, obj, anchor, "ana", 0.5, 0.9, start + day * DAY, **kw)  # type: ignore[arg-type]


def test_a_contradicts_logs_a_decision_on_the_other_key_and_an_erasure_undoes_it(
    ledger: Ledger,
) -> None:
    """A fact naming `contradicts` that outranks the other key's belief ends it, and the other
    key's log says so (RETRACTED, naming the evidence); erasing that fact brings it back."""
    ledger.submit(_sub(WORKS_AT, "Acme", 1, anchor="agent_observed"))
    moved = ledger.submit(_sub(EMPLOYER, "Initech", 5, contradicts=WORKS_AT))
    assert (moved.decision.outcome, moved.decision.rule) == (Outcome.ACCEPTED, Rule.FIRST_VERSION)
    with pytest.raises(NotFound):
        ledger.belief(WORKS_AT)
    last = ledger.decisions(key=WORKS_AT).items[-1].decision
    assert (last.outcome, last.rule, last.evidence_id) == (
        Outcome.RETRACTED,
        Rule.RETRACT,
        moved.evidence_id,
    )
    assert str(EMPLOYER) in last.detail
    ledger.erase(evidence_id=moved.evidence_id, operator="op", reason="wrong")
    assert ledger.belief(WORKS_AT).object == "Acme"


def test_a_correction_of_a_contradicts_on_its_own_key_gives_the_other_key_back(
    ledger: Ledger,
) -> None:
    """Correcting the contradicting fact (it was never true) makes it stop counting on the
    other key, which logs the change."""
    ledger.submit(_sub(WORKS_AT, "Acme", 1, anchor="agent_observed"))
    moved = ledger.submit(_sub(EMPLOYER, "Initech", 5, contradicts=WORKS_AT))
    ledger.submit(_sub(EMPLOYER, "Globex", 5, corrects=moved.evidence_id))
    assert ledger.belief(WORKS_AT).object == "Acme"
    last = ledger.decisions(key=WORKS_AT).items[-1].decision
    assert (last.outcome, last.rule) == (Outcome.RETRACTED, Rule.RETRACT)
    assert "corrects" in last.detail


def test_a_weaker_contradicts_is_stored_and_leaves_the_other_key_alone(ledger: Ledger) -> None:
    """A contradicts that the other key's belief outranks changes nothing there and logs
    nothing there."""
    ledger.submit(_sub(WORKS_AT, "Acme", 1))
    before = ledger.decisions(key=WORKS_AT).items
    ledger.submit(_sub(EMPLOYER, "Initech", 5, anchor="llm_generated", contradicts=WORKS_AT))
    assert ledger.belief(WORKS_AT).object == "Acme"
    assert ledger.decisions(key=WORKS_AT).items == before


async def test_a_retraction_replicates_and_is_decided_on_each_peer() -> None:
    """A retraction made on one node reaches the others as evidence, each decides it
    (RETRACTED where it ends the belief there), and its vote is withdrawn everywhere."""
    fed = Federation(["a", "b", "c"], clock=FakeClock())
    try:
        now = fed.clock.now()
        fed.ledgers["a"].submit(
            Submission(*WORKS_AT, "Acme", "agent_observed", "crm", 0.5, 0.9, now - DAY)
        )
        for _ in range(3):
            await fed.round()
        assert all(lg.belief(WORKS_AT).object == "Acme" for lg in fed.ledgers.values())
        fed.clock.advance(DAY)
        done = fed.ledgers["a"].retract(WORKS_AT, reason="left").decision
        assert done.outcome is Outcome.RETRACTED
        for _ in range(3):
            await fed.round()
        for name, lg in fed.ledgers.items():
            with pytest.raises(NotFound):
                lg.belief(WORKS_AT)
            logged = [d.decision for d in lg.decisions(key=WORKS_AT).items]
            assert any(
                d.evidence_id == done.evidence_id and d.outcome is Outcome.RETRACTED for d in logged
            ), name
            assert lg.tally_of(WORKS_AT) is None or not lg.tally_of(WORKS_AT).versions, name
    finally:
        fed.close()


def test_a_relayed_retraction_whose_id_does_not_match_is_refused() -> None:
    """A peer cannot pass a retraction off as another statement: the receiver recomputes the
    id over the kind too, so an assertion's id on a retraction (or a flipped kind) is refused."""
    fed = Federation(["a", "b"], clock=FakeClock())
    try:
        now = fed.clock.now()
        held = fed.ledgers["a"].submit(
            Submission(*WORKS_AT, "Acme", "agent_observed", "crm", 0.5, 0.9, now - DAY)
        )
        with fed.ledgers["a"].repo.read() as tx:
            [e] = tx.evidence([held.evidence_id]).values()
        flipped = _wire.relayed(_wire.relayed_pb(replace(e, retracts=True)))
        result = fed.ledgers["b"].receive("a", None, [], [flipped], [])
        assert [reason for _, reason in result.rejected] == [
            "evidence_id: does not match the evidence's content"
        ]
        with pytest.raises(NotFound):
            fed.ledgers["b"].belief(WORKS_AT)
    finally:
        fed.close()


def test_a_relayed_retraction_counts_at_the_peers_ceiling() -> None:
    """A peer's user_stated retraction counts here as federation_received, like any relayed
    evidence: it cannot end this node's first-party agent_observed belief (DISBELIEVED by
    trust_anchor), while on its own node it ended the same fact."""
    fed = Federation(["a", "b"], clock=FakeClock())
    try:
        now = fed.clock.now()
        for node in ("a", "b"):
            fed.ledgers[node].submit(
                Submission(*WORKS_AT, "Acme", "agent_observed", f"crm-{node}", 0.5, 0.9, now - DAY)
            )
        fed.clock.advance(DAY)
        done = fed.ledgers["a"].retract(WORKS_AT, reason="left").decision
        assert done.outcome is Outcome.RETRACTED
        # As a offers it to a peer: signed by a, its origin, with a's certificate beside it.
        [r] = [e for e in fed.ledgers["a"].offer({"evidence": [""]})[1] if e.retracts]
        roster, credentials = fed.rosters["b"], fed.credentials
        assert roster is not None and credentials is not None
        roster.learn([credentials.signer("a").identity.der], by="a")
        result = fed.ledgers["b"].receive("a", None, [], [r], [])
        assert not result.rejected
        logged = [d.decision for d in fed.ledgers["b"].decisions(key=WORKS_AT).items]
        mine = [d for d in logged if d.evidence_id == r.evidence_id]
        assert [(d.outcome, d.rule) for d in mine] == [(Outcome.DISBELIEVED, Rule.TRUST_ANCHOR)]
        assert fed.ledgers["b"].belief(WORKS_AT).object == "Acme"
    finally:
        fed.close()


def test_a_retraction_does_not_expire_so_what_it_ended_stays_ended() -> None:
    """A retraction ends a validity at its event time; it never expires (specification §6, as
    built): long after its anchor's half-life, what it ended is still not believed, the
    decay job records nothing, and the view of a time before the retraction still sees the
    value."""
    # The fact's anchor never decays here; the retraction's halves every 30 days.
    policy = policy_from_mapping(
        {"half_life_days": {"agent_observed": "never", "api_response": 30}}
    )
    clock = FakeClock()
    ledger = memory_ledger(policy, clock)
    try:
        start = clock.now()
        ledger.submit(Submission(*WORKS_AT, "Acme", "agent_observed", "crm", 0.5, 0.9, start))
        clock.advance(DAY)
        ended = ledger.retract(
            WORKS_AT, attribution="api_response", source="hr", confidence=0.9
        ).decision
        assert ended.outcome is Outcome.RETRACTED
        clock.advance(400 * DAY)
        with pytest.raises(NotFound):
            ledger.belief(WORKS_AT)
        assert ledger.run_decay().decayed == 0
        with pytest.raises(NotFound):
            ledger.belief(WORKS_AT)
        assert ledger.belief(WORKS_AT, as_of=start).object == "Acme"
    finally:
        ledger.repo.close()


def test_explain_and_get_on_an_ended_key_say_what_ended_it(ledger: Ledger) -> None:
    """On a key whose every version was retracted or moved away by `contradicts`, Explain and
    GetBelief (now and as of a time after the end) are NOT_FOUND naming what ended each value;
    an erased value is never named."""
    ledger.submit(_sub(WORKS_AT, "Acme", 1))
    ledger.retract(WORKS_AT, "Acme", FakeClock().now() + 2 * DAY, "left", source="hr")
    retraction = ledger.history(WORKS_AT)[0].ended_by[0]
    with pytest.raises(NotFound, match="'Acme' was ended by retraction " + retraction) as got:
        ledger.explain(WORKS_AT)
    assert "user_stated from hr" in str(got.value)
    with pytest.raises(NotFound, match="'Acme' was ended by retraction " + retraction):
        ledger.belief(WORKS_AT)
    with pytest.raises(NotFound, match=r"as of .*'Acme' was ended by retraction"):
        ledger.explain(WORKS_AT, as_of=FakeClock().now() + 3 * DAY)
    assert ledger.explain(WORKS_AT, as_of=FakeClock().now() + DAY).belief is not None

    ledger.submit(_sub(EMPLOYER, "Globex", 1, anchor="agent_observed"))
    moved = ledger.submit(_sub(WORKS_AT, "Initech", 5, contradicts=EMPLOYER))
    with pytest.raises(NotFound, match=f"on {WORKS_AT}, which names this key in contradicts"):
        ledger.explain(EMPLOYER)
    ledger.erase(key=EMPLOYER, operator="op", reason="gdpr")
    with pytest.raises(NotFound) as erased:
        ledger.explain(EMPLOYER)
    assert "Globex" not in str(erased.value) and moved.evidence_id not in str(erased.value)
