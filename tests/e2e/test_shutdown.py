"""Stopping a node with a signal: health turns NOT_SERVING, then a clean exit 0, in bounded time."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
import pytest
from _e2e import RPC_TIMEOUT, STOP_TIMEOUT, isolated_env, open_channel, start_server
from grpc_health.v1 import health_pb2, health_pb2_grpc

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_node_gracefully_with_exit_0(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM or SIGINT: the node says it is shutting down and exits 0 within the bound."""
    node = start_server(tmp_path)
    channel = open_channel(node.address)
    try:
        key = pb.Key(namespace="user:stop", subject="ana", predicate="lives_in")
        fact = pb.FactInput(key=key, object="Porto", anchor="user_stated", source="e2e")
        pb_grpc.FactServiceStub(channel).SubmitFact(
            pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT
        )
    finally:
        channel.close()
    started = time.monotonic()
    code = node.stop(sig, timeout=STOP_TIMEOUT)
    assert code == 0, f"exit {code} after {time.monotonic() - started:.1f}s: {node.output()}"
    assert "shutting down" in node.lines
    assert "Traceback" not in node.output()


def test_health_watchers_see_not_serving_before_the_node_exits(tmp_path: Path) -> None:
    """A health Watch open at SIGTERM receives NOT_SERVING, then the process exits 0."""
    node = start_server(tmp_path)
    channel = open_channel(node.address)
    try:
        health = health_pb2_grpc.HealthStub(channel)
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=STOP_TIMEOUT)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        node.proc.send_signal(signal.SIGTERM)
        statuses = []
        try:
            for reply in watch:
                statuses.append(reply.status)
                if reply.status == health_pb2.HealthCheckResponse.NOT_SERVING:
                    break
        except grpc.RpcError as err:  # the server closed the stream after the update
            assert err.code() is not grpc.StatusCode.DEADLINE_EXCEEDED, statuses
        assert health_pb2.HealthCheckResponse.NOT_SERVING in statuses
        watch.cancel()
    finally:
        channel.close()
        code = node.stop(timeout=STOP_TIMEOUT)
    assert code == 0, node.output()


def test_open_watch_streams_do_not_hold_the_node_past_its_grace_period(tmp_path: Path) -> None:
    """SIGTERM with a WatchBeliefs stream open still exits 0 soon after the grace period."""
    env = {**isolated_env(tmp_path / "home"), "FACTNODE_GRACE_SECONDS": "1"}
    node = start_server(tmp_path, env=env)
    channel = open_channel(node.address)
    try:
        facts = pb_grpc.FactServiceStub(channel)
        key = pb.Key(namespace="user:stop", subject="ana", predicate="lives_in")
        fact = pb.FactInput(key=key, object="Porto", anchor="user_stated", source="e2e")
        facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
        watch = facts.WatchBeliefs(pb.WatchBeliefsRequest(), timeout=STOP_TIMEOUT)
        next(watch)  # the stream is open and live
        started = time.monotonic()
        code = node.stop(signal.SIGTERM, timeout=STOP_TIMEOUT)
        took = time.monotonic() - started
        with pytest.raises(grpc.RpcError) as ended:
            next(watch)
        assert ended.value.code() is not grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        channel.close()
        node.kill()
    assert code == 0, node.output()
    assert took < 1 + 5, f"took {took:.1f}s with a 1 s grace period"
