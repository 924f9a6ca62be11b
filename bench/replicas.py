"""Replicas of one node on one PostgreSQL database (specification §10), in one run.

    python bench/replicas.py --postgres postgresql+psycopg://user@host/db [--seconds S]
        [--rounds R] [--clients C] [--client-processes P] [--quick]

Makes a fresh database beside the one the URL names (dropped at the end), starts three
`factnode serve` replicas on it (and a fourth without the served memory, for `memory`),
preloads `--keys` keys, reads them once through every replica, then measures:

- `get` and `submit`: the aggregate rate of GetBelief (random preloaded keys) and of
  SubmitFact (a new key each call) from `--clients` concurrent callers spread evenly over
  the first 1, 2 and 3 replicas, `--seconds` each. The three run in turn, `--rounds`
  times, so a busy moment skews one round rather than one replica count; each figure is
  the median over the rounds, and `ratio` is it over the one-replica figure. The callers
  run in `--client-processes` processes (default one per four cores, at least one): on a
  small machine they share the cores with the replicas and the database, which is what
  the figures then show; on a larger one give them cores of their own.
- `lock_waiting`: during `submit`, how many transactions were waiting for the store's
  write lock, sampled from `pg_locks` every 50 ms (mean): writes from every replica take
  one advisory lock (README, "Replicas").
- `memory`: GetBelief on a replica with the served-answer memory (checked against the log
  of every replica's writes, `store._checked`) and on one without it (`cache_keys = 0`),
  in alternating pairs, first with reads only, then while 2 callers rewrite the same keys
  through another replica: rates and `ratio_with_over_without`.
- `read`: what a read of a served belief costs on PostgreSQL without the served-answer
  memory (`Ledger.served`: its read transaction), against the least a memory kept correct
  across replicas must do per hit (one read transaction that reads the write generation,
  the check that makes a missed invalidation impossible to serve from), in alternating
  pairs of `--reads` reads each, in this process on the same database: microseconds per
  read and `ratio_checked_over_bypass`.

Readable lines first; the last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from sqlalchemy import create_engine

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import Key, Policy
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock, fresh_postgres_database

REPLICAS = 3
START_TIMEOUT = 60.0
CALL_TIMEOUT = 30.0
NAMESPACE = "bench"


def start_replica(url: str, workdir: Path, **settings: str) -> tuple[subprocess.Popen[str], str]:
    """A `factnode serve` on `url` (with `settings` as FACTNODE_* variables), and the
    address it announced."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACTNODE_")}
    env.update({f"FACTNODE_{k.upper()}": v for k, v in settings.items()})
    data = workdir / uuid.uuid4().hex[:8]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "factnode.cli", "serve", "--database-url", url),
            *("--listen", "127.0.0.1:0", "--data-dir", str(data)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    for line in proc.stdout:
        if " listening on " in line:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep it drained
            return proc, line.rsplit(" ", 1)[1].strip()
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise SystemExit(f"a replica did not start (exit {proc.wait()})")


def _fact(subject: str, obj: str) -> pb.SubmitFactRequest:
    key = pb.Key(namespace=NAMESPACE, subject=subject, predicate="lives_in")
    fact = pb.FactInput(key=key, object=obj, anchor="user_stated", source="bench")
    return pb.SubmitFactRequest(fact=fact, idempotency_key=uuid.uuid4().hex)


def preload(address: str, keys: int) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.FactServiceStub(channel)
        for start in range(0, keys, 500):
            batch = [_fact(f"k{i}", f"city-{i}") for i in range(start, min(keys, start + 500))]
            stub.SubmitFacts(iter(batch), timeout=120)


async def _drive(
    addresses: list[str], phase: str, callers: int, seconds: float, keys: int, tag: str
) -> int:
    """Calls from `callers` coroutines, caller i on replica i % n, for `seconds`: how many
    calls completed."""
    channels = [grpc.aio.insecure_channel(a) for a in addresses]
    stubs = [pb_grpc.FactServiceStub(c) for c in channels]
    done = 0
    stop = time.monotonic() + seconds

    async def caller(i: int) -> None:
        nonlocal done
        stub = stubs[i % len(stubs)]
        n = 0
        while time.monotonic() < stop:
            n += 1
            if phase == "get":
                key = pb.Key(namespace=NAMESPACE, subject=f"k{(i * 7919 + n) % keys}")
                key.predicate = "lives_in"
                await stub.GetBelief(pb.GetBeliefRequest(key=key), timeout=CALL_TIMEOUT)
            elif phase == "rewrite":  # a new value of a preloaded key: its belief changes
                subject = f"k{(i * 104729 + n * 7) % keys}"
                await stub.SubmitFact(_fact(subject, f"{tag}-{n}"), timeout=CALL_TIMEOUT)
            else:
                await stub.SubmitFact(_fact(f"w{tag}-{i}-{n}", "x"), timeout=CALL_TIMEOUT)
            done += 1

    await asyncio.gather(*(caller(i) for i in range(callers)))
    for c in channels:
        await c.close()
    return done


def _worker(args: tuple[list[str], str, int, float, int, str]) -> int:
    return asyncio.run(_drive(*args))


def measure(
    pool: Any, addresses: list[str], phase: str, opts: argparse.Namespace, tag: str
) -> float:
    """Calls per second from every client process together."""
    per = [opts.clients // opts.client_processes] * opts.client_processes
    per[0] += opts.clients - sum(per)
    jobs = [(addresses, phase, n, opts.seconds, opts.keys, f"{tag}-{p}") for p, n in enumerate(per)]
    started = time.monotonic()
    counts = pool.map(_worker, jobs)
    return sum(counts) / max(opts.seconds, time.monotonic() - started - 0.5)


class LockWaits:
    """Samples, every 50 ms, how many transactions wait for an advisory lock."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url, isolation_level="AUTOCOMMIT")
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        with self.engine.connect() as conn:
            while not self._stop.wait(0.05):
                self.samples.append(
                    int(
                        conn.exec_driver_sql(
                            "SELECT count(*) FROM pg_locks"
                            " WHERE locktype = 'advisory' AND NOT granted"
                        ).scalar()
                        or 0
                    )
                )

    def __enter__(self) -> LockWaits:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.engine.dispose()


def read_costs(url: str, opts: argparse.Namespace) -> dict[str, Any]:
    """Microseconds per served-belief read without memory, and per checked memory hit."""
    repo = SqlRepository(url, cache_keys=0)
    ledger = Ledger(repo, Policy(), "bench", FakeClock())
    keys = [Key(NAMESPACE, f"k{i}", "lives_in") for i in range(opts.keys)]
    memory = {k: ledger.served(k)[0] for k in keys[:100]}

    def bypass(i: int) -> object:
        return ledger.served(keys[i % len(keys)])

    def checked(i: int) -> object:
        with repo.read() as tx:
            tx.meta("write_generation")  # nothing written since the memory's generation?
        return memory.get(keys[i % 100])

    pairs: list[tuple[float, float]] = []
    for _ in range(opts.rounds * 2):
        took = []
        for read in (bypass, checked):
            started = time.perf_counter()
            for i in range(opts.reads):
                read(i)
            took.append((time.perf_counter() - started) / opts.reads * 1e6)
        pairs.append((took[0], took[1]))
    repo.close()
    ratios = [c / b for b, c in pairs]
    return {
        "bypass_us": round(statistics.median(b for b, _ in pairs), 1),
        "checked_hit_us": round(statistics.median(c for _, c in pairs), 1),
        "ratio_checked_over_bypass": round(statistics.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
    }


def memory_pairs(
    pool: Any, on: str, off: str, writer: str, opts: argparse.Namespace
) -> dict[str, Any]:
    """GetBelief on a replica with the served memory and on one without it (cache_keys 0),
    in alternating pairs: alone, then while 2 callers rewrite the same keys through a
    third replica (so the memory forgets as it goes). Ratio: with over without."""
    out: dict[str, Any] = {}
    for mode in ("reads_only", "with_writes"):
        pairs = []
        for r in range(opts.rounds):
            rates = []
            for address in (on, off):
                stop = threading.Event()
                writes = threading.Thread(target=_rewrite, args=(writer, opts, stop, f"{r}"))
                if mode == "with_writes":
                    writes.start()
                rates.append(measure(pool, [address], "get", opts, f"m{r}"))
                stop.set()
                if writes.is_alive():
                    writes.join()
            pairs.append((rates[0], rates[1]))
            print(f"memory {mode}: with {rates[0]:.0f}/s, without {rates[1]:.0f}/s", flush=True)
        out[mode] = {
            "with_per_s": round(statistics.median(p[0] for p in pairs), 1),
            "without_per_s": round(statistics.median(p[1] for p in pairs), 1),
            "ratio_with_over_without": round(statistics.median(a / b for a, b in pairs), 3),
            "ratios": [round(a / b, 3) for a, b in pairs],
        }
    return out


def _rewrite(address: str, opts: argparse.Namespace, stop: threading.Event, tag: str) -> None:
    while not stop.is_set():
        asyncio.run(_drive([address], "rewrite", 2, 0.5, opts.keys, f"{tag}-{time.time()}"))


def run(url: str, opts: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    replicas = [start_replica(url, workdir) for _ in range(REPLICAS)]
    replicas.append(start_replica(url, workdir, cache_keys="0"))  # no served memory
    addresses = [a for _, a in replicas]
    try:
        preload(addresses[0], opts.keys)
        rates: dict[str, dict[int, list[float]]] = {"get": {}, "submit": {}}
        warm = argparse.Namespace(**{**vars(opts), "seconds": 2.0})
        waits: dict[int, list[float]] = {}
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(opts.client_processes) as pool:
            measure(pool, addresses, "get", warm, "warm")  # every memory holds the keys
            for r in range(opts.rounds):
                for n in range(1, REPLICAS + 1):
                    rates["get"].setdefault(n, []).append(
                        measure(pool, addresses[:n], "get", opts, f"{r}-{n}")
                    )
                    with LockWaits(url) as sampled:
                        rate = measure(pool, addresses[:n], "submit", opts, f"{r}-{n}")
                    rates["submit"].setdefault(n, []).append(rate)
                    waits.setdefault(n, []).append(statistics.fmean(sampled.samples or [0]))
                    print(
                        f"round {r + 1} with {n} replica(s): get {rates['get'][n][-1]:.0f}/s, "
                        f"submit {rate:.0f}/s, waiting for the write lock {waits[n][-1]:.1f}",
                        flush=True,
                    )
            memory = memory_pairs(pool, addresses[0], addresses[REPLICAS], addresses[1], opts)
    finally:
        for proc, _ in replicas:
            proc.terminate()
        for proc, _ in replicas:
            proc.wait(timeout=30)
    out: dict[str, Any] = {}
    for phase, by_n in rates.items():
        one = statistics.median(by_n[1])
        out[phase] = {
            str(n): {
                "per_s": round(statistics.median(v), 1),
                "ratio": round(statistics.median(v) / one, 3),
                "rounds": [round(x, 1) for x in v],
            }
            for n, v in by_n.items()
        }
    out["lock_waiting"] = {str(n): round(statistics.median(v), 2) for n, v in waits.items()}
    out["memory"] = memory
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("FACTNODE_TEST_POSTGRES_URL"))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--client-processes", type=int, default=max(1, (os.cpu_count() or 1) // 4))
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="2 s phases, 1 round")
    opts = parser.parse_args()
    if not opts.postgres:
        raise SystemExit("--postgres URL (or FACTNODE_TEST_POSTGRES_URL) is required")
    if opts.quick:
        opts.seconds, opts.rounds, opts.reads = 2.0, 1, 200
    with fresh_postgres_database(opts.postgres, "bench_replicas") as url:
        figures = run(url, opts)
        figures["read"] = read_costs(url, opts)
    figures.update(
        cpus=os.cpu_count(),
        clients=opts.clients,
        client_processes=opts.client_processes,
        seconds=opts.seconds,
        rounds=opts.rounds,
        load_avg_1m=round(os.getloadavg()[0], 2),
    )
    for phase in ("get", "submit"):
        line = ", ".join(
            f"{n}: {f['per_s']:.0f}/s (x{f['ratio']:.2f})" for n, f in figures[phase].items()
        )
        print(f"{phase} by replicas: {line}")
    for mode, m in figures["memory"].items():
        print(
            f"GetBelief {mode}: with the memory {m['with_per_s']:.0f}/s, without "
            f"{m['without_per_s']:.0f}/s (x{m['ratio_with_over_without']:.2f})"
        )
    r = figures["read"]
    print(
        f"read without memory {r['bypass_us']} us, checked memory hit {r['checked_hit_us']} us "
        f"(ratio {r['ratio_checked_over_bypass']})"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
