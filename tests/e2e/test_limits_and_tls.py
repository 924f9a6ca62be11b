"""Message size limits, and TLS on the client port with the CLI's --ca-cert."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from _e2e import RPC_TIMEOUT, Cli, isolated_env, start_server, unique_ns

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.certs import issue_node_cert


def test_an_oversized_message_is_refused_and_writes_nothing(
    facts: pb_grpc.FactServiceStub, admin: pb_grpc.AdminServiceStub
) -> None:
    """A request over max_message_bytes (4 MiB) is refused with RESOURCE_EXHAUSTED; nothing is stored."""
    before = admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT).counts.evidence
    key = pb.Key(namespace=unique_ns("big"), subject="s", predicate="p")
    fact = pb.FactInput(key=key, object="x" * (5 * 1024 * 1024), anchor="user_stated", source="s")
    with pytest.raises(grpc.RpcError) as err:
        facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    after = admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT).counts.evidence
    assert after == before


def test_an_object_over_its_limit_names_the_field(facts: pb_grpc.FactServiceStub) -> None:
    """An object over 4096 bytes (but within the message limit) is INVALID_ARGUMENT on `object`."""
    key = pb.Key(namespace=unique_ns("big"), subject="s", predicate="p")
    fact = pb.FactInput(key=key, object="x" * 5000, anchor="user_stated", source="s")
    with pytest.raises(grpc.RpcError) as err:
        facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "object" in (err.value.details() or "")


def test_the_client_port_serves_tls_from_configured_files(tmp_path: Path) -> None:
    """With [tls] cert and key the client port speaks TLS; the CLI connects with --ca-cert."""
    certs = tmp_path / "certs"
    crt, key = issue_node_cert(certs, "localhost")
    config = tmp_path / "factnode.toml"
    config.write_text(f'[tls]\ncert = "{crt}"\nkey = "{key}"\n')
    server = start_server(tmp_path, "--config", str(config))
    try:
        cli = Cli(server.address, isolated_env(tmp_path / "cli-home"))
        ok = cli.run("status", "--ca-cert", str(certs / "ca.crt"), "--json")
        assert json.loads(ok.stdout)["node_id"] == server.node_id
        # Without the CA the TLS handshake fails: the node is unreachable for a plain client.
        cli.run("status", check=3)
    finally:
        assert server.stop() is not None
