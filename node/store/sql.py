"""The SQLModel store: SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

import functools
import threading
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from sqlalchemy import (
    Engine,
    Table,
    and_,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection, CursorResult, Dialect
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.expression import ClauseElement
from sqlmodel import create_engine

from factnode.core import (
    Arbitrated,
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
from factnode.core.consensus import Vote
from factnode.store._tables import (
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
from factnode.store.cache import DEFAULT_CACHE_KEYS, KeyCache, TxCache, by_voter
from factnode.store.migrations import upgrade
from factnode.store.repository import (
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


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, a busy timeout, secure_delete and BEGIN IMMEDIATE."""
    if not url.startswith("sqlite"):
        # hide_parameters: a database error must not quote a fact's value or source in a log.
        return create_engine(url, pool_pre_ping=True, hide_parameters=True)
    memory = url in ("sqlite://", "sqlite:///:memory:")
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        poolclass=StaticPool if memory else None,
        hide_parameters=True,
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


# The evidence table's columns in one order: rows are read and written as tuples in it.
_EVIDENCE_COLUMNS = (
    "evidence_id",
    "key_id",
    "namespace",
    "subject",
    "predicate",
    "object",
    "version_id",
    "attribution",
    "source",
    "worth_milli",
    "confidence_milli",
    "valid_from",
    "valid_from_defaulted",
    "recorded_at",
    "origin_node",
    "corrects",
    "contradicts_namespace",
    "contradicts_subject",
    "contradicts_predicate",
    "anchor_cap",
    "idempotency_key",
    "status",
    "subject_id",
    "origin_recorded_at",
)
_SELECT_EVIDENCE = select(*(E.c[name] for name in _EVIDENCE_COLUMNS))
_EVIDENCE_KEY_ID = _EVIDENCE_COLUMNS.index("key_id")
_EVIDENCE_STATUS = _EVIDENCE_COLUMNS.index("status")
_ACTIVE = EvidenceStatus.ACTIVE
# Tables whose rows an erasure removes (values, sources, or the key's text).
_ERASED_TABLES = ("evidence", "decision", "belief", "belief_change", "vote", "retraction")
# The node_meta row whose value changes with every write transaction.
_GENERATION = "write_generation"


def _evidence(row: Sequence[Any], key: Key | None = None) -> Evidence:
    """Evidence from a row of `_SELECT_EVIDENCE`, read by position (the hot read path);
    `key`, when the caller holds it, is the row's key (shared rather than built again)."""
    (
        evidence_id,
        _key_id,
        namespace,
        subject,
        predicate,
        obj,
        version_id,
        attribution,
        source,
        worth_milli,
        confidence_milli,
        valid_from,
        valid_from_defaulted,
        recorded_at,
        origin_node,
        corrects,
        contradicts_namespace,
        contradicts_subject,
        contradicts_predicate,
        anchor_cap,
        _idempotency_key,
        _status,
        _subject_id,
        origin_recorded_at,
    ) = row
    return Evidence(
        evidence_id,
        Key(namespace, subject, predicate) if key is None else key,
        obj,
        version_id,
        attribution,
        source,
        worth_milli,
        confidence_milli,
        valid_from,
        valid_from_defaulted,
        recorded_at,
        origin_node,
        corrects,
        Key(contradicts_namespace, contradicts_subject, contradicts_predicate)
        if contradicts_namespace is not None
        else None,
        anchor_cap,
        origin_recorded_at,
    )


# Rows carry each enum as its plain string: StrEnum members are their values, and str()
# gives them without the enum's attribute machinery (the write path's hottest loop).
def _evidence_values(
    e: Evidence, status: EvidenceStatus, idempotency_key: str | None
) -> tuple[Any, ...]:
    """One evidence row as a tuple in `_EVIDENCE_COLUMNS` order."""
    c = e.contradicts
    key = e.key
    return (
        e.evidence_id,
        ids.key_id(key),
        key.namespace,
        key.subject,
        key.predicate,
        e.object,
        e.version_id,
        e.attribution,
        e.source,
        e.worth_milli,
        e.confidence_milli,
        e.valid_from,
        e.valid_from_defaulted,
        e.recorded_at,
        e.origin_node,
        e.corrects,
        c.namespace if c else None,
        c.subject if c else None,
        c.predicate if c else None,
        e.anchor_cap,
        idempotency_key,
        str(status),
        ids.subject_id(key.namespace, key.subject),
        e.origin_recorded_at,
    )


def _evidence_row(
    e: Evidence, status: EvidenceStatus, idempotency_key: str | None
) -> dict[str, Any]:
    return dict(zip(_EVIDENCE_COLUMNS, _evidence_values(e, status, idempotency_key), strict=True))


def _mark(dialect: Dialect) -> str:
    """The dialect's positional parameter marker (psycopg takes %s for positions)."""
    return "?" if dialect.paramstyle == "qmark" else "%s"


@functools.lru_cache(maxsize=64)
def _insert_sql(
    dialect: Dialect, table: Table, columns: tuple[str, ...], conflict: tuple[str, ...] = ()
) -> str:
    """A driver-level INSERT of `columns` with positional markers in the dialect's style;
    with `conflict` (the primary key), a row that is already there is overwritten instead."""
    quote = dialect.identifier_preparer
    mark = _mark(dialect)
    sql = (
        f"INSERT INTO {quote.format_table(table)} ({', '.join(quote.quote(c) for c in columns)})"
        f" VALUES ({', '.join([mark] * len(columns))})"
    )
    if conflict:
        # The same upsert syntax on SQLite (3.24+) and PostgreSQL.
        changed = ", ".join(
            f"{quote.quote(c)} = excluded.{quote.quote(c)}" for c in columns if c not in conflict
        )
        sql += (
            f" ON CONFLICT ({', '.join(quote.quote(c) for c in conflict)}) DO UPDATE SET {changed}"
        )
    return sql


def _insert(
    conn: Connection,
    table: Table,
    columns: tuple[str, ...],
    rows: Sequence[tuple[Any, ...]],
    conflict: tuple[str, ...] = (),
) -> None:
    """Inserts (or, given `conflict`, upserts) tuple rows with one driver executemany: no
    per-row parameter building."""
    if rows:
        conn.exec_driver_sql(_insert_sql(conn.dialect, table, columns, conflict), list(rows))


@functools.lru_cache(maxsize=256)
def _in_sql(dialect: Dialect, head: ClauseElement, column: str, n: int) -> str:
    """`head` (a statement without parameters) restricted to `column` IN `n` positional values."""
    mark = _mark(dialect)
    return f"{head.compile(dialect=dialect)} WHERE {column} IN ({', '.join([mark] * n)})"


def _in(
    conn: Connection, head: ClauseElement, column: str, values: Collection[str]
) -> Iterator[CursorResult[Any]]:
    """Runs `head` over `values` in chunks at driver level, yielding each chunk's result.

    The hot path's reads and deletes by id: SQLAlchemy's compiling and expanding of an IN
    list cost more than SQLite's own work. Each chunk is padded to a power of two by
    repeating its last value, so a handful of statement texts serve every size."""
    for part in chunks(sorted(values)):
        n = 1 << (len(part) - 1).bit_length()
        params = (*part, *[part[-1]] * (n - len(part)))
        yield conn.exec_driver_sql(_in_sql(conn.dialect, head, column, n), params)


def _select_in(
    conn: Connection, head: ClauseElement, column: str, values: Collection[str]
) -> Iterator[Any]:
    """The rows of `head` whose `column` is one of `values`."""
    for result in _in(conn, head, column, values):
        yield from result


@functools.lru_cache(maxsize=64)
def _under_sql(
    dialect: Dialect, head: ClauseElement, column: str, fixed: tuple[str, ...], n: int
) -> str:
    """`head` restricted to rows whose `column` lies in one of `n` prefix ranges, with the
    `fixed` columns equal to given values inside each range's term (so that each term is
    one index range and the database can answer the OR range by range)."""
    mark = _mark(dialect)
    same = "".join(f"{c} = {mark} AND " for c in fixed)
    term = f"({same}{column} >= {mark} AND {column} < {mark})"
    where = " OR ".join([term] * n) if n else " AND ".join(f"{c} = {mark}" for c in fixed)
    return f"{head.compile(dialect=dialect)}" + (f" WHERE {where}" if where else "")


def _select_under(
    conn: Connection,
    head: ClauseElement,
    column: str,
    prefixes: Collection[str],
    fixed: Sequence[tuple[str, Any]] = (),
) -> Iterator[Any]:
    """The rows of `head` whose hex `column` starts with one of `prefixes` (the empty prefix:
    every row), `fixed` columns equal to their values; a few statements for many prefixes."""
    names = tuple(c for c, _ in fixed)
    values = tuple(v for _, v in fixed)
    wanted = sorted(set(prefixes))
    if "" in wanted:
        yield from conn.exec_driver_sql(_under_sql(conn.dialect, head, column, names, 0), values)
        return
    for part in chunks(wanted, 64):
        n = 1 << (len(part) - 1).bit_length()
        padded = [*part, *[part[-1]] * (n - len(part))]
        params = tuple(x for p in padded for x in (*values, p, p + "g"))
        yield from conn.exec_driver_sql(_under_sql(conn.dialect, head, column, names, n), params)


def _key(m: Any) -> Key:
    return Key(m["namespace"], m["subject"], m["predicate"])


# Belief rows with their value, and vote rows, read by position as the evidence rows are.
_SELECT_BELIEFS = (
    select(
        B.c.namespace,
        B.c.subject,
        B.c.predicate,
        B.c.version_id,
        E.c.object,
        B.c.evidence_id,
        B.c.rule,
        B.c.state,
        B.c.updated_at,
    )
    .select_from(B)
    .join(E, E.c.evidence_id == B.c.evidence_id)
)
_SELECT_VOTES = select(
    V.c.voter,
    V.c.namespace,
    V.c.subject,
    V.c.predicate,
    V.c.version_id,
    V.c.evidence_id,
    V.c.anchor,
    V.c.worth_milli,
    V.c.fresh_since,
    V.c.cast_at,
)


def _stored_belief(row: Sequence[Any]) -> StoredBelief:
    namespace, subject, predicate, version_id, obj, evidence_id, rule, state, updated_at = row
    return StoredBelief(
        Key(namespace, subject, predicate),
        version_id,
        obj,
        evidence_id,
        Rule(rule),
        BeliefState(state),
        updated_at,
    )


def _vote(row: Sequence[Any]) -> Vote:
    (voter, namespace, subject, predicate, version_id, evidence_id, anchor, worth, fresh, cast) = (
        row
    )
    return Vote(
        voter,
        Key(namespace, subject, predicate),
        version_id,
        evidence_id,
        anchor,
        worth,
        fresh,
        cast,
    )


def _vote_values(v: Vote) -> tuple[Any, ...]:
    return (
        v.voter,
        *_key_values(v.key),
        v.version_id,
        v.evidence_id,
        v.anchor,
        v.worth_milli,
        v.fresh_since,
        v.cast_at,
    )


# Columns of the other tables the write path inserts, in the order of their value tuples.
_KEY_COLUMNS = ("key_id", "namespace", "subject", "predicate")
_RETRACTION_COLUMNS = ("key_id", "version_id", "at", "recorded_at", "reason")
_DECISION_COLUMNS = (
    *_KEY_COLUMNS,
    "outcome",
    "rule",
    "decided_at",
    "evidence_id",
    "version_id",
    "supersedes",
    "detail",
)
_BELIEF_COLUMNS = (*_KEY_COLUMNS, "version_id", "evidence_id", "rule", "state", "updated_at")
_BELIEF_CHANGE_COLUMNS = (*_KEY_COLUMNS, "version_id", "state", "rule", "changed_at")
_VOTE_COLUMNS = (
    "voter",
    *_KEY_COLUMNS,
    "version_id",
    "evidence_id",
    "anchor",
    "worth_milli",
    "fresh_since",
    "cast_at",
)
_SELECT_RETRACTIONS = select(R.c.key_id, R.c.version_id, R.c.at, R.c.recorded_at, R.c.reason)
_SELECT_EVIDENCE_ID = select(E.c.evidence_id)
_SELECT_ERASURES = select(ER)
_SELECT_ERASED_IDS = select(EE.c.erasure_id, EE.c.evidence_id)
_DELETE_BELIEFS = delete(B)


def _key_values(key: Key) -> tuple[str, str, str, str]:
    return (ids.key_id(key), key.namespace, key.subject, key.predicate)


def _count_keys(conn: Connection, state: BeliefState) -> int:
    q = select(func.count(func.distinct(B.c.key_id))).where(B.c.state == state.value)
    return int(conn.scalar(q) or 0)


class SqlTransaction:
    """A unit of work on one connection; a write transaction also keeps the key cache."""

    def __init__(self, conn: Connection, cache: TxCache | None = None) -> None:
        self._c = conn
        self._cache = cache

    def key_states(self, keys: Collection[Key]) -> dict[Key, KeyState]:
        if self._cache is None:
            return self._load_states(keys)
        return self._cache.states.read(keys, self._load_states)

    def _load_states(self, keys: Collection[Key]) -> dict[Key, KeyState]:
        by_id = {ids.key_id(k): k for k in keys}
        evidence: dict[Key, list[Evidence]] = defaultdict(list)
        retractions: dict[Key, list[Retraction]] = defaultdict(list)
        active = EvidenceStatus.ACTIVE.value
        # The status is checked here, not in SQL: given `status = ?` too, SQLite picks the
        # (status, attribution) index and reads every active row of the table.
        for row in _select_in(self._c, _SELECT_EVIDENCE, "evidence.key_id", by_id):
            if row[_EVIDENCE_STATUS] == active:
                key = by_id[row[_EVIDENCE_KEY_ID]]
                evidence[key].append(_evidence(row, key))
        for key_id, version_id, at, recorded_at, reason in _select_in(
            self._c, _SELECT_RETRACTIONS, "retraction.key_id", by_id
        ):
            key = by_id[key_id]
            retractions[key].append(Retraction(key, version_id, at, recorded_at, reason))
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

    def _forget(self) -> None:
        """Before a write the key cache does not follow: it starts over."""
        if self._cache is not None:
            self._cache.clear()

    def stored_evidence_ids(self, evidence_ids: Collection[str]) -> set[str]:
        return {
            r[0]
            for r in _select_in(self._c, _SELECT_EVIDENCE_ID, "evidence.evidence_id", evidence_ids)
        }

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
        _insert(self._c, E, _EVIDENCE_COLUMNS, [_evidence_values(*r) for r in rows])
        if self._cache is not None:
            self._cache.added_evidence(e for e, status, _ in rows if status is _ACTIVE)

    def add_retractions(self, retractions: Sequence[Retraction]) -> None:
        _insert(
            self._c,
            R,
            _RETRACTION_COLUMNS,
            [(ids.key_id(r.key), r.version_id, r.at, r.recorded_at, r.reason) for r in retractions],
        )
        if self._cache is not None:
            self._cache.added_retractions(retractions)

    def add_decisions(self, decisions: Sequence[Decision]) -> None:
        _insert(
            self._c,
            D,
            _DECISION_COLUMNS,
            [
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
            ],
        )

    def _beliefs_where(self, *conds: Any) -> list[StoredBelief]:
        q = _SELECT_BELIEFS.where(*conds).order_by(
            B.c.namespace, B.c.subject, B.c.predicate, B.c.version_id
        )
        return [_stored_belief(r) for r in self._c.execute(q)]

    def beliefs(self, keys: Collection[Key]) -> dict[Key, list[StoredBelief]]:
        if self._cache is None:
            return self._load_beliefs(keys)
        cached = self._cache.beliefs.read(
            keys, lambda missing: {k: tuple(bs) for k, bs in self._load_beliefs(missing).items()}
        )
        return {k: list(bs) for k, bs in cached.items()}

    def _load_beliefs(self, keys: Collection[Key]) -> dict[Key, list[StoredBelief]]:
        out: dict[Key, list[StoredBelief]] = {k: [] for k in keys}
        for row in _select_in(
            self._c, _SELECT_BELIEFS, "belief.key_id", {ids.key_id(k) for k in keys}
        ):
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
        cols = {key: _key_values(key) for key, _, _ in changes}
        for _ in _in(self._c, _DELETE_BELIEFS, "belief.key_id", {c[0] for c in cols.values()}):
            pass  # each chunk's DELETE runs as the loop reaches it
        _insert(
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
        _insert(
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

    def evidence(self, evidence_ids: Collection[str]) -> dict[str, Evidence]:
        rows = _select_in(self._c, _SELECT_EVIDENCE, "evidence.evidence_id", set(evidence_ids))
        return {e.evidence_id: e for e in map(_evidence, rows)}

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
        q = _SELECT_BELIEFS.where(*conds).order_by(B.c.key_id, B.c.version_id).limit(limit)
        return [_stored_belief(r) for r in self._c.execute(q)]

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
            _SELECT_EVIDENCE.where(
                E.c.status == EvidenceStatus.ACTIVE.value,
                # Relayed evidence decays at its capped anchor's half-life (DESIGN §6).
                or_(
                    E.c.attribution.in_(sorted(attributions)),
                    E.c.anchor_cap.in_(sorted(attributions)),
                ),
                E.c.evidence_id > after,
            )
            .order_by(E.c.evidence_id)
            .limit(limit)
        )
        return [_evidence(r) for r in self._c.execute(q)]

    def set_status(self, evidence_ids: Collection[str], status: EvidenceStatus) -> None:
        self._forget()
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
        return [_evidence(r) for r in self._c.execute(_SELECT_EVIDENCE.where(cond))]

    def erase(
        self, evidence_ids: Collection[str], held_by: Collection[Key], forget_keys: Collection[Key]
    ) -> None:
        """Overwrites values and sources in place, then removes the rows and the decisions
        about them (found under `held_by`, the keys the erased evidence belongs to).

        For `forget_keys` (erasure by key or subject) the key's log rows go too, so
        not even the key text stays behind.
        """
        self._forget()
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
        for part in chunks(sorted(ids.key_id(k) for k in forget_keys)):
            for table in (D, BC, R):
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

    def erased_ids(self, evidence_ids: Collection[str]) -> set[str]:
        out: set[str] = set()
        for part in chunks(sorted(evidence_ids)):
            out.update(self._c.scalars(select(EE.c.evidence_id).where(EE.c.evidence_id.in_(part))))
        return out

    # -- federation -----------------------------------------------------------

    def votes(self, keys: Collection[Key]) -> dict[Key, list[Vote]]:
        if self._cache is None:
            return self._load_votes(keys)
        cached = self._cache.votes.read(
            keys, lambda missing: {k: by_voter(vs) for k, vs in self._load_votes(missing).items()}
        )
        return {k: list(vs) for k, vs in cached.items()}

    def _load_votes(self, keys: Collection[Key]) -> dict[Key, list[Vote]]:
        out: dict[Key, list[Vote]] = {k: [] for k in keys}
        for row in _select_in(self._c, _SELECT_VOTES, "vote.key_id", {ids.key_id(k) for k in keys}):
            v = _vote(row)
            out[v.key].append(v)
        return out

    def put_votes(self, votes: Sequence[Vote]) -> None:
        if votes:
            # One vote per voter and key: the latest replaces the one held.
            _insert(
                self._c, V, _VOTE_COLUMNS, [_vote_values(v) for v in votes], ("voter", "key_id")
            )
            if self._cache is not None:
                self._cache.put_votes(votes)

    def delete_votes(self, voter: str, keys: Collection[Key]) -> None:
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

    def delete_votes_on_keys(self, keys: Collection[Key]) -> None:
        self._forget()
        for part in chunks(sorted(ids.key_id(k) for k in keys)):
            self._c.execute(delete(V).where(V.c.key_id.in_(part)))

    def delete_votes_on_evidence(self, evidence_ids: Collection[str]) -> None:
        self._forget()
        for part in chunks(sorted(evidence_ids)):
            self._c.execute(delete(V).where(V.c.evidence_id.in_(part)))

    def all_evidence_ids(self) -> Iterator[str]:
        """Active evidence only: peers never compare or receive decayed or rejected evidence."""
        yield from self._c.scalars(select(E.c.evidence_id).where(E.c.status == _ACTIVE.value))

    def all_erasure_ids(self) -> Iterator[str]:
        yield from self._c.scalars(select(ER.c.erasure_id))

    def all_votes(self) -> Iterator[Vote]:
        for r in self._c.execute(_SELECT_VOTES):
            yield _vote(r)

    def evidence_under(self, prefixes: Collection[str]) -> list[Evidence]:
        rows = _select_under(self._c, _SELECT_EVIDENCE, "evidence.evidence_id", prefixes)
        return [_evidence(r) for r in rows if r[_EVIDENCE_STATUS] == _ACTIVE]

    def tombstones_under(self, prefixes: Collection[str]) -> list[Tombstone]:
        found = [
            r._mapping
            for r in _select_under(self._c, _SELECT_ERASURES, "erasure.erasure_id", prefixes)
        ]
        erased: dict[str, list[str]] = defaultdict(list)
        for erasure_id, evidence_id in _select_in(
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
            )
            for m in found
        ]

    def votes_under(self, voter: str, prefixes: Collection[str]) -> list[Vote]:
        rows = _select_under(
            self._c, _SELECT_VOTES, "vote.key_id", prefixes, [("vote.voter", voter)]
        )
        return [_vote(r) for r in rows]

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
            q = _SELECT_EVIDENCE.where(
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
        _insert(self._c, M, ("name", "value"), [(name, value)], ("name",))


class SqlRepository:
    """Opens transactions on a SQLModel engine; the schema is migrated on open.

    Write transactions run one at a time in this process and share a `KeyCache` of up to
    `cache_keys` hot keys (0 turns it off). Each write moves a generation number kept in the
    database, so a write by anything else (another process on the same file) is noticed at
    the next write here and the cache starts over.
    """

    def __init__(self, url: str, cache_keys: int = DEFAULT_CACHE_KEYS) -> None:
        self.url = url
        self.engine = make_engine(url)
        # An in-memory database is one shared connection: one transaction at a time.
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if isinstance(self.engine.pool, StaticPool) else nullcontext()
        )
        self._writer = threading.Lock()
        self._cache = KeyCache(cache_keys)
        upgrade(self.engine)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def write(self) -> Iterator[SqlTransaction]:
        cache = self._cache
        with self._writer, self._serial:
            with self.engine.connect().execution_options(write=True) as conn, conn.begin():
                if not self.is_sqlite:
                    # One writer at a time, as SQLite's BEGIN IMMEDIATE gives.
                    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7210432)")
                tx = SqlTransaction(conn, cache.begin() if cache.capacity else None)
                seen = tx.meta(_GENERATION)
                if seen != cache.generation:
                    cache.clear()  # written by someone else since our last write
                yield tx
                generation = uuid.uuid4().hex
                tx.set_meta(_GENERATION, generation)
            # Committed: the cache follows.
            cache.generation = generation
            if tx._cache is not None:
                tx._cache.commit()

    @contextmanager
    def read(self) -> Iterator[SqlTransaction]:
        with self._serial, self.engine.connect() as conn, conn.begin():
            yield SqlTransaction(conn)

    def after_erase(self) -> None:
        """Pushes erased bytes out of the WAL (SQLite) or dead tuples (PostgreSQL)."""
        with (
            self._serial,
            self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
        ):
            if self.is_sqlite:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            else:
                # A plain VACUUM frees dead row versions but leaves their bytes in the pages;
                # VACUUM FULL writes each table anew and drops the old files. It locks the
                # table while it runs: erasures are rare operator actions.
                for table in _ERASED_TABLES:
                    conn.exec_driver_sql(f"VACUUM FULL {table}")

    def close(self) -> None:
        self.engine.dispose()
