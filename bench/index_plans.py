"""Which indexes the store's queries use: every SELECT the store runs, with its query plan.

    python bench/index_plans.py [--postgres URL]

Drives a small workload through the real ledger (submissions with idempotency keys,
corrections and contradictions, a retraction, reads of every kind, pages, the review
queue, peer evidence and votes, a resolution, decay, and erasures by evidence, key and
subject), records every distinct SELECT the store sends (SQLAlchemy's
`before_cursor_execute`), then asks the database for each one's plan with the parameters
it ran with: SQLite's `EXPLAIN QUERY PLAN`, or with `--postgres` (in a fresh schema, dropped
afterwards) `EXPLAIN` after `ANALYZE` and with `enable_seqscan` off, since on tables this
small PostgreSQL would otherwise scan every table whichever indexes exist: the plan then
shows the index the planner can use, which is what this audit asks.

Prints each query's plan, then each index of the schema with the number of queries whose
plan uses it; the last line is one JSON object {index: queries using it}. An index no plan
names is a cost on every write that no read repays (bench/README.md, issue 25).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool

sys.path.insert(0, str(Path(__file__).resolve().parent))

from write_batch import fresh_store

from factnode.core import MICROS_PER_DAY, Key, Policy, Submission
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock

DAY = MICROS_PER_DAY
NS = "user:ana"


def shape(statement: str) -> str:
    """A statement with its values taken out: one plan per kind of query, not per value."""
    values = re.sub(r"'(?:[^']|'')*'|\b\d+\b", "?", " ".join(statement.split()))
    return re.sub(r"\?(?:, \?)+", "?", values)


@contextmanager
def recorded() -> Iterator[list[str]]:
    """Every distinct statement that may search (SELECT, UPDATE, DELETE) sent on any SQLite
    connection opened meanwhile, as SQLite expands it with its values: the hand-built SQL
    runs on DBAPI cursors, which SQLAlchemy's events never see."""
    seen: dict[str, str] = {}  # by shape: the first statement of each

    def trace(statement: str) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH", "UPDATE", "DELETE")):
            seen.setdefault(shape(statement), statement)

    def connected(dbapi_conn: Any, *_: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.set_trace_callback(trace)

    # On checkout too: a pooled connection opened before (by the migrations) is reused.
    for name in ("connect", "checkout"):
        event.listen(Pool, name, connected)
    out: list[str] = []
    try:
        yield out
    finally:
        for name in ("connect", "checkout"):
            event.remove(Pool, name, connected)
        out.extend(seen.values())


def workload(ledger: Ledger, peer: Ledger, clock: FakeClock) -> None:
    """One of each thing the store is asked, on a few keys."""
    key = Key(NS, "ana", "lives_in")
    works = Key(NS, "ana", "works_at")
    for i in range(40):
        ledger.submit(Submission(NS, f"s{i}", "lives_in", f"city{i}", "user_stated", "ana"))
    first = ledger.submit(Submission(NS, "ana", "lives_in", "Lisbon", "user_stated", "ana"))
    ledger.submit_many(
        [
            Submission(NS, "ana", "lives_in", "Porto", "user_stated", "bob"),
            Submission(NS, "ana", "works_at", "Acme", "agent_observed", "crm"),
            Submission(NS, "ana", "speaks", "pt", "user_stated", "ana", idempotency_key="i-1"),
        ]
    )
    ledger.submit(
        Submission(NS, "ana", "speaks", "pt", "user_stated", "ana", idempotency_key="i-1")
    )
    ledger.submit(
        Submission(NS, "ana", "lives_in", "Faro", "user_stated", "ana", corrects=first.evidence_id)
    )
    ledger.submit(Submission(NS, "ana", "lives_in", "Braga", "user_stated", "x", contradicts=works))
    ledger.retract(Key(NS, "s1", "lives_in"), reason="moved")
    clock.advance(2 * DAY)
    ledger.belief(key)
    ledger.served(key)
    ledger.belief(key, as_of=clock.now() - DAY, known_at=clock.now() - DAY)
    ledger.history(key)
    ledger.explain(key)
    ledger.list_beliefs(NS, page_size=5)
    ledger.list_beliefs(NS, "ana")
    ledger.review_queue(NS)
    ledger.decisions(key)
    ledger.decisions(None, NS, page_size=5)
    ledger.changes(NS, 0, 10)
    ledger.counts()
    ledger.tally_of(key)
    # A peer's evidence and its vote, then an operator's resolution of the tie they make.
    peer.submit(Submission(NS, "ana", "lives_in", "Porto", "user_stated", "peer"))
    _, evidence, votes = peer.offer({"evidence": [""], "votes": [""]})
    ledger.receive("peer", "user_stated", [], evidence, votes, [""])
    ledger.offer({"evidence": [""], "tombstones": [""], "votes": [""]})
    queued = ledger.review_queue(NS).items
    if queued:
        ledger.resolve(
            queued[0].key, version_id=queued[0].version_id, obj=None, reason="r", operator="op"
        )
    clock.advance(400 * DAY)
    ledger.run_decay()
    ledger.erase(evidence_id=first.evidence_id, operator="op", reason="r")
    ledger.erase(key=Key(NS, "s2", "lives_in"), operator="op", reason="r")
    ledger.erase(subject=(NS, "s3"), operator="op", reason="r")
    tombstones, _, _ = ledger.offer({"tombstones": [""]})
    peer.receive("node", None, tombstones, [], [])
    # After erasures, each write checks what it brings against them (`erased`).
    ledger.submit(Submission(NS, "s3", "lives_in", "Porto", "user_stated", "ana"))
    _, evidence, _ = peer.offer({"evidence": [""]})
    ledger.receive("peer", None, [], evidence, [])


def sqlite_plan(engine: Engine, statement: str) -> list[str]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement).fetchall()
    return [str(r[-1]) for r in rows]


def postgres_plan(engine: Engine, statement: str) -> list[str]:
    """The plan of a statement SQLite ran, on PostgreSQL: SQLite's expanded text is plain
    SQL but for booleans (0/1), which PostgreSQL refuses; those plans are reported as such."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        try:
            rows = conn.exec_driver_sql("EXPLAIN " + statement.replace("%", "%%")).fetchall()
        except Exception as exc:
            return [f"(not explained on PostgreSQL: {type(exc).__name__})"]
    return [str(r[0]) for r in rows]


def store(url: str, clock: FakeClock, statements: list[str] | None = None) -> SqlRepository:
    """A migrated store with the workload run through it (recording its statements into
    `statements` where given: the migrations' own are not the store's queries)."""
    repo, peer_repo = SqlRepository(url), SqlRepository("sqlite://")
    try:
        with recorded() if statements is not None else nullcontext([]) as seen:
            ledger = Ledger(repo, Policy(), "node", clock)
            workload(ledger, Ledger(peer_repo, Policy(), "peer", clock), clock)
        if statements is not None:
            statements.extend(seen)
    finally:
        peer_repo.close()
    return repo


def audit(engine: Engine, statements: list[str], explain: Any) -> dict[str, int]:
    """Prints each statement's plan; returns each index with how many plans use it."""
    indexes = {
        ix["name"]: table
        for table in inspect(engine).get_table_names()
        for ix in inspect(engine).get_indexes(table)
        if ix["name"]
    }
    used = dict.fromkeys(sorted(indexes), 0)
    for statement in statements:
        plan = explain(engine, statement)
        print("--", " ".join(statement.split())[:300])
        for line in plan:
            print("   ", line)
        for name in used:
            if any(re.search(rf"\b{name}\b", line) for line in plan):
                used[name] += 1
    print()
    print(
        f"{engine.dialect.name}: {len(statements)} kinds of statement; the plans using each index:"
    )
    for name, count in used.items():
        print(f"  {indexes[name]:>14}.{name}: {count}{'   <- unused' if not count else ''}")
    return used


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--postgres", default=None, help="a PostgreSQL URL (a fresh schema is used)")
    args = p.parse_args(argv)
    figures: dict[str, dict[str, int]] = {}
    statements: list[str] = []
    with fresh_store(None) as url:
        repo = store(url, FakeClock(20_000 * DAY), statements)
        try:
            figures["sqlite"] = audit(repo.engine, statements, sqlite_plan)
        finally:
            repo.close()
    if args.postgres:
        with fresh_store(args.postgres) as url:
            repo = store(url, FakeClock(20_000 * DAY))
            try:
                with repo.engine.begin() as conn:
                    conn.execute(text("ANALYZE"))
                figures["postgresql"] = audit(repo.engine, statements, postgres_plan)
            finally:
                repo.close()
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
