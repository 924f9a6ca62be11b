"""Signed votes over real mTLS (specification §7): a vote counts for the member that signed it,
whichever member delivered it, and a relay can withhold a vote but never alter it,
re-attribute it, renumber it or pass off a stranger's.

Three `factnode serve` processes in a line, a - b - c: c has no link to a. `h` is a member
with a valid certificate that b and c list as a peer; it is not started: the test speaks for
it over its peer links. `z` holds a certificate from another CA.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from _fednet import (
    RPC_TIMEOUT,
    Federation,
    FedNode,
    StartFederation,
    certificate_der,
    event_time,
    key,
    peer_channel,
    signed_evidence,
    signed_vote,
    unique_ns,
)

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import Key, ids

A, B, C, H, Z = "a", "b", "c", "h", "z"


@pytest.fixture(scope="module")
def fed(start_federation: StartFederation) -> Federation:
    """a - b - c in a line; b and c also list h; z (another CA's certificate) is listed by
    nobody. c trusts b's evidence up to agent_observed; h's and a's at the default."""

    def line(f: Federation) -> None:
        f[A].peers = [f[B]]
        f[B].peers = [f[A], f[C], f[H]]
        f[C].peers = [f[B], f[H]]
        f[C].peer_max_anchor = {B: "agent_observed"}

    return start_federation([A, B, C, H, Z], foreign=[Z], absent=[H, Z], configure=line)


class Link:
    """h's end of its peer link to one node."""

    def __init__(self, fed: Federation, target: str) -> None:
        self.identity = fed[H].tls
        self.channel = peer_channel(self.identity, fed[target])
        self.stub = pb_grpc.FederationServiceStub(self.channel)

    def votes(self) -> pb.Delta:
        """Every signed vote the target holds, as it offers them to a peer."""
        return self.offered(pb.DIGEST_SET_VOTES)

    def offered(self, digest_set: pb.DigestSet) -> pb.Delta:
        return self.stub.PullDelta(
            pb.DeltaRequest(buckets=[pb.BucketRef(set=digest_set, prefix="")]),
            timeout=RPC_TIMEOUT,
        )

    def push(self, delta: pb.Delta) -> pb.PushDeltaResponse:
        return self.stub.PushDelta(delta, timeout=RPC_TIMEOUT)

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def to_b(fed: Federation) -> Iterator[Link]:
    link = Link(fed, B)
    yield link
    link.close()


@pytest.fixture
def to_c(fed: Federation) -> Iterator[Link]:
    link = Link(fed, C)
    yield link
    link.close()


def voters(node: FedNode, k: pb.Key) -> dict[str, str]:
    """Who counts for which value on `node`: voter -> value."""
    b = node.belief(k)
    assert b is not None, f"{node.node_id} has no belief for {k}"
    return {v: t.object for t in b.tallies for v in t.voters}


def tallies(node: FedNode, k: pb.Key) -> list[tuple[str, int, tuple[str, ...]]]:
    b = node.belief(k)
    assert b is not None
    return sorted((t.object, t.weight, tuple(sorted(t.voters))) for t in b.tallies)


def vote_of(delta: pb.Delta, voter: str, k: pb.Key) -> pb.Vote:
    found = [v for v in delta.votes if v.voter == voter and v.key == k]
    assert len(found) == 1, f"{voter}'s vote on {k} not offered: {delta.votes}"
    return found[0]


def key_id(k: pb.Key) -> str:
    return ids.key_id(Key(k.namespace, k.subject, k.predicate))


def agree(fed: Federation, k: pb.Key, a_says: str = "Lisbon") -> None:
    """a and b say `a_says`, c says Porto a minute later (so c believes Porto on recency
    whatever b's evidence counts at on c); the line syncs until quiet."""
    at = event_time()
    fed[A].submit(k, a_says, source="agent:a", valid_from=at)
    fed[B].submit(k, "Lisbon", source="agent:b", valid_from=at)
    later = type(at)()
    later.FromMicroseconds(at.ToMicroseconds() + 60_000_000)
    fed[C].submit(k, "Porto", source="agent:c", valid_from=later)
    fed.sync_until_quiet(down=[H, Z])


def test_a_vote_relayed_through_a_third_node_counts_for_its_signer(fed: Federation) -> None:
    """c has no link to a, yet counts a's vote, relayed unchanged by b, for a: the three
    nodes serve the same tally, and c adopts Lisbon by consensus (a and b against c)."""
    k = key(unique_ns("relay"), "ana", "lives_in")
    agree(fed, k)
    assert voters(fed[C], k) == {A: "Lisbon", B: "Lisbon", C: "Porto"}
    assert tallies(fed[C], k) == tallies(fed[A], k) == tallies(fed[B], k)
    served = fed[C].belief(k)
    assert served is not None and (served.object, served.rule) == (
        "Lisbon",
        "federation_consensus",
    )


def test_a_relay_that_alters_a_vote_is_refused(fed: Federation, to_b: Link, to_c: Link) -> None:
    """h takes a's signed vote and changes its version, its weight, or its voter: c refuses
    each copy for its signature, item by item, and a's honest vote still counts as it was."""
    k = key(unique_ns("alter"), "ana", "lives_in")
    agree(fed, k)
    before = tallies(fed[C], k)
    genuine = vote_of(to_b.votes(), A, k)
    porto = ids.version_id(Key(k.namespace, k.subject, k.predicate), "Porto")
    altered = []
    for change in ({"version_id": porto}, {"anchor": 100}, {"worth_milli": 1000}, {"voter": B}):
        v = pb.Vote()
        v.CopyFrom(genuine)
        for name, value in change.items():
            setattr(v, name, value)
        altered.append(v)
    reply = to_c.push(pb.Delta(votes=altered))
    assert [r.id for r in reply.rejected] == [key_id(k)] * 4
    assert {r.reason for r in reply.rejected} == {
        "its signature does not verify against its signer's certificate"
    }
    assert tallies(fed[C], k) == before


def test_a_replayed_older_vote_changes_nothing(fed: Federation, to_b: Link, to_c: Link) -> None:
    """h keeps a's first vote (Lisbon) and replays it after a changed its mind (Porto): c keeps
    counting a for Porto; renumbered as newer, the old vote's signature fails."""
    k = key(unique_ns("replay"), "ana", "lives_in")
    agree(fed, k)
    old = vote_of(to_b.votes(), A, k)
    fed[A].submit(k, "Porto", source="ana", attribution="user_stated", valid_from=event_time())
    fed.sync_until_quiet(down=[H, Z])
    assert voters(fed[C], k)[A] == "Porto"
    before = tallies(fed[C], k)
    assert list(to_c.push(pb.Delta(votes=[old])).rejected) == []  # taken as held: older
    assert voters(fed[C], k)[A] == "Porto"
    renumbered = pb.Vote()
    renumbered.CopyFrom(old)
    renumbered.seq = old.seq + 1_000
    reply = to_c.push(pb.Delta(votes=[renumbered]))
    assert [r.reason for r in reply.rejected] == [
        "its signature does not verify against its signer's certificate"
    ]
    assert tallies(fed[C], k) == before


def test_votes_of_an_unknown_signer_are_refused(fed: Federation, to_b: Link, to_c: Link) -> None:
    """h forwards z's signed vote with z's certificate (another CA's), and a vote of a voter
    whose certificate nobody sent: c refuses both; h's own signed vote, the control, counts."""
    k = key(unique_ns("stranger"), "ana", "lives_in")
    agree(fed, k)
    before = tallies(fed[C], k)
    held = vote_of(to_b.votes(), B, k)  # a vote for Lisbon on evidence c holds
    unsigned = pb.Vote()
    unsigned.CopyFrom(held)
    unsigned.ClearField("signature")
    unsigned.ClearField("voter")
    unsigned.seq = 0
    from_z = signed_vote(fed[Z].tls, unsigned, voter=Z)
    ghost = signed_vote(fed[H].tls, unsigned, voter="ghost")
    reply = to_c.push(pb.Delta(votes=[from_z, ghost], certificates=[certificate_der(fed[Z].tls)]))
    assert (
        sorted(r.reason for r in reply.rejected)
        == ["its signer's certificate is not known here"] * 2
    )
    assert tallies(fed[C], k) == before
    assert list(to_c.push(pb.Delta(votes=[signed_vote(fed[H].tls, unsigned)])).rejected) == []
    assert voters(fed[C], k)[H] == "Lisbon"


def test_an_unsigned_vote_is_refused(fed: Federation, to_b: Link, to_c: Link) -> None:
    """A vote without a signature, as a node of an older version sends its own, is refused
    item by item, even from the member it names."""
    k = key(unique_ns("unsigned"), "ana", "lives_in")
    agree(fed, k)
    before = tallies(fed[C], k)
    held = vote_of(to_b.votes(), B, k)
    plain = pb.Vote()
    plain.CopyFrom(held)
    plain.ClearField("signature")
    plain.voter = H
    reply = to_c.push(pb.Delta(votes=[plain]))
    assert [r.reason for r in reply.rejected] == ["it carries no signature"]
    assert tallies(fed[C], k) == before


def test_a_refused_link_cannot_vote_through_a_relay(fed: Federation) -> None:
    """The control for the stranger: z cannot even open a link (another CA)."""
    channel = peer_channel(fed[Z].tls, fed[C])
    try:
        with pytest.raises(grpc.RpcError):
            pb_grpc.FederationServiceStub(channel).PushDelta(pb.Delta(), timeout=RPC_TIMEOUT)
    finally:
        channel.close()


def _anchor_caps(node: FedNode, k: pb.Key) -> dict[str, str]:
    """The anchor cap each piece of evidence on `k` counts at on `node`, by value."""
    history = node.history(k)
    assert history is not None
    return {e.object: e.anchor_cap for v in history.versions for e in v.evidence}


def test_relayed_evidence_counts_at_its_origins_cap_whoever_delivers_it(
    fed: Federation, to_b: Link, to_c: Link
) -> None:
    """b's evidence, delivered to c by h (a member c trusts no more than the default), counts
    on c at the cap c sets for b, its origin (agent_observed), not at h's; h's own evidence
    at h's (federation_received); b delivering it later changes nothing."""
    k = key(unique_ns("origin-cap"), "build", "python_version")
    fed[B].submit(k, "3.12", source="agent:b", valid_from=event_time())
    offered = [e for e in to_b.offered(pb.DIGEST_SET_EVIDENCE).evidence if e.key == k]
    assert len(offered) == 1 and offered[0].origin_node == B and offered[0].signature
    own = pb.RelayedEvidence()
    own.CopyFrom(offered[0])
    own.object, own.source, own.origin_node = "3.13", "agent:h", H
    own.evidence_id = ids.evidence_id(
        Key(k.namespace, k.subject, k.predicate), "3.13", own.anchor, "agent:h",
        own.valid_from.ToMicroseconds(), own.worth_milli, own.confidence_milli, None, None,
    )  # fmt: skip
    own = signed_evidence(fed[H].tls, own)
    reply = to_c.push(pb.Delta(evidence=[offered[0], own], certificates=list(offered_certs(to_b))))
    assert list(reply.rejected) == []
    assert _anchor_caps(fed[C], k) == {"3.12": "agent_observed", "3.13": "federation_received"}
    fed.sync_until_quiet(down=[H, Z])
    assert _anchor_caps(fed[C], k) == {"3.12": "agent_observed", "3.13": "federation_received"}


def offered_certs(link: Link) -> list[bytes]:
    """The certificates a node passes on with its evidence."""
    return list(link.offered(pb.DIGEST_SET_EVIDENCE).certificates)


def test_a_relay_cannot_reattribute_evidence_to_a_more_trusted_origin(
    fed: Federation, to_c: Link
) -> None:
    """h's evidence re-attributed to b (whom c trusts more), signed by h or not signed at all,
    is refused item by item for its signature, and c's belief is as it was."""
    k = key(unique_ns("reattribute"), "build", "python_version")
    at = event_time()
    fed[C].submit(k, "3.12", source="agent:c", valid_from=at)
    obj, source = "3.13", "agent:h"
    e = pb.RelayedEvidence(
        evidence_id=ids.evidence_id(
            Key(k.namespace, k.subject, k.predicate),
            obj,
            "agent_observed",
            source,
            at.ToMicroseconds() + 1,
            500,
            900,
            None,
            None,
        ),
        key=k,
        object=obj,
        anchor="agent_observed",
        source=source,
        worth_milli=500,
        confidence_milli=900,
        origin_node=B,
    )
    e.valid_from.FromMicroseconds(at.ToMicroseconds() + 1)
    e.recorded_at.FromMicroseconds(at.ToMicroseconds() + 1)
    reply = to_c.push(pb.Delta(evidence=[e, signed_evidence(fed[H].tls, e)]))
    assert [r.reason for r in reply.rejected] == [
        "it carries no signature",
        "its signature does not verify against its signer's certificate",
    ]
    b = fed[C].belief(k)
    assert b is not None and b.object == "3.12"
    assert set(_anchor_caps(fed[C], k)) == {"3.12"}


def test_an_equivocating_voter_counts_zero_everywhere_and_the_key_is_reviewed(
    fed: Federation, to_b: Link, to_c: Link
) -> None:
    """h signs two different votes with one number on one key and hands one to b, the other
    to c: once the line has synced, every node holds the proof, counts h zero on the key,
    serves it CONTESTED and lists it in its review queue naming h; a later vote of h on the
    key is not taken."""
    ns = unique_ns("equivocate")
    k = key(ns, "ana", "lives_in")
    agree(fed, k)
    lisbon = vote_of(to_b.votes(), B, k)  # votes resting on evidence every node holds
    porto = vote_of(to_c.votes(), C, k)
    one, other = pb.Vote(), pb.Vote()
    for v, src in ((one, lisbon), (other, porto)):
        v.CopyFrom(src)
        v.ClearField("signature")
        v.ClearField("voter")
        v.seq = 7
        v.cast_at.CopyFrom(lisbon.cast_at)
    assert list(to_b.push(pb.Delta(votes=[signed_vote(fed[H].tls, one)])).rejected) == []
    assert list(to_c.push(pb.Delta(votes=[signed_vote(fed[H].tls, other)])).rejected) == []
    assert voters(fed[B], k)[H] == "Lisbon" and voters(fed[C], k)[H] == "Porto"
    fed.sync_until_quiet(down=[H, Z])
    for node in (A, B, C):
        assert H not in voters(fed[node], k), node
        belief = fed[node].belief(k)
        assert belief is not None and belief.state == pb.BELIEF_STATE_CONTESTED, node
        queued = fed[node].contested(ns)
        entry = queued[(k.namespace, k.subject, k.predicate)]
        assert "h signed two different votes" in entry.detail, (node, entry.detail)
    later = pb.Vote()
    later.CopyFrom(one)
    later.seq = 8
    assert list(to_c.push(pb.Delta(votes=[signed_vote(fed[H].tls, later)])).rejected) == []
    assert H not in voters(fed[C], k)
