"""gRPC over mutual TLS between peers: the client link and the FederationService servicer."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import Peer
from factnode.federation.members import Roster
from factnode.federation.sync import FederationEndpoint
from factnode.federation.trust import NotAMember
from factnode.server._errors import Context, PermissionDenied, ResourceExhausted, unary

CALL_TIMEOUT_SECONDS = 20.0
# What one peer may ask of this node. An honest round makes its calls one after another
# (a SyncNow beside the periodic round makes two at once), a few hundred calls even for a
# first sync of a large store; beyond these a call is refused with RESOURCE_EXHAUSTED and
# the peer's syncer retries after its backoff.
PEER_CONCURRENT_CALLS = 4
PEER_CALLS_PER_SECOND = 100.0
PEER_CALL_BURST = 500


@dataclass
class _Allowance:
    tokens: float
    refilled: float
    running: int = 0


@dataclass
class PeerLimits:
    """Per-peer bounds on federation calls: at most `concurrent` at once and a token bucket
    of `per_second` calls with bursts of `burst`."""

    concurrent: int = PEER_CONCURRENT_CALLS
    per_second: float = PEER_CALLS_PER_SECOND
    burst: int = PEER_CALL_BURST
    clock: Callable[[], float] = time.monotonic
    _peers: dict[str, _Allowance] = field(default_factory=dict)

    @contextlib.contextmanager
    def call(self, peer: str) -> Iterator[None]:
        """Holds one of `peer`'s calls; refuses it when the peer is over a limit."""
        now = self.clock()
        a = self._peers.setdefault(peer, _Allowance(float(self.burst), now))
        a.tokens = min(float(self.burst), a.tokens + (now - a.refilled) * self.per_second)
        a.refilled = now
        if a.running >= self.concurrent:
            raise ResourceExhausted(
                f"peer {peer} has {a.running} federation calls running (at most {self.concurrent})"
            )
        if a.tokens < 1:
            raise ResourceExhausted(
                f"peer {peer} is over {self.per_second:g} federation calls per second"
            )
        a.tokens -= 1
        a.running += 1
        try:
            yield
        finally:
            a.running -= 1


class TlsFiles:
    """This node's certificate, key and the CA that signs every peer's certificate."""

    def __init__(self, cert: bytes, key: bytes, ca: bytes) -> None:
        self.cert, self.key, self.ca = cert, key, ca


class GrpcPeerLink:
    """A channel to one peer whose certificate must name the peer's node id."""

    def __init__(self, peer: Peer, tls: TlsFiles, max_message_bytes: int) -> None:
        self._address = peer.address
        self._creds = grpc.ssl_channel_credentials(
            root_certificates=tls.ca, private_key=tls.key, certificate_chain=tls.cert
        )
        self._options = [
            # The server must prove it is the node we expect, whatever address it is at.
            ("grpc.ssl_target_name_override", peer.node_id),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
        self._dial()

    def _dial(self) -> None:
        self.channel = grpc.aio.secure_channel(self._address, self._creds, options=self._options)
        self.stub = pb_grpc.FederationServiceStub(self.channel)

    async def get_digest(self, request: pb.DigestRequest) -> pb.Digest:
        # Every round starts here. A channel that failed to connect fails each call at once
        # until gRPC's own reconnect backoff (up to two minutes) runs out; the syncer keeps
        # its own backoff, so a round that is due dials the peer afresh instead.
        failed = self.channel
        if failed.get_state() is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            self._dial()  # before any await, so a concurrent round does not dial twice
            await failed.close(None)
        return await self.stub.GetDigest(request, timeout=CALL_TIMEOUT_SECONDS)

    async def pull_delta(self, request: pb.DeltaRequest) -> pb.Delta:
        return await self.stub.PullDelta(request, timeout=CALL_TIMEOUT_SECONDS)

    async def push_delta(self, delta: pb.Delta) -> pb.PushDeltaResponse:
        return await self.stub.PushDelta(delta, timeout=CALL_TIMEOUT_SECONDS)

    async def close(self) -> None:
        await self.channel.close(None)


def proven_peer(context: Context, peers: Sequence[str], roster: Roster | None = None) -> str:
    """The node id the caller's verified certificate names. Where the node holds a roster,
    any member now (the CA signed its certificate, not revoked, not expired: specification §7);
    without one, a configured peer."""
    for key, _ in context.invocation_metadata() or ():
        if key == "authorization":
            raise PermissionDenied("FederationService is for peer nodes, not client tokens")
    names = list(context.auth_context().get("x509_common_name") or [])
    if not names:
        raise PermissionDenied("peer calls need a client certificate signed by the federation CA")
    node_id = names[0].decode() if isinstance(names[0], bytes) else str(names[0])
    if roster is None and node_id not in peers:
        raise PermissionDenied(f"certificate names {node_id!r}, which is not a configured peer")
    if roster is not None:
        pem = list(context.auth_context().get("x509_pem_cert") or [])
        if not pem:
            raise PermissionDenied(
                "peer calls need a client certificate signed by the federation CA"
            )
        try:
            identity = roster.seen(pem[0] if isinstance(pem[0], bytes) else str(pem[0]).encode())
        except NotAMember as exc:
            raise PermissionDenied(str(exc)) from None
        refusal = roster.refusal(identity, dt.datetime.now(dt.UTC))
        if refusal:
            raise PermissionDenied(f"{refusal}: not a member of this federation")
    return node_id


async def identify(address: str, tls: TlsFiles, timeout: float = CALL_TIMEOUT_SECONDS) -> bytes:
    """The certificate (PEM) of whoever listens at a seed's `address`: a TLS handshake with
    this node's certificate, the peer's checked against the CA alone (the seed's node id is
    what this learns, so no name can be checked yet). The caller checks who it names; the
    links that follow check that name on every connection."""
    host, _, port = address.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(cadata=tls.ca.decode())
    with tempfile.TemporaryDirectory() as tmp:  # ssl loads a key pair from files only
        cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
        cert.write_bytes(tls.cert)
        key.touch(0o600)
        key.write_bytes(tls.key)
        context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])  # what a gRPC server expects of its clients
    _reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host.strip("[]"), int(port), ssl=context), timeout
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        # Dropped, not shut down: waiting for the TLS close under uvloop never ended.
        writer.transport.abort()
    if not der:
        raise NotAMember(f"{address} presented no certificate")
    return ssl.DER_cert_to_PEM_cert(der).encode()


class FederationServicer(pb_grpc.FederationServiceServicer):
    """Serves digests and deltas to peers; the caller is who its certificate proves."""

    def __init__(
        self,
        endpoint: FederationEndpoint,
        roster: Roster | None = None,
        limits: PeerLimits | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.peer_ids = list(endpoint.peers)
        self.roster = roster
        self.limits = limits or PeerLimits()

    @unary
    async def GetDigest(self, request: pb.DigestRequest, context: Context) -> pb.Digest:
        caller = proven_peer(context, self.peer_ids, self.roster)
        with self.limits.call(caller):
            return await asyncio.to_thread(self.endpoint.get_digest, caller, request)

    @unary
    async def PullDelta(self, request: pb.DeltaRequest, context: Context) -> pb.Delta:
        caller = proven_peer(context, self.peer_ids, self.roster)
        with self.limits.call(caller):
            return await asyncio.to_thread(self.endpoint.pull_delta, caller, request)

    @unary
    async def PushDelta(self, request: pb.Delta, context: Context) -> pb.PushDeltaResponse:
        caller = proven_peer(context, self.peer_ids, self.roster)
        with self.limits.call(caller):
            return await asyncio.to_thread(self.endpoint.push_delta, caller, request)
