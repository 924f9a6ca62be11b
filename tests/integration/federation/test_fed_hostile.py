"""A hostile configured peer over a real mTLS link: its certificate is valid and names a peer
the victim lists, and it sends crafted deltas through FederationService. Nothing it sends moves
the victim's beliefs beyond what its honest evidence would (specification §6, §7, §9).

The victim is a real `factnode serve` process. The peers it lists (`mallory`, `honest`) are not
started: the test speaks for them over their peer links, with certificates from the
federation CA, and reads the victim's beliefs over its client port.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import grpc
import pytest
from _fednet import (
    BELIEVED,
    RPC_TIMEOUT,
    Federation,
    FedNode,
    StartFederation,
    TlsIdentity,
    event_time,
    key,
    make_identities,
    node_id_of,
    peer_channel,
    refused,
    signed_evidence,
    signed_tombstone,
    signed_vote,
    unique_ns,
)
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import MICROS_PER_DAY, Key, ids
from factnode.core.decay import lifetime

VICTIM, MALLORY, HONEST = "victim", "mallory", "honest"
SECOND = 1_000_000


def now() -> int:
    """This machine's clock (the victim's too) in microseconds."""
    return time.time_ns() // 1000


def ts(micros: int) -> Timestamp:
    out = Timestamp()
    out.FromMicroseconds(micros)
    return out


def core_key(k: pb.Key) -> Key:
    return Key(k.namespace, k.subject, k.predicate)


def evidence(
    k: pb.Key,
    obj: str,
    *,
    attribution: str = "agent_observed",
    source: str = "agent:mallory",
    worth_milli: int = 500,
    confidence_milli: int = 900,
    valid_from: int | None = None,
    origin: str = MALLORY,
) -> pb.RelayedEvidence:
    """Evidence as a peer relays it, with its honest content address."""
    at = event_time().ToMicroseconds() if valid_from is None else valid_from
    eid = ids.evidence_id(
        core_key(k), obj, attribution, source, at, worth_milli, confidence_milli, None, None
    )
    return pb.RelayedEvidence(
        evidence_id=eid,
        key=k,
        object=obj,
        anchor=attribution,
        source=source,
        worth_milli=worth_milli,
        confidence_milli=confidence_milli,
        valid_from=ts(at),
        recorded_at=ts(at),
        origin_node=origin,
    )


def vote(
    e: pb.RelayedEvidence,
    *,
    anchor: int = 60,
    worth_milli: int | None = None,
    cast_at: int | None = None,
) -> pb.Vote:
    """A vote for `e`'s version resting on `e`, claiming whatever weight the caller says."""
    return pb.Vote(
        key=e.key,
        version_id=ids.version_id(core_key(e.key), e.object),
        evidence_id=e.evidence_id,
        anchor=anchor,
        worth_milli=e.worth_milli if worth_milli is None else worth_milli,
        fresh_since=e.valid_from,
        cast_at=ts(now() if cast_at is None else cast_at),
    )


class PeerLink:
    """The attacker's end of one peer link to the victim's federation port."""

    def __init__(self, identity: TlsIdentity, victim: FedNode) -> None:
        self.identity = identity
        self.channel = peer_channel(identity, victim)
        self.stub = pb_grpc.FederationServiceStub(self.channel)

    def push(
        self, delta: pb.Delta, metadata: tuple[tuple[str, str], ...] = ()
    ) -> pb.PushDeltaResponse:
        """Sends `delta`, its unsigned votes signed by this link's node, numbered by their
        cast time, and the evidence it originates signed by it: a member's lies are signed
        like its honest items (specification §7)."""
        signed = pb.Delta()
        signed.CopyFrom(delta)
        me = node_id_of(self.identity)
        for v in signed.votes:
            if not v.signature:
                v.CopyFrom(signed_vote(self.identity, v))
        for e in signed.evidence:
            if not e.signature and e.origin_node == me:
                e.CopyFrom(signed_evidence(self.identity, e))
        for t in signed.tombstones:
            if not t.signature and t.origin_node == me:
                t.CopyFrom(signed_tombstone(self.identity, t))
        return self.stub.PushDelta(signed, timeout=RPC_TIMEOUT, metadata=metadata)

    def offered(self, digest_set: pb.DigestSet) -> pb.Delta:
        """Everything the victim offers under the root bucket of one set."""
        return self.stub.PullDelta(
            pb.DeltaRequest(buckets=[pb.BucketRef(set=digest_set, prefix="")]),
            timeout=RPC_TIMEOUT,
        )

    def close(self) -> None:
        self.channel.close()


@dataclass(frozen=True)
class Counted:
    """One version's tally on the victim as GetBelief reports it."""

    weight: int
    share_milli: int
    voters: tuple[str, ...]


def tallies(node: FedNode, k: pb.Key) -> dict[str, Counted]:
    """The victim's counted votes per value (empty when no peer's vote counts)."""
    b = node.belief(k)
    assert b is not None, f"{node.node_id} has no belief for {k}"
    return {t.object: Counted(t.weight, t.share_milli, tuple(sorted(t.voters))) for t in b.tallies}


def voted_by(node: FedNode, k: pb.Key, voter: str) -> str | None:
    """The value `voter`'s counted vote is for on `node`, or None when it does not count."""
    found = [obj for obj, c in tallies(node, k).items() if voter in c.voters]
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.fixture(scope="module")
def fed(start_federation: StartFederation) -> Federation:
    """The victim, listing `mallory` (default cap, federation_received) and `honest` (cap
    agent_observed) as peers; neither is started: the test holds their certificates."""

    def caps(f: Federation) -> None:
        f[VICTIM].peer_max_anchor = {HONEST: "agent_observed"}

    return start_federation([VICTIM, MALLORY, HONEST], absent=[MALLORY, HONEST], configure=caps)


@pytest.fixture
def victim(fed: Federation) -> FedNode:
    return fed[VICTIM]


@pytest.fixture
def mallory(fed: Federation) -> Iterator[PeerLink]:
    """A link presenting mallory's valid certificate."""
    link = PeerLink(fed[MALLORY].tls, fed[VICTIM])
    yield link
    link.close()


@pytest.fixture
def honest(fed: Federation) -> Iterator[PeerLink]:
    """A link presenting honest's valid certificate."""
    link = PeerLink(fed[HONEST].tls, fed[VICTIM])
    yield link
    link.close()


def fresh_key(prefix: str) -> pb.Key:
    return key(unique_ns(prefix), "build", "python_version")


def test_an_inflated_vote_counts_at_its_evidences_honest_weight(
    victim: FedNode, mallory: PeerLink
) -> None:
    """A vote claiming anchor 100 and worth 1000 on evidence held as llm_generated worth 0.1
    weighs 30 x 100 (90 per mille against the victim's 60 x 500): the honest belief stands."""
    k, at = fresh_key("inflate"), event_time()
    victim.submit(k, "3.12", source="agent:victim", valid_from=at)
    e = evidence(
        k, "3.13", attribution="llm_generated", worth_milli=100, valid_from=at.ToMicroseconds()
    )
    reply = mallory.push(pb.Delta(evidence=[e], votes=[vote(e, anchor=100, worth_milli=1000)]))
    assert list(reply.rejected) == []  # kept, but weighed from the evidence
    b = victim.belief(k)
    assert b is not None and (b.object, b.state) == ("3.12", BELIEVED)
    t = tallies(victim, k)
    assert t["3.13"].voters == (MALLORY,) and t["3.12"].voters == (VICTIM,)
    # The same event time gives both the same freshness: weights are in the ratio 3000:30000.
    # Believed as sent it would be 100000:30000, 769 per mille, and consensus for 3.13.
    assert 10 * t["3.13"].weight == t["3.12"].weight
    assert t["3.13"].share_milli == 90


def test_a_future_tombstone_erases_what_it_covers_now_and_later_writes_are_accepted(
    victim: FedNode, mallory: PeerLink
) -> None:
    """A tombstone dated 9999-12-31 erases what it covers now, like the valid one beside it (no
    clock skew keeps erased data alive), but the victim bounds it by its own clock: the key takes
    the victim's later writes, and the victim relays the tombstone as it came, beside its bound,
    signed by itself, which says when the victim applied it (specification §6)."""
    blocked, erased = fresh_key("block"), fresh_key("erase")
    victim.submit(blocked, "3.12", source="agent:victim")
    victim.submit(erased, "3.12", source="agent:victim")
    far = ts(int(datetime(9999, 12, 31, tzinfo=UTC).timestamp()) * SECOND)
    forever = pb.ErasureTombstone(
        erasure_id=uuid.uuid4().hex,
        scope=pb.ERASURE_SCOPE_KEY,
        scope_hash=ids.key_id(core_key(blocked)),
        erased_at=far,
        operator="mallory",
        reason="block it for ever",
        origin_node=MALLORY,
    )
    fine = pb.ErasureTombstone(
        erasure_id=uuid.uuid4().hex,
        scope=pb.ERASURE_SCOPE_KEY,
        scope_hash=ids.key_id(core_key(erased)),
        erased_at=ts(now()),
        operator="mallory",
        reason="an erasure request",
        origin_node=MALLORY,
    )
    before = now()
    reply = mallory.push(pb.Delta(tombstones=[forever, fine]))
    assert list(reply.rejected) == []
    assert reply.accepted == 2
    assert victim.belief(erased) is None
    assert victim.belief(blocked) is None
    later = victim.submit(blocked, "3.13", source="ana", attribution="user_stated")
    assert later.decision.outcome == pb.OUTCOME_ACCEPTED, later.decision
    b = victim.belief(blocked)
    assert b is not None and (b.object, b.state) == ("3.13", BELIEVED)
    offered = mallory.offered(pb.DIGEST_SET_TOMBSTONES)
    relayed = {t.erasure_id: t for t in offered.tombstones}
    assert fine.erasure_id in relayed
    assert relayed[forever.erasure_id].erased_at == far
    [bound] = offered.erasure_bounds  # the valid one needs none
    assert (bound.erasure_id, bound.node_id) == (forever.erasure_id, victim.node_id)
    assert before <= bound.bound_at.ToMicroseconds() <= now() and bound.signature


def test_an_older_vote_arriving_later_never_replaces_a_newer_one(
    victim: FedNode, mallory: PeerLink
) -> None:
    """The highest signed number wins (specification §7): an older vote last in the same delta, or
    alone in a later delta, leaves the newer one counted; a vote dated an hour in the victim's
    future counts by its number (a clock running ahead loses nothing), and a higher number
    replaces it though dated earlier (nor does a clock set back)."""
    k = fresh_key("stale")
    victim.submit(k, "3.12", source="agent:victim", valid_from=event_time())
    old, new = evidence(k, "3.11"), evidence(k, "3.13")
    t0 = now()
    newer, older = vote(new, cast_at=t0), vote(old, cast_at=t0 - 60 * SECOND)
    reply = mallory.push(pb.Delta(evidence=[old, new], votes=[newer, older]))
    assert list(reply.rejected) == []
    assert voted_by(victim, k, MALLORY) == "3.13"
    mallory.push(pb.Delta(votes=[older]))
    assert voted_by(victim, k, MALLORY) == "3.13"
    # Dated an hour ahead (beyond the 5-minute allowance), numbered after the held vote.
    ahead = vote(old, cast_at=t0 + 3600 * SECOND)
    assert list(mallory.push(pb.Delta(votes=[ahead])).rejected) == []
    assert voted_by(victim, k, MALLORY) == "3.11"
    # Numbered after it, dated before it: the number decides.
    behind = vote(new, cast_at=t0 + SECOND)
    behind.seq = t0 + 3601 * SECOND
    assert list(mallory.push(pb.Delta(votes=[behind])).rejected) == []
    assert voted_by(victim, k, MALLORY) == "3.13"


def test_a_vote_on_evidence_not_held_waits_until_the_evidence_arrives(
    victim: FedNode, mallory: PeerLink
) -> None:
    """A vote naming evidence the victim lacks is kept but counts nothing; once the evidence
    arrives the vote counts, weighed from it."""
    k, at = fresh_key("unheld"), event_time()
    victim.submit(k, "3.12", source="agent:victim", valid_from=at)
    e = evidence(k, "3.13", valid_from=at.ToMicroseconds())
    reply = mallory.push(pb.Delta(votes=[vote(e, anchor=100, worth_milli=1000)]))
    assert list(reply.rejected) == []
    assert voted_by(victim, k, MALLORY) is None
    mallory.push(pb.Delta(evidence=[e]))
    t = tallies(victim, k)
    assert t["3.13"].voters == (MALLORY,)
    # agent_observed worth 0.5 at the victim's event time: the same weight as the victim's.
    assert t["3.13"].weight == t["3.12"].weight


def test_a_vote_on_expired_evidence_counts_nothing(victim: FedNode, mallory: PeerLink) -> None:
    """Once the evidence a vote rests on has expired on the victim the vote counts nothing,
    with no decay job run, and sending that evidence and vote again brings neither back."""
    k = fresh_key("decayed")
    victim.submit(k, "3.12", source="ana", attribution="user_stated", valid_from=event_time())
    # llm_generated 0.9 at a 30-day half-life holds about 35 days from its recording:
    # recorded that long ago less four seconds, it expires four seconds from now.
    life = lifetime(900, 400, 30 * MICROS_PER_DAY)
    ends = now() + 4 * SECOND
    e = evidence(k, "3.13", attribution="llm_generated", valid_from=ends - life)
    reply = mallory.push(pb.Delta(evidence=[e], votes=[vote(e, anchor=30)]))
    assert list(reply.rejected) == []
    assert voted_by(victim, k, MALLORY) == "3.13"  # the control: live, it counts
    deadline = time.monotonic() + 30
    while now() <= ends and time.monotonic() < deadline:
        time.sleep(0.2)
    assert voted_by(victim, k, MALLORY) is None
    mallory.push(pb.Delta(evidence=[e], votes=[vote(e, anchor=30, cast_at=now() + SECOND)]))
    assert voted_by(victim, k, MALLORY) is None
    b = victim.belief(k)
    assert b is not None and (b.object, b.state) == ("3.12", BELIEVED)
    decay = victim.admin.RunDecay(pb.RunDecayRequest(), timeout=RPC_TIMEOUT)
    assert decay.tombstoned == 0
    assert voted_by(victim, k, MALLORY) is None


def test_duplicated_and_reordered_deltas_change_nothing_more(
    victim: FedNode, mallory: PeerLink
) -> None:
    """Replaying a delta reversed and doubled, twice, leaves the belief, tallies, history,
    decision log and counts exactly as the first delivery left them."""
    k = fresh_key("replay")
    victim.submit(k, "3.12", source="agent:victim", valid_from=event_time())
    e1, e2 = evidence(k, "3.13"), evidence(k, "3.11", source="agent:mallory-2")
    first = pb.Delta(evidence=[e1, e2], votes=[vote(e1)])

    def state() -> tuple[
        pb.Belief,
        list[tuple[str, int, tuple[str, ...]]],
        pb.GetHistoryResponse | None,
        pb.ListDecisionsResponse,
        pb.StatusCounts,
    ]:
        b = victim.belief(k)
        assert b is not None
        # Weights follow the UTC hour; who voted for what, and the shares, do not.
        counted = sorted((t.object, t.share_milli, tuple(t.voters)) for t in b.tallies)
        del b.tallies[:]
        history = victim.history(k)
        log = victim.facts.ListDecisions(
            pb.ListDecisionsRequest(key=k, page_size=1000), timeout=RPC_TIMEOUT
        )
        counts = victim.admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT).counts
        return b, counted, history, log, counts

    assert list(mallory.push(first).rejected) == []
    once = state()
    assert any(MALLORY in voters for _, _, voters in once[1])
    replay = pb.Delta(evidence=[e2, e1, e2, e1], votes=[vote(e1), vote(e1)])
    replay.votes[0].CopyFrom(first.votes[0])  # the same cast_at: the very same vote
    replay.votes[1].CopyFrom(first.votes[0])
    for _ in range(2):
        assert list(mallory.push(replay).rejected) == []
    assert state() == once


def test_a_vote_counts_for_the_node_its_certificate_proves(
    victim: FedNode, mallory: PeerLink, honest: PeerLink
) -> None:
    """Evidence that names `honest` as its origin, pushed over mallory's link unsigned or
    signed with mallory's key, is refused for its signature (a relay cannot re-attribute
    evidence, specification §7); mallory's vote on it waits and counts nothing, and honest's vote
    on the key stays as honest cast it, its evidence at honest's ceiling."""
    k = fresh_key("impersonate")
    at = event_time().ToMicroseconds()
    victim.submit(k, "3.12", source="agent:victim", valid_from=ts(at))
    # A day older than the victim's own fact, so the victim's vote rests on its own evidence
    # and honest's vote is independent of it.
    theirs = evidence(
        k, "3.12", source="agent:honest", origin=HONEST, valid_from=at - MICROS_PER_DAY
    )
    assert list(honest.push(pb.Delta(evidence=[theirs], votes=[vote(theirs)])).rejected) == []
    # Newer than the victim's own agent_observed fact: at honest's cap (agent_observed) it would
    # win locally on recency.
    forged = evidence(
        k, "3.13", source="agent:honest", origin=HONEST, valid_from=at + 1800 * SECOND
    )
    forged.anchor_cap = "codebase_verified"  # and it claims a higher ceiling than anyone's
    resigned = signed_evidence(mallory.identity, forged)
    reply = mallory.push(
        pb.Delta(evidence=[forged, resigned], votes=[vote(forged, cast_at=now() + SECOND)]),
        metadata=(("x-node-id", HONEST),),
    )
    assert [(r.id, r.reason) for r in reply.rejected] == [
        (forged.evidence_id, "it carries no signature"),
        (forged.evidence_id, "its signature does not verify against its signer's certificate"),
    ]
    history = victim.history(k)
    assert history is not None
    held = {e.evidence_id: e for v in history.versions for e in v.evidence}
    assert forged.evidence_id not in held
    assert held[theirs.evidence_id].anchor_cap == "agent_observed"
    b = victim.belief(k)
    assert b is not None and b.object == "3.12"
    t = tallies(victim, k)
    assert t["3.12"].voters == (HONEST, VICTIM)
    assert voted_by(victim, k, MALLORY) is None  # its vote waits for evidence never held


def test_a_certificate_from_another_ca_is_refused_at_the_handshake(
    fed: Federation, victim: FedNode
) -> None:
    """A certificate naming mallory but signed by another CA fails the TLS handshake
    (UNAVAILABLE): the evidence and vote it tried to push are nowhere on the victim."""
    forged = make_identities(fed.root / "other-ca", [MALLORY])[MALLORY]
    impostor = PeerLink(TlsIdentity(forged.cert, forged.key, victim.tls.ca), victim)
    k = fresh_key("foreign")
    e = evidence(k, "3.13")
    try:
        code = refused(lambda: impostor.push(pb.Delta(evidence=[e], votes=[vote(e)])))
        assert code == grpc.StatusCode.UNAVAILABLE
    finally:
        impostor.close()
    assert victim.belief(k) is None and victim.history(k) is None


# -- client credentials on a node that has them ------------------------------------------------

GUARDED = "guarded"
OPERATOR = "hostile-operator-token"


@dataclass(frozen=True)
class Guarded:
    """A node with client TLS (its own client CA), an operator token and a peer, mallory."""

    node: FedNode
    client: TlsIdentity  # a client certificate from the client CA, naming mallory
    mallory: TlsIdentity  # mallory's peer certificate from the federation CA

    def client_channel(self) -> grpc.Channel:
        """The client port over TLS, presenting the client certificate."""
        creds = grpc.ssl_channel_credentials(
            root_certificates=self.client.ca.read_bytes(),
            private_key=self.client.key.read_bytes(),
            certificate_chain=self.client.cert.read_bytes(),
        )
        return grpc.secure_channel(self.node.address, creds)

    def belief(self, k: pb.Key) -> pb.Belief | None:
        """The served belief read with the operator token, or None (NOT_FOUND)."""
        with self.client_channel() as ch:
            try:
                return pb_grpc.FactServiceStub(ch).GetBelief(
                    pb.GetBeliefRequest(key=k), timeout=RPC_TIMEOUT, metadata=as_operator()
                )
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.NOT_FOUND:
                    return None
                raise


def as_operator() -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {OPERATOR}"),)


@pytest.fixture(scope="module")
def guarded(start_federation: StartFederation, tmp_path_factory: pytest.TempPathFactory) -> Guarded:
    """`guarded` serves clients over TLS with certificates from a client CA of its own and
    takes an operator token; its one peer, mallory, is not started."""
    clients = make_identities(tmp_path_factory.mktemp("client-ca"), ["localhost", MALLORY])
    server = clients["localhost"]

    def client_side(f: Federation) -> None:
        f[GUARDED].extra_config = (
            f'[tls]\ncert = "{server.cert}"\nkey = "{server.key}"\nclient_ca = "{server.ca}"\n\n'
            f'[[tokens]]\ntoken = "{OPERATOR}"\nroles = ["operator"]\nname = "olga"\n'
        )

    fed = start_federation([GUARDED, MALLORY], absent=[MALLORY], configure=client_side)
    return Guarded(fed[GUARDED], clients[MALLORY], fed[MALLORY].tls)


def test_client_credentials_reach_no_federation_service_on_the_client_port(
    guarded: Guarded,
) -> None:
    """Over the client port, a client certificate naming a peer plus an operator token gets
    UNIMPLEMENTED from FederationService, while the same channel and token reach AdminService."""
    k = fresh_key("client-port")
    e = evidence(k, "3.13")
    with guarded.client_channel() as ch:
        federation = pb_grpc.FederationServiceStub(ch)
        push = pb.Delta(evidence=[e], votes=[vote(e)])
        code = refused(
            lambda: federation.PushDelta(push, timeout=RPC_TIMEOUT, metadata=as_operator())
        )
        assert code == grpc.StatusCode.UNIMPLEMENTED
        status = pb_grpc.AdminServiceStub(ch).GetStatus(
            pb.GetStatusRequest(), timeout=RPC_TIMEOUT, metadata=as_operator()
        )
        assert status.node_id == GUARDED
    assert guarded.belief(k) is None


def test_a_client_certificate_is_refused_at_the_federation_handshake(guarded: Guarded) -> None:
    """A certificate from the client CA, naming the configured peer mallory, fails the TLS
    handshake on the federation port (UNAVAILABLE) and writes nothing."""
    k = fresh_key("client-cert")
    e = evidence(k, "3.13")
    client = TlsIdentity(guarded.client.cert, guarded.client.key, guarded.node.tls.ca)
    link = PeerLink(client, guarded.node)
    try:
        code = refused(lambda: link.push(pb.Delta(evidence=[e], votes=[vote(e)])))
        assert code == grpc.StatusCode.UNAVAILABLE
    finally:
        link.close()
    assert guarded.belief(k) is None


def test_a_client_token_over_a_valid_peer_link_is_refused_and_writes_nothing(
    guarded: Guarded,
) -> None:
    """Mallory's valid peer certificate carrying the node's operator token is PERMISSION_DENIED
    on FederationService and writes nothing; the same push without the token is taken."""
    k = fresh_key("peer-token")
    e = evidence(k, "3.13")
    push = pb.Delta(evidence=[e], votes=[vote(e)])
    link = PeerLink(guarded.mallory, guarded.node)
    try:
        code = refused(lambda: link.push(push, metadata=as_operator()))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert guarded.belief(k) is None
        assert list(link.push(push).rejected) == []  # the control: as a peer, it is taken
    finally:
        link.close()
    b = guarded.belief(k)
    assert b is not None and b.object == "3.13"
