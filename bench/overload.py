"""Calls in flight against completions and latency: a node under a burst, beside bare gRPC.

    python bench/overload.py                 # 100, 1,000 and 3,000 calls at once
    python bench/overload.py --quick         # 100 and 1,000
    python bench/overload.py --in-flight 3000 --clients 30 --repeats 3

Starts `factnode serve` as a subprocess (e2e.py's NodeProcess: its own data directory, a
free loopback port, /metrics on another) and, in this process, a bare grpc.aio echo server.
For each number N of calls in flight it launches N calls at once and waits for all of them
(each has a deadline of `--timeout` seconds), for:

- `get`: GetBelief of one key, from one `factnode.AsyncClient` (its defaults);
- `put`: SubmitFact of N distinct facts, from one AsyncClient;
- `put_clients`: the same N puts spread over `--clients` AsyncClients (each may send its
  own 100 at once, so together they can pass the node's `max_calls_in_flight`);
- `raw_get`: GetBelief on a bare grpc.aio channel, no retries, no client-side limit: what
  the node itself answers to N at once;
- `echo`: N calls at once to the echo server on a bare channel (the baseline), the server
  with the node's call backlog (`app.MAX_WAITING_CALLS`);
- `echo_default`: the same to an echo server with gRPC's default backlog, which drops
  calls as CANCELLED once more than 1,000 wait (issue 41, finding 10's cause).

Each line: completed, failed (by status), completions per second, p50 and p99 latency of a
call in milliseconds (launch to answer, waits in the client and retries included), and,
for the node's lines, `ratio` = its completions per second / the echo's at the same N in
the same repeat (median over `--repeats`), and `overloaded`: the attempts the node refused
RESOURCE_EXHAUSTED during the phase (its factnode_calls_overloaded_total). After the puts
the bench reads the decision log: `put_logged` must equal the puts completed.

Readable lines first; the last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import NodeProcess, free_port, say

import factnode
from factnode.api.v1 import factnode_pb2 as pb

# The node's own backlog, for the echo baseline (gRPC's default before factnode set it).
MAX_WAITING_CALLS = 100_000

BELIEF_PATH = "/factnode.v1.FactService/GetBelief"
ECHO_PATH = "/bench.Echo/Call"


async def burst(n: int, call: Callable[[int], Awaitable[object]]) -> dict[str, Any]:
    """N calls launched at once; their outcomes by status, rate and latencies."""
    latencies: list[float] = []
    failed: dict[str, int] = {}

    async def one(i: int) -> None:
        t0 = time.perf_counter()
        try:
            await call(i)
        except (factnode.ClientError, grpc.aio.AioRpcError) as err:
            code = err.code if isinstance(err, factnode.ClientError) else err.code().name
            failed[code] = failed.get(code, 0) + 1
            return
        latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - start
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return (
            round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)
            if ordered
            else float("nan")
        )

    return {
        "completed": len(latencies), "failed": failed, "per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": pct(0.5), "p99_ms": pct(0.99), "seconds": round(elapsed, 2),
    }  # fmt: skip


async def echo_server(backlog: int | None) -> tuple[grpc.aio.Server, str]:
    async def echo(request: bytes, context: object) -> bytes:
        return request

    options = [] if backlog is None else [
        ("grpc.server.max_pending_requests", backlog),
        ("grpc.server.max_pending_requests_hard_limit", backlog),
    ]  # fmt: skip
    server = grpc.aio.server(options=options)
    handler = grpc.unary_unary_rpc_method_handler(echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Echo", {"Call": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def overloaded(metrics_url: str) -> float:
    """The node's factnode_calls_overloaded_total (0 where the node has no such metric)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("factnode_calls_overloaded_total "):
                return float(line.split()[1])
    return 0.0


async def logged(address: str, namespace: str, timeout: float) -> int:
    """Decisions the node logged in `namespace`."""
    count, token = 0, ""
    async with factnode.AsyncClient(address, timeout=timeout) as client:
        while True:
            page = await client.decisions(namespace=namespace, page_size=1000, page_token=token)
            count += len(page.items)
            token = page.next_page_token
            if not token:
                return count


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The clients' options: the deadline, and `--max-in-flight` where given."""
    out: dict[str, Any] = {"timeout": args.timeout}
    if args.max_in_flight is not None:
        out["max_in_flight"] = args.max_in_flight
    return out


async def level(
    n: int, node: NodeProcess, echoes: dict[str, str], metrics: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Every phase at N calls in flight."""
    out: dict[str, Any] = {}
    key = ("bench", "ana", "lives_in")
    request = pb.GetBeliefRequest(key=pb.Key(namespace=key[0], subject=key[1], predicate=key[2]))

    async def phase(name: str, run: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        before = overloaded(metrics) if name not in echoes else 0.0
        out[name] = await run()
        if name not in echoes:
            out[name]["overloaded"] = int(overloaded(metrics) - before)

    payload = request.SerializeToString()
    for name, address in echoes.items():
        async with grpc.aio.insecure_channel(address) as channel:
            echo = channel.unary_unary(ECHO_PATH)
            await echo(payload, timeout=args.timeout)  # connected before the clock starts
            await phase(name, lambda e=echo: burst(n, lambda i: e(payload, timeout=args.timeout)))
    async with factnode.AsyncClient(node.address, **client_options(args)) as client:
        await client.submit(key, "Porto", "user_stated", source="ana")
        await phase("get", lambda: burst(n, lambda i: client.belief(key)))
        root = f"put-{uuid.uuid4().hex[:8]}"
        await phase("put", lambda: burst(
            n, lambda i: client.submit((root, f"s{i}", "p"), "v", "user_stated", source="b")
        ))  # fmt: skip
        out["put"]["logged"] = await logged(node.address, root, args.timeout)
    clients = [
        factnode.AsyncClient(node.address, timeout=args.timeout) for _ in range(args.clients)
    ]
    try:
        root = f"putc-{uuid.uuid4().hex[:8]}"
        await phase("put_clients", lambda: burst(n, lambda i: clients[i % len(clients)].submit(
            (root, f"s{i}", "p"), "v", "user_stated", source="b"
        )))  # fmt: skip
        out["put_clients"]["logged"] = await logged(node.address, root, args.timeout)
    finally:
        for c in clients:
            await c.close()
    async with grpc.aio.insecure_channel(
        node.address, options=[("grpc.enable_retries", 0)]
    ) as channel:
        raw = channel.unary_unary(
            BELIEF_PATH, request_serializer=pb.GetBeliefRequest.SerializeToString
        )
        await phase("raw_get", lambda: burst(n, lambda i: raw(request, timeout=args.timeout)))
    for name in ("get", "put", "put_clients", "raw_get"):
        out[name]["ratio"] = round(out[name]["per_s"] / out["echo"]["per_s"], 3)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(x) for x in args.in_flight.split(",")]
    result: dict[str, Any] = {"load_avg_1m": [os.getloadavg()[0]], "clients": args.clients}
    with tempfile.TemporaryDirectory(prefix="factnode-overload-") as tmp:
        metrics_port = free_port()
        node = NodeProcess(
            Path(tmp), None, "auto", extra_config=f'metrics_listen = "127.0.0.1:{metrics_port}"'
        )
        servers = {
            "echo": await echo_server(MAX_WAITING_CALLS),
            "echo_default": await echo_server(None),
        }
        echoes = {name: address for name, (_, address) in servers.items()}
        try:
            async with grpc.aio.insecure_channel(node.address) as channel:
                await node.wait_serving(channel)
            metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            runs: dict[int, list[dict[str, Any]]] = {n: [] for n in levels}
            for _ in range(args.repeats):
                for n in levels:
                    figures = await level(n, node, echoes, metrics, args)
                    runs[n].append(figures)
                    for name, f in figures.items():
                        extra = f" ratio {f['ratio']}" if "ratio" in f else ""
                        extra += f" overloaded {f['overloaded']}" if "overloaded" in f else ""
                        extra += f" logged {f['logged']}" if "logged" in f else ""
                        say(
                            f"{n:>5} in flight {name:<11} completed {f['completed']:>5} failed {f['failed'] or 0} "
                            f"{f['per_s']:>8}/s p50 {f['p50_ms']:>7} ms p99 {f['p99_ms']:>7} ms{extra}"
                        )
            for n, figs in runs.items():
                result[str(n)] = figs[-1] if len(figs) == 1 else {
                    "repeats": figs,
                    "ratio_median": {k: statistics.median(f[k]["ratio"] for f in figs)
                                     for k in ("get", "put", "put_clients", "raw_get")},
                }  # fmt: skip
        finally:
            for server, _ in servers.values():
                await server.stop(0)
            node.stop()
    result["load_avg_1m"].append(os.getloadavg()[0])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--in-flight", default="100,1000,3000", help="comma-separated")
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 only")
    parser.add_argument("--clients", type=int, default=30, help="clients of put_clients")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="each call's deadline")
    parser.add_argument("--max-in-flight", type=int, help="each client's (default: its own)")
    args = parser.parse_args()
    if args.quick:
        args.in_flight = "100,1000"
    print(json.dumps(asyncio.run(run(args))), flush=True)


if __name__ == "__main__":
    main()
