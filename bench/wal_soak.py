"""SQLite's write-ahead log under sustained writes, against a real node.

    python bench/wal_soak.py [--seconds S] [--writers N] [--readers N]

Starts `factnode serve` on SQLite as a subprocess (its own temporary data directory, a
free loopback port, health SERVING awaited with a bound). `--writers` callers (default 4)
submit distinct facts of about 100 bytes with unary SubmitFact for `--seconds` (default
60), while `--readers` callers (default 0) read them back with GetBelief. The size of
`factnode.db-wal` is sampled every second. Prints the maximum and median log size, the
database size, facts written, SubmitFact's latency (p50, p99, max) and the node's resident
memory; the last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import CALL_TIMEOUT, NodeProcess

MIB = 1024 * 1024
SAMPLE_SECONDS = 1.0


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def fact(writer: int, n: int) -> pb.SubmitFactRequest:
    """A distinct fact of about 100 bytes (key, value and source)."""
    return pb.SubmitFactRequest(
        fact=pb.FactInput(
            key=pb.Key(namespace="soak:w", subject=f"s{writer}-{n:08d}", predicate="lives_in"),
            object=f"city number {n:08d} of writer {writer}, somewhere",
            anchor="user_stated",
            source="wal-soak",
        )
    )


async def soak(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    node = NodeProcess(workdir, None, "auto")
    wal = workdir / "data" / "factnode.db-wal"
    db = workdir / "data" / "factnode.db"
    try:
        async with grpc.aio.insecure_channel(node.address) as channel:
            await node.wait_serving(channel)
            facts = pb_grpc.FactServiceStub(channel)
            written = [0] * args.writers
            latencies: list[float] = []
            read = 0
            stop_at = time.monotonic() + args.seconds

            async def writer(w: int) -> None:
                while time.monotonic() < stop_at:
                    t0 = time.perf_counter()
                    await facts.SubmitFact(fact(w, written[w]), timeout=CALL_TIMEOUT)
                    latencies.append(time.perf_counter() - t0)
                    written[w] += 1

            async def reader(r: int) -> None:
                nonlocal read
                rng = random.Random(r)
                while time.monotonic() < stop_at:
                    w = rng.randrange(args.writers)
                    if not written[w]:
                        await asyncio.sleep(0.01)
                        continue
                    key = fact(w, rng.randrange(written[w])).fact.key
                    await facts.GetBelief(pb.GetBeliefRequest(key=key), timeout=CALL_TIMEOUT)
                    read += 1

            samples: list[int] = []

            async def sampler() -> None:
                while time.monotonic() < stop_at:
                    samples.append(size(wal))
                    await asyncio.sleep(SAMPLE_SECONDS)

            start = time.monotonic()
            await asyncio.gather(
                sampler(),
                *(writer(w) for w in range(args.writers)),
                *(reader(r) for r in range(args.readers)),
            )
            elapsed = time.monotonic() - start
            samples.append(size(wal))
            rss = node.rss_mb()
    finally:
        node.stop()
    total = sum(written)
    latencies.sort()

    def ms(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 1)

    return {
        "wal_max_mib": round(max(samples) / MIB, 1),
        "wal_median_mib": round(statistics.median(samples) / MIB, 1),
        "wal_end_mib": round(samples[-1] / MIB, 1),
        "db_mib": round(size(db) / MIB, 1),
        "facts_written": total,
        "facts_per_second": round(total / elapsed, 1),
        "submit_p50_ms": ms(0.5),
        "submit_p99_ms": ms(0.99),
        "submit_max_ms": round(latencies[-1] * 1000, 1),
        "reads": read,
        "node_rss_mb": round(rss, 1) if rss is not None else None,
        "wal_kib_per_fact_max": round(max(samples) / 1024 / max(total, 1), 1),
        "samples": len(samples),
        "seconds": args.seconds,
        "writers": args.writers,
        "readers": args.readers,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to write (60)")
    parser.add_argument("--writers", type=int, default=4, help="concurrent writers (4)")
    parser.add_argument("--readers", type=int, default=0, help="concurrent readers (0)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="factnode-wal-soak-") as tmp:
        out = asyncio.run(soak(args, Path(tmp)))
    print(
        f"{out['facts_written']} facts in {args.seconds:g} s ({out['facts_per_second']}/s), "
        f"{args.writers} writers, {args.readers} readers; SubmitFact p50 {out['submit_p50_ms']} ms, "
        f"p99 {out['submit_p99_ms']} ms, max {out['submit_max_ms']} ms",
        flush=True,
    )
    print(
        f"WAL max {out['wal_max_mib']} MiB, median {out['wal_median_mib']} MiB, "
        f"at the end {out['wal_end_mib']} MiB; database {out['db_mib']} MiB; "
        f"node RSS {out['node_rss_mb']} MB",
        flush=True,
    )
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
