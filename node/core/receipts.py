"""Erasure receipts: every member that applies a tombstone says so, signed (specification §6,
"Erasure receipts"), so a node can show which members have forgotten and which have not yet.

A receipt names the erasure, the member, when that member applied it (by its own clock) and
how many pieces of evidence it removed (zero is an answer: it held none). Receipts travel
like votes: signed by the member they name, carried unchanged through any relay, refused
item by item when malformed, unsigned, badly signed or from a revoked member. Of one
member's receipts for one erasure the latest counts: a restored member that erases again
what a backup brought back signs a new one.

Coverage is a pure function of the members known, which of them are revoked, and the
receipts held: a current member without a receipt is waited for; a revoked member is not
(it is shown as revoked). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from factnode.core._model import Instant
from factnode.core.validation import (
    FieldViolation,
    _is_id,
    check_instant,
    check_node_id,
    describe_violations,
)

# Largest `removed` a receipt may state (a count of evidence rows, far below 2^63).
MAX_REMOVED = 2**53


@dataclass(frozen=True, slots=True)
class Receipt:
    """`node` applied erasure `erasure_id` at `applied_at` by its own clock and removed
    `removed` pieces of evidence; signed by `node` (b"": this node's own, signed as offered)."""

    erasure_id: str
    node: str
    applied_at: Instant
    removed: int
    signature: bytes = b""

    @property
    def item_id(self) -> str:
        """Its id among the receipts peers compare: its erasure's id, then its node."""
        return f"{self.erasure_id}/{self.node}"


def receipt_problem(r: Receipt) -> str:
    """Why a peer's receipt is malformed, or "" when it may be kept."""
    if not _is_id(r.erasure_id):
        return "erasure ids must be 32 lowercase hex digits"
    out: list[FieldViolation] = []
    check_node_id(out, "node", r.node)
    check_instant(out, "applied_at", r.applied_at)
    if not 0 <= r.removed <= MAX_REMOVED:
        out.append(FieldViolation("removed", f"must be a count from 0 to {MAX_REMOVED}"))
    return describe_violations(out)


def newer_receipts(held: Mapping[str, Receipt], receipts: Sequence[Receipt]) -> list[Receipt]:
    """Of `receipts`, those that change what is held (`held`: by `item_id`): one per erasure
    and member, the latest, where it is new or later than the one held. Order-independent:
    nodes holding the same receipts keep the same ones."""
    out: dict[str, Receipt] = {}
    for r in receipts:
        best = out.get(r.item_id) or held.get(r.item_id)
        if best is None or (r.applied_at, r.removed) > (best.applied_at, best.removed):
            out[r.item_id] = r
    return [r for item, r in out.items() if held.get(item) != r]


@dataclass(frozen=True, slots=True)
class Coverage:
    """Which members have confirmed an erasure: their receipts, the current members still
    waited for, and the revoked members (not waited for)."""

    erasure_id: str
    confirmed: tuple[Receipt, ...]
    waiting: tuple[str, ...]
    revoked: tuple[str, ...]

    @property
    def complete(self) -> bool:
        """Every current member has confirmed."""
        return not self.waiting

    @property
    def members(self) -> int:
        """The current members counted: those confirmed (not revoked) and those waited for."""
        return len([r for r in self.confirmed if r.node not in self.revoked]) + len(self.waiting)

    def summary(self) -> str:
        """E.g. "confirmed by 7 of 9 members; waiting: n4, n8"."""
        current = len([r for r in self.confirmed if r.node not in self.revoked])
        text = f"confirmed by {current} of {self.members} members"
        if self.waiting:
            text += "; waiting: " + ", ".join(self.waiting)
        if self.revoked:
            text += "; revoked: " + ", ".join(self.revoked)
        return text


def coverage(erasure_id: str, members: Mapping[str, bool], receipts: Iterable[Receipt]) -> Coverage:
    """The coverage of an erasure: `members` maps every member known (this node included)
    to whether it is revoked; `receipts` are the erasure's held receipts. A member with a
    receipt is confirmed (a revoked one's receipt is kept and shown, not counted); a current
    member without one is waited for."""
    mine = {r.node: r for r in receipts if r.erasure_id == erasure_id}
    revoked = tuple(sorted(n for n, is_revoked in members.items() if is_revoked))
    waiting = tuple(
        sorted(n for n, is_revoked in members.items() if not is_revoked and n not in mine)
    )
    confirmed = tuple(sorted(mine.values(), key=lambda r: (r.applied_at, r.node)))
    return Coverage(erasure_id, confirmed, waiting, revoked)
