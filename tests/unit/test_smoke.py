"""Smoke: the pure core decides a simple conflict."""

from factnode.core import (
    MICROS_PER_DAY,
    KeyState,
    Outcome,
    Policy,
    Rule,
    Submission,
    decide,
    make_evidence,
)


def test_first_party_fact_beats_newer_low_anchor_claim() -> None:
    """A low-anchor claim newer than a first-party fact is DISBELIEVED by trust_anchor."""
    policy = Policy()
    first = make_evidence(
        Submission(
            "user:ana", "ana", "lives_in", "Porto", "user_stated", "ana", 0.5, 0.9, MICROS_PER_DAY
        ),
        policy,
        recorded_at=2 * MICROS_PER_DAY,
        origin_node="n1",
    )
    later = make_evidence(
        Submission(
            "user:ana",
            "ana",
            "lives_in",
            "Lisbon",
            "llm_generated",
            "gpt",
            0.5,
            0.9,
            5 * MICROS_PER_DAY,
        ),
        policy,
        recorded_at=6 * MICROS_PER_DAY,
        origin_node="n1",
    )
    ruling = decide(later, KeyState([first]), policy)
    assert (ruling.decision.outcome, ruling.decision.rule) == (
        Outcome.DISBELIEVED,
        Rule.TRUST_ANCHOR,
    )
