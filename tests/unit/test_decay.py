"""Decay: effective confidence halves every half-life; cold evidence is picked for tombstones."""

from __future__ import annotations

from dataclasses import replace

import pytest
from _facts import DAY, POLICY, fact

from factnode.core import (
    cold_evidence,
    effective_confidence_milli,
    freshness_milli,
    policy_from_mapping,
)


@pytest.mark.parametrize(
    ("age_days", "half_life_days", "expected"),
    [
        (0, 30, 1000),
        (-5, 30, 1000),  # evidence dated in the future has not aged
        (30, 30, 500),
        (60, 30, 250),
        (90, 30, 125),
        (15, 30, 707),  # floor(1000 / sqrt(2))
        (180, 180, 500),
        (10_000, None, 1000),
    ],
)
def test_freshness(age_days: int, half_life_days: int | None, expected: int) -> None:
    """Freshness is 0.5^(age / half_life) in thousandths, rounded down; 1000 without decay."""
    half_life = None if half_life_days is None else half_life_days * DAY
    assert freshness_milli(age_days * DAY, half_life) == expected


@pytest.mark.parametrize(
    ("anchor", "half_life_days"),
    [
        ("api_response", 180),
        ("document_extracted", 180),
        ("agent_observed", 180),
        ("agent_inferred", 30),
        ("llm_generated", 30),
        ("federation_received", 30),
    ],
)
def test_effective_confidence_halves_at_one_half_life(anchor: str, half_life_days: int) -> None:
    """Effective confidence is half the stated confidence one half-life after the event time."""
    e = fact("Porto", day=10, at=400, anchor=anchor, confidence=0.8)
    assert effective_confidence_milli(e, POLICY, now=10 * DAY) == 800
    assert effective_confidence_milli(e, POLICY, now=(10 + half_life_days) * DAY) == 400
    assert effective_confidence_milli(e, POLICY, now=(10 + 2 * half_life_days) * DAY) == 200


@pytest.mark.parametrize("anchor", ["codebase_verified", "user_stated", "user_confirmed"])
def test_first_party_anchors_never_decay(anchor: str) -> None:
    """codebase_verified, user_stated and user_confirmed keep their confidence at any age."""
    e = fact("Porto", day=0, anchor=anchor, confidence=0.41)
    assert effective_confidence_milli(e, POLICY, now=100 * 365 * DAY) == 410
    assert cold_evidence([e], POLICY, now=100 * 365 * DAY) == []


def test_age_counts_from_event_time_not_ingestion() -> None:
    """A fact learned today about long ago is already aged."""
    e = fact("Porto", day=0, at=100, anchor="llm_generated", confidence=0.8)
    assert effective_confidence_milli(e, POLICY, now=100 * DAY) < 800 // 8


def test_cold_evidence_selects_below_min_confidence_only() -> None:
    """Evidence is cold strictly below min_confidence (at it, it stays); ids come sorted."""
    at_threshold = fact("Porto", day=0, anchor="llm_generated", confidence=0.8)  # 400 at 30 days
    just_below = fact("Lisbon", day=0, anchor="llm_generated", confidence=0.799)  # 399 at 30 days
    young = fact("Faro", day=29, anchor="llm_generated", confidence=0.5)
    first_party = fact("Braga", day=0, anchor="user_stated", confidence=0.4)
    slow = fact("Evora", day=0, anchor="api_response", confidence=0.5)
    old = fact("Tavira", day=-60, anchor="agent_inferred", confidence=1.0)  # 250 at 90 days
    evidence = [at_threshold, just_below, young, first_party, slow, old]
    assert cold_evidence(evidence, POLICY, now=30 * DAY) == sorted(
        [just_below.evidence_id, old.evidence_id]
    )


def test_decay_follows_the_policy() -> None:
    """Half-lives and min_confidence come from the policy in force."""
    policy = policy_from_mapping({"half_life_days": {"user_stated": 10}, "min_confidence": 0.5})
    e = fact("Porto", day=0, anchor="user_stated", confidence=0.9, policy=policy)
    assert effective_confidence_milli(e, policy, now=10 * DAY) == 450
    assert cold_evidence([e], policy, now=10 * DAY) == [e.evidence_id]
    assert cold_evidence([e], POLICY, now=10 * DAY) == []


def test_relayed_evidence_decays_at_its_capped_anchors_half_life() -> None:
    """A relayed user_stated fact counted as federation_received here halves every 30 days."""
    own = fact("Porto", day=0, confidence=1.0)
    relayed = replace(own, anchor_cap="federation_received")
    assert effective_confidence_milli(own, POLICY, 30 * DAY) == 1000
    assert effective_confidence_milli(relayed, POLICY, 30 * DAY) == 500
    assert cold_evidence([own, relayed], POLICY, 90 * DAY) == [relayed.evidence_id]
