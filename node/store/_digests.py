"""The sync reads: everything held (for digests) and what lies under digest buckets."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator

from sqlalchemy import LargeBinary, cast, func, literal, or_, select

from factnode.core import Evidence
from factnode.core.consensus import Vote
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.receipts import Receipt
from factnode.store._part import TransactionPart
from factnode.store._rows import (
    _ACTIVE,
    _EVIDENCE_STATUS,
    _SELECT_ERASED_IDS,
    _SELECT_ERASURES,
    _SELECT_EVIDENCE,
    _SELECT_VOTES,
    EB,
    ER,
    RC,
    E,
    _evidence,
    _vote,
)
from factnode.store._sqltext import select_in, select_pairs, select_under
from factnode.store.repository import Tombstone

# The evidence columns that hold text a client or peer gave (`core.quarantine.text_fields`).
_TEXT_COLUMNS = (
    "namespace", "subject", "predicate", "object", "attribution", "source", "origin_node",
    "corrects", "contradicts_namespace", "contradicts_subject", "contradicts_predicate",
    "anchor_cap",
)  # fmt: skip


class SqlDigests(TransactionPart):
    """The sync part of a transaction: reads for digests and buckets."""

    def all_evidence_ids(self) -> Iterator[str]:
        """Active evidence only: peers never compare or receive decayed or rejected evidence."""
        yield from self._c.scalars(select(E.c.evidence_id).where(E.c.status == _ACTIVE.value))

    def evidence_breaking_text_rule(self) -> list[Evidence]:
        """Active evidence holding a NUL in a text column, as SQLite stored it before the text
        rule: what the node quarantines when it opens the store. PostgreSQL's text cannot
        hold a NUL, and neither backend stores a lone surrogate, so there nothing is read."""
        if self._c.dialect.name != "sqlite":
            return []
        nul = literal(b"\x00", LargeBinary)
        breaks = or_(*(func.instr(cast(E.c[name], LargeBinary), nul) > 0 for name in _TEXT_COLUMNS))
        rows = self._c.execute(_SELECT_EVIDENCE.where(breaks))
        return [_evidence(r) for r in rows if r[_EVIDENCE_STATUS] == _ACTIVE]

    def all_erasure_ids(self) -> Iterator[str]:
        yield from self._c.scalars(select(ER.c.erasure_id))

    def all_votes(self) -> Iterator[Vote]:
        for r in self._c.execute(_SELECT_VOTES):
            yield _vote(r)

    def evidence_under(self, prefixes: Collection[str]) -> list[Evidence]:
        rows = select_under(self._c, _SELECT_EVIDENCE, "evidence.evidence_id", prefixes)
        return [_evidence(r) for r in rows if r[_EVIDENCE_STATUS] == _ACTIVE]

    def tombstones_under(self, prefixes: Collection[str]) -> list[Tombstone]:
        found = [
            r._mapping
            for r in select_under(self._c, _SELECT_ERASURES, "erasure.erasure_id", prefixes)
        ]
        erased: dict[str, list[str]] = defaultdict(list)
        for erasure_id, evidence_id in select_in(
            self._c,
            _SELECT_ERASED_IDS,
            "erased_evidence.erasure_id",
            {m["erasure_id"] for m in found},
        ):
            erased[erasure_id].append(evidence_id)
        return [
            Tombstone(
                m["erasure_id"],
                m["scope"],
                m["scope_hash"],
                m["erased_at"],
                m["operator"],
                m["reason"],
                tuple(sorted(erased[m["erasure_id"]])),
                m["origin_node"] or "",
                bytes(m["signature"]) if m["signature"] else b"",
            )
            for m in found
        ]

    def all_erasure_bounds(self) -> Iterator[ErasureBound]:
        for erasure_id, node_id, bound_at in self._c.execute(
            select(EB.c.erasure_id, EB.c.node_id, EB.c.bound_at)
        ):
            yield ErasureBound(erasure_id, node_id, bound_at)

    def all_receipts(self) -> Iterator[Receipt]:
        for erasure_id, node_id, applied_at, removed in self._c.execute(
            select(RC.c.erasure_id, RC.c.node_id, RC.c.applied_at, RC.c.removed)
        ):
            yield Receipt(erasure_id, node_id, applied_at, removed)

    def all_receipts_signed(self) -> list[Receipt]:
        """Every receipt held, with its signature (this node's own: none, signed as offered)."""
        return self.receipts_under([""])

    def receipts_under(self, prefixes: Collection[str]) -> list[Receipt]:
        rows = select_under(self._c, select(RC), "erasure_receipt.erasure_id", prefixes)
        return [Receipt(r[0], r[1], r[2], r[3], bytes(r[4]) if r[4] else b"") for r in rows]

    def bounds_under(self, prefixes: Collection[str]) -> list[ErasureBound]:
        rows = select_under(self._c, select(EB), "erasure_bound.erasure_id", prefixes)
        return [ErasureBound(r[0], r[1], r[2], bytes(r[3]) if r[3] else b"") for r in rows]

    def votes_of(self, items: Collection[tuple[str, str]]) -> list[Vote]:
        # By primary key, one index search per pair (`select_pairs`): a pull's answer wants
        # a few voters' votes on each key, and a key holds every member's.
        pairs = {(voter, key_id) for key_id, voter in items}
        return [
            _vote(row)
            for row in select_pairs(self._c, _SELECT_VOTES, "vote", ("voter", "key_id"), pairs)
        ]

    def votes_under(self, voter: str | None, prefixes: Collection[str]) -> list[Vote]:
        fixed = [] if voter is None else [("vote.voter", voter)]
        rows = select_under(self._c, _SELECT_VOTES, "vote.key_id", prefixes, fixed)
        return [_vote(r) for r in rows]
