"""What idle WatchBeliefs streams cost a real node: its CPU and GetBelief's latency beside them.

    python bench/watch_idle.py [--streams 1000] [--seconds 10] [--gets 500]

Starts `factnode serve` as a subprocess (as `bench/e2e.py` does: its own data directory and
config, a free loopback port, health SERVING awaited), submits one fact, opens `--streams`
WatchBeliefs streams from this process (spread over channels of at most 100 streams) and
waits until a second fact has reached every one of them, so each is live and waiting. Then:

- `idle_cpu_pct`: the node's CPU time (user and system, all threads, from /proc) over
  `--seconds` of idle streams, as a percentage of one core; `idle_cpu_pct_no_streams` is the
  same measure before any stream was opened, the node's own floor.
- `get_p50_ms`, `get_p99_ms`: `--gets` GetBelief calls one after another with the streams open.
- `change_reached_all_ms`: one more change, from SubmitFact until every stream has it.

Readable lines first; the last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import CALL_TIMEOUT, NodeProcess, say

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

STREAMS_PER_CHANNEL = 100
KEY = pb.Key(namespace="bench:watch", subject="build", predicate="python_version")
WAIT = 120.0  # seconds for every stream to see a change


def _fact(obj: str) -> pb.SubmitFactRequest:
    return pb.SubmitFactRequest(
        fact=pb.FactInput(key=KEY, object=obj, anchor="user_stated", source="bench")
    )


async def _idle_cpu(node: NodeProcess, seconds: float) -> float:
    before = node.cpu_seconds()
    await asyncio.sleep(seconds)
    return 100.0 * (node.cpu_seconds() - before) / seconds


async def _until_all(counts: list[int], at_least: int) -> None:
    deadline = time.monotonic() + WAIT
    while min(counts) < at_least:
        if time.monotonic() > deadline:
            live = sum(1 for c in counts if c >= at_least)
            raise RuntimeError(f"only {live} of {len(counts)} streams saw the change")
        await asyncio.sleep(0.01)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="factnode-watch-") as tmp:
        node = NodeProcess(Path(tmp), None, "auto")
        channels: list[grpc.aio.Channel] = []
        tasks: list[asyncio.Task[None]] = []
        try:
            control = grpc.aio.insecure_channel(node.address)
            channels.append(control)
            await node.wait_serving(control)
            facts = pb_grpc.FactServiceStub(control)
            await facts.SubmitFact(_fact("3.11"), timeout=CALL_TIMEOUT)
            floor = await _idle_cpu(node, args.seconds)
            say(f"node CPU with no streams: {floor:.2f}% of a core")

            counts = [0] * args.streams

            async def watch(stub: pb_grpc.FactServiceStub, i: int) -> None:
                async for _change in stub.WatchBeliefs(
                    pb.WatchBeliefsRequest(namespace=KEY.namespace, resume_token="")
                ):
                    counts[i] += 1

            for start in range(0, args.streams, STREAMS_PER_CHANNEL):
                channel = grpc.aio.insecure_channel(node.address)
                channels.append(channel)
                stub = pb_grpc.FactServiceStub(channel)
                for i in range(start, min(start + STREAMS_PER_CHANNEL, args.streams)):
                    tasks.append(asyncio.create_task(watch(stub, i)))
            # Every stream first replays the existing change, then waits.
            await _until_all(counts, 1)
            await facts.SubmitFact(_fact("3.12"), timeout=CALL_TIMEOUT)
            await _until_all(counts, 2)
            say(f"{args.streams} streams open and live")
            await asyncio.sleep(2.0)  # let the wake-ups of that change settle

            idle = await _idle_cpu(node, args.seconds)
            say(f"node CPU with {args.streams} idle streams: {idle:.2f}% of a core")

            latencies = []
            for _ in range(args.gets):
                t0 = time.perf_counter()
                await facts.GetBelief(pb.GetBeliefRequest(key=KEY), timeout=CALL_TIMEOUT)
                latencies.append(time.perf_counter() - t0)
            latencies.sort()
            p50 = latencies[len(latencies) // 2] * 1000
            p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000
            say(f"GetBelief beside them: p50 {p50:.2f} ms, p99 {p99:.2f} ms")

            t0 = time.perf_counter()
            await facts.SubmitFact(_fact("3.13"), timeout=CALL_TIMEOUT)
            await _until_all(counts, 3)
            reached = (time.perf_counter() - t0) * 1000
            say(f"one change reached all {args.streams} streams in {reached:.0f} ms")
            return {
                "streams": args.streams,
                "seconds": args.seconds,
                "gets": args.gets,
                "idle_cpu_pct_no_streams": round(floor, 2),
                "idle_cpu_pct": round(idle, 2),
                "get_p50_ms": round(p50, 2),
                "get_p99_ms": round(p99, 2),
                "change_reached_all_ms": round(reached, 1),
                "node_rss_mb": node.rss_mb(),
            }
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for channel in channels:
                await channel.close(None)
            node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--gets", type=int, default=500)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
