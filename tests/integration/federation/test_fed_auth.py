"""Peer links are mutual TLS under one CA: foreign or missing certificates, and tokens, fail."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from _fednet import (
    RPC_TIMEOUT,
    Federation,
    StartFederation,
    TlsIdentity,
    event_time,
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
    trusts that CA but presents a certificate naming n3 from another CA."""
    return start_federation(["n1", "n2", "n3"], foreign=["n3"])


def digest(channel: grpc.Channel, metadata: tuple[tuple[str, str], ...] = ()) -> pb.Digest:
    return pb_grpc.FederationServiceStub(channel).GetDigest(
        pb.DigestRequest(), timeout=RPC_TIMEOUT, metadata=metadata
    )


@pytest.fixture(scope="module")
def outsider(fed: Federation) -> TlsIdentity:
    """A certificate from the federation CA naming a node no one lists as a peer."""
    return make_identities(fed.root / "certs", ["stranger"])["stranger"]


def test_a_peer_with_a_certificate_from_another_ca_is_refused(fed: Federation) -> None:
    """A peer whose certificate another CA signed fails every sync, both ways, and gains nothing."""
    n1, n2, n3 = fed["n1"], fed["n2"], fed["n3"]
    ns = unique_ns("impostor")
    mine, theirs = key(ns, "ana", "lives_in"), key(ns, "ravi", "lives_in")
    n1.submit(mine, "Porto", source="agent:n1", valid_from=event_time())
    n3.submit(theirs, "Lisbon", source="agent:n3", valid_from=event_time())

    results = {r.node_id: r for r in n3.sync().results}
    assert set(results) == {"n1", "n2"}
    for r in results.values():
        assert not r.ok and r.error, r
        assert r.evidence_sent == r.evidence_received == 0
    [toward] = n1.sync("n3").results
    assert not toward.ok and toward.error
    [good] = n1.sync("n2").results
    assert good.ok, good.error

    assert n3.belief(mine) is None
    assert n1.belief(theirs) is None and n2.belief(theirs) is None
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


def test_a_certificate_for_a_node_that_is_not_a_peer_is_denied(
    fed: Federation, outsider: TlsIdentity
) -> None:
    """A valid certificate naming a node that is not a configured peer is PERMISSION_DENIED."""
    with peer_channel(outsider, fed["n1"]) as ch:
        assert refused(lambda: digest(ch)) == grpc.StatusCode.PERMISSION_DENIED


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
