"""What a hostile peer with a valid certificate can make a real node build and store.

    python bench/peer_abuse.py [--keys 20000] [--abstentions 50000]

Builds a store of `--keys` keys with ten pieces of evidence each (`bench/e2e.py`'s
`build_store`, through `Ledger.ingest`), starts `factnode serve` on it with a federation port
and one configured peer, `mallory`, whose certificate the same development CA signs, and
then, as mallory over mutual TLS:

1. `digest`: one GetDigest naming 4,000 root buckets at depth 2 (a request of about 16 KB);
   `digest_1024`: the same with 1,024 root buckets, as many as a request may name.
2. `pull`: four concurrent PullDelta of the root evidence bucket.
3. `abstain`: `--abstentions` abstentions (votes with no version) on keys the node holds
   nowhere, pushed in deltas of 5,000.

For each: what the node answered (status, answer bytes, items, buckets left unanswered),
and the node's resident memory (VmRSS) after it and its peak so far (VmHWM, from /proc).
For `abstain`, how many the node took and refused. The node's peak before the first
step is `rss_peak_mb_start`. Readable lines first; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import NodeProcess, build_store, free_port, say

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.certs import ensure_ca, issue_node_cert

NODE_ID = "node-scale"  # the id build_store gives the store
PEER_ID = "mallory"
CALL_TIMEOUT = 120.0
MAX_MESSAGE = 64 * 1024 * 1024  # mallory's side accepts whatever the node sends


def _memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


def _status(exc: grpc.aio.AioRpcError) -> str:
    return f"{exc.code().name}: {(exc.details() or '')[:120]}"


async def _digest_step(fed: Any, request: pb.DigestRequest, pid: int) -> dict[str, Any]:
    """One GetDigest: its request and answer sizes (or refusal) and the node's memory after."""
    step: dict[str, Any] = {"request_bytes": request.ByteSize()}
    try:
        digest = await fed.GetDigest(request, timeout=CALL_TIMEOUT)
        step.update(
            status="OK",
            answer_bytes=digest.ByteSize(),
            buckets=len(digest.buckets),
            unanswered=len(digest.unanswered),
        )
    except grpc.aio.AioRpcError as exc:
        step["status"] = _status(exc)
    rss, peak = _memory(pid)
    step["rss_mb"], step["rss_peak_mb"] = round(rss, 1), round(peak, 1)
    return step


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="factnode-abuse-") as tmp:
        work = Path(tmp)
        built = build_store(work / "data", args.keys)
        say(f"store of {args.keys * 10:,} evidence rows built in {built:.1f} s")
        certs = work / "certs"
        ensure_ca(certs)
        node_cert, node_key = issue_node_cert(certs, NODE_ID)
        peer_cert, peer_key = issue_node_cert(certs, PEER_ID)
        fed_port = free_port()
        extra = "\n".join(
            [
                "[federation]",
                f'listen = "127.0.0.1:{fed_port}"',
                f'cert = "{node_cert}"',
                f'key = "{node_key}"',
                f'ca = "{certs / "ca.crt"}"',
                "sync_interval_seconds = 3600",
                "",
                "[[peers]]",
                'address = "127.0.0.1:1"',  # never reached: the node only answers mallory
                f'node_id = "{PEER_ID}"',
            ]
        )
        node = NodeProcess(work, None, "auto", extra_config=extra)
        out: dict[str, Any] = {"keys": args.keys, "evidence": args.keys * 10}
        try:
            async with grpc.aio.insecure_channel(node.address) as client:
                await node.wait_serving(client)
            creds = grpc.ssl_channel_credentials(
                root_certificates=(certs / "ca.crt").read_bytes(),
                private_key=peer_key.read_bytes(),
                certificate_chain=peer_cert.read_bytes(),
            )
            options = [
                ("grpc.ssl_target_name_override", NODE_ID),
                ("grpc.max_receive_message_length", MAX_MESSAGE),
                ("grpc.max_send_message_length", MAX_MESSAGE),
            ]
            pid = node.proc.pid
            async with grpc.aio.secure_channel(f"127.0.0.1:{fed_port}", creds, options) as ch:
                fed = pb_grpc.FederationServiceStub(ch)
                await fed.GetDigest(pb.DigestRequest(), timeout=CALL_TIMEOUT)  # index built
                rss, peak = _memory(pid)
                out["rss_mb_start"], out["rss_peak_mb_start"] = round(rss, 1), round(peak, 1)
                say(f"node resident {rss:.0f} MB, peak {peak:.0f} MB before the abuse")

                # 1. One GetDigest of 4,000 root buckets at depth 2.
                refs = [pb.BucketRef(set=pb.DIGEST_SET_EVIDENCE, prefix="")] * 4000
                request = pb.DigestRequest(buckets=refs, depth=2)
                step = await _digest_step(fed, request, pid)
                out["digest"] = step
                say(f"digest: {step}")

                # 1b. As many root buckets as a request may name, at depth 2.
                request = pb.DigestRequest(buckets=refs[:1024], depth=2)
                step = await _digest_step(fed, request, pid)
                out["digest_1024"] = step
                say(f"digest of 1,024 root buckets: {step}")

                # 2. Four concurrent PullDelta of the root evidence bucket.
                async def pull() -> dict[str, Any]:
                    req = pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_EVIDENCE)])
                    try:
                        delta = await fed.PullDelta(req, timeout=CALL_TIMEOUT)
                    except grpc.aio.AioRpcError as exc:
                        return {"status": _status(exc)}
                    return {
                        "status": "OK",
                        "answer_bytes": delta.ByteSize(),
                        "items": len(delta.evidence),
                        "unanswered": len(delta.unanswered) if hasattr(delta, "unanswered") else 0,
                    }

                pulls = await asyncio.gather(*(pull() for _ in range(4)))
                rss, peak = _memory(pid)
                out["pull"] = {
                    "answers": pulls,
                    "rss_mb": round(rss, 1),
                    "rss_peak_mb": round(peak, 1),
                }
                say(f"pull: {out['pull']}")

                # 3. Abstentions on keys the node holds nowhere.
                taken = refused = 0
                for first in range(0, args.abstentions, 5000):
                    votes = [
                        pb.Vote(key=pb.Key(namespace="abuse", subject=f"s{i}", predicate="p"))
                        for i in range(first, min(args.abstentions, first + 5000))
                    ]
                    reply = await fed.PushDelta(pb.Delta(votes=votes), timeout=CALL_TIMEOUT)
                    taken += reply.accepted
                    refused += len(reply.rejected)
                rss, peak = _memory(pid)
                out["abstain"] = {
                    "sent": args.abstentions,
                    "taken": taken,
                    "refused": refused,
                    "rss_mb": round(rss, 1),
                    "rss_peak_mb": round(peak, 1),
                }
                say(f"abstain: {out['abstain']}")
        finally:
            node.stop()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--abstentions", type=int, default=50_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
