"""Forgetting: confidence decays with age, and cold evidence becomes a tombstone."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

from factnode.core._model import Evidence, Instant
from factnode.core.policy import Policy


def freshness_milli(age: Instant, half_life: Instant | None) -> int:
    """0.5^(age / half_life) in integer thousandths; 1000 for no decay or no age."""
    if half_life is None or age <= 0:
        return 1000
    # float ** float is typed Any (a negative base could give a complex); this one is a float.
    factor: float = 0.5 ** (age / half_life)
    return math.floor(1000 * factor)


def decays_as(e: Evidence, policy: Policy) -> str:
    """The anchor whose half-life applies: relayed evidence decays as the anchor it counts
    as on this node (its cap), when that ranks below its attribution."""
    cap = e.anchor_cap
    if cap is not None and policy.anchors[cap] < policy.anchors[e.attribution]:
        return cap
    return e.attribution


def effective_confidence_milli(e: Evidence, policy: Policy, now: Instant) -> int:
    """Confidence x 0.5^(age / half_life[anchor]), age counted from the event time."""
    fresh = freshness_milli(now - e.valid_from, policy.half_life_micros(decays_as(e, policy)))
    return e.confidence_milli * fresh // 1000


def is_cold(e: Evidence, policy: Policy, now: Instant) -> bool:
    """Evidence whose effective confidence fell below `min_confidence` leaves beliefs."""
    return effective_confidence_milli(e, policy, now) < policy.min_confidence_milli


def cold_evidence(evidence: Iterable[Evidence], policy: Policy, now: Instant) -> list[str]:
    """Ids of the evidence the decay step turns into tombstones, in id order."""
    return sorted(e.evidence_id for e in evidence if is_cold(e, policy, now))


PPM = 1_000_000
# F(r, h) below carries this many extra bits, so one floor at the end is the only rounding.
_GUARD_BITS = 64


def freshness_ppm(age_hours: int, half_life_hours: int) -> int:
    """max(1, floor(10^6 x 0.5^(age / half_life))) for whole hours, in exact integers.

    Every node evaluating the same age gets the same integer: no float decides it. It never
    reaches zero, so a fact every node agrees on stays adopted however old it is."""
    if half_life_hours <= 0:
        raise ValueError("half_life_hours must be positive")
    if age_hours <= 0:
        return PPM
    whole, part = divmod(age_hours, half_life_hours)
    # floor(floor(x) / 2^m) == floor(x / 2^m): the shift loses nothing beyond the one floor.
    return max(1, _scaled_fraction(part, half_life_hours) >> (_GUARD_BITS + whole))


@functools.lru_cache(maxsize=8192)
def _scaled_fraction(part: int, half_life: int) -> int:
    """floor(10^6 x 2^64 x 2^(-part / half_life)): the largest n with
    n^half_life x 2^part <= (10^6 x 2^64)^half_life, found by exact integer search."""
    scale = PPM << _GUARD_BITS
    bound = scale**half_life
    guess = int(scale * 2.0 ** (-part / half_life))
    lo, hi = max(0, guess - (1 << 40)), min(scale, guess + (1 << 40))
    if lo**half_life << part > bound:
        lo = 0
    if (hi + 1) ** half_life << part <= bound:
        hi = scale
    while lo < hi:  # invariant: lo fits, hi + 1 does not (or hi is the answer)
        mid = (lo + hi + 1) // 2
        if mid**half_life << part <= bound:
            lo = mid
        else:
            hi = mid - 1
    return lo
