"""Unary SubmitFact under group commit: a node killed with SIGKILL while many callers submit
keeps every fact it acknowledged, since an acknowledgement follows its batch's commit."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest
from _e2e import RPC_TIMEOUT, START_TIMEOUT, open_channel, start_server
from test_durability import fact, pages, wait_for

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

NS = "dur:unary"
CALLERS = 16
ACKED_BEFORE_KILL = 300  # acknowledgements to collect before the kill


@pytest.mark.slow
def test_sigkill_during_concurrent_submit_fact_keeps_every_acknowledged_fact(
    tmp_path: Path,
) -> None:
    """After kill -9 amid 16 concurrent SubmitFact callers and a restart, every acknowledged
    fact is believed with its acknowledged evidence id."""
    data_dir = tmp_path / "data"
    node = start_server(tmp_path, data_dir=data_dir)
    stop = threading.Event()
    acked: dict[int, str] = {}  # fact number -> acknowledged evidence id
    lock = threading.Lock()
    counter = iter(range(10**9))
    channel = open_channel(node.address)
    facts = pb_grpc.FactServiceStub(channel)

    def caller() -> None:
        while not stop.is_set():
            with lock:
                i = next(counter)
            try:
                reply = facts.SubmitFact(fact(NS, i), timeout=RPC_TIMEOUT)
            except grpc.RpcError:
                return  # the node is gone: this call was never acknowledged
            assert reply.decision.outcome == pb.OUTCOME_ACCEPTED
            with lock:
                acked[i] = reply.evidence_id

    threads = [threading.Thread(target=caller, daemon=True) for _ in range(CALLERS)]
    try:
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) >= ACKED_BEFORE_KILL, START_TIMEOUT, "acknowledgements")
        node.kill()
        stop.set()
        for t in threads:
            t.join(timeout=RPC_TIMEOUT + 5)
        assert not any(t.is_alive() for t in threads), "a caller hung after the kill"
        channel.close()
    finally:
        stop.set()
        node.kill()

    with lock:
        acknowledged = dict(acked)
    again = start_server(tmp_path, data_dir=data_dir)
    try:
        channel = open_channel(again.address)
        facts = pb_grpc.FactServiceStub(channel)
        believed = pages(facts.ListBeliefs, pb.ListBeliefsRequest(namespace=NS), "beliefs")
        by_subject = {b.key.subject: b for b in believed}
        for i, evidence_id in acknowledged.items():
            want = fact(NS, i).fact
            belief = by_subject.get(want.key.subject)
            assert belief is not None, f"acknowledged fact {i} was lost"
            assert (belief.object, belief.evidence.evidence_id) == (want.object, evidence_id)
        channel.close()
    finally:
        code = again.stop()
    assert code == 0, again.output()
