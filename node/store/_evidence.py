"""Evidence (assertions and retractions): what each key holds, and what other keys say
against it, looked up by id or idempotency key, the versions it succeeded, and the
confirmations that restated it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.sql.expression import ClauseElement

from factnode.core import (
    Arbitrated,
    Confirmation,
    Evidence,
    EvidenceStatus,
    Key,
    KeyState,
    ids,
)
from factnode.store._rows import (
    _ACTIVE,
    _EVIDENCE_COLUMNS,
    _EVIDENCE_CONTRADICTS_KEY_ID,
    _EVIDENCE_KEY_ID,
    _EVIDENCE_RETRACTS,
    _EVIDENCE_STATUS,
    _SELECT_EVIDENCE,
    _SELECT_EVIDENCE_ID,
    C,
    D,
    E,
    _evidence,
    _evidence_values,
)
from factnode.store._search import SqlSearch, searchable
from factnode.store._sqltext import delete_in, insert_rows, select_in
from factnode.store.repository import chunks

_SELECT_CONFIRMATIONS = select(
    C.c.evidence_id, C.c.signer, C.c.confirmed_at, C.c.received_at, C.c.signature
)


def _confirmations(rows: Iterable[Any]) -> list[Confirmation]:
    out = [Confirmation(r[0], r[1], r[2], r[3], r[4] or b"") for r in rows]
    return sorted(out, key=lambda c: (c.confirmed_at, c.evidence_id, c.signer))


def state_queries(key_ids: Collection[str]) -> list[tuple[ClauseElement, str, Collection[str]]]:
    """What a key state is read from: the keys' own evidence, and the evidence of other keys
    naming them in `contradicts` (`select_in` arguments)."""
    return [
        (_SELECT_EVIDENCE, "evidence.key_id", key_ids),
        (_SELECT_EVIDENCE, "evidence.contradicts_key_id", key_ids),
    ]


class SqlEvidence(SqlSearch):
    """The evidence part of a transaction (with retractions, the key cache and lineage)."""

    def key_states(self, keys: Collection[Key]) -> dict[Key, KeyState]:
        if self._cache is None:
            return self._load_states(keys)
        return self._cache.states.read(keys, self._load_states)

    def _load_states(
        self, keys: Collection[Key], rows: tuple[Iterable[Any], Iterable[Any]] | None = None
    ) -> dict[Key, KeyState]:
        """The keys' states; `rows` are the answers of `state_queries` when the caller
        already read them."""
        by_id = {ids.key_id(k): k for k in keys}
        if rows is None:  # read lazily, in this order
            own_query, against_query = state_queries(by_id)
            rows = (select_in(self._c, *own_query), select_in(self._c, *against_query))
        own, against_them = rows
        evidence: dict[Key, list[Evidence]] = defaultdict(list)
        retractions: dict[Key, list[Evidence]] = defaultdict(list)
        active = EvidenceStatus.ACTIVE.value
        # The status is checked here, not in SQL: given `status = ?` too, SQLite picks the
        # (status, attribution) index and reads every active row of the table.
        for row in own:
            if row[_EVIDENCE_STATUS] == active:
                key = by_id[row[_EVIDENCE_KEY_ID]]
                held = retractions if row[_EVIDENCE_RETRACTS] else evidence
                held[key].append(_evidence(row, key))
        # Assertions of other keys that name these in `contradicts` count here as
        # retractions (specification §5), unless corrected on their own key: their correctors too.
        against: dict[str, tuple[Key, Key]] = {}  # evidence id -> (key it is against, its key)
        for row in against_them:
            if row[_EVIDENCE_STATUS] == active:
                key = by_id[row[_EVIDENCE_CONTRADICTS_KEY_ID]]
                e = _evidence(row)
                if e.key != key:
                    retractions[key].append(e)
                    against[e.evidence_id] = (key, e.key)
        if against:
            for row in select_in(self._c, _SELECT_EVIDENCE, "evidence.corrects", against):
                e = _evidence(row)
                if row[_EVIDENCE_STATUS] != active or e.corrects is None:
                    continue
                key, stated_on = against[e.corrects]
                # Only a correction on the contradicting evidence's own key corrects it.
                if e.key == stated_on and all(
                    r.evidence_id != e.evidence_id for r in retractions[key]
                ):
                    retractions[key].append(e)
        return {
            k: KeyState(tuple(evidence.get(k, ())), tuple(retractions.get(k, ()))) for k in keys
        }

    def remembered(self, keys: Collection[Key]) -> dict[Key, Arbitrated]:
        """What `remember` left for keys whose state has not changed since; keys without
        it are left out."""
        if self._cache is None:
            return {}
        out: dict[Key, Arbitrated] = {}
        for key in keys:
            memo = self._cache.arbitrated.get(key)
            if memo is not None:
                out[key] = memo
        return out

    def remember(self, arbitrated: Mapping[Key, Arbitrated]) -> None:
        """Keeps each key's state as it now stands in this transaction, arbitrated."""
        if self._cache is not None:
            for key, memo in arbitrated.items():
                self._cache.arbitrated.set(key, memo)

    def stored_evidence_ids(self, evidence_ids: Collection[str]) -> set[str]:
        return {
            r[0]
            for r in select_in(self._c, _SELECT_EVIDENCE_ID, "evidence.evidence_id", evidence_ids)
        }

    def evidence_for_idempotency_keys(self, keys: Collection[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for part in chunks(sorted(keys)):
            for row in self._c.execute(
                select(E.c.idempotency_key, E.c.evidence_id).where(E.c.idempotency_key.in_(part))
            ):
                out[row[0]] = row[1]
        return out

    def add_evidence(self, rows: Sequence[tuple[Evidence, EvidenceStatus, str | None]]) -> None:
        insert_rows(self._c, E, _EVIDENCE_COLUMNS, [_evidence_values(*r) for r in rows])
        self.index_evidence(searchable(rows))
        if self._cache is not None:
            self._cache.added_evidence(e for e, status, _ in rows if status is _ACTIVE)

    def bears_on(self, pairs: Sequence[tuple[Key, Evidence]]) -> None:
        """Evidence just added on one key that now counts in another key's state (a
        `contradicts`, or a correction of one): the key cache follows, as a fresh load
        would find it."""
        if self._cache is not None:
            self._cache.bears_on(pairs)

    def evidence(self, evidence_ids: Collection[str]) -> dict[str, Evidence]:
        rows = select_in(self._c, _SELECT_EVIDENCE, "evidence.evidence_id", set(evidence_ids))
        return {e.evidence_id: e for e in map(_evidence, rows)}

    def lineage(self, key: Key) -> list[tuple[str, str]]:
        q = select(D.c.version_id, D.c.supersedes).where(
            D.c.key_id == ids.key_id(key),
            D.c.supersedes.is_not(None),
            D.c.version_id.is_not(None),
        )
        return [(r[0], r[1]) for r in self._c.execute(q)]

    def decaying_keys(self, attributions: Collection[str], after: str, limit: int) -> list[Key]:
        anchors = sorted(attributions)
        q = (
            select(E.c.key_id, E.c.namespace, E.c.subject, E.c.predicate)
            .where(
                E.c.status == EvidenceStatus.ACTIVE.value,
                # Relayed evidence decays at its capped anchor's half-life (specification §6).
                or_(E.c.attribution.in_(anchors), E.c.anchor_cap.in_(anchors)),
                E.c.key_id > after,
            )
            .group_by(E.c.key_id, E.c.namespace, E.c.subject, E.c.predicate)
            .order_by(E.c.key_id)
            .limit(limit)
        )
        return [Key(r[1], r[2], r[3]) for r in self._c.execute(q)]

    def confirmations(self, evidence_ids: Collection[str]) -> list[Confirmation]:
        """Every confirmation held on the evidence `evidence_ids`, oldest first."""
        rows = select_in(
            self._c, _SELECT_CONFIRMATIONS, "confirmation.evidence_id", set(evidence_ids)
        )
        return _confirmations(rows)

    def confirmations_under(self, prefixes: Collection[str]) -> list[Confirmation]:
        """Every confirmation held on evidence whose id starts with one of `prefixes`."""
        if not prefixes:
            return []
        q = _SELECT_CONFIRMATIONS
        if "" not in prefixes:
            q = q.where(or_(*(C.c.evidence_id.startswith(p) for p in sorted(set(prefixes)))))
        return _confirmations(self._c.execute(q))

    def delete_confirmations(self, evidence_ids: Collection[str]) -> None:
        """Forgets the confirmations of erased evidence."""
        delete_in(self._c, delete(C), "confirmation.evidence_id", evidence_ids)

    def confirm(self, confirmations: Sequence[Confirmation], moved: Sequence[Evidence]) -> None:
        """Keeps `confirmations` and stores the `confirmed_at` of each of `moved` (held
        evidence whose latest counted confirmation they move, `core.decay.confirmed_at`)."""
        insert_rows(
            self._c,
            C,
            ("evidence_id", "signer", "confirmed_at", "received_at", "signature"),
            [
                (c.evidence_id, c.signer, c.confirmed_at, c.received_at, c.signature or None)
                for c in confirmations
            ],
        )
        for e in moved:
            self._c.execute(
                update(E)
                .where(E.c.evidence_id == e.evidence_id)
                .values(confirmed_at=e.confirmed_at)
            )
        if self._cache is not None:
            self._cache.confirmed(moved)
