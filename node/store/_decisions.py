"""The decision log and the feed of served-belief changes, both read by sequence number."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from factnode.core import (
    BeliefState,
    Decision,
    Key,
    Outcome,
    Rule,
    ids,
)
from factnode.store._part import TransactionPart
from factnode.store._rows import (
    _DECISION_COLUMNS,
    BC,
    D,
    M,
    _key,
    _key_values,
)
from factnode.store._sqltext import fetch_all, insert_rows, scalar
from factnode.store.repository import (
    BeliefChange,
    LoggedDecision,
)

_LAST_SEQS = "SELECT seq FROM decision ORDER BY seq DESC LIMIT ?"
# SQLite numbers a new row one above the highest row it holds, so the numbers of the newest
# decisions an erasure deletes would be given again, and a reader that had read up to them
# would miss what came next. The highest number given before an erasure is kept under this
# name and SQLite's decisions are numbered above it. PostgreSQL's sequence never repeats.
DECISION_SEQ_META = "decision_seq_high"
_HIGHEST_SEQ = (
    "SELECT max(coalesce((SELECT max(seq) FROM decision), 0),"
    " coalesce((SELECT CAST(value AS INTEGER) FROM node_meta WHERE name = ?), 0))"
)


def keep_highest_seq(conn: Connection) -> None:
    """Before decisions are deleted: SQLite keeps the highest number given so far, so that
    none is given again (`DECISION_SEQ_META`)."""
    if conn.dialect.name == "sqlite":
        high = int(scalar(conn, _HIGHEST_SEQ, (DECISION_SEQ_META,)))
        insert_rows(conn, M, ("name", "value"), [(DECISION_SEQ_META, str(high))], ("name",))


class SqlDecisions(TransactionPart):
    """The decision part of a transaction: the decision log and the belief-change feed."""

    def add_decisions(self, decisions: Sequence[Decision]) -> None:
        rows = [
            (
                *_key_values(d.key),
                str(d.outcome),
                str(d.rule),
                d.decided_at,
                d.evidence_id,
                d.version_id,
                d.supersedes,
                d.detail,
            )
            for d in decisions
        ]
        if self._c.dialect.name == "sqlite":
            # Numbered above every number given before, deleted rows' too (DECISION_SEQ_META).
            first = int(scalar(self._c, _HIGHEST_SEQ, (DECISION_SEQ_META,))) + 1
            numbered = [(first + i, *row) for i, row in enumerate(rows)]
            insert_rows(self._c, D, ("seq", *_DECISION_COLUMNS), numbered)
        else:
            insert_rows(self._c, D, _DECISION_COLUMNS, rows)
        self._logged.extend(decisions)

    def logged_seqs(self, decisions: Sequence[Decision]) -> list[int]:
        """The log position of each of `decisions`, which this write transaction logged (the
        same objects): read back, as the database numbers the rows. Writers are serialised
        (`SqlRepository.write`), and both backends number a new row above every row already
        there (`add_decisions` on SQLite, PostgreSQL's sequence), so this transaction's rows
        are the highest, in the order it inserted them."""
        if not decisions:
            return []
        n = len(self._logged)
        seqs = sorted(s for (s,) in fetch_all(self._c, _LAST_SEQS, (n,)))
        by_object = {id(d): s for d, s in zip(self._logged, seqs, strict=True)}
        return [by_object[id(d)] for d in decisions]

    def decisions(
        self, key: Key | None, namespace: str | None, after_seq: int, limit: int
    ) -> list[LoggedDecision]:
        conds: list[Any] = [D.c.seq > after_seq]
        if key is not None:
            conds.append(D.c.key_id == ids.key_id(key))
        if namespace:
            conds.append(D.c.namespace == namespace)
        q = select(D).where(*conds).order_by(D.c.seq).limit(limit)
        return [_logged(r._mapping) for r in self._c.execute(q)]

    def latest_decision(self, key: Key, outcomes: Collection[Outcome]) -> LoggedDecision | None:
        """The key's latest decision with one of `outcomes`, or None."""
        q = (
            select(D)
            .where(D.c.key_id == ids.key_id(key), D.c.outcome.in_([str(o) for o in outcomes]))
            .order_by(D.c.seq.desc())
            .limit(1)
        )
        row = self._c.execute(q).first()
        return _logged(row._mapping) if row is not None else None

    def last_change_seq(self) -> int:
        return int(self._c.scalar(select(func.max(BC.c.seq))) or 0)

    def belief_changes(
        self, namespace: str | None, after_seq: int, limit: int
    ) -> list[BeliefChange]:
        conds: list[Any] = [BC.c.seq > after_seq]
        if namespace:
            conds.append(BC.c.namespace == namespace)
        q = select(BC).where(*conds).order_by(BC.c.seq).limit(limit)
        return [
            BeliefChange(
                seq=m["seq"],
                key=_key(m),
                version_id=m["version_id"],
                state=BeliefState(m["state"]) if m["state"] else None,
                rule=Rule(m["rule"]) if m["rule"] else None,
                changed_at=m["changed_at"],
            )
            for m in (r._mapping for r in self._c.execute(q))
        ]


def _logged(m: Any) -> LoggedDecision:
    return LoggedDecision(
        m["seq"],
        Decision(
            key=_key(m),
            outcome=Outcome(m["outcome"]),
            rule=Rule(m["rule"]),
            decided_at=m["decided_at"],
            evidence_id=m["evidence_id"],
            version_id=m["version_id"],
            supersedes=m["supersedes"],
            detail=m["detail"],
        ),
    )
