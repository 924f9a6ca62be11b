"""An operator's resolution is a pin: it settles the key under review in one command, and
the rules take over again when evidence decides the key (specification §7)."""

from __future__ import annotations

import pytest

from factnode.core import BeliefState, InvalidInput, Key, Outcome, Rule, Submission
from factnode.ledger import Ledger, NotFound, NotUnderReview
from factnode.testing import FakeClock

LIVES_IN = Key("user:ana", "ana", "lives_in")
SEPT = 1_756_684_800_000_000  # 2025-09-01T00:00:00Z
DAY = 86_400_000_000
YEAR_2030 = 1_893_456_000_000_000  # 2030-01-01T00:00:00Z


def _say(ledger: Ledger, value: str, source: str, valid_from: int = SEPT) -> None:
    ledger.submit(
        Submission(
            "user:ana", "ana", "lives_in", value, "user_stated", source, 0.5, 0.9, valid_from
        )
    )


def test_the_walkthroughs_tie_is_resolved_in_one_command(ledger: Ledger) -> None:
    """Two user_stated facts tied on every rule: resolving to Faro serves Faro BELIEVED by
    operator_resolution, takes the key out of the review queue and logs who and why."""
    _say(ledger, "Faro", "ana")
    _say(ledger, "Braga", "bob")
    assert ledger.belief(LIVES_IN).state is BeliefState.AMBIGUOUS
    resolution = ledger.resolve(
        LIVES_IN, version_id=None, obj="Faro", reason="asked Ana", operator="op"
    )
    assert resolution.resolved, resolution.note
    belief = ledger.belief(LIVES_IN)
    assert (belief.object, belief.state, belief.rule) == (
        "Faro",
        BeliefState.BELIEVED,
        Rule.OPERATOR_RESOLUTION,
    )
    assert ledger.review_queue("user:ana").items == []
    logged = ledger.decisions(LIVES_IN).items[-1]
    assert (logged.decision.outcome, logged.decision.rule) == (
        Outcome.RESOLVED,
        Rule.OPERATOR_RESOLUTION,
    )
    assert "asked Ana" in logged.decision.detail and "op" in logged.decision.detail


def test_evidence_that_decides_the_key_takes_over_from_the_pin(ledger: Ledger) -> None:
    """A later, recency-winning fact for Braga ends the pin's hold; the pin stays in the log."""
    _say(ledger, "Faro", "ana")
    _say(ledger, "Braga", "bob")
    ledger.resolve(LIVES_IN, version_id=None, obj="Faro", reason="asked Ana", operator="op")
    _say(ledger, "Braga", "ana", valid_from=SEPT + 86_400_000_000)
    belief = ledger.belief(LIVES_IN)
    assert (belief.object, belief.state, belief.rule) == (
        "Braga",
        BeliefState.BELIEVED,
        Rule.RECENCY,
    )
    outcomes = [d.decision.outcome for d in ledger.decisions(LIVES_IN).items]
    assert Outcome.RESOLVED in outcomes


@pytest.mark.parametrize("value", ["Porto", "Faro"])
def test_resolving_a_key_the_rules_decide_is_refused_and_writes_nothing(
    ledger: Ledger, value: str
) -> None:
    """Resolving a settled key (to the version that lost, or to the one the rules already
    believe) is NotUnderReview naming its state and rule; no pin or decision is written."""
    _say(ledger, "Faro", "ana")
    _say(ledger, "Porto", "ana", valid_from=SEPT - 86_400_000_000)
    before = ledger.counts()
    logged = ledger.decisions(LIVES_IN).items
    with pytest.raises(NotUnderReview, match=r"not under review \(BELIEVED by rule recency\)"):
        ledger.resolve(LIVES_IN, version_id=None, obj=value, reason="checked", operator="op")
    assert ledger.counts() == before
    assert ledger.decisions(LIVES_IN).items == logged
    belief = ledger.belief(LIVES_IN)
    assert (belief.object, belief.rule) == ("Faro", Rule.RECENCY)


def test_a_pinned_key_can_be_resolved_again(ledger: Ledger) -> None:
    """A key served by an operator's pin is still under review: a second resolution moves it."""
    _say(ledger, "Faro", "ana")
    _say(ledger, "Braga", "bob")
    ledger.resolve(LIVES_IN, version_id=None, obj="Faro", reason="asked Ana", operator="op")
    again = ledger.resolve(
        LIVES_IN, version_id=None, obj="Braga", reason="Ana moved", operator="op"
    )
    assert again.resolved, again.note
    belief = ledger.belief(LIVES_IN)
    assert (belief.object, belief.rule) == ("Braga", Rule.OPERATOR_RESOLUTION)


def test_a_resolution_needs_a_held_version_and_a_reason(ledger: Ledger) -> None:
    """An unknown value is NOT_FOUND; an empty reason is invalid and writes nothing."""
    _say(ledger, "Faro", "ana")
    with pytest.raises(NotFound):
        ledger.resolve(LIVES_IN, version_id=None, obj="Lagos", reason="x", operator="op")
    before = ledger.counts()
    with pytest.raises(InvalidInput, match="reason"):
        ledger.resolve(LIVES_IN, version_id=None, obj="Faro", reason=" ", operator="op")
    assert ledger.counts() == before


def _story(ledger: Ledger, **view: int) -> tuple[str, BeliefState, Rule]:
    b = ledger.belief(LIVES_IN, **view)
    return (b.object, b.state, b.rule)


def test_every_view_of_a_pinned_key_tells_the_same_story(ledger: Ledger, clock: FakeClock) -> None:
    """After a pin settles a tie, GetBelief now, as of now, as known in the future, Explain and
    the served row of GetHistory all name the pinned value BELIEVED by operator_resolution."""
    yesterday = clock.now() - DAY
    _say(ledger, "Oslo", "ana", yesterday)
    _say(ledger, "Bergen", "bob", yesterday)
    ledger.resolve(LIVES_IN, version_id=None, obj="Oslo", reason="asked Ana", operator="op")
    pinned = ("Oslo", BeliefState.BELIEVED, Rule.OPERATOR_RESOLUTION)
    now = clock.now()
    assert _story(ledger) == pinned
    assert _story(ledger, as_of=now) == pinned
    assert _story(ledger, known_at=now) == pinned
    assert _story(ledger, known_at=YEAR_2030) == pinned
    assert _story(ledger, as_of=YEAR_2030, known_at=YEAR_2030) == pinned
    explained = ledger.explain(LIVES_IN, as_of=now)
    assert explained.belief is not None
    assert (explained.belief.object, explained.belief.rule) == ("Oslo", Rule.OPERATOR_RESOLUTION)
    rows = {h.object: h for h in ledger.history(LIVES_IN)}
    assert (rows["Oslo"].status, rows["Oslo"].rule) == ("BELIEVED", Rule.OPERATOR_RESOLUTION)
    assert rows["Oslo"].intervals and rows["Oslo"].intervals[-1].end is None
    assert rows["Bergen"].status == "DISBELIEVED" and rows["Bergen"].intervals == ()


def test_a_pin_counts_only_in_views_that_know_of_it(ledger: Ledger, clock: FakeClock) -> None:
    """As known before the pin was recorded, the tie is AMBIGUOUS by tiebreak; from then on
    the pin serves its version, in as-of answers and history alike."""
    yesterday = clock.now() - DAY
    _say(ledger, "Oslo", "ana", yesterday)
    _say(ledger, "Bergen", "bob", yesterday)
    before = clock.advance(1_000_000)
    clock.advance(1_000_000)
    ledger.resolve(LIVES_IN, version_id=None, obj="Oslo", reason="asked Ana", operator="op")
    assert _story(ledger, known_at=before)[1:] == (BeliefState.AMBIGUOUS, Rule.TIEBREAK)
    assert _story(ledger, known_at=clock.now())[0] == "Oslo"
    rows = {h.object: h for h in ledger.history(LIVES_IN, known_at=before)}
    assert {h.status for h in rows.values()} == {"AMBIGUOUS"}
