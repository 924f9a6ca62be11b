"""The whole story through the ledger and the store: explain after an operator's resolution,
history of a version served until then, and the version an erasure or a retraction makes
believed again, with no erased value in any reply."""

from __future__ import annotations

from factnode.core import Key, Outcome, Rule, Submission
from factnode.ledger import Ledger
from factnode.testing import FakeClock

LIVES_IN = Key("user:ana", "ana", "lives_in")
SEPT = 1_756_684_800_000_000  # 2025-09-01T00:00:00Z


def _say(ledger: Ledger, clock: FakeClock, value: str, anchor: str, source: str) -> str:
    # Ingested after the facts' event time, so a retraction "now" can end them.
    clock.current = max(clock.current, SEPT + 86_400_000_000)
    clock.advance(1_000_000)
    sub = Submission("user:ana", "ana", "lives_in", value, anchor, source, 0.5, 0.9, SEPT)
    return ledger.submit(sub).evidence_id


def test_explain_on_a_resolved_key_names_each_losers_rule_then_the_pin(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Faro and Braga tie, Lisbon is llm_generated; resolved to the tiebreak's loser, explain
    says Lisbon loses by trust_anchor and the other tied version by tiebreak, then the pin,
    and that the key is no longer under review while the evidence still ties."""
    _say(ledger, clock, "Faro", "user_stated", "ana")
    _say(ledger, clock, "Braga", "user_stated", "bob")
    _say(ledger, clock, "Lisbon", "llm_generated", "gpt")
    provisional = ledger.belief(LIVES_IN).object
    chosen = "Braga" if provisional == "Faro" else "Faro"
    clock.advance(1_000_000)
    assert ledger.resolve(
        LIVES_IN, version_id=None, obj=chosen, reason="asked", operator="op"
    ).resolved
    explained = ledger.explain(LIVES_IN)
    assert explained.belief is not None and explained.belief.object == chosen
    by = {c.object: c for c in explained.comparisons}
    assert by["Lisbon"].rule is Rule.OPERATOR_RESOLUTION
    assert by["Lisbon"].evidence_rule is Rule.TRUST_ANCHOR
    assert by[provisional].evidence_rule is Rule.TIEBREAK
    assert "then an operator's resolution" in by["Lisbon"].reason
    assert explained.review.startswith("not under review: an operator's resolution (recorded ")
    assert "the evidence still ties 'Braga' and 'Faro'" in explained.review

    history = {h.object: h for h in ledger.history(LIVES_IN)}
    pinned_at = ledger.decisions(LIVES_IN).items[-1].decision.decided_at
    assert history[provisional].intervals == ()
    assert history[provisional].served_until == pinned_at
    assert history["Lisbon"].served_until is None and history[chosen].served_until is None


def test_a_retraction_of_the_winner_is_told_by_explain(ledger: Ledger, clock: FakeClock) -> None:
    """Rome outranked Milan by trust_anchor; once Rome is retracted, explain names Milan as
    believed again, Rome, the rule and the retraction."""
    _say(ledger, clock, "Milan", "agent_observed", "doc")
    _say(ledger, clock, "Rome", "user_stated", "ana")
    clock.advance(1_000_000)
    decision = ledger.retract(LIVES_IN, "Rome", reason="moved", source="ana").decision
    again = ledger.explain(LIVES_IN).believed_again
    assert again is not None and again.ended_by == (decision.evidence_id,)
    assert again.text.startswith(
        "'Milan' is believed again: 'Rome', which outranked it by trust_anchor, was ended by "
        f"retraction {decision.evidence_id}"
    )


def test_an_erased_winner_leaves_a_story_without_its_value(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Erasing Rome (which outranked Milan) makes Milan believed again: the erase report,
    explain and the decision log say so by rule, and 'Rome' is in no reply afterwards."""
    _say(ledger, clock, "Milan", "agent_observed", "doc")
    rome = _say(ledger, clock, "Rome", "user_stated", "ana")
    clock.advance(1_000_000)
    report = ledger.erase(evidence_id=rome, operator="op", reason="gdpr")
    [again] = report.believed_again
    assert again.text == (
        "'Milan' is believed again: the version that outranked it by trust_anchor was erased "
        f"(erasure {report.erasure_id})"
    )
    explained = ledger.explain(LIVES_IN)
    assert explained.believed_again is not None
    assert explained.believed_again.text == again.text
    logged = ledger.decisions(LIVES_IN).items[-1].decision
    assert (logged.outcome, logged.rule) == (Outcome.ERASED, Rule.ERASED)
    replies = repr(
        (
            report,
            explained,
            ledger.history(LIVES_IN),
            ledger.decisions(LIVES_IN).items,
            ledger.belief(LIVES_IN),
        )
    )
    assert "Rome" not in replies

    # A later decision that changes what is served ends the story.
    _say(ledger, clock, "Porto", "user_stated", "ana")
    assert ledger.explain(LIVES_IN).believed_again is None


def test_erasing_the_version_believed_again_takes_its_story_from_the_log(
    ledger: Ledger, clock: FakeClock
) -> None:
    """The story's log entry rests on Milan's evidence: erasing Milan removes it, so 'Milan'
    is left in no decision."""
    milan = _say(ledger, clock, "Milan", "agent_observed", "doc")
    rome = _say(ledger, clock, "Rome", "user_stated", "ana")
    ledger.erase(evidence_id=rome, operator="op", reason="gdpr")
    ledger.erase(evidence_id=milan, operator="op", reason="gdpr")
    assert "Milan" not in repr(ledger.decisions(LIVES_IN).items)
