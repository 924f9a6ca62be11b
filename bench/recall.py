"""Recall: SearchBeliefs over a corpus of beliefs with updates, beside GetBelief.

    python bench/recall.py [--quick] [--postgres URL] [--beliefs N] [--queries Q]
                           [--pairs P] [--seconds S]

Builds a corpus through a real node (`factnode serve` as a subprocess, its data directory
on local disk under the system temporary directory, SQLite unless `--postgres URL`):
`--beliefs` keys (100,000; `--quick` 5,000) of five kinds, each value drawn from a
vocabulary ("person-123 city Lisbon", "team-7 database PostgreSQL", "service-42 region eu
west frankfurt"...). Every key is written two to four times, in rounds, with different
values, trust anchors and event times (SubmitFacts streams of 1,000), so most keys hold
superseded or disbelieved versions beside the one served. Then, on that node:

1. Precision and recall of "current value" queries: for `--queries` sampled keys, the
   query is the key's subject words and its served value's words ("person 123 lisbon").
   A hit in the top 5 is wrong when GetBelief of the hit's key, asked right after, does
   not serve the hit's value: precision@5 = right hits / hits (1.0 by construction: the
   node returns only served values; any wrong hit is printed). recall@5: the queried key's
   served value is among the top 5.
2. Latency: each sampled key's SearchBeliefs (page of 5) and GetBelief, interleaved one
   after the other on the same client and loop; p50 and p99 of each.
3. Index size: SQLite, the pages (`dbstat`) of the FTS5 table `search_text` and its shadow
   tables, `search_doc` and its indexes; PostgreSQL, `pg_total_relation_size('search_doc')`;
   per held assertion (one index row each) and per belief (key).

Then the node is stopped and started again in this process on the same store, to measure
4. the write cost of the index: unary SubmitFact from 16 callers (new keys, vocabulary
   values) for `--seconds`, with the index written and without it, in `--pairs` alternating
   pairs (the order flips every pair). "Without" monkeypatches
   `factnode.store._search.SqlSearch.index_evidence` to a no-op in this process for that
   phase only; there is no setting for it. The same pairs run SubmitFacts streams of 1,000.
   Each pair is printed; `write_cost_ratio` is the median over pairs of (rate with index /
   rate without).

Readable lines first; the last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import CALL_TIMEOUT, NodeProcess, say

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.client import AsyncClient, Hit
from factnode.clock import SystemClock
from factnode.config import Settings
from factnode.core import Policy, recall
from factnode.ledger import Ledger, ensure_node_id
from factnode.server._loop import loop_factory
from factnode.server.app import Node, start_node
from factnode.store import SqlRepository, _search
from factnode.store._search import MATCH_WINDOW

SEED = 20261206
TOP = 5  # precision and recall at 5: the page size of the measured searches
STREAM_MESSAGES = 1000  # facts per SubmitFacts stream
LOAD_STREAMS = 2  # streams in flight while loading (one is read while one is written)
WRITERS = 16  # concurrent SubmitFact callers in the write-cost pairs

# -- the vocabulary and the corpus -------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


CITIES = _words(
    "Lisbon Porto Madrid Barcelona Seville Valencia Paris Lyon Marseille Toulouse Bordeaux "
    "Nantes Lille Brussels Antwerp Ghent Amsterdam Rotterdam Utrecht Berlin Hamburg Munich "
    "Cologne Frankfurt Stuttgart Dresden Leipzig Vienna Graz Zurich Geneva Basel Milan Rome "
    "Naples Turin Florence Bologna Venice Genoa Athens Thessaloniki Sofia Bucharest Budapest "
    "Prague Brno Warsaw Krakow Gdansk Wroclaw Vilnius Riga Tallinn Helsinki Stockholm "
    "Gothenburg Oslo Bergen Copenhagen Aarhus Dublin Cork London Manchester Leeds Glasgow "
    "Edinburgh Cardiff Bristol Liverpool Reykjavik Istanbul Ankara Cairo Casablanca Lagos "
    "Nairobi Accra Johannesburg Toronto Montreal Vancouver Boston Chicago Denver Seattle "
    "Portland Austin Houston Dallas Atlanta Miami Tokyo Osaka Kyoto Seoul Busan Taipei "
    "Singapore Jakarta Manila Bangkok Hanoi Mumbai Delhi Bangalore Chennai Sydney Melbourne "
    "Auckland Wellington Santiago Lima Bogota Quito Montevideo"
)
COMPANIES = tuple(
    f"{a} {b}"
    for a in _words("Acme Globex Initech Umbrella Stark Wayne Wonka Tyrell Cyberdyne Soylent")
    for b in _words("Labs Systems Analytics Logistics Foods Energy Robotics Media")
)
DATABASES = _words(
    "PostgreSQL MySQL MariaDB SQLite MongoDB Cassandra Redis DynamoDB CockroachDB ClickHouse "
    "Oracle Couchbase Neo4j Elasticsearch InfluxDB TimescaleDB Firestore Spanner Snowflake "
    "BigQuery DuckDB Valkey ScyllaDB SingleStore"
)
LANGUAGES = _words(
    "Python Rust Go Java Kotlin Scala TypeScript JavaScript Ruby Elixir Erlang Haskell "
    "OCaml Clojure Swift CSharp FSharp Cpp Zig Julia Perl Lua Dart Crystal"
)
REGIONS = tuple(
    f"{area} {city}"
    for area, cities in (
        ("eu west", "dublin london paris"),
        ("eu central", "frankfurt zurich milan"),
        ("eu north", "stockholm"),
        ("us east", "virginia ohio"),
        ("us west", "oregon california"),
        ("ap south", "mumbai hyderabad"),
        ("ap northeast", "tokyo seoul osaka"),
        ("ap southeast", "singapore sydney jakarta"),
        ("sa east", "saopaulo"),
        ("ca central", "montreal"),
    )
    for city in cities.split()
)


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of key: its namespace, subject prefix, predicate and values."""

    namespace: str
    prefix: str
    predicate: str
    values: tuple[str, ...]
    share: int  # keys of this kind per 10 keys


KINDS = (
    Kind("acme:people", "person", "city", CITIES, 3),
    Kind("acme:people", "person", "employer", COMPANIES, 3),
    Kind("acme:teams", "team", "database", DATABASES, 1),
    Kind("acme:teams", "team", "language", LANGUAGES, 1),
    Kind("acme:services", "service", "region", REGIONS, 2),
)
# Trust anchors, weighted: user_stated outranks api_response outranks agent_observed...
# (the decaying ones get recent event times only, so none has expired by the time it is read).
ANCHORS = (
    "user_stated",
    "user_confirmed",
    "api_response",
    "api_response",
    "document_extracted",
    "agent_observed",
    "agent_observed",
)
VERSIONS = (2, 3, 3, 4)  # writes per key (values differ from one write to the next)


@dataclass(frozen=True, slots=True)
class CorpusKey:
    kind: Kind
    subject: str

    @property
    def pb_key(self) -> pb.Key:
        return pb.Key(
            namespace=self.kind.namespace, subject=self.subject, predicate=self.kind.predicate
        )

    def tuple(self) -> tuple[str, str, str]:
        return (self.kind.namespace, self.subject, self.kind.predicate)


def corpus_keys(n: int) -> list[CorpusKey]:
    """`n` keys: for every 10, three people's cities, three people's employers (the same
    people), one team's database and one its language, two services' regions."""
    out: list[CorpusKey] = []
    counters: dict[str, int] = {}
    i = 0
    while len(out) < n:
        kind = KINDS[_kind_slot(i)]
        if kind.predicate in ("city", "database", "region"):
            counters[kind.prefix] = counters.get(kind.prefix, 0) + 1
        number = counters[kind.prefix] if kind.predicate != "employer" else _same_person(i, out)
        out.append(CorpusKey(kind, f"{kind.prefix}-{number}"))
        i += 1
    return out


def _kind_slot(i: int) -> int:
    """Which kind key `i` is: slots 0-2 city, 3-5 employer, 6 database, 7 language, 8-9 region."""
    slot = i % 10
    return 0 if slot < 3 else 1 if slot < 6 else 2 if slot == 6 else 3 if slot == 7 else 4


def _same_person(i: int, so_far: Sequence[CorpusKey]) -> int:
    """The employer key at slot 3-5 is the person whose city is at slot 0-2 of its ten."""
    return int(so_far[i - 3].subject.rsplit("-", 1)[1])


def corpus_rounds(keys: Sequence[CorpusKey], now: datetime) -> list[list[pb.SubmitFactRequest]]:
    """The writes, round by round: round r writes the r-th version of every key that has one.
    Event times move forward about ten days a round, give or take fifteen, so a later write
    is usually, not always, the more recent; anchors vary, so some later writes lose."""
    rng = random.Random(SEED)
    plans: list[list[tuple[str, str, datetime]]] = []
    for key in keys:
        versions = rng.choice(VERSIONS)
        values: list[tuple[str, str, datetime]] = []
        last = ""
        for r in range(versions):
            value = rng.choice([v for v in key.kind.values if v != last])
            last = value
            days_ago = 10 * (versions - 1 - r) + rng.uniform(0.5, 15)
            values.append((value, rng.choice(ANCHORS), now - timedelta(days=days_ago)))
        plans.append(values)
    rounds: list[list[pb.SubmitFactRequest]] = []
    for r in range(max(VERSIONS)):
        batch = []
        for key, values in zip(keys, plans, strict=True):
            if r < len(values):
                value, anchor, at = values[r]
                batch.append(fact_request(key.pb_key, value, anchor, f"agent-{r}", at))
        rounds.append(batch)
    return rounds


def fact_request(
    key: pb.Key, value: str, anchor: str, source: str, at: datetime | None = None
) -> pb.SubmitFactRequest:
    fact = pb.FactInput(key=key, object=value, anchor=anchor, source=source)
    if at is not None:
        stamp = Timestamp()
        stamp.FromDatetime(at)
        fact.valid_from.CopyFrom(stamp)
    return pb.SubmitFactRequest(fact=fact)


def chunked(
    items: Sequence[pb.SubmitFactRequest], size: int
) -> Iterator[Sequence[pb.SubmitFactRequest]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


async def _stream(stub: pb_grpc.FactServiceAsyncStub, part: Sequence[pb.SubmitFactRequest]) -> int:
    """One SubmitFacts stream of `part`; the facts it decided."""

    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        for f in part:
            yield f

    reply = await stub.SubmitFacts(items(), timeout=CALL_TIMEOUT * 10)
    if reply.invalid_count:
        raise RuntimeError(f"a stream had {reply.invalid_count} invalid facts")
    return int(reply.decided_count)


async def _round(stub: pb_grpc.FactServiceAsyncStub, facts: Sequence[pb.SubmitFactRequest]) -> int:
    """One round's facts in streams of STREAM_MESSAGES, LOAD_STREAMS in flight."""
    queue = list(chunked(facts, STREAM_MESSAGES))
    decided = 0

    async def worker() -> None:
        nonlocal decided
        while queue:
            got = await _stream(stub, queue.pop(0))
            decided += got  # after the await: `decided += await ...` would read it before

    await asyncio.gather(*(worker() for _ in range(LOAD_STREAMS)))
    return decided


async def load(
    stub: pb_grpc.FactServiceAsyncStub, rounds: Sequence[Sequence[pb.SubmitFactRequest]]
) -> dict[str, Any]:
    """Every round through SubmitFacts streams (a round finishes before the next starts);
    the facts decided and the rates."""
    out: dict[str, Any] = {"rounds": []}
    total = 0
    t_all = time.perf_counter()
    for r, facts in enumerate(rounds):
        t0 = time.perf_counter()
        decided = await _round(stub, facts)
        elapsed = time.perf_counter() - t0
        total += decided
        out["rounds"].append(
            {"facts": decided, "seconds": round(elapsed, 1), "per_s": round(decided / elapsed)}
        )
        say(f"  round {r + 1}: {decided:,} facts in {elapsed:.1f} s ({decided / elapsed:,.0f}/s)")
    elapsed = time.perf_counter() - t_all
    out.update({"facts": total, "seconds": round(elapsed, 1), "per_s": round(total / elapsed)})
    return out


# -- 1 and 2: queries and latency ------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def served_values(belief: Any) -> set[str]:
    return set(belief.values) if belief.values else {belief.object}


async def queries(
    client: AsyncClient, keys: Sequence[CorpusKey], n: int, budget: float
) -> dict[str, Any]:
    """For `n` sampled keys (fewer if `budget` seconds pass first): GetBelief (timed),
    SearchBeliefs of the subject's words and the served value's words (timed, interleaved
    with GetBelief), then each hit checked against GetBelief of its key (not timed)."""
    rng = random.Random(SEED + 1)
    sample = rng.sample(range(len(keys)), n)
    done = 0
    stop_at = time.perf_counter() + budget
    texts: list[str] = []
    search_s: list[float] = []
    get_s: list[float] = []
    hits_total = right = found = 0
    wrong: list[dict[str, Any]] = []
    ranks: list[int] = []
    empty = 0
    for i in sample:
        if time.perf_counter() > stop_at:
            say(f"  query budget ({budget:g} s) spent after {done} of {n} queries")
            break
        done += 1
        key = keys[i]
        t0 = time.perf_counter()
        belief = await client.belief(key.tuple())
        get_s.append(time.perf_counter() - t0)
        query = f"{key.subject.replace('-', ' ')} {belief.object}"
        texts.append(query)
        t0 = time.perf_counter()
        page = await client.search(query, page_size=TOP)
        search_s.append(time.perf_counter() - t0)
        hits: Sequence[Hit] = page.items[:TOP]
        if not hits:
            empty += 1
        rank = 0
        for place, hit in enumerate(hits, 1):
            hits_total += 1
            now = await client.belief(hit.belief.key)
            if hit.object in served_values(now) and (
                now.values or hit.version_id == now.version_id
            ):
                right += 1
            else:
                wrong.append(
                    {
                        "query": query,
                        "hit": {
                            "key": list(hit.belief.key),
                            "object": hit.object,
                            "version_id": hit.version_id,
                            "state": hit.belief.state,
                            "anchor": hit.anchor,
                        },
                        "get_belief": {
                            "object": now.object,
                            "values": list(now.values),
                            "version_id": now.version_id,
                            "state": now.state,
                        },
                    }
                )
            if not rank and tuple(hit.belief.key) == key.tuple() and hit.object == belief.object:
                rank = place
        if rank:
            found += 1
            ranks.append(rank)
    return {
        "queries": done,
        "queries_asked_for": n,
        "query_texts": texts,
        "hits": hits_total,
        "right_hits": right,
        "precision_at_5": round(right / hits_total, 4) if hits_total else None,
        "recall_at_5": round(found / done, 4),
        "rank_of_current": {str(r): ranks.count(r) for r in range(1, TOP + 1)},
        "empty_pages": empty,
        "wrong": wrong[:10],
        "wrong_count": len(wrong),
        "search_p50_ms": round(pct(search_s, 0.50), 2),
        "search_p99_ms": round(pct(search_s, 0.99), 2),
        "search_mean_ms": round(statistics.fmean(search_s) * 1000, 2),
        "get_p50_ms": round(pct(get_s, 0.50), 2),
        "get_p99_ms": round(pct(get_s, 0.99), 2),
        "get_mean_ms": round(statistics.fmean(get_s) * 1000, 2),
    }


async def examples(client: AsyncClient) -> list[dict[str, Any]]:
    """A few questions in plain words, with their top hits (for the reader)."""
    out = []
    for query in (
        "city of person-123",
        "which database does team-7 use",
        "where does service-42 run",
    ):
        t0 = time.perf_counter()
        page = await client.search(query, page_size=3)
        ms = (time.perf_counter() - t0) * 1000
        top = [f"{'/'.join(h.belief.key)} = {h.object} ({h.score:.2f})" for h in page.items]
        say(f"  {query!r} ({ms:.0f} ms): {'; '.join(top) or 'no hits'}")
        out.append({"query": query, "ms": round(ms, 1), "top": top})
    return out


# -- 3: index size -------------------------------------------------------------------

SQLITE_INDEX_NAMES = "name = 'search_doc' OR name LIKE 'search_text%' OR name LIKE 'ix_search_doc%'"


def sqlite_sizes(db: Path) -> dict[str, Any]:
    """Bytes of the index (dbstat pages of search_text*, search_doc and its indexes), the
    whole file, and the held assertions (search_doc rows) and keys."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA wal_checkpoint")  # harmless read-only; the node has stopped anyway
        per_table = dict(
            conn.execute(
                f"SELECT name, SUM(pgsize) FROM dbstat WHERE {SQLITE_INDEX_NAMES} GROUP BY name ORDER BY name"
            ).fetchall()
        )
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        docs = conn.execute("SELECT COUNT(*) FROM search_doc").fetchone()[0]
        held = conn.execute(
            "SELECT COUNT(*) FROM evidence WHERE status = 'ACTIVE' AND NOT retracts"
        ).fetchone()[0]
        keys = conn.execute("SELECT COUNT(*) FROM belief").fetchone()[0]
        evidence_bytes = conn.execute(
            "SELECT SUM(pgsize) FROM dbstat WHERE name = 'evidence'"
        ).fetchone()[0]
    finally:
        conn.close()
    return {
        "index_bytes": int(sum(per_table.values())),
        "index_bytes_by_table": {k: int(v) for k, v in per_table.items()},
        "store_bytes": int(page_size * pages),
        "evidence_table_bytes": int(evidence_bytes or 0),
        "indexed_assertions": int(docs),
        "held_assertions": int(held),
        "served_rows": int(keys),
    }


def postgres_sizes(url: str) -> dict[str, Any]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as c:
            index_bytes = c.execute(
                text("SELECT pg_total_relation_size('search_doc')")
            ).scalar_one()
            docs = c.execute(text("SELECT COUNT(*) FROM search_doc")).scalar_one()
            held = c.execute(
                text("SELECT COUNT(*) FROM evidence WHERE status = 'ACTIVE' AND NOT retracts")
            ).scalar_one()
            keys = c.execute(text("SELECT COUNT(*) FROM belief")).scalar_one()
            db_bytes = c.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
            evidence_bytes = c.execute(
                text("SELECT pg_total_relation_size('evidence')")
            ).scalar_one()
    finally:
        engine.dispose()
    return {
        "index_bytes": int(index_bytes),
        "store_bytes": int(db_bytes),
        "evidence_table_bytes": int(evidence_bytes),
        "indexed_assertions": int(docs),
        "held_assertions": int(held),
        "served_rows": int(keys),
    }


# -- where a search's time goes ---------------------------------------------------------

BREAKDOWN_QUERIES = 20


def breakdown(url: str, texts: Sequence[str]) -> dict[str, Any]:
    """In this process, on the stopped node's store: for the first BREAKDOWN_QUERIES query
    texts, the whole ledger search (what SearchBeliefs runs), the store's ranked-match
    queries alone (`search_matches`: every word, then any word, up to MAX_CANDIDATES rows
    each), loading the key states of the first chunk of candidates (`key_states`), and how
    many assertions the query's words match. On SQLite, the any-word statement's EXPLAIN
    QUERY PLAN too."""
    repo = SqlRepository(url, cache_keys=0)
    try:
        ledger = Ledger(repo, Policy(), ensure_node_id(repo, None, "node-recall"), SystemClock())
        rows: list[dict[str, float]] = []
        for text in texts[:BREAKDOWN_QUERIES]:
            s = recall.search(text, limit=TOP)
            t0 = time.perf_counter()
            ledger.reading.search(s, lambda ns: True)
            whole = time.perf_counter() - t0
            with repo.read() as tx:
                t0 = time.perf_counter()
                every = tx.search_matches(s.terms, every_word=True)
                every_ms = time.perf_counter() - t0
                t0 = time.perf_counter()
                found = tx.search_matches(s.terms, every_word=False)
                any_ms = time.perf_counter() - t0
                t0 = time.perf_counter()
                tx.key_states(sorted({m.key for m in (every or found)[:32]}))
                states = time.perf_counter() - t0
                matching = _matching(tx, s.terms)
            rows.append(
                {
                    "search_ms": whole * 1000,
                    "every_word_query_ms": every_ms * 1000,
                    "any_word_query_ms": any_ms * 1000,
                    "key_states_ms": states * 1000,
                    "every_word_candidates": len(every),
                    "any_word_candidates": len(found),
                    "matching_assertions": matching,
                }
            )
        out: dict[str, Any] = {
            name: round(statistics.median(r[name] for r in rows), 1) for name in rows[0]
        }
        out["queries"] = len(rows)
        if url.startswith("sqlite"):
            out["plan"] = _sqlite_plan(url.removeprefix("sqlite:///"), texts[0])
        return out
    finally:
        repo.close()


def _matching(tx: Any, terms: Sequence[str]) -> int:
    """Assertions any of `terms` matches (the rows the store ranks before its LIMIT)."""
    c = tx._c
    if c.dialect.name == "sqlite":
        sql = "SELECT COUNT(*) FROM search_text WHERE search_text MATCH ?"
        return int(c.exec_driver_sql(sql, (recall.fts5_match(terms),)).scalar_one())
    query = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
    sql = f"SELECT COUNT(*) FROM search_doc WHERE document @@ ({query})"
    return int(c.exec_driver_sql(sql, tuple(terms)).scalar_one())


def _sqlite_plan(path: str, text: str) -> list[str]:
    """EXPLAIN QUERY PLAN of the store's any-word search statement (as `search_matches`
    builds it) for `text`."""
    statements: list[str] = []
    repo = SqlRepository(f"sqlite:///{path}", cache_keys=0)
    try:
        with repo.read() as tx:
            conn = tx._c

            def grab(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
                if "search_text MATCH" in statement:
                    statements.append(statement)

            from sqlalchemy import event

            event.listen(conn, "before_cursor_execute", grab)
            try:
                tx.search_matches(recall.search_terms(text), every_word=False, limit=TOP)
            finally:
                event.remove(conn, "before_cursor_execute", grab)
    finally:
        repo.close()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        terms = recall.search_terms(text)
        rows = db.execute(
            "EXPLAIN QUERY PLAN " + statements[-1],
            (recall.fts5_match(terms), MATCH_WINDOW, TOP),
        ).fetchall()
    finally:
        db.close()
    return [str(r[3]) for r in rows]


# -- 4: the write cost -----------------------------------------------------------------


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class IndexSwitch:
    """Turns the recall index write off and on in this process (the bench's monkeypatch)."""

    def __init__(self) -> None:
        self.original = _search.SqlSearch.index_evidence

    def set(self, on: bool) -> None:
        if on:
            _search.SqlSearch.index_evidence = self.original  # type: ignore[method-assign]
        else:
            _search.SqlSearch.index_evidence = _no_index  # type: ignore[method-assign]


def _no_index(self: _search.SqlSearch, evidence: Sequence[Any]) -> None:
    return None


class Writes:
    """New keys in their own namespace, vocabulary values, distinct across phases."""

    def __init__(self) -> None:
        self.n = 0
        self.rng = random.Random(SEED + 2)

    def next(self) -> pb.SubmitFactRequest:
        self.n += 1
        kind = KINDS[self.n % len(KINDS)]
        key = pb.Key(
            namespace="acme:writes", subject=f"{kind.prefix}-w{self.n}", predicate=kind.predicate
        )
        return fact_request(key, self.rng.choice(kind.values), self.rng.choice(ANCHORS), "bench")


async def unary_phase(
    stub: pb_grpc.FactServiceAsyncStub, writes: Writes, seconds: float
) -> dict[str, float]:
    stop_at = time.perf_counter() + seconds
    done = 0

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await stub.SubmitFact(writes.next(), timeout=CALL_TIMEOUT)
            done += 1

    cpu0, t0 = _cpu(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(WRITERS)))
    elapsed, cpu = time.perf_counter() - t0, _cpu() - cpu0
    return {
        "per_s": round(done / elapsed, 1),
        "facts": done,
        "cpu_us_per_fact": round(cpu / done * 1e6),
    }


async def stream_phase(
    stub: pb_grpc.FactServiceAsyncStub, writes: Writes, seconds: float
) -> dict[str, float]:
    done = 0
    cpu0, t0 = _cpu(), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        got = await _stream(stub, [writes.next() for _ in range(STREAM_MESSAGES)])
        done += got
    elapsed, cpu = time.perf_counter() - t0, _cpu() - cpu0
    return {
        "per_s": round(done / elapsed, 1),
        "facts": done,
        "cpu_us_per_fact": round(cpu / done * 1e6),
    }


async def write_pairs(settings: Settings, pairs: int, seconds: float) -> dict[str, Any]:
    """The node in this process on the loaded store; `pairs` pairs of (with index, without),
    the order flipping each pair, for unary SubmitFact and for SubmitFacts streams."""
    switch = IndexSwitch()
    node: Node | None = None
    channel: grpc.aio.Channel | None = None
    try:
        node, port = await start_node(settings)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = pb_grpc.FactServiceStub(channel)
        writes = Writes()
        await unary_phase(stub, writes, min(1.0, seconds / 3))  # warm up
        out: dict[str, list[dict[str, Any]]] = {"unary": [], "stream": []}
        for i in range(pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            for kind, phase in (("unary", unary_phase), ("stream", stream_phase)):
                got: dict[bool, dict[str, float]] = {}
                for on in order:
                    switch.set(on)
                    try:
                        got[on] = await phase(stub, writes, seconds)
                    finally:
                        switch.set(True)
                ratio = got[True]["per_s"] / got[False]["per_s"]
                out[kind].append(
                    {
                        "with_index": got[True],
                        "without_index": got[False],
                        "ratio": round(ratio, 3),
                        "first": "with" if order[0] else "without",
                    }
                )
                say(
                    f"  pair {i + 1} {kind:6s} ({'with' if order[0] else 'without'} first): "
                    f"with index {got[True]['per_s']:8.1f}/s ({got[True]['cpu_us_per_fact']} us CPU a fact), "
                    f"without {got[False]['per_s']:8.1f}/s ({got[False]['cpu_us_per_fact']} us), "
                    f"ratio {ratio:.3f}"
                )
        return out
    finally:
        switch.set(True)
        if channel is not None:
            await channel.close(None)
        if node is not None:
            await node.stop(0)


# -- the run ------------------------------------------------------------------------


async def run(args: argparse.Namespace, event_loop: str) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="factnode-recall-"))
    out: dict[str, Any] = {}
    node: NodeProcess | None = None
    try:
        keys = corpus_keys(args.beliefs)
        now = datetime.now(UTC)
        rounds = corpus_rounds(keys, now)
        say(
            f"corpus: {len(keys):,} keys, {sum(len(r) for r in rounds):,} facts in {len(rounds)} rounds; "
            f"store {'postgres' if args.postgres else 'sqlite'} ({workdir})"
        )
        node = NodeProcess(workdir, args.postgres, event_loop)
        channel = grpc.aio.insecure_channel(node.address)
        try:
            await node.wait_serving(channel)
            out["load"] = await load(pb_grpc.FactServiceStub(channel), rounds)
        finally:
            await channel.close(None)
        say(
            f"loaded {out['load']['facts']:,} facts in {out['load']['seconds']:.0f} s "
            f"({out['load']['per_s']:,}/s through SubmitFacts)"
        )
        client = AsyncClient(node.address, timeout=CALL_TIMEOUT)
        try:
            say("plain questions:")
            out["examples"] = await examples(client)
            # Warm both calls (connections, caches) before timing.
            for k in keys[:20]:
                await client.belief(k.tuple())
                await client.search(f"{k.subject.replace('-', ' ')}", page_size=TOP)
            out["queries"] = await queries(client, keys, args.queries, args.query_seconds)
        finally:
            await client.close()
        q = out["queries"]
        say(
            f"precision@5 {q['precision_at_5']} ({q['right_hits']} of {q['hits']} hits served now), "
            f"recall@5 {q['recall_at_5']} over {q['queries']} queries "
            f"(rank of the current value: {q['rank_of_current']}; empty pages {q['empty_pages']})"
        )
        if q["wrong_count"]:
            say(f"PRECISION IS NOT 1.0: {q['wrong_count']} hits not served now; first ones:")
            for w in q["wrong"]:
                say(f"  {json.dumps(w)}")
        say(
            f"SearchBeliefs p50 {q['search_p50_ms']} ms p99 {q['search_p99_ms']} ms | "
            f"GetBelief p50 {q['get_p50_ms']} ms p99 {q['get_p99_ms']} ms "
            f"(interleaved, one client, one at a time)"
        )
        out["node_rss_mb"] = node.rss_mb()
        node.stop()
        node = None
        data = workdir / "data"
        sizes = (
            postgres_sizes(args.postgres) if args.postgres else sqlite_sizes(data / "factnode.db")
        )
        sizes["index_bytes_per_assertion"] = round(
            sizes["index_bytes"] / sizes["indexed_assertions"], 1
        )
        sizes["index_bytes_per_belief"] = round(sizes["index_bytes"] / len(keys), 1)
        out["size"] = sizes
        say(
            f"index {sizes['index_bytes'] / 2**20:.1f} MiB: {sizes['index_bytes_per_assertion']} bytes "
            f"per held assertion ({sizes['indexed_assertions']:,}; held {sizes['held_assertions']:,}), "
            f"{sizes['index_bytes_per_belief']} per belief ({len(keys):,}); whole store "
            f"{sizes['store_bytes'] / 2**20:.1f} MiB, evidence table {sizes['evidence_table_bytes'] / 2**20:.1f} MiB"
        )
        if "index_bytes_by_table" in sizes:
            say(f"  by table: {sizes['index_bytes_by_table']}")
        settings = Settings(
            listen="127.0.0.1:0",
            data_dir=data,
            database_url=args.postgres,
            event_loop=event_loop,
        )
        b = out["breakdown"] = breakdown(settings.db_url, q.pop("query_texts"))
        say(
            f"where a search's time goes (in this process, medians of {b['queries']} queries): "
            f"whole search {b['search_ms']} ms; the store's every-word query "
            f"{b['every_word_query_ms']} ms ({b['every_word_candidates']:.0f} candidates), "
            f"any-word query {b['any_word_query_ms']} ms ({b['any_word_candidates']:.0f} "
            f"candidates of {b['matching_assertions']:.0f} matching assertions; it runs only "
            f"when the every-word candidates run out); key states of a chunk of candidates "
            f"{b['key_states_ms']} ms"
        )
        for line in b.get("plan", []):
            say(f"  plan: {line}")
        say(
            f"write cost: the node again, in this process, on the same store; 'without index' = "
            f"factnode.store._search.SqlSearch.index_evidence monkeypatched to a no-op "
            f"({args.pairs} pairs, {args.seconds:g} s a phase, {WRITERS} unary callers / streams of "
            f"{STREAM_MESSAGES})"
        )
        if args.no_writes:
            out["writes"] = {"unary": [], "stream": []}
        else:
            out["writes"] = await write_pairs(settings, args.pairs, args.seconds)
        return out
    finally:
        if node is not None:
            node.stop()
        if args.keep:
            say(f"kept the store in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def summary(
    args: argparse.Namespace, out: dict[str, Any], event_loop: str, load_avg: list[float]
) -> dict[str, Any]:
    q, size, writes = out["queries"], out["size"], out["writes"]

    def med(kind: str, side: str) -> float | None:
        got = [p[side]["per_s"] for p in writes[kind]]
        return round(float(statistics.median(got)), 1) if got else None

    def mid(ratios: list[float]) -> float | None:
        return round(statistics.median(ratios), 3) if ratios else None

    ratios = [p["ratio"] for p in writes["unary"]]
    stream_ratios = [p["ratio"] for p in writes["stream"]]
    return {
        "beliefs": args.beliefs,
        "facts": out["load"]["facts"],
        "queries": q["queries"],
        "precision_at_5": q["precision_at_5"],
        "recall_at_5": q["recall_at_5"],
        "search_p50_ms": q["search_p50_ms"],
        "search_p99_ms": q["search_p99_ms"],
        "get_p50_ms": q["get_p50_ms"],
        "get_p99_ms": q["get_p99_ms"],
        "index_bytes": size["index_bytes"],
        "index_bytes_per_assertion": size["index_bytes_per_assertion"],
        "index_bytes_per_belief": size["index_bytes_per_belief"],
        "submit_with_index_per_s": med("unary", "with_index"),
        "submit_without_index_per_s": med("unary", "without_index"),
        "write_cost_ratio": mid(ratios),
        "pairs": ratios,
        "stream_with_index_per_s": med("stream", "with_index"),
        "stream_without_index_per_s": med("stream", "without_index"),
        "stream_write_cost_ratio": mid(stream_ratios),
        "stream_pairs": stream_ratios,
        "load_per_s": out["load"]["per_s"],
        "load_seconds": out["load"]["seconds"],
        "without_index": "monkeypatched SqlSearch.index_evidence (in-process node)",
        "store": "postgres" if args.postgres else "sqlite",
        "event_loop": event_loop,
        "seconds": args.seconds,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_1m": load_avg,
        "figures": out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="5,000 beliefs, 200 queries, 2 short pairs"
    )
    parser.add_argument("--postgres", metavar="URL", help="run the node on this (scratch) database")
    parser.add_argument("--beliefs", type=int, help="keys in the corpus (default 100,000)")
    parser.add_argument("--queries", type=int, help="sampled keys queried (default 500)")
    parser.add_argument(
        "--query-seconds",
        type=float,
        default=300.0,
        help="stop sampling queries after this long (default 300)",
    )
    parser.add_argument("--pairs", type=int, help="write-cost pairs (default 4)")
    parser.add_argument("--seconds", type=float, help="seconds per write phase (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the store's directory")
    parser.add_argument(
        "--no-writes", action="store_true", help="skip the write-cost pairs (figure 4)"
    )
    args = parser.parse_args()
    if args.beliefs is None:
        args.beliefs = 5_000 if args.quick else 100_000
    if args.queries is None:
        args.queries = 200 if args.quick else 500
    if args.pairs is None:
        args.pairs = 2 if args.quick else 4
    if args.seconds is None:
        args.seconds = 2.0 if args.quick else 5.0
    args.queries = min(args.queries, args.beliefs)
    event_loop, new_loop = loop_factory("auto")
    load_before = os.getloadavg()[0]
    with asyncio.Runner(loop_factory=new_loop) as runner:
        out = runner.run(run(args, event_loop))
    result = summary(args, out, event_loop, [load_before, os.getloadavg()[0]])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
