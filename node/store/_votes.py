"""Votes held from peers and cast here: one per voter and key."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.sql.expression import ClauseElement

from factnode.core import (
    Key,
    ids,
)
from factnode.core.consensus import Vote
from factnode.store._part import TransactionPart
from factnode.store._rows import (
    _SELECT_VOTES,
    _VOTE_COLUMNS,
    E,
    V,
    _vote,
    _vote_values,
)
from factnode.store._sqltext import insert_rows, select_in
from factnode.store.cache import by_voter
from factnode.store.repository import chunks


def vote_query(key_ids: Collection[str]) -> tuple[ClauseElement, str, Collection[str]]:
    """What votes are read from (`select_in` arguments)."""
    return _SELECT_VOTES, "vote.key_id", key_ids


class SqlVotes(TransactionPart):
    """The vote part of a transaction."""

    def votes(self, keys: Collection[Key]) -> dict[Key, list[Vote]]:
        if self._cache is None:
            return self._load_votes(keys)
        cached = self._cache.votes.read(
            keys, lambda missing: {k: by_voter(vs) for k, vs in self._load_votes(missing).items()}
        )
        return {k: list(vs) for k, vs in cached.items()}

    def _load_votes(
        self, keys: Collection[Key], rows: Iterable[Any] | None = None
    ) -> dict[Key, list[Vote]]:
        """The keys' votes; `rows` is the answer of `vote_query` when the caller already
        read it."""
        out: dict[Key, list[Vote]] = {k: [] for k in keys}
        if rows is None:
            rows = select_in(self._c, *vote_query({ids.key_id(k) for k in keys}))
        for row in rows:
            v = _vote(row)
            out[v.key].append(v)
        return out

    def put_votes(self, votes: Sequence[Vote]) -> None:
        if votes:
            self._touch(v.key for v in votes)
            # One vote per voter and key: the latest replaces the one held.
            insert_rows(
                self._c, V, _VOTE_COLUMNS, [_vote_values(v) for v in votes], ("voter", "key_id")
            )
            if self._cache is not None:
                self._cache.put_votes(votes)

    def waiting_votes(self, voter: str) -> int:
        """How many of `voter`'s votes name evidence this node does not hold, or abstain on
        a key it holds no evidence for."""
        held = select(E.c.evidence_id).where(E.c.evidence_id == V.c.evidence_id)
        key_held = select(E.c.key_id).where(E.c.key_id == V.c.key_id)
        q = (
            select(func.count())
            .select_from(V)
            .where(
                V.c.voter == voter,
                or_(
                    and_(V.c.version_id.is_not(None), ~held.exists()),
                    and_(V.c.version_id.is_(None), ~key_held.exists()),
                ),
            )
        )
        return int(self._c.scalar(q) or 0)

    def keys_held(self, keys: Collection[Key]) -> set[Key]:
        """The keys among `keys` this node holds evidence for."""
        by_id = {ids.key_id(k): k for k in keys}
        out: set[Key] = set()
        for part in chunks(sorted(by_id)):
            out.update(
                by_id[kid]
                for kid in self._c.scalars(
                    select(E.c.key_id).where(E.c.key_id.in_(part)).distinct()
                )
            )
        return out

    def delete_votes(self, voter: str, keys: Collection[Key]) -> None:
        self._touch(keys)
        for part in chunks(sorted(ids.key_id(k) for k in keys)):
            self._c.execute(delete(V).where(V.c.voter == voter, V.c.key_id.in_(part)))
        if self._cache is not None:
            self._cache.deleted_votes(voter, keys)

    def votes_on_evidence(self, evidence_ids: Collection[str]) -> list[Vote]:
        out: list[Vote] = []
        for part in chunks(sorted(evidence_ids)):
            out.extend(
                _vote(r) for r in self._c.execute(_SELECT_VOTES.where(V.c.evidence_id.in_(part)))
            )
        return out

    def voted_keys_in_scope(self, scope: str, scope_hash: str) -> set[Key]:
        """The keys any vote held names within a key or subject erasure's scope (its hash)."""
        q = select(V.c.namespace, V.c.subject, V.c.predicate).distinct()
        if scope == "key":
            q = q.where(V.c.key_id == scope_hash)
        elif scope != "subject":
            return set()
        keys = {Key(*row) for row in self._c.execute(q)}
        if scope == "subject":
            # Votes keep no subject hash, so this reads every voted key once (an erasure by
            # subject is rare; a subject_id column on vote would make it an index lookup).
            keys = {k for k in keys if ids.subject_id(k.namespace, k.subject) == scope_hash}
        return keys

    def delete_votes_on_keys(self, keys: Collection[Key]) -> None:
        self._forget()
        for part in chunks(sorted(ids.key_id(k) for k in keys)):
            self._c.execute(delete(V).where(V.c.key_id.in_(part)))

    def delete_votes_on_evidence(self, evidence_ids: Collection[str]) -> None:
        self._forget()
        for part in chunks(sorted(evidence_ids)):
            self._c.execute(delete(V).where(V.c.evidence_id.in_(part)))
