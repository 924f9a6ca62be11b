"""A real node against bare gRPC, as a client sees it, in one run.

    python bench/e2e.py [--quick] [--postgres URL] [--repeats N] [--seconds S]

Starts `factnode serve` as a subprocess (its own temporary data directory and config
file, a free loopback port, health SERVING awaited with a bound) and, in this process, a
bare grpc.aio echo server on raw bytes (a generic handler, identity serializers). For each
call it measures the node and then the echo at the same concurrency with payloads of the
same sizes (the echo's request carries the node request's size and asks for a reply of the
node response's size), back to back, `--repeats` times, so a busy moment on a shared
machine skews one pair rather than the verdict:

- `submit`: unary SubmitFact from 16 concurrent callers, each call a distinct fact.
- `stream`: one SubmitFacts client stream at a time (messages per second); the echo is
  one client stream of raw messages of the same size, answered once at the end.
- `get`: GetBelief of random preloaded keys from 16 concurrent callers.
- `asof`: GetBelief with `as_of` (time travel) of random preloaded keys, 16 callers.
- `list`: ListBeliefs, a page of 100 beliefs of one namespace, 16 callers.

Each figure: requests (or messages) per second, p50 and p99 latency in milliseconds (for
`stream`, the latency of one whole stream) and `ratio` = node rate / echo rate, the median
over the repeats (`ratios` lists each pair's).

`--scale` (SQLite) instead builds two stores through the store's batch path
(`Ledger.ingest`, not gRPC): 10,000 evidence rows over 1,000 keys and 1,000,000 rows over
100,000 keys, ten competing pieces of evidence per key; starts a node on each and measures
GetBelief on both, each next to an echo: over a hot set of 2,000 keys and uniformly over
all keys, then again uniformly with the served memory off (`cache_keys = 0`, every read
from the store); reports GetBelief at 1,000,000 rows over 10,000 rows for each, and the
nodes' resident memory.

Readable lines first; the last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import EVENT_LOOPS, Settings
from factnode.core import MICROS_PER_DAY, Key, Policy, Submission, make_evidence
from factnode.ledger import Ledger, ensure_node_id
from factnode.server._loop import loop_factory
from factnode.store import SqlRepository
from factnode.testing import FakeClock

CONCURRENCY = 16
START_TIMEOUT = 60.0  # seconds for the node to report SERVING
CALL_TIMEOUT = 30.0  # seconds for one call
STOP_TIMEOUT = 20.0
STREAM_MESSAGES = 1000  # messages per SubmitFacts stream
PHASES = ("submit", "stream", "get", "asof", "list")
PRELOAD_KEYS = 2000  # keys the reads choose from
LIST_PAGE = 100
SEED = 20261201

ECHO_UNARY = "/bench.Echo/Unary"
ECHO_STREAM = "/bench.Echo/Stream"


def say(text: str) -> None:
    print(text, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the echo ---------------------------------------------------------------------

_replies: dict[int, bytes] = {}


def _reply(size: int) -> bytes:
    out = _replies.get(size)
    if out is None:
        out = _replies[size] = b"r" * size
    return out


def echo_request(request_size: int, reply_size: int) -> bytes:
    """A raw request of `request_size` bytes asking for a reply of `reply_size` bytes."""
    head = reply_size.to_bytes(4, "big")
    return head + b"q" * max(0, request_size - len(head))


async def _echo_unary(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    return _reply(int.from_bytes(request[:4], "big"))


async def _echo_stream(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
) -> bytes:
    reply_size = 0
    async for request in requests:
        reply_size = int.from_bytes(request[:4], "big")
    return _reply(reply_size)


class _EchoHandler(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        if details.method == ECHO_UNARY:
            return grpc.unary_unary_rpc_method_handler(_echo_unary)
        if details.method == ECHO_STREAM:
            return grpc.stream_unary_rpc_method_handler(_echo_stream)
        return None


async def start_echo() -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((_EchoHandler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


async def serve_echo_forever() -> None:
    """The echo alone, for `EchoProcess`: prints its port, serves until killed."""
    server, port = await start_echo()
    print(port, flush=True)
    await server.wait_for_termination()


class EchoProcess:
    """The bare echo in a process of its own, so its CPU per call can be read like the
    node's (the in-process echo shares its process with the callers)."""

    def __init__(self, event_loop: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-echo", "--event-loop", event_loop],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def cpu_seconds(self) -> float:
        return _cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=STOP_TIMEOUT)


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system, all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the node ---------------------------------------------------------------------


class NodeProcess:
    """`factnode serve` in a subprocess with its own data dir and config file."""

    def __init__(
        self,
        workdir: Path,
        postgres: str | None,
        event_loop: str,
        cache_keys: int | None = None,
        extra_config: str = "",
    ) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        config = workdir / "factnode.toml"
        lines = [
            f'listen = "{self.address}"',
            f'data_dir = "{workdir / "data"}"',
            f'event_loop = "{event_loop}"',
        ]
        if postgres:
            lines.append(f"database_url = {json.dumps(postgres)}")
        if cache_keys is not None:
            lines.append(f"cache_keys = {cache_keys}")
        if extra_config:  # TOML tables (such as [federation]) after the plain settings
            lines.append(extra_config)
        config.write_text("\n".join(lines) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FACTNODE_")}
        env["PYTHONUNBUFFERED"] = "1"
        self.log = workdir / "serve.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "factnode.cli", "serve", "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=workdir,
            )

    async def wait_serving(self, channel: grpc.aio.Channel) -> None:
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"factnode serve exited: {self.log.read_text()}")
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.1)
        raise RuntimeError(f"node not SERVING within {START_TIMEOUT}s: {self.log.read_text()}")

    def cpu_seconds(self) -> float:
        return _cpu_seconds(self.proc.pid)

    def rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)


# -- measuring --------------------------------------------------------------------


def figures(latencies: list[float], count: int, elapsed: float) -> dict[str, float]:
    """Rate, p50 and p99 (ms) of one phase."""
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {
        "rps": round(count / elapsed, 1),
        "p50_ms": round(pct(0.50), 2),
        "p99_ms": round(pct(0.99), 2),
        "calls": count,
    }


async def concurrent(
    call: Callable[[int], Awaitable[object]], seconds: float, callers: int = CONCURRENCY
) -> dict[str, float]:
    """`callers` loops calling `call(n)` (n distinct across calls) for `seconds`."""
    counter = iter(range(10**12))
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def caller() -> None:
        while time.perf_counter() < stop_at:
            n = next(counter)
            t0 = time.perf_counter()
            await call(n)
            latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return figures(latencies, len(latencies), time.perf_counter() - start)


async def streams(one_stream: Callable[[int], Awaitable[int]], seconds: float) -> dict[str, float]:
    """Whole streams one after another for `seconds`: messages per second, stream latency."""
    latencies: list[float] = []
    messages = 0
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        messages += await one_stream(n)
        latencies.append(time.perf_counter() - t0)
        n += 1
    return figures(latencies, messages, time.perf_counter() - start)


class Workload:
    """Requests for the node, and echo requests of the same sizes."""

    def __init__(self, node: grpc.aio.Channel, echo: grpc.aio.Channel, run_id: str) -> None:
        self.facts = pb_grpc.FactServiceStub(node)
        self.echo_unary = echo.unary_unary(ECHO_UNARY, None, None)
        self.echo_stream = echo.stream_unary(ECHO_STREAM, None, None)
        self.ns_write = f"bench:w{run_id}"
        self.ns_read = f"bench:r{run_id}"
        self.rng = random.Random(SEED)
        self.sizes: dict[str, tuple[int, int]] = {}

    def fact(self, ns: str, subject: str, value: str) -> pb.SubmitFactRequest:
        return pb.SubmitFactRequest(
            fact=pb.FactInput(
                key=pb.Key(namespace=ns, subject=subject, predicate="lives_in"),
                object=value,
                anchor="user_stated",
                source="bench",
            )
        )

    async def preload(self) -> None:
        async def items() -> AsyncIterator[pb.SubmitFactRequest]:
            for i in range(PRELOAD_KEYS):
                yield self.fact(self.ns_read, f"subject-{i:06d}", f"city-{i}")

        reply = await self.facts.SubmitFacts(items(), timeout=CALL_TIMEOUT * 4)
        if reply.decided_count != PRELOAD_KEYS:
            raise RuntimeError(f"preload decided {reply.decided_count} of {PRELOAD_KEYS}")
        self.asof = Timestamp()
        self.asof.GetCurrentTime()

    def read_key(self) -> pb.Key:
        i = self.rng.randrange(PRELOAD_KEYS)
        return pb.Key(namespace=self.ns_read, subject=f"subject-{i:06d}", predicate="lives_in")

    def note(self, name: str, request: Any, reply: Any) -> None:
        self.sizes[name] = (request.ByteSize(), reply.ByteSize())

    async def submit(self, n: int) -> None:
        request = self.fact(self.ns_write, f"unary-{n}", f"value-{n}")
        reply = await self.facts.SubmitFact(request, timeout=CALL_TIMEOUT)
        if "submit" not in self.sizes:
            self.note("submit", request, reply)

    async def stream(self, n: int) -> int:
        sample = self.fact(self.ns_write, f"stream-{n}-000000", "value")

        async def items() -> AsyncIterator[pb.SubmitFactRequest]:
            for i in range(STREAM_MESSAGES):
                yield self.fact(self.ns_write, f"stream-{n}-{i:06d}", "value")

        reply = await self.facts.SubmitFacts(items(), timeout=CALL_TIMEOUT * 4)
        if reply.decided_count != STREAM_MESSAGES:
            raise RuntimeError(f"stream decided {reply.decided_count} of {STREAM_MESSAGES}")
        if "stream" not in self.sizes:
            self.note("stream", sample, reply)
        return STREAM_MESSAGES

    async def get(self, n: int) -> None:
        request = pb.GetBeliefRequest(key=self.read_key())
        reply = await self.facts.GetBelief(request, timeout=CALL_TIMEOUT)
        if "get" not in self.sizes:
            self.note("get", request, reply)

    async def asof_get(self, n: int) -> None:
        request = pb.GetBeliefRequest(key=self.read_key(), as_of=self.asof)
        reply = await self.facts.GetBelief(request, timeout=CALL_TIMEOUT)
        if "asof" not in self.sizes:
            self.note("asof", request, reply)

    async def list_page(self, n: int) -> None:
        request = pb.ListBeliefsRequest(namespace=self.ns_read, page_size=LIST_PAGE)
        reply = await self.facts.ListBeliefs(request, timeout=CALL_TIMEOUT)
        if len(reply.beliefs) != LIST_PAGE:
            raise RuntimeError(f"list page held {len(reply.beliefs)} beliefs")
        if "list" not in self.sizes:
            self.note("list", request, reply)

    def echo_call(self, name: str) -> Callable[[int], Awaitable[object]]:
        request_size, reply_size = self.sizes[name]
        payload = echo_request(request_size, reply_size)

        async def call(n: int) -> object:
            return await self.echo_unary(payload, timeout=CALL_TIMEOUT)

        return call

    def echo_streams(self) -> Callable[[int], Awaitable[int]]:
        request_size, reply_size = self.sizes["stream"]
        payload = echo_request(request_size, reply_size)

        async def one_stream(n: int) -> int:
            async def items() -> AsyncIterator[bytes]:
                for _ in range(STREAM_MESSAGES):
                    yield payload

            await self.echo_stream(items(), timeout=CALL_TIMEOUT * 4)
            return STREAM_MESSAGES

        return one_stream


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="factnode-e2e-bench-"))
    node = NodeProcess(workdir, args.postgres, args.event_loop)
    echo_server, echo_port = await start_echo()
    node_channel = grpc.aio.insecure_channel(node.address)
    echo_channel = grpc.aio.insecure_channel(f"127.0.0.1:{echo_port}")
    load_before = os.getloadavg()[0]
    try:
        await node.wait_serving(node_channel)
        w = Workload(node_channel, echo_channel, uuid.uuid4().hex[:8])
        await w.preload()
        seconds, warm = args.seconds, min(1.0, args.seconds / 3)
        plan: list[tuple[str, Callable[[], Awaitable[dict[str, float]]], Any]] = [
            ("submit", lambda: concurrent(w.submit, seconds), lambda: w.echo_call("submit")),
            ("stream", lambda: streams(w.stream, seconds), w.echo_streams),
            ("get", lambda: concurrent(w.get, seconds), lambda: w.echo_call("get")),
            ("asof", lambda: concurrent(w.asof_get, seconds), lambda: w.echo_call("asof")),
            ("list", lambda: concurrent(w.list_page, seconds), lambda: w.echo_call("list")),
        ]
        if args.only:
            plan = [step for step in plan if step[0] in args.only]
        out: dict[str, Any] = {}
        for name, node_phase, echo_of in plan:
            # Warm both paths (and learn the payload sizes) before measuring.
            if name == "stream":
                await w.stream(-1)
            else:
                await concurrent(
                    {
                        "submit": w.submit,
                        "get": w.get,
                        "asof": w.asof_get,
                        "list": w.list_page,
                    }[name],
                    warm,
                )
            echo_phase_fn = echo_of()
            runner = streams if name == "stream" else concurrent
            await runner(echo_phase_fn, warm)
            pairs = []
            for _ in range(args.repeats):
                cpu_before = node.cpu_seconds()
                node_fig = await node_phase()
                # The node's CPU per call (per message for the stream): where the gap is.
                node_fig["cpu_us_per_call"] = round(
                    (node.cpu_seconds() - cpu_before) / node_fig["calls"] * 1e6
                )
                echo_fig = await runner(echo_phase_fn, seconds)
                pairs.append((node_fig, echo_fig))
            ratios = [round(n["rps"] / e["rps"], 3) for n, e in pairs]
            mid = sorted(range(len(pairs)), key=lambda i: ratios[i])[len(pairs) // 2]
            node_fig, echo_fig = pairs[mid]
            out[name] = {
                "node": node_fig,
                "echo": echo_fig,
                "ratio": round(statistics.median(ratios), 3),
                "ratios": ratios,
                "request_bytes": w.sizes[name][0],
                "reply_bytes": w.sizes[name][1],
            }
            say(
                f"{name:7s} node {node_fig['rps']:8.1f}/s p50 {node_fig['p50_ms']:7.2f} ms "
                f"p99 {node_fig['p99_ms']:7.2f} ms cpu {node_fig['cpu_us_per_call']:5d} us "
                f"| echo {echo_fig['rps']:8.1f}/s "
                f"p50 {echo_fig['p50_ms']:7.2f} ms p99 {echo_fig['p99_ms']:7.2f} ms "
                f"| ratio {out[name]['ratio']:.3f} (each pair: {ratios})"
            )
        if "submit" in out:
            out["echo_process"] = await echo_process_cpu(w, seconds, args.event_loop)
            say(
                f"bare echo in its own process, submit's sizes: "
                f"{out['echo_process']['rps']:.1f}/s, cpu {out['echo_process']['cpu_us_per_call']} us"
                " per call"
            )
        out["node_rss_mb"] = node.rss_mb()
        out["load_avg_1m"] = [load_before, os.getloadavg()[0]]
        return out
    finally:
        await node_channel.close(None)
        await echo_channel.close(None)
        await echo_server.stop(0)
        node.stop()
        shutil.rmtree(workdir, ignore_errors=True)


async def echo_process_cpu(w: Workload, seconds: float, event_loop: str) -> dict[str, float]:
    """What gRPC itself costs a server per unary call: the bare echo in its own process,
    16 callers, submit's payload sizes; its rate and CPU per call."""
    echo = EchoProcess(event_loop)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{echo.port}")
    try:
        call = channel.unary_unary(ECHO_UNARY, None, None)
        payload = echo_request(*w.sizes["submit"])

        async def one(n: int) -> object:
            return await call(payload, timeout=CALL_TIMEOUT)

        await concurrent(one, min(1.0, seconds / 3))
        before = echo.cpu_seconds()
        fig = await concurrent(one, seconds)
        fig["cpu_us_per_call"] = round((echo.cpu_seconds() - before) / fig["calls"] * 1e6)
        return fig
    finally:
        await channel.close(None)
        echo.stop()


# -- at scale -------------------------------------------------------------------------

SCALE_STORES = ((1_000, "10k"), (100_000, "1m"))  # keys; 10 evidence rows per key
SCALE_EVIDENCE_PER_KEY = 10
SCALE_BATCH_KEYS = 500  # keys per write transaction while building (5,000 rows)
SCALE_HOT_KEYS = 2_000
# Anchors that never decay by default: the node's decay job finds nothing to do.
SCALE_ANCHORS = ("user_stated", "user_confirmed", "codebase_verified")


def scale_key(i: int) -> Key:
    return Key(f"scale:{i % 100}", f"subject-{i:07d}", "lives_in")


def build_store(data_dir: Path, n_keys: int) -> float:
    """Fills a fresh store in `data_dir` as the node would open it: `n_keys` keys with ten
    competing pieces of evidence each (anchors, event times, worth and confidence drawn from
    a seeded generator), through `Ledger.ingest` in batches. Returns the seconds it took."""
    data_dir.mkdir(parents=True)
    repo = SqlRepository(Settings(data_dir=data_dir).db_url)
    rng = random.Random(SEED + n_keys)
    policy = Policy()
    now = int(time.time() * 1_000_000)
    t0 = time.perf_counter()
    try:
        ledger = Ledger(repo, policy, ensure_node_id(repo, None, "node-scale"), FakeClock(now))
        for first in range(0, n_keys, SCALE_BATCH_KEYS):
            items = []
            for i in range(first, min(n_keys, first + SCALE_BATCH_KEYS)):
                key = scale_key(i)
                for v in range(SCALE_EVIDENCE_PER_KEY):
                    fact = Submission(
                        key.namespace,
                        key.subject,
                        key.predicate,
                        f"city-{v}",
                        rng.choice(SCALE_ANCHORS),
                        source=f"agent-{rng.randrange(4)}",
                        worth=rng.randrange(4, 11) / 10,
                        confidence=rng.randrange(5, 11) / 10,
                        valid_from=now - rng.randrange(1, 400) * MICROS_PER_DAY,
                    )
                    items.append(
                        (make_evidence(fact, policy, recorded_at=now, origin_node=""), None)
                    )
            ledger.ingest(items)
    finally:
        repo.close()
    return time.perf_counter() - t0


async def measure_scale(args: argparse.Namespace) -> dict[str, Any]:
    """Both stores built; GetBelief on a node over each, next to an echo, alternately: with
    the served memory on (hot keys, then keys drawn from all), then with it off."""
    out: dict[str, Any] = {}
    workdirs: dict[str, Path] = {}
    try:
        for n_keys, name in SCALE_STORES:
            workdirs[name] = Path(tempfile.mkdtemp(prefix=f"factnode-scale-{name}-"))
            seconds = await asyncio.to_thread(build_store, workdirs[name] / "data", n_keys)
            rows = n_keys * SCALE_EVIDENCE_PER_KEY
            out[f"build_{name}"] = {"rows": rows, "keys": n_keys, "seconds": round(seconds, 1)}
            say(f"built {rows:,} rows over {n_keys:,} keys in {seconds:.0f} s")
        for memory, phases in ((True, ("hot", "uniform")), (False, ("uniform_no_memory",))):
            rss = await _scale_reads(args, workdirs, memory, phases, out)
            if memory:
                out["node_rss_mb"] = rss
                say(
                    f"node resident memory: 10k rows {rss['10k']:.0f} MB, 1M rows {rss['1m']:.0f} MB"
                )
        return out
    finally:
        for workdir in workdirs.values():
            shutil.rmtree(workdir, ignore_errors=True)


async def _scale_reads(
    args: argparse.Namespace,
    workdirs: dict[str, Path],
    memory: bool,
    phases: tuple[str, ...],
    out: dict[str, Any],
) -> dict[str, float | None]:
    """Starts a node on each store (served memory on or off), measures each phase into
    `out`, and returns each node's resident memory (MB) at the end."""
    nodes = {
        name: NodeProcess(workdirs[name], None, args.event_loop, None if memory else 0)
        for name in workdirs
    }
    channels = {name: grpc.aio.insecure_channel(n.address) for name, n in nodes.items()}
    echo_server, echo_port = await start_echo()
    echo_channel = grpc.aio.insecure_channel(f"127.0.0.1:{echo_port}")
    try:
        for name, node in nodes.items():
            await node.wait_serving(channels[name])
        rng = random.Random(SEED)
        stubs = {name: pb_grpc.FactServiceStub(ch) for name, ch in channels.items()}
        sizes: dict[str, tuple[int, int]] = {}

        def reader(name: str, n_keys: int, hot: bool) -> Callable[[int], Awaitable[object]]:
            pool = min(n_keys, SCALE_HOT_KEYS) if hot else n_keys

            async def call(n: int) -> object:
                k = scale_key(rng.randrange(pool))
                request = pb.GetBeliefRequest(
                    key=pb.Key(namespace=k.namespace, subject=k.subject, predicate=k.predicate)
                )
                reply = await stubs[name].GetBelief(request, timeout=CALL_TIMEOUT)
                sizes.setdefault(name, (request.ByteSize(), reply.ByteSize()))
                return reply

            return call

        echo_unary = echo_channel.unary_unary(ECHO_UNARY, None, None)
        seconds, warm = args.seconds, min(1.0, args.seconds / 3)
        for phase in phases:
            hot = phase == "hot"
            pairs: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = {}
            for n_keys, name in SCALE_STORES:
                await concurrent(reader(name, n_keys, hot), warm)
            for _ in range(args.repeats):
                for n_keys, name in SCALE_STORES:
                    node_fig = await concurrent(reader(name, n_keys, hot), seconds)
                    payload = echo_request(*sizes[name])

                    async def echo_call(n: int, payload: bytes = payload) -> object:
                        return await echo_unary(payload, timeout=CALL_TIMEOUT)

                    echo_fig = await concurrent(echo_call, seconds)
                    pairs.setdefault(name, []).append((node_fig, echo_fig))
            ratios = {
                name: [round(n["rps"] / e["rps"], 3) for n, e in got] for name, got in pairs.items()
            }
            mid = {name: statistics.median(r) for name, r in ratios.items()}
            out[f"get_{phase}"] = {
                name: {
                    "ratio": round(mid[name], 3),
                    "ratios": ratios[name],
                    "node_rps": [n["rps"] for n, _ in pairs[name]],
                    "node_p99_ms": [n["p99_ms"] for n, _ in pairs[name]],
                    "echo_rps": [e["rps"] for _, e in pairs[name]],
                }
                for name in pairs
            }
            out[f"get_{phase}_1m_over_10k"] = round(mid["1m"] / mid["10k"], 3)
            say(
                f"GetBelief ({phase}) node/echo at 10k rows {mid['10k']:.3f}, at 1M rows "
                f"{mid['1m']:.3f}: 1M over 10k {out[f'get_{phase}_1m_over_10k']:.3f} "
                f"(node rps 10k {out[f'get_{phase}']['10k']['node_rps']}, "
                f"1M {out[f'get_{phase}']['1m']['node_rps']})"
            )
        return {name: node.rss_mb() for name, node in nodes.items()}
    finally:
        for ch in channels.values():
            await ch.close(None)
        await echo_channel.close(None)
        await echo_server.stop(0)
        for node in nodes.values():
            node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds per figure")
    parser.add_argument("--postgres", metavar="URL", help="run the node on this database")
    parser.add_argument("--seconds", type=float, help="seconds per measured phase")
    parser.add_argument("--repeats", type=int, help="node/echo pairs per figure")
    parser.add_argument(
        "--scale",
        action="store_true",
        help="GetBelief at 10,000 vs 1,000,000 evidence rows, and RSS (SQLite; minutes)",
    )
    parser.add_argument(
        "--only",
        type=lambda text: text.split(","),
        metavar="FIGURES",
        help="measure only these, comma-separated (submit,stream,get,asof,list)",
    )
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default="auto",
        help="the loop of the node, the echo and the callers alike (default: the node's default)",
    )
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # The node, the echo and the callers all run on the same kind of loop, so the echo stays
    # bare gRPC on the loop the node has: the ratio is not the loop's gain.
    args.event_loop, new_loop = loop_factory(args.event_loop)

    def run(main: Awaitable[Any]) -> Any:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            return runner.run(main)

    if args.serve_echo:
        run(serve_echo_forever())
        return
    if args.only and not set(args.only) <= set(PHASES):
        parser.error(f"--only takes some of {','.join(PHASES)}, got {','.join(args.only)}")
    if args.seconds is None:
        args.seconds = 2.0 if args.quick else 8.0
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    say(
        f"factnode e2e bench: {CONCURRENCY} callers, {args.seconds}s per phase, "
        f"{args.repeats} node/echo pair(s) per figure, store "
        f"{'postgres' if args.postgres else 'sqlite'}, event loop {args.event_loop}"
    )
    if args.scale:
        if args.postgres:
            parser.error("--scale builds SQLite stores; it does not take --postgres")
        scale = run(measure_scale(args))
        summary = {
            "get_hot_1m_over_10k": scale["get_hot_1m_over_10k"],
            "get_uniform_1m_over_10k": scale["get_uniform_1m_over_10k"],
            "get_uniform_no_memory_1m_over_10k": scale["get_uniform_no_memory_1m_over_10k"],
            "node_rss_mb_1m": scale["node_rss_mb"]["1m"],
            "store": "sqlite",
            "event_loop": args.event_loop,
            "seconds": args.seconds,
            "repeats": args.repeats,
            "concurrency": CONCURRENCY,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "figures": scale,
        }
        print(json.dumps(summary), flush=True)
        return
    out = run(measure(args))
    result: dict[str, Any] = {f"{name}_ratio": out[name]["ratio"] for name in PHASES if name in out}
    result.update(
        {
            "get_p99_over_echo_p99": round(
                out["get"]["node"]["p99_ms"] / out["get"]["echo"]["p99_ms"], 2
            )
            if "get" in out
            else None,
            "store": "postgres" if args.postgres else "sqlite",
            "event_loop": args.event_loop,
            "seconds": args.seconds,
            "repeats": args.repeats,
            "concurrency": CONCURRENCY,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "figures": out,
        }
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
