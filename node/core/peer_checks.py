"""Checks on what a peer sends: tombstones and votes are checked, never believed.

Pure: the caller passes the evidence it holds; each check returns "" when the item may be
applied, or the reason it is refused (reported back to the peer item by item).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Protocol

from factnode.core._model import Evidence, Instant
from factnode.core.consensus import Vote, latest_votes
from factnode.core.policy import Policy
from factnode.core.validation import (
    FieldViolation,
    _is_id,
    check_instant,
    check_key,
    check_node_id,
    describe_violations,
    quoted,
    text_problem,
)

ERASURE_SCOPES = ("evidence", "key", "subject")


class ErasureRecord(Protocol):
    """The parts of an erasure tombstone a receiver checks."""

    @property
    def erasure_id(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def scope_hash(self) -> str: ...
    @property
    def erased_at(self) -> Instant: ...
    @property
    def evidence_ids(self) -> tuple[str, ...]: ...
    @property
    def origin_node(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def reason(self) -> str: ...


def tombstone_problem(t: ErasureRecord) -> str:
    """Why a peer's tombstone is malformed, or "" when it may be applied (its time bounded as
    `erasure_bounds` says, its origin checked by `erasure_refusal`)."""
    if t.scope not in ERASURE_SCOPES:
        return f"unknown erasure scope {quoted(t.scope)}"
    if (
        not _is_id(t.erasure_id)
        or not _is_id(t.scope_hash)
        or not all(_is_id(i) for i in t.evidence_ids)
    ):
        return "erasure ids must be 32 lowercase hex digits"
    out: list[FieldViolation] = []
    for name, text in (("operator", t.operator), ("reason", t.reason)):
        problem = text_problem(text)
        if problem:
            out.append(FieldViolation(name, problem))
    check_instant(out, "erased_at", t.erased_at)
    if t.origin_node:  # older peers send none
        check_node_id(out, "origin_node", t.origin_node)
    return describe_violations(out)


@dataclass(frozen=True, slots=True)
class ErasureGrant:
    """Erasures this node accepts from one member (`node`, a glob: "*" is every member) for
    the namespaces matching `namespaces` (globs)."""

    node: str
    namespaces: tuple[str, ...] = ("*",)


# The default: erasures replicate (specification §6), so every member's are applied, each logged.
ACCEPT_ALL_ERASURES: tuple[ErasureGrant, ...] = (ErasureGrant("*", ("*",)),)


def erasure_refusal(
    grants: Sequence[ErasureGrant], origin: str, relay: str, namespaces: Collection[str] | None
) -> str:
    """Why a peer's tombstone is not applied here by the grants, or "" when it may be.

    Both the node where the erasure was made (`origin`, as the tombstone names it) and the
    peer that delivered it (`relay`, as its certificate proves) must be granted every
    namespace it covers (a node that checks signatures has checked the origin's signature).
    `namespaces` are those of the evidence it covers here; None when it covers nothing held
    here, which only a grant of every namespace ("*") accepts, since nothing here says which
    namespace it is in."""
    for who, role in ((origin or relay, "the node where it was made"), (relay, "the relay")):
        patterns = [p for g in grants if fnmatchcase(who, g.node) for p in g.namespaces]
        if not patterns:
            return f"this node accepts no erasures from {who} ({role})"
        if namespaces is None:
            if "*" not in patterns:
                return (
                    "it covers nothing this node holds, so its namespace cannot be checked "
                    f"against the namespaces it accepts erasures for from {who}"
                )
            continue
        if any(not any(fnmatchcase(ns, p) for p in patterns) for ns in namespaces):
            return f"it covers a namespace this node accepts no erasures for from {who} ({role})"
    return ""


def vote_problem(v: Vote, policy: Policy, now: Instant) -> str:
    """Why a peer's vote is refused outright, or "" when it may be kept. A kept vote counts
    only as `counted_vote` weighs it, from evidence held here."""
    out: list[FieldViolation] = []
    check_key(out, v.key)
    check_instant(out, "fresh_since", v.fresh_since)
    check_instant(out, "cast_at", v.cast_at)
    if out:
        return describe_violations(out)
    if not 0 <= v.worth_milli <= 1000 or not 0 <= v.anchor <= max(policy.anchors.values()):
        return "vote weight out of range"
    if v.seq == 0 and v.cast_at > now + policy.clock_skew_micros:
        # An unnumbered vote is ordered by its time; a numbered one by its number alone, so
        # a voter's clock running ahead neither loses nor freezes its vote (specification §7).
        return "cast_at lies in this node's future"
    if not 0 <= v.seq < 2**63:
        return "vote sequence number out of range"
    if v.version_id is not None and not (_is_id(v.version_id) and _is_id(v.evidence_id)):
        return "version_id and evidence_id must be 32 lowercase hex digits"
    return ""


def latest_per_key(votes: Iterable[Vote]) -> list[Vote]:
    """One vote per (voter, key): the latest cast, whatever order they arrived in."""
    by_key: dict[tuple[str, object], list[Vote]] = {}
    for v in votes:
        by_key.setdefault((v.voter, v.key), []).append(v)
    return [next(iter(latest_votes(group).values())) for group in by_key.values()]


def counted_vote(v: Vote, held: Mapping[str, Evidence], policy: Policy) -> Vote | None:
    """A peer's vote as this node counts it, or None while it cannot count.

    Checked, never believed: the vote must rest on active evidence held here for the voted
    version (until that evidence arrives the vote waits); its worth and freshness come from
    that evidence and its anchor is at most what the table gives the evidence's attribution.
    An abstention counts as it is."""
    if v.version_id is None:
        return v
    e = held.get(v.evidence_id)
    if e is None or e.key != v.key or e.version_id != v.version_id:
        return None
    anchor = min(v.anchor, policy.anchors.get(e.attribution, 0))
    if (anchor, e.worth_milli, e.valid_from) == (v.anchor, v.worth_milli, v.fresh_since):
        return v
    return replace(v, anchor=anchor, worth_milli=e.worth_milli, fresh_since=e.valid_from)
