"""Checks on what a peer sends: tombstones and votes are checked, never believed.

Pure: the caller passes the evidence it holds; each check returns "" when the item may be
applied, or the reason it is refused (reported back to the peer item by item).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from factnode.core._model import Evidence, Instant
from factnode.core.consensus import Vote
from factnode.core.policy import Policy
from factnode.core.validation import (
    FieldViolation,
    _is_id,
    check_instant,
    check_key,
    check_node_id,
    describe_violations,
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


def tombstone_problem(t: ErasureRecord) -> str:
    """Why a peer's tombstone is refused, or "" when it may be applied."""
    if t.scope not in ERASURE_SCOPES:
        return f"unknown erasure scope {t.scope!r}"
    if (
        not _is_id(t.erasure_id)
        or not _is_id(t.scope_hash)
        or not all(_is_id(i) for i in t.evidence_ids)
    ):
        return "erasure ids must be 32 lowercase hex digits"
    out: list[FieldViolation] = []
    check_instant(out, "erased_at", t.erased_at)
    if t.origin_node:  # older peers send none
        check_node_id(out, "origin_node", t.origin_node)
    return describe_violations(out)


def vote_problem(v: Vote, held: Mapping[str, Evidence], policy: Policy) -> str:
    """Why a peer's vote is refused, or "" when it may be counted."""
    out: list[FieldViolation] = []
    check_key(out, v.key)
    check_instant(out, "fresh_since", v.fresh_since)
    if out:
        return describe_violations(out)
    if not 0 <= v.worth_milli <= 1000 or not 0 <= v.anchor <= max(policy.anchors.values()):
        return "vote weight out of range"
    if v.version_id is None:
        return ""
    e = held.get(v.evidence_id)
    if e is None or e.key != v.key or e.version_id != v.version_id:
        return "unknown version: the vote does not rest on evidence this node holds"
    return ""
