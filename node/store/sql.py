"""The SQLModel store: SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from sqlalchemy import Engine, and_, bindparam, delete, event, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.pool import StaticPool
from sqlmodel import create_engine

from node.core import (
    BeliefState,
    Decision,
    Evidence,
    EvidenceStatus,
    Instant,
    Key,
    KeyState,
    Outcome,
    Retraction,
    Rule,
    ids,
)
from node.core.consensus import Vote
from node.store._tables import (
    BeliefChangeRow,
    BeliefRow,
    DecisionRow,
    ErasedEvidenceRow,
    ErasureRow,
    EvidenceRow,
    NodeMetaRow,
    RetractionRow,
    VoteRow,
)
from node.store.migrations import upgrade
from node.store.repository import (
    BeliefChange,
    Counts,
    LoggedDecision,
    StoredBelief,
    Tombstone,
    chunks,
)

E = EvidenceRow.__table__  # type: ignore[attr-defined]
R = RetractionRow.__table__  # type: ignore[attr-defined]
D = DecisionRow.__table__  # type: ignore[attr-defined]
B = BeliefRow.__table__  # type: ignore[attr-defined]
BC = BeliefChangeRow.__table__  # type: ignore[attr-defined]
ER = ErasureRow.__table__  # type: ignore[attr-defined]
EE = ErasedEvidenceRow.__table__  # type: ignore[attr-defined]
M = NodeMetaRow.__table__  # type: ignore[attr-defined]
V = VoteRow.__table__  # type: ignore[attr-defined]

# Statements run once per key on the write path, built once: constructing and cache-keying a
# fresh statement per call cost more than SQLite's own work (bench/arbitration.py).
_DELETE_VOTE = delete(V).where(
    V.c.voter == bindparam("b_voter"), V.c.key_id == bindparam("b_key_id")
)


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, a busy timeout, secure_delete and BEGIN IMMEDIATE."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    memory = url in ("sqlite://", "sqlite:///:memory:")
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        poolclass=StaticPool if memory else None,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from pysqlite so BEGIN IMMEDIATE is ours to emit.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if not memory:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA busy_timeout=30000")
        # Erased values must not survive in free pages.
        cur.execute("PRAGMA secure_delete=ON")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = "IMMEDIATE" if conn.get_execution_options().get("write") else "DEFERRED"
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


def _evidence(row: Row[Any]) -> Evidence:
    m = row._mapping
    contradicts = (
        Key(m["contradicts_namespace"], m["contradicts_subject"], m["contradicts_predicate"])
        if m["contradicts_namespace"] is not None
        else None
    )
    return Evidence(
        evidence_id=m["evidence_id"],
        key=Key(m["namespace"], m["subject"], m["predicate"]),
        object=m["object"],
        version_id=m["version_id"],
        attribution=m["attribution"],
        source=m["source"],
        worth_milli=m["worth_milli"],
        confidence_milli=m["confidence_milli"],
        valid_from=m["valid_from"],
        valid_from_defaulted=m["valid_from_defaulted"],
        recorded_at=m["recorded_at"],
        origin_node=m["origin_node"],
        corrects=m["corrects"],
        contradicts=contradicts,
        anchor_cap=m["anchor_cap"],
        origin_recorded_at=m["origin_recorded_at"],
    )


def _evidence_row(
    e: Evidence, status: EvidenceStatus, idempotency_key: str | None
) -> dict[str, Any]:
    c = e.contradicts
    return {
        "evidence_id": e.evidence_id,
        "key_id": ids.key_id(e.key),
        "namespace": e.key.namespace,
        "subject": e.key.subject,
        "predicate": e.key.predicate,
        "object": e.object,
        "version_id": e.version_id,
        "attribution": e.attribution,
        "source": e.source,
        "worth_milli": e.worth_milli,
        "confidence_milli": e.confidence_milli,
        "valid_from": e.valid_from,
        "valid_from_defaulted": e.valid_from_defaulted,
        "recorded_at": e.recorded_at,
        "origin_node": e.origin_node,
        "corrects": e.corrects,
        "contradicts_namespace": c.namespace if c else None,
        "contradicts_subject": c.subject if c else None,
        "contradicts_predicate": c.predicate if c else None,
        "anchor_cap": e.anchor_cap,
        "idempotency_key": idempotency_key,
        "status": status.value,
        "subject_id": ids.subject_id(e.key.namespace, e.key.subject),
        "origin_recorded_at": e.origin_recorded_at,
    }


def _key(m: Any) -> Key:
    return Key(m["namespace"], m["subject"], m["predicate"])


def _stored_belief(m: Any) -> StoredBelief:
    return StoredBelief(
        key=_key(m),
        version_id=m["version_id"],
        object=m["object"],
        evidence_id=m["evidence_id"],
        rule=Rule(m["rule"]),
        state=BeliefState(m["state"]),
        updated_at=m["updated_at"],
    )


def _vote(m: Any) -> Vote:
    return Vote(
        voter=m["voter"],
        key=_key(m),
        version_id=m["version_id"],
        evidence_id=m["evidence_id"],
        anchor=m["anchor"],
        worth_milli=m["worth_milli"],
        fresh_since=m["fresh_since"],
        cast_at=m["cast_at"],
    )


def _vote_row(v: Vote) -> dict[str, Any]:
    return {
        "voter": v.voter,
        **_key_cols(v.key),
        "version_id": v.version_id,
        "evidence_id": v.evidence_id,
        "anchor": v.anchor,
        "worth_milli": v.worth_milli,
        "fresh_since": v.fresh_since,
        "cast_at": v.cast_at,
    }


def _prefix(col: Any, prefix: str) -> list[Any]:
    """Rows whose hex id starts with `prefix`, as an index-friendly range."""
    if not prefix:
        return []
    return [col >= prefix, col < prefix + "g"]


def _key_cols(key: Key) -> dict[str, str]:
    return {
        "key_id": ids.key_id(key),
        "namespace": key.namespace,
        "subject": key.subject,
        "predicate": key.predicate,
    }


def _count_keys(conn: Connection, state: BeliefState) -> int:
    q = select(func.count(func.distinct(B.c.key_id))).where(B.c.state == state.value)
    return int(conn.scalar(q) or 0)


class SqlTransaction:
    """A unit of work on one connection."""

    def __init__(self, conn: Connection) -> None:
        self._c = conn

    def key_states(self, keys: Collection[Key]) -> dict[Key, KeyState]:
        by_id = {ids.key_id(k): k for k in keys}
        evidence: dict[Key, list[Evidence]] = defaultdict(list)
        retractions: dict[Key, list[Retraction]] = defaultdict(list)
        for part in chunks(sorted(by_id)):
            for row in self._c.execute(
                select(E).where(E.c.key_id.in_(part), E.c.status == EvidenceStatus.ACTIVE.value)
            ):
                e = _evidence(row)
                evidence[e.key].append(e)
            for row in self._c.execute(select(R).where(R.c.key_id.in_(part))):
                m = row._mapping
                key = by_id[m["key_id"]]
                retractions[key].append(
                    Retraction(key, m["version_id"], m["at"], m["recorded_at"], m["reason"])
                )
        return {k: KeyState(evidence.get(k, []), retractions.get(k, [])) for k in keys}

    def stored_evidence_ids(self, evidence_ids: Collection[str]) -> set[str]:
        found: set[str] = set()
        for part in chunks(sorted(evidence_ids)):
            found.update(self._c.scalars(select(E.c.evidence_id).where(E.c.evidence_id.in_(part))))
        return found

    def evidence_for_idempotency_keys(self, keys: Collection[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for part in chunks(sorted(keys)):
            for row in self._c.execute(
                select(E.c.idempotency_key, E.c.evidence_id).where(E.c.idempotency_key.in_(part))
            ):
                out[row[0]] = row[1]
        return out

    def erased(self, evidence: Sequence[Evidence]) -> set[str]:
        if not evidence or self._c.scalar(select(func.count()).select_from(ER)) == 0:
            return set()
        out: set[str] = set()
        for part in chunks(sorted({e.evidence_id for e in evidence})):
            out.update(self._c.scalars(select(EE.c.evidence_id).where(EE.c.evidence_id.in_(part))))
        # Evidence recorded before a key or subject erasure never comes back.
        scopes = {ids.key_id(e.key) for e in evidence} | {
            ids.subject_id(e.key.namespace, e.key.subject) for e in evidence
        }
        erased_at: dict[str, int] = {}
        for part in chunks(sorted(scopes)):
            for row in self._c.execute(
                select(ER.c.scope_hash, func.max(ER.c.erased_at))
                .where(ER.c.scope_hash.in_(part), ER.c.scope.in_(("key", "subject")))
                .group_by(ER.c.scope_hash)
            ):
                erased_at[row[0]] = row[1]
        for e in evidence:
            for scope in (ids.key_id(e.key), ids.subject_id(e.key.namespace, e.key.subject)):
                if scope in erased_at and e.first_recorded_at <= erased_at[scope]:
                    out.add(e.evidence_id)
        return out

    def add_evidence(self, rows: Sequence[tuple[Evidence, EvidenceStatus, str | None]]) -> None:
        if rows:
            self._c.execute(insert(E), [_evidence_row(*r) for r in rows])

    def add_retractions(self, retractions: Sequence[Retraction]) -> None:
        if retractions:
            self._c.execute(
                insert(R),
                [
                    {
                        "key_id": ids.key_id(r.key),
                        "version_id": r.version_id,
                        "at": r.at,
                        "recorded_at": r.recorded_at,
                        "reason": r.reason,
                    }
                    for r in retractions
                ],
            )

    def add_decisions(self, decisions: Sequence[Decision]) -> None:
        if not decisions:
            return
        rows = [
            {
                **_key_cols(d.key),
                "outcome": d.outcome.value,
                "rule": d.rule.value,
                "decided_at": d.decided_at,
                "evidence_id": d.evidence_id,
                "version_id": d.version_id,
                "supersedes": d.supersedes,
                "detail": d.detail,
            }
            for d in decisions
        ]
        self._c.execute(insert(D), rows)

    def _beliefs_where(self, *conds: Any) -> list[StoredBelief]:
        q = (
            select(B, E.c.object)
            .join(E, E.c.evidence_id == B.c.evidence_id)
            .where(*conds)
            .order_by(B.c.namespace, B.c.subject, B.c.predicate, B.c.version_id)
        )
        return [_stored_belief(r._mapping) for r in self._c.execute(q)]

    def beliefs(self, keys: Collection[Key]) -> dict[Key, list[StoredBelief]]:
        out: dict[Key, list[StoredBelief]] = {k: [] for k in keys}
        key_ids = sorted(ids.key_id(k) for k in keys)
        for part in chunks(key_ids):
            for b in self._beliefs_where(B.c.key_id.in_(part)):
                out.setdefault(b.key, []).append(b)
        return out

    def replace_beliefs(
        self, changes: Sequence[tuple[Key, Sequence[StoredBelief], bool]], changed_at: Instant
    ) -> None:
        """Replaces the served rows of each key; announced changes go to the change log."""
        if not changes:
            return
        cols = {key: _key_cols(key) for key, _, _ in changes}
        for part in chunks(sorted(c["key_id"] for c in cols.values())):
            self._c.execute(delete(B).where(B.c.key_id.in_(part)))
        rows = [
            {
                **cols[key],
                "version_id": b.version_id,
                "evidence_id": b.evidence_id,
                "rule": b.rule.value,
                "state": b.state.value,
                "updated_at": b.updated_at,
            }
            for key, served, _ in changes
            for b in served
        ]
        if rows:
            self._c.execute(insert(B), rows)
        announced = [
            {
                **cols[key],
                "version_id": served[0].version_id if served else None,
                "state": served[0].state.value if served else None,
                "rule": served[0].rule.value if served else None,
                "changed_at": changed_at,
            }
            for key, served, announce in changes
            if announce
        ]
        if announced:
            self._c.execute(insert(BC), announced)

    def evidence(self, evidence_ids: Collection[str]) -> dict[str, Evidence]:
        out: dict[str, Evidence] = {}
        for part in chunks(sorted(evidence_ids)):
            for row in self._c.execute(select(E).where(E.c.evidence_id.in_(part))):
                out[row._mapping["evidence_id"]] = _evidence(row)
        return out

    def lineage(self, key: Key) -> list[tuple[str, str]]:
        q = select(D.c.version_id, D.c.supersedes).where(
            D.c.key_id == ids.key_id(key), D.c.supersedes.is_not(None)
        )
        return [(r[0], r[1]) for r in self._c.execute(q)]

    def list_beliefs(
        self,
        namespace: str,
        subject: str | None,
        after: tuple[str, str] | None,
        limit: int,
        states: Collection[BeliefState] | None = None,
    ) -> list[StoredBelief]:
        conds: list[Any] = []
        if namespace:
            conds.append(B.c.namespace == namespace)
        if subject is not None:
            conds.append(B.c.subject == subject)
        if states:
            conds.append(B.c.state.in_([s.value for s in states]))
        if after is not None:
            # Pages are ordered by (key_id, version_id): stable and index-backed.
            conds.append(
                or_(B.c.key_id > after[0], and_(B.c.key_id == after[0], B.c.version_id > after[1]))
            )
        q = (
            select(B, E.c.object)
            .join(E, E.c.evidence_id == B.c.evidence_id)
            .where(*conds)
            .order_by(B.c.key_id, B.c.version_id)
            .limit(limit)
        )
        return [_stored_belief(r._mapping) for r in self._c.execute(q)]

    def decisions(
        self, key: Key | None, namespace: str | None, after_seq: int, limit: int
    ) -> list[LoggedDecision]:
        conds: list[Any] = [D.c.seq > after_seq]
        if key is not None:
            conds.append(D.c.key_id == ids.key_id(key))
        if namespace:
            conds.append(D.c.namespace == namespace)
        q = select(D).where(*conds).order_by(D.c.seq).limit(limit)
        out = []
        for r in self._c.execute(q):
            m = r._mapping
            out.append(
                LoggedDecision(
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
            )
        return out

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

    def decaying_evidence(
        self, attributions: Collection[str], after: str, limit: int
    ) -> list[Evidence]:
        q = (
            select(E)
            .where(
                E.c.status == EvidenceStatus.ACTIVE.value,
                E.c.attribution.in_(sorted(attributions)),
                E.c.evidence_id > after,
            )
            .order_by(E.c.evidence_id)
            .limit(limit)
        )
        return [_evidence(r) for r in self._c.execute(q)]

    def set_status(self, evidence_ids: Collection[str], status: EvidenceStatus) -> None:
        for part in chunks(sorted(evidence_ids)):
            self._c.execute(update(E).where(E.c.evidence_id.in_(part)).values(status=status.value))

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
            cond = and_(E.c.namespace == subject[0], E.c.subject == subject[1])
        return [_evidence(r) for r in self._c.execute(select(E).where(cond))]

    def erase(self, evidence_ids: Collection[str], forget_keys: Collection[Key]) -> None:
        """Overwrites values and sources in place, then removes the rows.

        For `forget_keys` (erasure by key or subject) the key's log rows go too, so
        not even the key text stays behind.
        """
        for part in chunks(sorted(evidence_ids)):
            # Overwrite first: every page that held the text is rewritten, not just unlinked.
            self._c.execute(
                update(E)
                .where(E.c.evidence_id.in_(part))
                .values(object="", source="", idempotency_key=None, corrects=None)
            )
            self._c.execute(delete(D).where(D.c.evidence_id.in_(part)))
            self._c.execute(delete(E).where(E.c.evidence_id.in_(part)))
        for part in chunks(sorted(ids.key_id(k) for k in forget_keys)):
            for table in (D, BC, R):
                self._c.execute(delete(table).where(table.c.key_id.in_(part)))

    def add_tombstone(self, tombstone: Tombstone) -> None:
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
            },
        )
        known = self.erased_ids(tombstone.evidence_ids)
        fresh = [e for e in tombstone.evidence_ids if e not in known]
        if fresh:
            self._c.execute(
                insert(EE), [{"evidence_id": e, "erasure_id": tombstone.erasure_id} for e in fresh]
            )

    def erased_ids(self, evidence_ids: Collection[str]) -> set[str]:
        out: set[str] = set()
        for part in chunks(sorted(evidence_ids)):
            out.update(self._c.scalars(select(EE.c.evidence_id).where(EE.c.evidence_id.in_(part))))
        return out

    # -- federation -----------------------------------------------------------

    def votes(self, keys: Collection[Key]) -> dict[Key, list[Vote]]:
        by_id = {ids.key_id(k): k for k in keys}
        out: dict[Key, list[Vote]] = {k: [] for k in keys}
        for part in chunks(sorted(by_id)):
            for row in self._c.execute(select(V).where(V.c.key_id.in_(part))):
                v = _vote(row._mapping)
                out[by_id[row._mapping["key_id"]]].append(v)
        return out

    def put_votes(self, votes: Sequence[Vote]) -> None:
        if votes:
            self._c.execute(
                _DELETE_VOTE, [{"b_voter": v.voter, "b_key_id": ids.key_id(v.key)} for v in votes]
            )
            self._c.execute(insert(V), [_vote_row(v) for v in votes])

    def delete_votes(self, voter: str, keys: Collection[Key]) -> None:
        for part in chunks(sorted(ids.key_id(k) for k in keys)):
            self._c.execute(delete(V).where(V.c.voter == voter, V.c.key_id.in_(part)))

    def votes_on_evidence(self, evidence_ids: Collection[str]) -> list[Vote]:
        out: list[Vote] = []
        for part in chunks(sorted(evidence_ids)):
            out.extend(
                _vote(r._mapping)
                for r in self._c.execute(select(V).where(V.c.evidence_id.in_(part)))
            )
        return out

    def delete_votes_on_evidence(self, evidence_ids: Collection[str]) -> None:
        for part in chunks(sorted(evidence_ids)):
            self._c.execute(delete(V).where(V.c.evidence_id.in_(part)))

    def all_evidence_ids(self) -> Iterator[str]:
        yield from self._c.scalars(select(E.c.evidence_id))

    def all_erasure_ids(self) -> Iterator[str]:
        yield from self._c.scalars(select(ER.c.erasure_id))

    def all_votes(self) -> Iterator[Vote]:
        for r in self._c.execute(select(V)):
            yield _vote(r._mapping)

    def evidence_under(self, prefixes: Collection[str]) -> list[Evidence]:
        out: list[Evidence] = []
        for p in sorted(prefixes):
            out.extend(
                _evidence(r) for r in self._c.execute(select(E).where(*_prefix(E.c.evidence_id, p)))
            )
        return out

    def tombstones_under(self, prefixes: Collection[str]) -> list[Tombstone]:
        out: list[Tombstone] = []
        for p in sorted(prefixes):
            for r in self._c.execute(select(ER).where(*_prefix(ER.c.erasure_id, p))):
                m = r._mapping
                erased = tuple(
                    sorted(
                        self._c.scalars(
                            select(EE.c.evidence_id).where(EE.c.erasure_id == m["erasure_id"])
                        )
                    )
                )
                out.append(
                    Tombstone(
                        m["erasure_id"],
                        m["scope"],
                        m["scope_hash"],
                        m["erased_at"],
                        m["operator"],
                        m["reason"],
                        erased,
                    )
                )
        return out

    def votes_under(self, voter: str, prefixes: Collection[str]) -> list[Vote]:
        out: list[Vote] = []
        for p in sorted(prefixes):
            q = select(V).where(V.c.voter == voter, *_prefix(V.c.key_id, p))
            out.extend(_vote(r._mapping) for r in self._c.execute(q))
        return out

    def known_erasures(self, erasure_ids: Collection[str]) -> set[str]:
        out: set[str] = set()
        for part in chunks(sorted(erasure_ids)):
            out.update(self._c.scalars(select(ER.c.erasure_id).where(ER.c.erasure_id.in_(part))))
        return out

    def evidence_covered(self, tombstone: Tombstone) -> list[Evidence]:
        """Stored evidence a replicated erasure covers: its ids, or its scope recorded before it."""
        found = list(self.evidence(tombstone.evidence_ids).values())
        if tombstone.scope in ("key", "subject"):
            col = E.c.key_id if tombstone.scope == "key" else E.c.subject_id
            q = select(E).where(
                col == tombstone.scope_hash,
                func.coalesce(E.c.origin_recorded_at, E.c.recorded_at) <= tombstone.erased_at,
            )
            seen = {e.evidence_id for e in found}
            found += [
                e for e in (_evidence(r) for r in self._c.execute(q)) if e.evidence_id not in seen
            ]
        return found

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

    def meta(self, name: str) -> str | None:
        return self._c.scalar(select(M.c.value).where(M.c.name == name))

    def set_meta(self, name: str, value: str) -> None:
        self._c.execute(delete(M).where(M.c.name == name))
        self._c.execute(insert(M), {"name": name, "value": value})


class SqlRepository:
    """Opens transactions on a SQLModel engine; the schema is migrated on open."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        # An in-memory database is one shared connection: one transaction at a time.
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if isinstance(self.engine.pool, StaticPool) else nullcontext()
        )
        upgrade(self.engine)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def write(self) -> Iterator[SqlTransaction]:
        with (
            self._serial,
            self.engine.connect().execution_options(write=True) as conn,
            conn.begin(),
        ):
            if not self.is_sqlite:
                # One writer at a time, as SQLite's BEGIN IMMEDIATE gives.
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7210432)")
            yield SqlTransaction(conn)

    @contextmanager
    def read(self) -> Iterator[SqlTransaction]:
        with self._serial, self.engine.connect() as conn, conn.begin():
            yield SqlTransaction(conn)

    def after_erase(self) -> None:
        """Pushes erased bytes out of the WAL (SQLite) or dead tuples (PostgreSQL)."""
        with self._serial, self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if self.is_sqlite:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            else:
                for table in ("evidence", "decision", "belief", "belief_change"):
                    conn.exec_driver_sql(f"VACUUM {table}")

    def close(self) -> None:
        self.engine.dispose()
