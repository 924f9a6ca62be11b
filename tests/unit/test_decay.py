"""Decay (specification §6): a claim's confidence halves every half-life counted from when it
was last stated (`confirmed_at`), and from its expiry on it no longer holds."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal, localcontext

import pytest
from _facts import DAY, POLICY, fact
from hypothesis import given
from hypothesis import strategies as st

from factnode.core import (
    Confirmation,
    KeyState,
    confirmed_at,
    expiry,
    freshness_milli,
    holds,
    policy_from_mapping,
)
from factnode.core.decay import lifetime


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


def _effective(confidence_milli: int, age: int, half_life: int) -> Decimal:
    """confidence x 0.5^(age / half_life), to 80 digits: an independent oracle."""
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(confidence_milli) * (Decimal(2).ln() * -Decimal(age) / half_life).exp()


@given(
    confidence=st.integers(min_value=400, max_value=1000),
    minimum=st.integers(min_value=1, max_value=400),
    half_life_days=st.integers(min_value=1, max_value=3650),
)
def test_lifetime_is_the_first_microsecond_below_the_minimum(
    confidence: int, minimum: int, half_life_days: int
) -> None:
    """At age `lifetime` the effective confidence is below min_confidence, one microsecond
    earlier it is not: the expiry is exact to the microsecond."""
    half_life = half_life_days * DAY
    d = lifetime(confidence, minimum, half_life)
    assert _effective(confidence, d, half_life) < minimum
    # At a power-of-two ratio the confidence one microsecond earlier equals the minimum
    # exactly, which the oracle's 80 digits give as a hair below it.
    with localcontext() as ctx:
        ctx.prec = 80
        assert _effective(confidence, d - 1, half_life) >= minimum - Decimal("1e-60")


def test_lifetime_of_a_power_of_two_ratio_is_whole_half_lives() -> None:
    """0.8 against a floor of 0.4 (ratio 2) lasts exactly one half-life: at it, the
    confidence equals the floor and still holds; one microsecond later it does not."""
    assert lifetime(800, 400, 30 * DAY) == 30 * DAY + 1
    assert lifetime(1000, 250, 30 * DAY) == 60 * DAY + 1
    assert lifetime(399, 400, 30 * DAY) == 0


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
def test_expiry_counts_from_recording_not_event_time(anchor: str, half_life_days: int) -> None:
    """A fact recorded on day 400 about day 10 expires a lifetime after day 400: a fact
    stated today about the past is fresh knowledge of it."""
    e = fact("Porto", day=10, at=400, anchor=anchor, confidence=0.8)
    assert expiry(e, POLICY) == 400 * DAY + half_life_days * DAY + 1
    assert holds(e, POLICY, 400 * DAY + half_life_days * DAY)
    assert not holds(e, POLICY, 400 * DAY + half_life_days * DAY + 1)
    # Any earlier event time still sees it: the expiry closes the claim, it does not erase it.
    assert holds(e, POLICY, 10 * DAY)


@pytest.mark.parametrize("anchor", ["codebase_verified", "user_stated", "user_confirmed"])
def test_first_party_anchors_never_expire(anchor: str) -> None:
    """codebase_verified, user_stated and user_confirmed have no expiry at any age."""
    e = fact("Porto", day=0, anchor=anchor, confidence=0.41)
    assert expiry(e, POLICY) is None
    assert holds(e, POLICY, 100 * 365 * DAY)


def test_expiry_follows_the_policy() -> None:
    """Half-lives and min_confidence come from the policy in force."""
    policy = policy_from_mapping({"half_life_days": {"user_stated": 10}, "min_confidence": 0.45})
    e = fact("Porto", day=0, anchor="user_stated", confidence=0.9, policy=policy)
    assert expiry(e, policy) == 10 * DAY + 1
    assert expiry(e, POLICY) is None


def test_relayed_evidence_expires_at_its_capped_anchors_half_life() -> None:
    """A relayed user_stated fact counted as federation_received here halves every 30 days;
    its age counts from its origin's recording."""
    own = fact("Porto", day=0, confidence=0.8)
    relayed = replace(
        own, anchor_cap="federation_received", recorded_at=5 * DAY, origin_recorded_at=0
    )
    assert expiry(own, POLICY) is None
    assert expiry(relayed, POLICY) == 30 * DAY + 1


def test_a_confirmation_moves_the_expiry() -> None:
    """`confirmed_at` is the latest confirmation that counts here: the origin's or this
    node's; a view as known before one was received does not count it."""
    e = fact("Porto", day=0, anchor="llm_generated", confidence=0.8)
    later = Confirmation(e.evidence_id, "n1", 20 * DAY, received_at=20 * DAY)
    mine = Confirmation(e.evidence_id, "here", 25 * DAY, received_at=26 * DAY)
    other = Confirmation("f" * 32, "n1", 50 * DAY, received_at=50 * DAY)
    assert confirmed_at(e, [], POLICY, "here") == 0
    assert confirmed_at(e, [later, mine, other], POLICY, "here") == 25 * DAY
    assert confirmed_at(e, [later, mine], POLICY, "here", known_at=25 * DAY) == 20 * DAY
    assert confirmed_at(e, [later, mine], POLICY, "here", known_at=19 * DAY) == 0
    moved = replace(e, confirmed_at=25 * DAY)
    assert expiry(moved, POLICY) == 55 * DAY + 1


def test_a_member_confirms_no_more_than_its_cap_allows() -> None:
    """A member capped below the anchor the evidence counts as here cannot keep it alive;
    one capped at or above it can (specification §6)."""
    policy = replace(POLICY, member_caps={"low": "llm_generated", "high": "user_stated"})
    e = fact("Porto", day=0, anchor="agent_observed", confidence=0.8, policy=policy)
    low = Confirmation(e.evidence_id, "low", 10 * DAY, received_at=10 * DAY)
    high = Confirmation(e.evidence_id, "high", 5 * DAY, received_at=5 * DAY)
    assert confirmed_at(e, [low], policy, "here") == 0
    assert confirmed_at(e, [low, high], policy, "here") == 5 * DAY


def test_a_state_holding_leaves_out_expired_assertions_only() -> None:
    """`KeyState.holding` drops assertions past their expiry (the same state when none is),
    and says when the next one expires."""
    old = fact("Porto", day=0, anchor="llm_generated", confidence=0.8)
    young = fact("Lisbon", day=20, anchor="llm_generated", confidence=0.8)
    firm = fact("Faro", day=0, anchor="user_stated")
    state = KeyState((old, young, firm))
    assert state.holding(POLICY, 10 * DAY) is state
    assert state.holding(POLICY, 31 * DAY).evidence == (young, firm)
    assert state.next_expiry(POLICY, 0) == 30 * DAY + 1
    assert state.next_expiry(POLICY, 31 * DAY) == 50 * DAY + 1
    assert state.expired_between(POLICY, 0, 31 * DAY)
    assert not state.expired_between(POLICY, 31 * DAY, 40 * DAY)
