"""Peer links are mutual TLS under one CA: foreign or missing certificates, and tokens, fail."""

from __future__ import annotations

import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from _fednet import (
    RPC_TIMEOUT,
    Federation,
    StartFederation,
    TlsIdentity,
    event_time,
    isolated_env,
    key,
    make_identities,
    peer_channel,
    refused,
    unique_ns,
)

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc


@pytest.fixture(scope="module")
def fed(start_federation: StartFederation) -> Federation:
    """n1 and n2 with certificates from the federation CA; n3, configured as everyone's peer,
    trusts that CA but holds a certificate naming n3 from another CA. n3 is not started (a
    node refuses to start on a certificate its own CA did not sign); tests speak for it."""
    return start_federation(["n1", "n2", "n3"], foreign=["n3"], absent=["n3"])


def digest(channel: grpc.Channel, metadata: tuple[tuple[str, str], ...] = ()) -> pb.Digest:
    return pb_grpc.FederationServiceStub(channel).GetDigest(
        pb.DigestRequest(), timeout=RPC_TIMEOUT, metadata=metadata
    )


@pytest.fixture(scope="module")
def outsider(fed: Federation) -> TlsIdentity:
    """A certificate from the federation CA naming a node no one lists as a peer."""
    return make_identities(fed.root / "certs", ["stranger"])["stranger"]


def test_a_node_refuses_to_start_on_a_certificate_its_ca_did_not_sign(fed: Federation) -> None:
    """`factnode serve` with a federation certificate from another CA exits 2 naming the setting,
    instead of starting a node whose every round would fail."""
    n3 = fed["n3"]
    n3.write_config()
    run = subprocess.run(
        [sys.executable, "-m", "factnode.cli", "serve", "--config", str(n3.config_path)],
        capture_output=True, text=True, timeout=60, check=False,
        env=isolated_env(n3.workdir / "home"), cwd=n3.workdir,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "federation.cert" in run.stderr and "not signed by the federation CA" in run.stderr


def test_a_peer_with_a_certificate_from_another_ca_is_refused(fed: Federation) -> None:
    """A server at n3's address presenting a certificate another CA signed fails every round
    with it, and a client presenting one cannot call: nothing moves either way."""
    n1, n2, n3 = fed["n1"], fed["n2"], fed["n3"]
    ns = unique_ns("impostor")
    mine = key(ns, "ana", "lives_in")
    n1.submit(mine, "Porto", source="agent:n1", valid_from=event_time())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    creds = grpc.ssl_server_credentials(
        [(n3.tls.key.read_bytes(), n3.tls.cert.read_bytes())],
        root_certificates=n3.tls.ca.read_bytes(),
        require_client_auth=True,
    )
    assert server.add_secure_port(n3.federation_address, creds) == n3.federation_port
    server.start()
    try:
        [toward] = n1.sync("n3").results
        assert not toward.ok and toward.error
        assert toward.evidence_sent == toward.evidence_received == 0
    finally:
        server.stop(None)
    with peer_channel(n3.tls, n1) as ch:
        assert refused(lambda: digest(ch)) == grpc.StatusCode.UNAVAILABLE
    [good] = n1.sync("n2").results
    assert good.ok, good.error
    assert n2.belief(mine).object == "Porto"  # type: ignore[union-attr]
    status = n1.admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT)
    assert {p.node_id: bool(p.last_error) for p in status.peers} == {"n2": False, "n3": True}


def test_a_foreign_certificate_naming_a_configured_peer_cannot_call_federation(
    fed: Federation,
) -> None:
    """A client certificate from another CA cannot call FederationService, whatever it names."""
    with peer_channel(fed["n3"].tls, fed["n1"]) as ch:
        assert refused(lambda: digest(ch)) == grpc.StatusCode.UNAVAILABLE
    impostor = make_identities(fed.root / "other-ca", ["n2"])["n2"]
    impostor = TlsIdentity(impostor.cert, impostor.key, fed["n1"].tls.ca)
    with peer_channel(impostor, fed["n1"]) as ch:
        assert refused(lambda: digest(ch)) == grpc.StatusCode.UNAVAILABLE
    # The control: n2's own certificate gets an answer.
    with peer_channel(fed["n2"].tls, fed["n1"]) as ch:
        assert digest(ch).buckets


def test_a_client_without_a_certificate_cannot_call_federation(fed: Federation) -> None:
    """A TLS client that trusts the CA but presents no certificate cannot call FederationService."""
    creds = grpc.ssl_channel_credentials(root_certificates=Path(fed["n1"].tls.ca).read_bytes())
    target = fed["n1"]
    with grpc.secure_channel(
        target.federation_address, creds, options=[("grpc.ssl_target_name_override", "n1")]
    ) as ch:
        assert refused(lambda: digest(ch)) == grpc.StatusCode.UNAVAILABLE
    with grpc.insecure_channel(target.federation_address) as ch:
        assert refused(lambda: digest(ch)) == grpc.StatusCode.UNAVAILABLE


def test_a_certificate_for_a_node_that_is_not_configured_is_a_member(
    fed: Federation, outsider: TlsIdentity
) -> None:
    """Members, not a mesh (specification §7): a certificate the federation's CA signed makes a
    member whether or not any node configured it; its call is answered and n1 lists it."""
    with peer_channel(outsider, fed["n1"]) as ch:
        assert digest(ch).buckets
    members = fed["n1"].admin.ListMembers(pb.ListMembersRequest(), timeout=RPC_TIMEOUT).members
    stranger = {m.node_id: m for m in members}["stranger"]
    assert stranger.HasField("certificate_expires") and not stranger.revoked


def test_federation_service_is_not_served_on_the_client_port(fed: Federation) -> None:
    """The client port does not serve FederationService (UNIMPLEMENTED), token or not."""
    with grpc.insecure_channel(fed["n1"].address) as ch:
        assert refused(lambda: digest(ch)) == grpc.StatusCode.UNIMPLEMENTED
        token = (("authorization", "Bearer anything"),)
        assert refused(lambda: digest(ch, token)) == grpc.StatusCode.UNIMPLEMENTED
        # The control: the same channel reaches the client services.
        assert fed["n1"].admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT).node_id == "n1"


def test_a_bearer_token_is_refused_on_the_federation_port(fed: Federation) -> None:
    """A call carrying a bearer token is refused on the federation port, even over a peer link."""
    with peer_channel(fed["n2"].tls, fed["n1"]) as ch:
        assert digest(ch).buckets
        token = (("authorization", "Bearer anything"),)
        assert refused(lambda: digest(ch, token)) == grpc.StatusCode.PERMISSION_DENIED
