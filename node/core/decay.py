"""Forgetting: a claim's confidence decays from when it was last stated, and from its
expiry on it no longer holds (specification §6). Pure: no clock, no I/O."""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction

from factnode.core._model import Confirmation, Evidence, Instant
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


def confirmation_problem(c: Confirmation, now: Instant, skew: Instant) -> str:
    """Why a peer's confirmation is malformed or dated too far ahead of this node's clock
    (beyond the `skew` allowance: it would keep a claim alive past what its signer could
    know), or "" when it may be kept."""
    if len(c.evidence_id) != 32 or any(ch not in "0123456789abcdef" for ch in c.evidence_id):
        return "evidence ids must be 32 lowercase hex digits"
    if not c.signer or len(c.signer.encode("utf-8", "surrogatepass")) > 256:
        return "signer: must be a node id of 1 to 256 bytes"
    if c.confirmed_at > now + skew:
        return "confirmed_at: later than this node's clock allows"
    return ""


def latest_confirmations(held: Iterable[Confirmation]) -> list[Confirmation]:
    """Each signer's latest confirmation of each evidence (what it offers its peers: a
    later one replaces an earlier one everywhere), in (evidence, signer) order."""
    latest: dict[tuple[str, str], Confirmation] = {}
    for c in held:
        found = latest.get((c.evidence_id, c.signer))
        if found is None or c.confirmed_at > found.confirmed_at:
            latest[(c.evidence_id, c.signer)] = c
    return [latest[k] for k in sorted(latest)]


def counts(c: Confirmation, e: Evidence, policy: Policy, node_id: str) -> bool:
    """Whether confirmation `c` extends `e`'s life on node `node_id`: signed by its origin,
    by this node (a client with write rights restated it here), or by a member whose cap
    here is at least the anchor `e` counts as (specification §6)."""
    if c.evidence_id != e.evidence_id:
        return False
    if c.signer in (e.origin_node, node_id):
        return True
    cap = policy.anchors[policy.cap_for(c.signer)]
    return cap >= policy.anchor_value(e.attribution, e.anchor_cap)


def confirmed_at(
    e: Evidence,
    confirmations: Iterable[Confirmation],
    policy: Policy,
    node_id: str,
    known_at: Instant | None = None,
) -> Instant:
    """When `e` was last stated, as known at `known_at` (unset: all held): its first
    recording, or the latest confirmation that counts here and was held by then."""
    latest = e.first_recorded_at
    for c in confirmations:
        if (known_at is None or c.received_at <= known_at) and counts(c, e, policy, node_id):
            latest = max(latest, c.confirmed_at)
    return latest


# Digits enough that rounding cannot move the floor of half_life x log2(ratio): that product
# is irrational unless the ratio is a power of two, which `lifetime` handles in integers.
_DIGITS = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN)


@functools.lru_cache(maxsize=4096)
def lifetime(confidence_milli: int, min_milli: int, half_life: Instant) -> Instant:
    """The smallest age d (µs) at which confidence x 0.5^(d / half_life) < min_confidence:
    floor(half_life x log2(confidence / min)) + 1, in integer and correctly rounded decimal
    arithmetic, so every node gets the same integer. 0 when the confidence is below the
    minimum already."""
    if confidence_milli < min_milli:
        return 0
    ratio = Fraction(confidence_milli, min_milli)
    exponent = ratio.numerator.bit_length() - 1
    if ratio.denominator == 1 and ratio.numerator == 1 << exponent:
        return half_life * exponent + 1  # a power of two: log2 is the integer exponent
    with decimal.localcontext(_DIGITS):
        log2 = (Decimal(confidence_milli) / Decimal(min_milli)).ln() / Decimal(2).ln()
        return int((Decimal(half_life) * log2).to_integral_value(decimal.ROUND_FLOOR)) + 1


def expiry(e: Evidence, policy: Policy, confirmed: Instant | None = None) -> Instant | None:
    """The first instant at which `e` no longer holds: its effective confidence,
    confidence x 0.5^((t - confirmed) / half_life[the anchor it counts as here]), is below
    `min_confidence`. None for an anchor that never decays. `confirmed` (`confirmed_at`)
    defaults to what the evidence carries; age never counts from the event time."""
    half_life = policy.half_life_micros(decays_as(e, policy))
    if half_life is None:
        return None
    start = e.confirmed if confirmed is None else confirmed
    return start + lifetime(e.confidence_milli, policy.min_confidence_milli, half_life)


def holds(e: Evidence, policy: Policy, at: Instant, confirmed: Instant | None = None) -> bool:
    """Whether `e` still holds at event time `at`: `at` is before its expiry."""
    end = expiry(e, policy, confirmed)
    return end is None or at < end


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
