"""Served beliefs: each key's rows, pages of them, and the counts for status."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import ClauseElement

from factnode.core import (
    BeliefState,
    EvidenceStatus,
    Instant,
    Key,
    Outcome,
    ids,
)
from factnode.core.refresh import StoredBelief
from factnode.store._part import TransactionPart
from factnode.store._rows import (
    _BELIEF_CHANGE_COLUMNS,
    _BELIEF_COLUMNS,
    _DELETE_BELIEFS,
    _SELECT_BELIEFS,
    BC,
    ER,
    B,
    D,
    E,
    _key_values,
    _stored_belief,
)
from factnode.store._sqltext import delete_in, fetch_all, insert_rows, select_in, select_page
from factnode.store.repository import (
    Counts,
)

# The served states an operator reviews (specification §7, "The review queue").
QUEUED = (BeliefState.AMBIGUOUS, BeliefState.CONTESTED)
# After a position (key id, key id, version id) in a page ordered by key and version.
_AFTER_KEY = "(belief.key_id > ? OR (belief.key_id = ? AND belief.version_id > ?))"
# A subject that starts with a prefix: exact on every collation (a range would not be).
_SUBJECT_PREFIX = "substr(belief.subject, 1, ?) = ?"


def _count_keys(conn: Connection, state: BeliefState) -> int:
    q = select(func.count(func.distinct(B.c.key_id))).where(B.c.state == state.value)
    return int(conn.scalar(q) or 0)


def belief_query(key_ids: Collection[str]) -> tuple[ClauseElement, str, Collection[str]]:
    """What served rows are read from (`select_in` arguments)."""
    return _SELECT_BELIEFS, "belief.key_id", key_ids


class SqlBeliefs(TransactionPart):
    """The belief part of a transaction: served rows, pages and counts."""

    def beliefs(self, keys: Collection[Key]) -> dict[Key, list[StoredBelief]]:
        if self._cache is None:
            return self._load_beliefs(keys)
        cached = self._cache.beliefs.read(
            keys, lambda missing: {k: tuple(bs) for k, bs in self._load_beliefs(missing).items()}
        )
        return {k: list(bs) for k, bs in cached.items()}

    def _load_beliefs(
        self, keys: Collection[Key], rows: Iterable[Any] | None = None
    ) -> dict[Key, list[StoredBelief]]:
        """The keys' served rows; `rows` is the answer of `belief_query` when the caller
        already read it."""
        out: dict[Key, list[StoredBelief]] = {k: [] for k in keys}
        if rows is None:
            rows = select_in(self._c, *belief_query({ids.key_id(k) for k in keys}))
        for row in rows:
            b = _stored_belief(row)
            out.setdefault(b.key, []).append(b)
        for held in out.values():
            held.sort(key=lambda b: b.version_id)
        return out

    def replace_beliefs(
        self, changes: Sequence[tuple[Key, Sequence[StoredBelief], bool]], changed_at: Instant
    ) -> None:
        """Replaces the served rows of each key; announced changes go to the change log."""
        if not changes:
            return
        self._touch(key for key, _, _ in changes)
        cols = {key: _key_values(key) for key, _, _ in changes}
        # A key the cache holds with no served rows has none in the table (a new key, as most
        # of a stream's are): nothing to delete, and often no DELETE statement at all.
        held = self._cache.beliefs if self._cache is not None else None
        stale = {c[0] for key, c in cols.items() if held is None or held.get(key) != ()}
        delete_in(self._c, _DELETE_BELIEFS, "belief.key_id", stale)
        insert_rows(
            self._c,
            B,
            _BELIEF_COLUMNS,
            [
                (
                    *cols[key],
                    b.version_id,
                    b.evidence_id,
                    str(b.rule),
                    str(b.state),
                    b.updated_at,
                )
                for key, served, _ in changes
                for b in served
            ],
        )
        insert_rows(
            self._c,
            BC,
            _BELIEF_CHANGE_COLUMNS,
            [
                (
                    *cols[key],
                    served[0].version_id if served else None,
                    str(served[0].state) if served else None,
                    str(served[0].rule) if served else None,
                    changed_at,
                )
                for key, served, announce in changes
                if announce
            ],
        )
        if self._cache is not None:
            for key, served, _ in changes:
                self._cache.replaced_beliefs(key, served)

    def list_beliefs(
        self,
        namespace: str,
        subject: str | None,
        after: tuple[str, str] | None,
        limit: int,
        subject_prefix: str = "",
    ) -> list[StoredBelief]:
        conds: list[tuple[str, Sequence[Any]]] = []
        if namespace:
            conds.append(("belief.namespace = ?", (namespace,)))
        if subject is not None:
            conds.append(("belief.subject = ?", (subject,)))
        if subject_prefix:
            conds.append((_SUBJECT_PREFIX, (len(subject_prefix), subject_prefix)))
        if after is not None:
            # Pages are ordered by (key_id, version_id): stable and index-backed.
            key_id, version_id = after
            conds.append((_AFTER_KEY, (key_id, key_id, version_id)))
        order = ("belief.key_id", "belief.version_id")
        rows = select_page(self._c, _SELECT_BELIEFS, conds, order, limit)
        return [_stored_belief(r) for r in rows]

    def list_subjects(
        self, namespace: str, subject_prefix: str, after: str | None, limit: int
    ) -> list[str]:
        """The subjects with a served belief in `namespace` that start with `subject_prefix`,
        each once, in the database's order of text, after `after`: read from the
        (namespace, subject) index, never from the rows."""
        conds: list[tuple[str, Sequence[Any]]] = [("belief.namespace = ?", (namespace,))]
        if subject_prefix:
            conds.append((_SUBJECT_PREFIX, (len(subject_prefix), subject_prefix)))
        if after is not None:
            conds.append(("belief.subject > ?", (after,)))
        where = " AND ".join(c for c, _ in conds)
        sql = (
            f"SELECT DISTINCT belief.subject FROM belief WHERE {where} "
            "ORDER BY belief.subject LIMIT ?"
        )
        params = [v for _, values in conds for v in values]
        return [r[0] for r in fetch_all(self._c, sql, (*params, limit))]

    def queued_beliefs(
        self, namespace: str, after: tuple[int, str, str] | None, limit: int
    ) -> list[StoredBelief]:
        """The review queue's rows (CONTESTED or AMBIGUOUS), oldest first: ordered by the time
        the served row last changed, then key and version, after the position `after`."""
        states = tuple(s.value for s in QUEUED)
        conds: list[tuple[str, Sequence[Any]]] = [
            (f"belief.state IN ({', '.join('?' * len(states))})", states)
        ]
        if namespace:
            conds.append(("belief.namespace = ?", (namespace,)))
        if after is not None:
            since, key_id, version_id = after
            conds.append(
                (
                    f"(belief.updated_at > ? OR (belief.updated_at = ? AND {_AFTER_KEY}))",
                    (since, since, key_id, key_id, version_id),
                )
            )
        order = ("belief.updated_at", "belief.key_id", "belief.version_id")
        rows = select_page(self._c, _SELECT_BELIEFS, conds, order, limit)
        return [_stored_belief(r) for r in rows]

    def counts(self) -> Counts:
        def count(table: Any, *conds: Any) -> int:
            return int(self._c.scalar(select(func.count()).select_from(table).where(*conds)) or 0)

        return Counts(
            evidence=count(E, E.c.status == EvidenceStatus.ACTIVE.value),
            keys=int(self._c.scalar(select(func.count(func.distinct(B.c.key_id)))) or 0),
            decisions=count(D),
            contested=_count_keys(self._c, BeliefState.CONTESTED),
            ambiguous=_count_keys(self._c, BeliefState.AMBIGUOUS),
            rejected=count(D, D.c.outcome == Outcome.REJECTED.value),
            decayed=count(E, E.c.status == EvidenceStatus.DECAYED.value),
            erasures=count(ER),
        )
