"""When an erasure dated beyond a node's clock covers that node's evidence (specification §6).

An erasure covers evidence in its scope recorded at or before its `erased_at`. A tombstone
whose `erased_at` lies beyond a receiver's clock plus the skew allowance would block that
scope's later writes until then, perhaps for ever. So the receiver records a **bound**: a
statement, signed by itself, that it applied the erasure at its own clock's `bound_at`. The
bound gossips like the tombstone and says when the erasure takes effect for the evidence
the bounding node originates: what it recorded up to `bound_at` (by its own clock) is
covered; what it recorded after (after it learned of the erasure) is a later write.

Every comparison a bound decides is between two readings of one node's clock, so no clock
skew, ahead or behind, keeps erased data alive or blocks a node's later writes; a bound
changes the coverage of its signer's evidence only, which that signer could escape anyway by
dating its evidence, so a bound gives a member no power over anyone else's. Coverage is a
function of the tombstone and the set of bounds held, and bounds only grow (one per node and
erasure, the lowest kept), so every node holding the same items judges alike.

Pure: times come in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from factnode.core._model import Instant
from factnode.core.validation import (
    FieldViolation,
    _is_id,
    check_instant,
    check_node_id,
    describe_violations,
)


@dataclass(frozen=True, slots=True)
class ErasureBound:
    """`node` applied erasure `erasure_id` at `bound_at` by its own clock, which the
    erasure's `erased_at` lay beyond (plus the allowance); signed by `node`."""

    erasure_id: str
    node: str
    bound_at: Instant
    signature: bytes = b""

    @property
    def item_id(self) -> str:
        """Its id among the tombstones peers compare: its erasure's id, then its node."""
        return f"{self.erasure_id}/{self.node}"


def bound_on_arrival(erased_at: Instant, now: Instant, skew: int) -> Instant | None:
    """The bound a node records on applying a peer's erasure: its clock `now` when the
    erasure is dated beyond `now` plus the allowance `skew`; None otherwise (the erasure
    takes effect at its own time)."""
    return now if erased_at > now + skew else None


def effective_erased_at(erased_at: Instant, bounds: Mapping[str, Instant], origin: str) -> Instant:
    """When an erasure takes effect for evidence that `origin` originated: at the bound
    `origin` signed for it, if held and earlier, else at its `erased_at`."""
    bound = bounds.get(origin) if origin else None
    return erased_at if bound is None else min(erased_at, bound)


def covers_recorded(
    erased_at: Instant, bounds: Mapping[str, Instant], origin: str, recorded_at: Instant
) -> bool:
    """A key or subject erasure covers evidence in its scope that `origin` recorded at
    `recorded_at` (its own clock): recorded at or before the erasure took effect for it."""
    return recorded_at <= effective_erased_at(erased_at, bounds, origin)


def lowest_bounds(bounds: Mapping[str, Instant], more: Mapping[str, Instant]) -> dict[str, Instant]:
    """Two sets of one erasure's bounds (by node) merged: each node's lowest. Order-independent
    and idempotent, so nodes that hold the same bounds agree whatever order they came in."""
    out = dict(bounds)
    for node, at in more.items():
        out[node] = at if node not in out else min(out[node], at)
    return out


def lowered_bounds(
    held: Mapping[str, Mapping[str, Instant]], bounds: Sequence[ErasureBound]
) -> list[ErasureBound]:
    """Of `bounds`, those that change what is held (`held`: each erasure's bounds by node),
    one per erasure and node: the lowest, where it is new or lower than the one held."""
    changed: dict[tuple[str, str], ErasureBound] = {}
    for b in bounds:
        before = changed.get((b.erasure_id, b.node))
        mine = held.get(b.erasure_id, {})
        if lowest_bounds(mine, {b.node: b.bound_at}) == mine or (
            before is not None and before.bound_at <= b.bound_at
        ):
            continue
        changed[(b.erasure_id, b.node)] = b
    return list(changed.values())


def bound_problem(b: ErasureBound) -> str:
    """Why a peer's erasure bound is malformed, or "" when it may be kept."""
    if not _is_id(b.erasure_id):
        return "erasure ids must be 32 lowercase hex digits"
    out: list[FieldViolation] = []
    check_node_id(out, "node", b.node)
    check_instant(out, "bound_at", b.bound_at)
    return describe_violations(out)
