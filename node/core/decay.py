"""Forgetting: confidence decays with age, and cold evidence becomes a tombstone."""

from __future__ import annotations

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


def effective_confidence_milli(e: Evidence, policy: Policy, now: Instant) -> int:
    """Confidence x 0.5^(age / half_life[anchor]), age counted from the event time."""
    fresh = freshness_milli(now - e.valid_from, policy.half_life_micros(e.attribution))
    return e.confidence_milli * fresh // 1000


def is_cold(e: Evidence, policy: Policy, now: Instant) -> bool:
    """Evidence whose effective confidence fell below `min_confidence` leaves beliefs."""
    return effective_confidence_milli(e, policy, now) < policy.min_confidence_milli


def cold_evidence(evidence: Iterable[Evidence], policy: Policy, now: Instant) -> list[str]:
    """Ids of the evidence the decay step turns into tombstones, in id order."""
    return sorted(e.evidence_id for e in evidence if is_cold(e, policy, now))
