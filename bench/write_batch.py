"""The writer's time per group-commit batch: `Ledger.ingest` of small batches of new keys.

    python bench/write_batch.py [--batch 16 --batches 300 --repeats 3] [--postgres URL]

What the node's writer does for 16 concurrent SubmitFact callers (one write transaction per
batch, `synchronous=FULL`), without gRPC: each batch holds `--batch` facts on keys never
seen before, on a fresh SQLite file store (`SqlRepository`, `FakeClock`), or with
`--postgres URL` in a fresh schema of that database, dropped afterwards. Each repeat is a
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
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

from factnode.core import MICROS_PER_DAY, Evidence, Policy, Submission
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


def one_run(batch: int, batches: int, postgres: str | None) -> tuple[float, float]:
    """Mean seconds per batch over `batches` batches of new keys on a fresh store: wall
    clock, and this process's CPU (which a loaded machine's waits do not inflate)."""
    with fresh_store(postgres) as url:
        repo = SqlRepository(url)
        try:
            ledger = Ledger(repo, Policy(), "node-bench", FakeClock(START))

            def facts(b: int) -> list[tuple[Evidence, str | None]]:
                return [
                    (
                        ledger.evidence_of(
                            Submission(
                                "bench",
                                f"subject-{b}-{i}",
                                "lives_in",
                                f"city-{i}",
                                "user_stated",
                                source="bench",
                            )
                        ),
                        None,
                    )
                    for i in range(batch)
                ]

            prepared = [facts(b) for b in range(batches + 1)]
            ledger.ingest(prepared[0])  # warm: statement texts, caches
            started, cpu = time.perf_counter(), time.process_time()
            for items in prepared[1:]:
                ledger.ingest(items)
            wall = time.perf_counter() - started
            return wall / batches, (time.process_time() - cpu) / batches
        finally:
            repo.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16, help="new keys per write transaction")
    parser.add_argument("--batches", type=int, default=300, help="timed batches per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="fresh stores, one run each")
    parser.add_argument(
        "--postgres", metavar="URL", help="run on this PostgreSQL database (a schema per store)"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    runs = [one_run(args.batch, args.batches, args.postgres) for _ in range(args.repeats)]
    ms = [round(wall * 1000, 3) for wall, _ in runs]
    cpu_ms = [round(cpu * 1000, 3) for _, cpu in runs]
    median = statistics.median(ms)
    store = "postgres" if args.postgres else "sqlite"
    print(
        f"write batch ({store}): {args.batch} new keys,"
        f" {args.batches} batches x {args.repeats} stores"
    )
    print(f"ms per batch {median:.2f} (each store: {ms}); {args.batch / median * 1000:.0f} facts/s")
    print(f"CPU ms per batch {statistics.median(cpu_ms):.2f} (each store: {cpu_ms})")
    print(
        json.dumps(
            {
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
