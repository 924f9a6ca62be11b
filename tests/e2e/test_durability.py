"""A node killed with SIGKILL in the middle of ingest keeps every acknowledged fact, whole."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _e2e import RPC_TIMEOUT, START_TIMEOUT, open_channel, start_server

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

ACKED_NS, STREAM_NS = "dur:acked", "dur:stream"
ACKED = 600  # facts in the first, completed SubmitFacts call
# The second stream: within what one reply can carry (a stream is read whole, then committed
# in batches), and long enough to be killed while its batches commit.
STREAM_ITEMS = 12_000
STREAM_SOURCE_PREFIX = "stream-"


def fact(ns: str, i: int) -> pb.SubmitFactRequest:
    """Fact number `i` of a namespace: its own key, so each is ACCEPTED on its own."""
    key = pb.Key(namespace=ns, subject=f"s{i:06d}", predicate="lives_in")
    return pb.SubmitFactRequest(
        fact=pb.FactInput(
            key=key, object=f"{ns}-value-{i}", anchor="user_stated", source=f"src-{i}"
        )
    )


def pages(call: Callable[..., Any], request: Any, items: str) -> list[Any]:
    """Every item of a paged listing."""
    out: list[Any] = []
    while True:
        response = call(request, timeout=RPC_TIMEOUT)
        out.extend(getattr(response, items))
        if not response.next_page_token:
            return out
        request.page_token = response.next_page_token


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Polls `predicate` until it holds; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_sigkill_mid_stream_keeps_every_acknowledged_fact_and_no_half_written_one(
    tmp_path: Path,
) -> None:
    """After kill -9 during SubmitFacts and a restart, acknowledged facts are all believed and
    every streamed key is either whole (evidence, decision, belief) or absent."""
    data_dir = tmp_path / "data"
    node = start_server(tmp_path, data_dir=data_dir)
    stop = threading.Event()
    try:
        channel = open_channel(node.address)
        facts = pb_grpc.FactServiceStub(channel)
        # 1. A completed call: what its response acknowledges must survive.
        done = facts.SubmitFacts(iter(fact(ACKED_NS, i) for i in range(ACKED)), timeout=60)
        acknowledged = {
            r.index: r.decision for r in done.results if r.WhichOneof("result") == "decision"
        }
        assert len(acknowledged) == ACKED
        assert {d.outcome for d in acknowledged.values()} == {pb.OUTCOME_ACCEPTED}

        # 2. A second stream whose batches are still committing when the process is killed.
        def stream() -> Iterator[pb.SubmitFactRequest]:
            for i in range(STREAM_ITEMS):
                if stop.is_set():
                    return
                yield fact(STREAM_NS, i)

        future = facts.SubmitFacts.future(stream(), timeout=120)
        probe = pb.ListDecisionsRequest(namespace=STREAM_NS, page_size=1)
        wait_for(
            lambda: bool(facts.ListDecisions(probe, timeout=RPC_TIMEOUT).decisions),
            START_TIMEOUT,
            "the node to commit part of the second stream",
        )
        node.kill()
        stop.set()
        error = future.exception(timeout=RPC_TIMEOUT)
        assert error is not None, "the stream completed before the kill: nothing was tested"
        channel.close()
    finally:
        stop.set()
        node.kill()  # a no-op once killed

    # 3. Restart on the same data dir.
    again = start_server(tmp_path, data_dir=data_dir)
    try:
        assert again.node_id == node.node_id, "the node id is persisted across restarts"
        channel = open_channel(again.address)
        facts = pb_grpc.FactServiceStub(channel)
        admin = pb_grpc.AdminServiceStub(channel)

        believed = pages(facts.ListBeliefs, pb.ListBeliefsRequest(namespace=ACKED_NS), "beliefs")
        values = {b.key.subject: b.object for b in believed}
        for i in acknowledged:
            want = fact(ACKED_NS, i).fact
            assert values.get(want.key.subject) == want.object, f"acknowledged fact {i} was lost"

        streamed = pages(facts.ListBeliefs, pb.ListBeliefsRequest(namespace=STREAM_NS), "beliefs")
        decisions = pages(
            facts.ListDecisions, pb.ListDecisionsRequest(namespace=STREAM_NS), "decisions"
        )
        by_subject = {b.key.subject: b for b in streamed}
        decided = {d.key.subject: d for d in decisions}
        assert len(decided) == len(decisions), "one decision per streamed fact"
        assert by_subject.keys() == decided.keys(), "a key with a decision but no belief, or back"
        committed = sorted(int(s.removeprefix("s")) for s in by_subject)
        assert committed, "part of the stream was committed before the kill (checked above)"
        assert len(committed) < STREAM_ITEMS, "the kill came before the stream was all committed"
        assert committed == list(range(len(committed))), "batches commit in order, without gaps"
        for i in committed:
            want = fact(STREAM_NS, i).fact
            belief, decision = by_subject[want.key.subject], decided[want.key.subject]
            assert (belief.object, belief.evidence.source) == (want.object, want.source)
            assert decision.outcome == pb.OUTCOME_ACCEPTED
            assert decision.evidence_id == belief.evidence.evidence_id

        counts = admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT).counts
        total = ACKED + len(committed)
        assert (counts.evidence, counts.decisions, counts.keys) == (total, total, total)
        channel.close()
    finally:
        code = again.stop()
    assert code == 0, again.output()
    db = sqlite3.connect(f"file:{data_dir / 'factnode.db'}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()
