"""The writer's time per group-commit batch: `Ledger.ingest` of small batches of new keys.

    python bench/write_batch.py [--batch 16 --batches 300 --repeats 3] [--postgres URL]
                                [--keys new|held|peer-voted]

What the node's writer does for 16 concurrent SubmitFact callers (one write transaction per
batch, `synchronous=FULL`), without gRPC: each batch holds `--batch` facts on keys never
seen before, on a fresh SQLite file store (`SqlRepository`, `FakeClock`), or with
`--postgres URL` in a fresh schema of that database, dropped afterwards. With `--keys held`
each key already holds a fact, written before the timing starts, that the batch's fact
contradicts; with `--keys peer-voted` each also holds a peer's vote (as after a sync: such
a key's writes also ask for its pin). On PostgreSQL the bench also counts the texts the
driver sends per batch (`trips_per_batch`: statements, and a commit the last text did not
carry): each is at least one round trip, and what a batch reads in the middle of its work
shows up there. Each repeat is a
new store; `ms_per_batch` is the median of the repeats' mean times per batch, and
`cpu_ms_per_batch` the same for this process's CPU time (steadier on a loaded machine). There is no
baseline inside one run: compare two trees by running this script against each, alternately
(`PYTHONPATH` naming the other tree's package), on the same machine.

The last line of output is one JSON object of all figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, make_url, text

from factnode.core import MICROS_PER_DAY, Evidence, Policy, Submission
from factnode.core.consensus import Vote
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock

START = 20_000 * MICROS_PER_DAY


@contextmanager
def fresh_store(postgres: str | None) -> Iterator[str]:
    """The URL of an empty store: a SQLite file, or a new schema in `postgres`."""
    if postgres is None:
        with tempfile.TemporaryDirectory(prefix="factnode-write-batch-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    schema = f"bench_{uuid.uuid4().hex[:16]}"
    admin = create_engine(postgres)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        try:
            url = make_url(postgres).update_query_dict({"options": f"-csearch_path={schema}"})
            yield url.render_as_string(hide_password=False)
        finally:
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        admin.dispose()


@dataclass
class Run:
    """One store's figures, per batch."""

    wall: float
    cpu: float
    trips: float | None  # PostgreSQL statement texts (None on SQLite)


class _Trips:
    """Counts the texts the PostgreSQL driver sends while counting: statements, and commits
    that still have a transaction to end."""

    def __init__(self) -> None:
        self.count = 0
        self.counting = False

    @contextmanager
    def patched(self) -> Iterator[None]:
        import psycopg

        originals = {
            (cls, name): getattr(cls, name)
            for cls, name in (
                (psycopg.Cursor, "execute"),
                (psycopg.Cursor, "executemany"),
                (psycopg.Connection, "commit"),
            )
        }

        def counted(method: Any) -> Any:
            def call(on: Any, *args: Any, **kwargs: Any) -> Any:
                # A commit sends nothing when the transaction's last text carried its COMMIT.
                idle = getattr(on, "pgconn", None) is not None and (
                    on.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
                )
                if self.counting and not idle:
                    self.count += 1
                return method(on, *args, **kwargs)

            return call

        for (cls, name), method in originals.items():
            setattr(cls, name, counted(method))
        try:
            yield
        finally:
            for (cls, name), method in originals.items():
                setattr(cls, name, method)


def one_run(batch: int, batches: int, postgres: str | None, keys: str) -> Run:
    """Mean seconds per batch over `batches` batches on a fresh store: wall clock, and this
    process's CPU (which a loaded machine's waits do not inflate); on PostgreSQL the
    statement texts per batch."""
    trips = _Trips()
    with fresh_store(postgres) as url, trips.patched() if postgres else nullcontext():
        repo = SqlRepository(url)
        try:
            clock = FakeClock(START)
            ledger = Ledger(repo, Policy(), "node-bench", clock)

            def facts(b: int, city: str) -> list[tuple[Evidence, str | None]]:
                return [
                    (
                        ledger.evidence_of(
                            Submission(
                                "bench",
                                f"subject-{b}-{i}",
                                "lives_in",
                                f"{city}-{i}",
                                "user_stated",
                                source="bench",
                            )
                        ),
                        None,
                    )
                    for i in range(batch)
                ]

            if keys != "new":
                for b in range(batches + 1):
                    held = facts(b, "earlier")
                    ledger.ingest(held)
                    if keys == "peer-voted":
                        _put_peer_votes(repo, [e for e, _ in held], clock.now())
                clock.advance(MICROS_PER_DAY)
            prepared = [facts(b, "city") for b in range(batches + 1)]
            ledger.ingest(prepared[0])  # warm: statement texts, caches
            trips.counting = True
            started, cpu = time.perf_counter(), time.process_time()
            for items in prepared[1:]:
                ledger.ingest(items)
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu
            trips.counting = False
            return Run(wall / batches, cpu / batches, trips.count / batches if postgres else None)
        finally:
            repo.close()


def _put_peer_votes(repo: SqlRepository, held: list[Evidence], now: int) -> None:
    """A peer's vote for each held fact, stored as a sync would store it."""
    with repo.write() as tx:
        tx.put_votes(
            [Vote("node-peer", e.key, e.version_id, e.evidence_id, 60, 500, now, now) for e in held]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16, help="new keys per write transaction")
    parser.add_argument("--batches", type=int, default=300, help="timed batches per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="fresh stores, one run each")
    parser.add_argument(
        "--postgres", metavar="URL", help="run on this PostgreSQL database (a schema per store)"
    )
    parser.add_argument(
        "--keys",
        choices=("new", "held", "peer-voted"),
        default="new",
        help="what the batch's keys hold before it (default: nothing)",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    runs = [
        one_run(args.batch, args.batches, args.postgres, args.keys) for _ in range(args.repeats)
    ]
    ms = [round(r.wall * 1000, 3) for r in runs]
    cpu_ms = [round(r.cpu * 1000, 3) for r in runs]
    trips = [round(r.trips, 2) for r in runs if r.trips is not None]
    median = statistics.median(ms)
    store = "postgres" if args.postgres else "sqlite"
    print(
        f"write batch ({store}): {args.batch} facts on {args.keys} keys,"
        f" {args.batches} batches x {args.repeats} stores"
    )
    print(f"ms per batch {median:.2f} (each store: {ms}); {args.batch / median * 1000:.0f} facts/s")
    print(f"CPU ms per batch {statistics.median(cpu_ms):.2f} (each store: {cpu_ms})")
    if trips:
        print(f"statement texts per batch {statistics.median(trips):.2f} (each store: {trips})")
    print(
        json.dumps(
            {
                "keys": args.keys,
                "trips_per_batch": statistics.median(trips) if trips else None,
                "ms_per_batch": median,
                "ms_per_batch_each": ms,
                "cpu_ms_per_batch": statistics.median(cpu_ms),
                "cpu_ms_per_batch_each": cpu_ms,
                "facts_per_s": round(args.batch / median * 1000),
                "batch": args.batch,
                "batches": args.batches,
                "repeats": args.repeats,
                "store": store,
                "load_avg_1m": [load_before, os.getloadavg()[0]],
            }
        )
    )


if __name__ == "__main__":
    main()
