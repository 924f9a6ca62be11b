"""Erasure: what a scope covers, overwriting and removing it, and the tombstones left."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from factnode.core import (
    Evidence,
    Instant,
    Key,
    ids,
)
from factnode.core.erasure_bounds import ErasureBound, covers_recorded
from factnode.core.receipts import Receipt
from factnode.store._decisions import keep_highest_seq
from factnode.store._part import TransactionPart
from factnode.store._rows import (
    _SELECT_EVIDENCE,
    BC,
    EB,
    EE,
    ER,
    RC,
    ST,
    D,
    E,
    P,
    _evidence,
)
from factnode.store._signatures import ES
from factnode.store._sqltext import scalar, select_in
from factnode.store.repository import (
    Tombstone,
    chunks,
)

ANY_ERASURE = "SELECT 1 FROM erasure LIMIT 1"  # whether erased evidence must be looked for


class SqlTombstones(TransactionPart):
    """The erasure part of a transaction: scopes, overwriting and tombstones."""

    def erased(self, evidence: Sequence[Evidence]) -> set[str]:
        if not evidence or scalar(self._c, ANY_ERASURE) is None:
            return set()
        out: set[str] = set()
        for part in chunks(sorted({e.evidence_id for e in evidence})):
            out.update(self._c.scalars(select(EE.c.evidence_id).where(EE.c.evidence_id.in_(part))))
        # Evidence recorded before a key or subject erasure took effect for its origin never
        # comes back (`core.erasure_bounds`).
        scopes = {ids.key_id(e.key) for e in evidence} | {
            ids.subject_id(e.key.namespace, e.key.subject) for e in evidence
        }
        by_scope: dict[str, list[tuple[str, int]]] = {}
        for part in chunks(sorted(scopes)):
            for erasure_id, scope_hash, erased_at in self._c.execute(
                select(ER.c.erasure_id, ER.c.scope_hash, ER.c.erased_at).where(
                    ER.c.scope_hash.in_(part), ER.c.scope.in_(("key", "subject"))
                )
            ):
                by_scope.setdefault(scope_hash, []).append((erasure_id, erased_at))
        bounds = self.erasure_bounds({i for found in by_scope.values() for i, _ in found})
        for e in evidence:
            for scope in (ids.key_id(e.key), ids.subject_id(e.key.namespace, e.key.subject)):
                if any(
                    covers_recorded(at, bounds.get(i, {}), e.origin_node, e.first_recorded_at)
                    for i, at in by_scope.get(scope, ())
                ):
                    out.add(e.evidence_id)
        return out

    def evidence_in_scope(
        self, scope: str, evidence_id: str | None, key: Key | None, subject: tuple[str, str] | None
    ) -> list[Evidence]:
        if scope == "evidence":
            cond = E.c.evidence_id == evidence_id
        elif scope == "key":
            assert key is not None
            cond = E.c.key_id == ids.key_id(key)
        else:
            assert subject is not None
            # By its hash, which ix_evidence_subject_id serves (and peers' tombstones use).
            cond = E.c.subject_id == ids.subject_id(*subject)
        return [_evidence(r) for r in self._c.execute(_SELECT_EVIDENCE.where(cond))]

    def erase(
        self, evidence_ids: Collection[str], held_by: Collection[Key], forget_keys: Collection[Key]
    ) -> None:
        """Overwrites values and sources in place, then removes the rows and the decisions
        about them (found under `held_by`, the keys the erased evidence belongs to).

        For `forget_keys` (erasure by key or subject) the key's log rows go too, so
        not even the key text stays behind; its id leaves the touch log as well (this write
        logs that everything changed, so no replica misses what those rows said).
        """
        self._forget()
        keep_highest_seq(self._c)
        doomed = set(evidence_ids)
        decided: list[int] = []
        for part in chunks(sorted(ids.key_id(k) for k in held_by)):
            q = select(D.c.seq, D.c.evidence_id).where(D.c.key_id.in_(part))
            decided.extend(seq for seq, eid in self._c.execute(q) if eid in doomed)
        for seqs in chunks(decided):
            self._c.execute(delete(D).where(D.c.seq.in_(seqs)))
        for part in chunks(sorted(doomed)):
            # Overwrite first: every page that held the text is rewritten, not just unlinked.
            self._c.execute(
                update(E)
                .where(E.c.evidence_id.in_(part))
                .values(object="", source="", idempotency_key=None, corrects=None)
            )
            self._c.execute(delete(E).where(E.c.evidence_id.in_(part)))
            self._c.execute(delete(ES).where(ES.c.evidence_id.in_(part)))
        for part in chunks(sorted(ids.key_id(k) for k in forget_keys)):
            for table in (D, BC, P, ST):
                self._c.execute(delete(table).where(table.c.key_id.in_(part)))

    def add_tombstone(self, tombstone: Tombstone) -> None:
        """Records an erasure; one already recorded (the same scope, instant and node: a
        repeated request) only gains the evidence ids it did not list yet."""
        if tombstone.erasure_id in self.known_erasures([tombstone.erasure_id]):
            self._add_erased_ids(tombstone)
            return
        self._c.execute(
            insert(ER),
            {
                "erasure_id": tombstone.erasure_id,
                "scope": tombstone.scope,
                "scope_hash": tombstone.scope_hash,
                "erased_at": tombstone.erased_at,
                "operator": tombstone.operator,
                "reason": tombstone.reason,
                "evidence_count": len(tombstone.evidence_ids),
                "origin_node": tombstone.origin_node or None,
                "signature": tombstone.signature or None,
            },
        )
        self._add_erased_ids(tombstone)

    def _add_erased_ids(self, tombstone: Tombstone) -> None:
        known = self.erased_ids(tombstone.evidence_ids)
        fresh = [e for e in tombstone.evidence_ids if e not in known]
        if fresh:
            self._c.execute(
                insert(EE), [{"evidence_id": e, "erasure_id": tombstone.erasure_id} for e in fresh]
            )

    def erased_keys(self, keys: Collection[Key]) -> set[Key]:
        """The keys among `keys` that a key or subject erasure held here covers."""
        if not keys or scalar(self._c, ANY_ERASURE) is None:
            return set()
        scopes: dict[str, set[Key]] = {}
        for k in keys:
            scopes.setdefault(ids.key_id(k), set()).add(k)
            scopes.setdefault(ids.subject_id(k.namespace, k.subject), set()).add(k)
        out: set[Key] = set()
        for part in chunks(sorted(scopes)):
            for scope_hash in self._c.scalars(
                select(ER.c.scope_hash).where(
                    ER.c.scope_hash.in_(part), ER.c.scope.in_(("key", "subject"))
                )
            ):
                out |= scopes[scope_hash]
        return out

    def erased_ids(self, evidence_ids: Collection[str]) -> set[str]:
        out: set[str] = set()
        for part in chunks(sorted(evidence_ids)):
            out.update(self._c.scalars(select(EE.c.evidence_id).where(EE.c.evidence_id.in_(part))))
        return out

    def known_erasures(self, erasure_ids: Collection[str]) -> set[str]:
        out: set[str] = set()
        for part in chunks(sorted(erasure_ids)):
            out.update(self._c.scalars(select(ER.c.erasure_id).where(ER.c.erasure_id.in_(part))))
        return out

    def evidence_covered(self, tombstone: Tombstone) -> list[Evidence]:
        """Stored evidence a replicated erasure covers: its ids, or its scope recorded before it
        took effect for the evidence's origin (`core.erasure_bounds`, with the bounds held)."""
        found = [
            _evidence(r)
            for r in select_in(
                self._c, _SELECT_EVIDENCE, "evidence.evidence_id", set(tombstone.evidence_ids)
            )
        ]
        if tombstone.scope in ("key", "subject"):
            col = E.c.key_id if tombstone.scope == "key" else E.c.subject_id
            q = _SELECT_EVIDENCE.where(
                col == tombstone.scope_hash,
                func.coalesce(E.c.origin_recorded_at, E.c.recorded_at) <= tombstone.erased_at,
            )
            seen = {e.evidence_id for e in found}
            bounds = self.erasure_bounds([tombstone.erasure_id]).get(tombstone.erasure_id, {})
            found += [
                e
                for e in (_evidence(r) for r in self._c.execute(q))
                if e.evidence_id not in seen
                and covers_recorded(tombstone.erased_at, bounds, e.origin_node, e.first_recorded_at)
            ]
        return found

    def erasure_bounds(self, erasure_ids: Collection[str]) -> dict[str, dict[str, Instant]]:
        """The bounds held for each of `erasure_ids`, by the node that signed each."""
        out: dict[str, dict[str, Instant]] = {}
        for part in chunks(sorted(erasure_ids)):
            for erasure_id, node_id, bound_at in self._c.execute(
                select(EB.c.erasure_id, EB.c.node_id, EB.c.bound_at).where(
                    EB.c.erasure_id.in_(part)
                )
            ):
                out.setdefault(erasure_id, {})[node_id] = bound_at
        return out

    def put_erasure_bounds(self, bounds: Sequence[ErasureBound]) -> None:
        """Stores each bound as its erasure's and node's (one per pair; which bounds change
        what is held is `core.erasure_bounds.lowered_bounds`)."""
        held = self.erasure_bounds({b.erasure_id for b in bounds})
        for b in bounds:
            if b.node in held.get(b.erasure_id, {}):
                self._c.execute(
                    update(EB)
                    .where(EB.c.erasure_id == b.erasure_id, EB.c.node_id == b.node)
                    .values(bound_at=b.bound_at, signature=b.signature or None)
                )
            else:
                self._c.execute(
                    insert(EB),
                    {
                        "erasure_id": b.erasure_id,
                        "node_id": b.node,
                        "bound_at": b.bound_at,
                        "signature": b.signature or None,
                    },
                )

    def receipts(self, erasure_ids: Collection[str]) -> dict[str, Receipt]:
        """The receipts held for `erasure_ids`, by `item_id`."""
        out: dict[str, Receipt] = {}
        for part in chunks(sorted(erasure_ids)):
            for r in self._c.execute(select(RC).where(RC.c.erasure_id.in_(part))):
                receipt = _receipt(r)
                out[receipt.item_id] = receipt
        return out

    def put_receipts(self, receipts: Sequence[Receipt]) -> None:
        """Stores each receipt as its erasure's and member's, replacing the one held (which
        receipts change what is held is `core.receipts.newer_receipts`)."""
        for r in receipts:
            self._c.execute(
                delete(RC).where(RC.c.erasure_id == r.erasure_id, RC.c.node_id == r.node)
            )
            self._c.execute(
                insert(RC),
                {
                    "erasure_id": r.erasure_id,
                    "node_id": r.node,
                    "applied_at": r.applied_at,
                    "removed": r.removed,
                    "signature": r.signature or None,
                },
            )

    def erasures_page(
        self, after: tuple[int, str] | None, limit: int, erasure_id: str | None = None
    ) -> list[Tombstone]:
        """Up to `limit` tombstones held, newest first, after the position `after` names
        ((erased_at, erasure id); None: from the newest), or the one `erasure_id` names. A
        tombstone read so lists no evidence ids (`evidence_ids` empty)."""
        q = select(ER).order_by(ER.c.erased_at.desc(), ER.c.erasure_id.desc()).limit(limit)
        if erasure_id is not None:
            q = q.where(ER.c.erasure_id == erasure_id)
        if after is not None:
            at, last = after
            q = q.where((ER.c.erased_at < at) | ((ER.c.erased_at == at) & (ER.c.erasure_id < last)))
        return [_tombstone_head(r) for r in self._c.execute(q)]

    def unconfirmed_erasures(self, current: Collection[str]) -> tuple[int, int | None]:
        """How many erasures held lack a receipt from some of the `current` members, and the
        oldest one's `erased_at` (None: none lacks one). One aggregate over the erasures,
        each looked up by the receipts' primary key."""
        confirmed = (
            select(func.count())
            .select_from(RC)
            .where(RC.c.erasure_id == ER.c.erasure_id, RC.c.node_id.in_(sorted(current)))
            .scalar_subquery()
        )
        q = select(func.count(), func.min(ER.c.erased_at)).where(confirmed < len(current))
        count, oldest = self._c.execute(q).one()
        return int(count), None if oldest is None else int(oldest)


def _receipt(r: Any) -> Receipt:
    m = r._mapping
    return Receipt(
        m["erasure_id"],
        m["node_id"],
        m["applied_at"],
        m["removed"],
        bytes(m["signature"]) if m["signature"] else b"",
    )


def _tombstone_head(r: Any) -> Tombstone:
    """A tombstone without its evidence ids (a listing shows their count)."""
    m = r._mapping
    return Tombstone(
        m["erasure_id"],
        m["scope"],
        m["scope_hash"],
        m["erased_at"],
        m["operator"],
        m["reason"],
        (),
        m["origin_node"] or "",
        bytes(m["signature"]) if m["signature"] else b"",
    )
