"""Arbitration and write-path throughput: the pure core, the store, and a raw SQLite floor.

    python bench/arbitration.py [--keys N --versions V --batch B --store-facts F --repeats R --quick]

Measures, in one run:

1. Decisions per second of the pure core: every key gets V competing versions whose
   anchors, event times, worth and confidence vary deterministically (seeded), replayed
   through `factnode.core.decide` against a per-key `KeyState` and the key's last
   arbitration exactly as `Ledger.ingest` does, with no I/O; then plain `arbitrate()` calls per second over the final sets.
2. Store writes per second: `Ledger.ingest` in batches on a fresh SQLite file store,
   against a raw floor: stdlib `sqlite3` `executemany` of the same evidence rows into a
   table with the store's own DDL (copied from its `sqlite_master`), the same pragmas
   and batch size, one transaction per batch. Store and raw run in back-to-back pairs
   (`--repeats`, default 3); the ratio is the median of the pairs' ratios. The target
   (issue 25) is store/raw >= 0.5. The JSON also gives the rows written per fact (every
   row inserted, updated or deleted, in every table).

Readable figures go first; the last line of output is one JSON object of all figures.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factnode.core import (
    MICROS_PER_DAY,
    Arbitrated,
    Evidence,
    EvidenceStatus,
    Key,
    KeyState,
    Policy,
    Submission,
    arbitrate,
    decide,
    make_evidence,
)
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.store.cache import DEFAULT_CACHE_KEYS
from factnode.store.sql import _evidence_row  # the store's own row builder: same rows
from factnode.testing import FakeClock

SEED = 20240611
RATIO_TARGET = 0.5  # issue 25 (0.25 before)
START = 20_000 * MICROS_PER_DAY  # FakeClock's default "now"

# Weighted so that anchors often tie and the later rules get to decide too.
ANCHOR_CHOICES = (
    "user_stated",
    "api_response",
    "api_response",
    "document_extracted",
    "agent_observed",
    "agent_observed",
    "agent_observed",
    "llm_generated",
)
SINGLE_PREDICATES = ("lives_in", "works_at", "manager", "title", "python_version")
MULTI_PREDICATE = "speaks"  # multi-valued by default policy: about 1 key in 10


# -- workload ------------------------------------------------------------------


def workload(
    rng: random.Random, n_keys: int, versions: int, policy: Policy, tag: str
) -> list[Evidence]:
    """`n_keys` keys x `versions` competing values each, in a seeded arrival order.

    Event times come from a small set of days (recency ties happen), worth from a coarse
    grid (worth margins both hold and fail) and confidence from a 0.05 grid over
    [0.35, 1.0] (some versions tie on every rule; a few fall
    under min_confidence and are rejected).
    """
    out: list[Evidence] = []
    recorded = START
    for k in range(n_keys):
        predicate = (
            MULTI_PREDICATE if k % 10 == 9 else SINGLE_PREDICATES[k % len(SINGLE_PREDICATES)]
        )
        ns, subject = f"{tag}:{k % 97}", f"s{k}"
        for v in range(versions):
            recorded += 1
            sub = Submission(
                ns,
                subject,
                predicate,
                f"value-{v}-{rng.randrange(1_000_000)}",
                rng.choice(ANCHOR_CHOICES),
                source=f"bench:agent-{rng.randrange(5)}",
                worth=rng.randrange(6, 21) * 50 / 1000,
                confidence=rng.randrange(7, 21) * 50 / 1000,
                valid_from=START - rng.randrange(8) * MICROS_PER_DAY,
            )
            out.append(make_evidence(sub, policy, recorded_at=recorded, origin_node="node-bench"))
    rng.shuffle(out)
    return out


# -- 1. the pure core ------------------------------------------------------------


def bench_core(evidence: Sequence[Evidence], policy: Policy) -> dict[str, Any]:
    """Replays the evidence through `decide` with per-key state, as `Ledger.ingest` does."""
    held: dict[Key, list[Evidence]] = {}
    ended: dict[Key, list[Evidence]] = {}  # retraction-like evidence (none in this set)
    known: dict[Key, Arbitrated] = {}  # each key's last arbitration, as the ledger keeps it
    outcomes: Counter[str] = Counter()
    t0 = time.perf_counter()
    for e in evidence:
        ruling = decide(
            e,
            KeyState(held.setdefault(e.key, []), ended.setdefault(e.key, [])),
            policy,
            duplicate=False,
            erased=False,
            known=known.get(e.key),
        )
        if ruling.candidate:
            held[e.key].append(e)
            assert ruling.arbitrated is not None
            known[e.key] = ruling.arbitrated
        outcomes[ruling.decision.outcome.value] += 1
    decide_s = time.perf_counter() - t0

    finals = list(held.values())
    rounds = 0
    t0 = time.perf_counter()
    rules: Counter[str] = Counter()
    while True:
        rounds += 1
        for ev in finals:
            verdict = arbitrate(ev, policy)
            if rounds == 1 and verdict is not None:
                rules[verdict.rule.value] += 1
        arb_s = time.perf_counter() - t0
        if arb_s >= 1.0 or rounds >= 5:
            break
    calls = rounds * len(finals)
    return {
        "core_decisions": len(evidence),
        "core_seconds": round(decide_s, 3),
        "core_decisions_per_s": round(len(evidence) / decide_s),
        "core_outcomes": dict(sorted(outcomes.items())),
        "arbitrate_calls": calls,
        "arbitrate_seconds": round(arb_s, 3),
        "arbitrate_per_s": round(calls / arb_s),
        "arbitrate_rules": dict(sorted(rules.items())),
    }


# -- 2. the store against raw sqlite3 ------------------------------------------------


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def run_store(
    url: str,
    evidence: Sequence[Evidence],
    batch: int,
    policy: Policy,
    cache_keys: int = DEFAULT_CACHE_KEYS,
) -> tuple[float, list[float], int, float]:
    """Seconds to ingest all evidence batch by batch on a fresh store, per-batch seconds, the
    rows the writes changed (SQLite's `total_changes` on the writer's connection: every row
    inserted, updated or deleted, in every table) and the CPU seconds this process spent on
    it (user and system, every thread: the store's checkpoints too)."""
    repo = SqlRepository(url, cache_keys=cache_keys)
    try:
        ledger = Ledger(repo, policy, "node-bench", FakeClock(START))
        per_batch = []
        rows_before = _rows_changed(repo)
        cpu0 = _cpu_seconds()
        t0 = time.perf_counter()
        for part in batches(evidence, batch):
            b0 = time.perf_counter()
            ledger.ingest([(e, None) for e in part])
            per_batch.append(time.perf_counter() - b0)
        elapsed, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
        return elapsed, per_batch, _rows_changed(repo) - rows_before, cpu
    finally:
        repo.close()


def _cpu_seconds() -> float:
    """This process's CPU time so far, user and system, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rows_changed(repo: SqlRepository) -> int:
    """Rows changed so far on the store's one write connection (a SQLite file keeps it)."""
    kept = repo._pinned
    if kept is None:
        return 0
    return int(kept.connection.dbapi_connection.total_changes)  # type: ignore[union-attr]


def evidence_ddl(store_db: Path) -> list[str]:
    """The store's own CREATE statements for the evidence table and its indexes."""
    with sqlite3.connect(store_db) as conn:
        rows = conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'evidence' AND sql IS NOT NULL "
            "ORDER BY type DESC, name"  # the table before its indexes
        ).fetchall()
    return [r[0] for r in rows]


def raw_rows(
    evidence: Sequence[Evidence], statuses: dict[str, str]
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The evidence rows exactly as the store builds them, as plain tuples.

    Uses the store's own row builder so the baseline follows schema changes; the status of
    each row is the one the store recorded (ACTIVE, or REJECTED by the gate).
    """
    dicts = [_evidence_row(e, EvidenceStatus(statuses[e.evidence_id]), None) for e in evidence]
    cols = list(dicts[0])
    return cols, [tuple(d[c] for c in cols) for d in dicts]


def raw_connection(path: Path, ddl: Sequence[str]) -> sqlite3.Connection:
    """A stdlib connection with the store's pragmas and the store's DDL applied."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA secure_delete=ON")
    for stmt in ddl:
        conn.execute(stmt)
    return conn


def run_raw(
    path: Path, ddl: Sequence[str], cols: Sequence[str], rows: Sequence[tuple[Any, ...]], batch: int
) -> tuple[float, float]:
    """Seconds to insert the rows with executemany, one transaction per batch, store pragmas,
    and the CPU seconds (user and system) it took."""
    conn = raw_connection(path, ddl)
    try:
        sql = f"INSERT INTO evidence ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        cpu0 = _cpu_seconds()
        t0 = time.perf_counter()
        for part in batches(rows, batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, part)
            conn.execute("COMMIT")
        return time.perf_counter() - t0, _cpu_seconds() - cpu0
    finally:
        conn.close()


WRITTEN_TABLES = ("evidence", "decision", "belief", "belief_change", "vote")


def run_raw_all_tables(store_db: Path, path: Path, n_batches: int) -> tuple[float, int]:
    """Seconds to insert every row the store ended up holding in the tables it writes
    (evidence, decisions, beliefs, belief changes, votes) with executemany,
    split into as many transactions as the store used, with the store's DDL and pragmas.

    A second floor beside the evidence-only one: the store writes several rows per fact
    (its decision, the key's belief and change, its vote), so this compares like with like
    on volume. It still does none of the store's reads or arbitration.
    """
    src = sqlite3.connect(store_db)
    try:
        ddl = [
            r[0]
            for r in src.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN "
                f"({', '.join('?' * len(WRITTEN_TABLES))}) ORDER BY type DESC, name",
                WRITTEN_TABLES,
            )
        ]
        data = {t: src.execute(f"SELECT * FROM {t}").fetchall() for t in WRITTEN_TABLES}
    finally:
        src.close()
    conn = raw_connection(path, ddl)
    try:
        total = sum(len(rows) for rows in data.values())
        t0 = time.perf_counter()
        for i in range(n_batches):
            conn.execute("BEGIN IMMEDIATE")
            for table, rows in data.items():
                if not rows:
                    continue
                part = rows[i * len(rows) // n_batches : (i + 1) * len(rows) // n_batches]
                if part:
                    marks = ", ".join("?" * len(part[0]))
                    conn.executemany(f"INSERT INTO {table} VALUES ({marks})", part)
            conn.execute("COMMIT")
        return time.perf_counter() - t0, total
    finally:
        conn.close()


def evidence_table(path: Path, columns: str = "*") -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT {columns} FROM evidence ORDER BY evidence_id").fetchall()


def bench_store(
    evidence: Sequence[Evidence],
    policy: Policy,
    batch: int,
    workdir: Path,
    repeats: int,
    profile: int,
) -> dict[str, Any]:
    """Store and raw runs in pairs, each pair back to back on fresh files, so that a busy
    moment on a shared machine skews one pair, not the verdict: the ratio is the median of
    the pairs' ratios."""
    store_db = workdir / "bench0.db"
    pairs: list[tuple[float, float]] = []
    cpu_pairs: list[tuple[float, float]] = []
    per_batch: list[float] = []
    rows_changed = 0
    for i in range(repeats):
        store_s, batches_s, changed, store_cpu = run_store(
            f"sqlite:///{workdir / f'bench{i}.db'}", evidence, batch, policy
        )
        if i == 0:
            per_batch = batches_s
            rows_changed = changed
            ddl = evidence_ddl(store_db)
            statuses = dict(evidence_table(store_db, "evidence_id, status"))
            cols, rows = raw_rows(evidence, statuses)
        raw_s, raw_cpu = run_raw(workdir / f"raw{i}.db", ddl, cols, rows, batch)
        pairs.append((store_s, raw_s))
        cpu_pairs.append((store_cpu, raw_cpu))
    # Both files must hold exactly the same evidence rows, or the ratio means nothing.
    same = evidence_table(store_db) == evidence_table(workdir / "raw0.db")
    all_runs = [
        run_raw_all_tables(store_db, workdir / f"raw_all{i}.db", len(per_batch))
        for i in range(repeats)
    ]
    raw_all_s = statistics.median(t for t, _ in all_runs)
    raw_all_rows = all_runs[0][1]

    n = len(evidence)
    store_s = statistics.median(s for s, _ in pairs)
    raw_s = statistics.median(r for _, r in pairs)
    ratios = [r / s for s, r in pairs]  # (n / s) / (n / r): store rows/s over raw rows/s
    ratio = statistics.median(ratios)
    store_rate, raw_rate = n / store_s, n / raw_s
    # CPU time, which a busy machine inflates far less than wall time (waits are not in it).
    cpu_ratios = [r / s for s, r in cpu_pairs]
    out: dict[str, Any] = {
        "store_facts": n,
        "batch": batch,
        "repeats": repeats,
        "store_seconds": round(store_s, 3),
        "store_seconds_all": [round(s, 3) for s, _ in pairs],
        "store_rows_per_s": round(store_rate),
        "store_batch_ms_median": round(statistics.median(per_batch) * 1000, 2),
        "store_batch_ms_last": round(per_batch[-1] * 1000, 2),
        "raw_seconds_median": round(raw_s, 3),
        "raw_seconds_all": [round(r, 3) for _, r in pairs],
        "raw_rows_per_s": round(raw_rate),
        "ratios_store_over_raw": [round(x, 4) for x in ratios],
        "ratio_store_over_raw": round(ratio, 4),
        "ratio_target": RATIO_TARGET,
        "ratio_target_met": ratio >= RATIO_TARGET,
        "same_rows": same,
        "store_cpu_us_per_fact": round(statistics.median(s for s, _ in cpu_pairs) / n * 1e6, 1),
        "raw_cpu_us_per_row": round(statistics.median(r for _, r in cpu_pairs) / n * 1e6, 1),
        "cpu_ratios_store_over_raw": [round(x, 4) for x in cpu_ratios],
        "cpu_ratio_store_over_raw": round(statistics.median(cpu_ratios), 4),
        "raw_all_tables_rows": raw_all_rows,
        "raw_all_tables_seconds_median": round(raw_all_s, 3),
        "raw_all_tables_facts_per_s": round(n / raw_all_s),
        "ratio_store_over_raw_all_tables": round(raw_all_s / store_s, 4),
        # Every row inserted, updated or deleted per fact, all tables (the first run's).
        "rows_written": rows_changed,
        "rows_written_per_fact": round(rows_changed / n, 3),
        "rows_held_per_fact": round(raw_all_rows / n, 3),
    }
    # For context: the same run with the key cache off, so every batch reads its keys back.
    cold_s, _, _, _ = run_store(f"sqlite:///{workdir / 'cold.db'}", evidence, batch, policy, 0)
    out["store_no_cache_seconds"] = round(cold_s, 3)
    out["ratio_store_no_cache_over_raw"] = round(raw_s / cold_s, 4)
    if profile:
        out["profile"] = profile_store(workdir / "profile.db", evidence, batch, policy, profile)
    return out


def profile_store(
    path: Path, evidence: Sequence[Evidence], batch: int, policy: Policy, top: int
) -> str:
    """cProfile of a separate store run on a fresh file (not timed with the figures)."""
    prof = cProfile.Profile()
    prof.enable()
    run_store(f"sqlite:///{path}", evidence, batch, policy)
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return buf.getvalue()


# -- main ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--keys", type=int, default=None, help="core: keys (default 10000; quick 1000)")
    p.add_argument(
        "--versions", type=int, default=10, help="competing versions per key (default 10)"
    )
    p.add_argument(
        "--batch", type=int, default=500, help="store: facts per transaction (default 500)"
    )
    p.add_argument(
        "--store-facts",
        type=int,
        default=None,
        help="store: facts to write (default 30000; quick 3000)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="store and raw runs, in pairs; the median of the pairs' ratios counts (default 3)",
    )
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument(
        "--dir", default=None, help="where the temporary databases go (default: system tmp)"
    )
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also print the store's top N cProfile rows",
    )
    args = p.parse_args(argv)

    keys = args.keys if args.keys is not None else (1000 if args.quick else 10_000)
    store_facts = (
        args.store_facts if args.store_facts is not None else (3000 if args.quick else 30_000)
    )
    if min(keys, args.versions, args.batch, store_facts, args.repeats) < 1:
        p.error("sizes must be positive")
    policy = Policy()

    py, lite = platform.python_version(), sqlite3.sqlite_version
    print(f"factnode arbitration bench: python {py}, sqlite {lite}, {os.cpu_count()} cpus")
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    core_ev = workload(random.Random(args.seed), keys, args.versions, policy, "core")
    store_keys = max(1, -(-store_facts // args.versions))
    store_ev = workload(random.Random(args.seed + 1), store_keys, args.versions, policy, "store")
    store_ev = store_ev[:store_facts]
    built = time.perf_counter() - t0
    print(
        f"workload: {len(core_ev)} core facts, {len(store_ev)} store facts, built in {built:.1f}s"
    )

    figures: dict[str, Any] = {
        "keys": keys,
        "versions": args.versions,
        "seed": args.seed,
        "quick": args.quick,
    }
    core = bench_core(core_ev, policy)
    figures.update(core)
    # The store is timed without the core run's 100,000 objects still alive around it.
    del core_ev
    gc.collect()
    print(
        f"core  decide:    {core['core_decisions']} decisions in {core['core_seconds']}s"
        f" = {core['core_decisions_per_s']:,} decisions/s"
    )
    print(f"      outcomes:  {core['core_outcomes']}")
    print(
        f"core  arbitrate: {core['arbitrate_calls']} calls over {keys} final sets"
        f" = {core['arbitrate_per_s']:,} calls/s"
    )
    print(f"      rules:     {core['arbitrate_rules']}")

    with tempfile.TemporaryDirectory(prefix="factnode-bench-", dir=args.dir) as tmp:
        store = bench_store(store_ev, policy, args.batch, Path(tmp), args.repeats, args.profile)
    profile = store.pop("profile", None)
    figures.update(store)
    print(
        f"store ingest:    {store['store_facts']} facts, batches of {store['batch']}:"
        f" {store['store_seconds']}s = {store['store_rows_per_s']:,} rows/s"
        f" (median of {store['repeats']}: {store['store_seconds_all']};"
        f" batch median {store['store_batch_ms_median']} ms)"
    )
    print(
        f"raw   sqlite3:   executemany of the same rows, DDL, pragmas and batches:"
        f" {store['raw_seconds_median']}s = {store['raw_rows_per_s']:,} rows/s"
        f" (median of {store['repeats']}: {store['raw_seconds_all']})"
    )
    verdict = "MET" if store["ratio_target_met"] else "NOT MET"
    ratio = store["ratio_store_over_raw"]
    print(
        f"ratio store/raw: {ratio:.3f}, the median of the pairs' {store['ratios_store_over_raw']}"
        f" (target >= {RATIO_TARGET}: {verdict})"
    )
    print(
        f"cpu   store/raw: {store['cpu_ratio_store_over_raw']:.3f}, the median of the pairs'"
        f" {store['cpu_ratios_store_over_raw']} (store {store['store_cpu_us_per_fact']} us a fact,"
        f" raw {store['raw_cpu_us_per_row']} us a row; user and system CPU, for context)"
    )
    print(
        f"raw   all tables: the {store['raw_all_tables_rows']:,} rows the store holds in every table "
        f"it writes, same transactions: {store['raw_all_tables_seconds_median']}s = "
        f"{store['raw_all_tables_facts_per_s']:,} facts/s; "
        f"store/raw_all: {store['ratio_store_over_raw_all_tables']:.3f} (for context, not the target)"
    )
    print(
        f"store, no cache: {store['store_no_cache_seconds']}s with cache_keys=0 (every batch reads"
        f" its keys back); over raw: {store['ratio_store_no_cache_over_raw']:.3f} (for context)"
    )
    print(
        f"rows per fact:   {store['rows_written_per_fact']} written (inserted, updated or deleted,"
        f" every table), {store['rows_held_per_fact']} held at the end"
    )
    if not store["same_rows"]:
        print("WARNING: the store and the raw table do not hold the same evidence rows")
    figures["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(f"load average (1 min) before/after: {figures['load_avg_1m']}; other work skews figures")
    if profile:
        print(profile)
    figures["python"] = py
    figures["sqlite"] = lite
    figures["cpus"] = os.cpu_count()
    sys.stdout.flush()
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
