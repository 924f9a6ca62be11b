"""Three real nodes: facts spread by sync, a restarted node catches up, erasures reach all."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from _fednet import (
    BELIEVED,
    RPC_TIMEOUT,
    Federation,
    StartFederation,
    event_time,
    key,
    peer_channel,
    unique_ns,
)
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

CONSENSUS = "federation_consensus"
MAX_ROUNDS = 10


@pytest.fixture(scope="module")
def fed3(start_federation: StartFederation) -> Federation:
    """Three nodes, each peering with the other two."""
    return start_federation(["n1", "n2", "n3"])


@pytest.fixture
def fed(fed3: Federation) -> Iterator[Federation]:
    """The module's federation with every node running (a test that stopped one restarts it)."""
    yield fed3
    stopped = [n for n in fed3 if not n.running]
    for node in stopped:
        node.spawn()
    for node in stopped:
        node.wait_listening()


def served(fed: Federation, k: pb.Key) -> dict[str, tuple[str, int, str] | None]:
    """Each node's served (object, state, rule) for a key, or None."""
    out: dict[str, tuple[str, int, str] | None] = {}
    for node in fed:
        b = node.belief(k)
        out[node.node_id] = None if b is None else (b.object, b.state, b.rule)
    return out


def served_within_rounds(
    fed: Federation, k: pb.Key, want: dict[str, tuple[str, int, str] | None]
) -> None:
    """SyncNow rounds on every node, at most MAX_ROUNDS, until each serves what `want` says."""
    got = served(fed, k)
    for _ in range(MAX_ROUNDS):
        if got == want:
            break
        for node in fed:
            assert all(r.ok for r in node.sync().results), node.node_id
        got = served(fed, k)
    assert got == want


def test_a_fact_reaches_every_node_within_a_bounded_number_of_rounds(fed: Federation) -> None:
    """A fact submitted on one node is served by all three after at most a few SyncNow rounds."""
    k = key(unique_ns("spread"), "ana", "lives_in")
    fed["n1"].submit(k, "Porto", source="agent:scout", valid_from=event_time())
    served_within_rounds(fed, k, {n.node_id: ("Porto", BELIEVED, CONSENSUS) for n in fed})
    # Relayed evidence keeps its provenance and counts capped at the peer ceiling.
    for peer in ("n2", "n3"):
        ev = fed[peer].belief(k).evidence  # type: ignore[union-attr]
        assert (ev.anchor, ev.source, ev.origin_node) == (
            "agent_observed",
            "agent:scout",
            "n1",
        )
        assert ev.anchor_cap == "federation_received"


def test_a_relayed_user_stated_beats_a_newer_relayed_llm_generated(fed: Federation) -> None:
    """The demo's case between real nodes: on n2 and n3 n1's user_stated 'Porto' and newer
    llm_generated 'Lisbon' both count as federation_received, and the stated anchors decide
    that tie, so every node serves Porto and the peers' own arbitration disbelieves Lisbon."""
    k = key(unique_ns("caps"), "ana", "lives_in")
    now = datetime.now(UTC).replace(microsecond=0)
    for value, anchor, source, days_ago in (
        ("Porto", "user_stated", "ana", 200),
        ("Lisbon", "llm_generated", "scraper", 10),
    ):
        at = Timestamp()
        at.FromDatetime(now - timedelta(days=days_ago))
        fed["n1"].submit(k, value, source=source, attribution=anchor, valid_from=at)
    served_within_rounds(fed, k, {n.node_id: ("Porto", BELIEVED, CONSENSUS) for n in fed})
    for peer in ("n2", "n3"):
        history = fed[peer].history(k)
        assert history is not None
        assert {v.object: v.status for v in history.versions} == {
            "Porto": pb.VERSION_STATUS_BELIEVED,
            "Lisbon": pb.VERSION_STATUS_DISBELIEVED,  # lost on trust_anchor, not on recency
        }, peer


def test_a_restarted_node_catches_up_with_what_it_missed(fed: Federation) -> None:
    """A node stopped by SIGTERM, restarted on its data dir and config, catches up with the rest."""
    ns = unique_ns("restart")
    n1, n2, n3 = fed["n1"], fed["n2"], fed["n3"]
    at = event_time()
    before = key(ns, "ana", "lives_in")
    n3.submit(before, "Porto", source="agent:n3", valid_from=at)
    fed.sync_until_quiet()

    assert n3.stop() == 0
    missed = [key(ns, "ana", "works_at"), key(ns, "ravi", "lives_in"), key(ns, "ravi", "works_at")]
    n1.submit(missed[0], "Acme", source="agent:n1", valid_from=at)
    n2.submit(missed[1], "Lisbon", source="agent:n2", valid_from=at)
    n1.submit(missed[2], "Initech", source="agent:n1", valid_from=at)
    n2.submit(missed[2], "Initech", source="agent:n2", valid_from=at)
    fed.sync_until_quiet(down={"n3"})
    status = n1.admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT)
    assert {p.node_id: bool(p.last_error) for p in status.peers} == {"n2": False, "n3": True}

    n3.spawn()
    n3.wait_listening()
    fed.sync_until_quiet()

    for k in [before, *missed]:
        states = served(fed, k)
        assert len(set(states.values())) == 1, (k, states)
        assert states["n3"] is not None and states["n3"][1:] == (BELIEVED, CONSENSUS), (k, states)
    listings = {
        n.node_id: [
            (b.key.subject, b.key.predicate, b.object, b.state, b.rule)
            for b in n.facts.ListBeliefs(
                pb.ListBeliefsRequest(namespace=ns), timeout=RPC_TIMEOUT
            ).beliefs
        ]
        for n in fed
    }
    assert listings["n3"] == listings["n1"] == listings["n2"]
    assert len(listings["n3"]) == 4
    status = n3.admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT)
    assert status.node_id == "n3"
    assert {p.node_id: (p.last_error, p.HasField("last_sync")) for p in status.peers} == {
        "n1": ("", True),
        "n2": ("", True),
    }


def test_an_erasure_reaches_every_node_including_one_that_was_down(fed: Federation) -> None:
    """An erase on one node leaves the value nowhere: not in any node's reads or store files,
    even one that was down and still held the evidence; new evidence afterwards spreads normally."""
    ns = unique_ns("erase")
    n1, n2, n3 = fed["n1"], fed["n2"], fed["n3"]
    tag = uuid.uuid4().hex
    secret, whisper = f"Rua-Secreta-{tag}", f"whisper-{tag}"
    k = key(ns, "ana", "lives_in")
    neighbour = key(ns, "ravi", "lives_in")
    at = event_time()
    n1.submit(k, secret, source=whisper, attribution="user_stated", valid_from=at)
    n2.submit(k, secret, source=f"{whisper}-again", valid_from=at)
    n1.submit(neighbour, "Lisbon", source="agent:n1", valid_from=at)
    fed.sync_until_quiet()
    for node in fed:
        # The control: the value is on every node before the erase, so this test can fail.
        assert node.belief(k).object == secret  # type: ignore[union-attr]
        assert any(secret.encode() in raw for raw in node.store_files().values()), node.node_id

    # What n3 holds for the key (its evidence and its own vote), as it would offer it to a peer.
    with peer_channel(n1.tls, n3) as ch:
        held = pb_grpc.FederationServiceStub(ch).PullDelta(
            pb.DeltaRequest(
                buckets=[
                    pb.BucketRef(set=pb.DIGEST_SET_EVIDENCE, prefix=""),
                    pb.BucketRef(set=pb.DIGEST_SET_PEER_VOTES, prefix=""),
                ]
            ),
            timeout=RPC_TIMEOUT,
        )
    stale = pb.Delta(
        evidence=[e for e in held.evidence if e.key == k],
        votes=[v for v in held.votes if v.key == k],
    )
    assert len(stale.evidence) == 2 and len(stale.votes) == 1

    assert n3.stop() == 0
    erased = n1.admin.Erase(
        pb.EraseRequest(key=k, reason="subject request", operator="dpo"), timeout=RPC_TIMEOUT
    )
    assert erased.evidence_erased == 2
    fed.sync_until_quiet(down={"n3"})
    assert n2.belief(k) is None

    # A peer that still holds the evidence offers it back, and its vote resting on it.
    for peer in (n1, n2):
        with peer_channel(n3.tls, peer) as ch:
            reply = pb_grpc.FederationServiceStub(ch).PushDelta(stale, timeout=RPC_TIMEOUT)
        reasons = {r.id: r.reason for r in reply.rejected}
        assert {e.evidence_id: reasons.get(e.evidence_id) for e in stale.evidence} == {
            e.evidence_id: "covered by an erasure" for e in stale.evidence
        }
        assert len(reasons) == 3, reasons  # the vote too: it rests on erased evidence
        assert peer.belief(k) is None and peer.history(k) is None

    # n3 itself comes back holding the erased evidence; the peers must not take it back from it.
    n3.spawn()
    n3.wait_listening()
    for peer in ("n1", "n2"):
        [result] = fed[peer].sync("n3").results
        assert result.ok, result.error
    fed.sync_until_quiet()

    for node in fed:
        assert node.belief(k) is None, node.node_id
        history = node.history(k)
        assert history is None or secret not in str(history), node.node_id
        decisions = node.facts.ListDecisions(
            pb.ListDecisionsRequest(namespace=ns, page_size=1000), timeout=RPC_TIMEOUT
        )
        assert secret not in str(decisions) and whisper not in str(decisions)
        left = [
            name
            for name, raw in node.store_files().items()
            if secret.encode() in raw or whisper.encode() in raw
        ]
        assert not left, f"{node.node_id}: the erased value or source is still in {left}"
        assert node.belief(neighbour).object == "Lisbon"  # type: ignore[union-attr]

    # Evidence recorded after the erasure is accepted normally, and spreads.
    n3.submit(k, "Rua Nova", source="agent:n3", valid_from=at)
    fed.sync_until_quiet()
    assert set(served(fed, k).values()) == {("Rua Nova", BELIEVED, CONSENSUS)}


def test_a_retraction_on_one_node_reaches_every_node(fed: Federation) -> None:
    """A fact every node holds, retracted on the node that first had it, is believed by no
    node after a bounded number of sync rounds, and every node's history shows it ended."""
    k = key(unique_ns("retract"), "ana", "works_at")
    at = event_time()
    fed["n1"].submit(k, "Acme", source="agent:hr", valid_from=at)
    fed.sync_until_quiet()
    for node in fed:
        # The control: every node serves it before the retraction, so this test can fail.
        assert node.belief(k).object == "Acme", node.node_id  # type: ignore[union-attr]

    reply = fed["n1"].facts.Retract(
        pb.RetractRequest(key=k, reason="left Acme", source="hr-system"), timeout=RPC_TIMEOUT
    )
    assert (reply.decision.outcome, reply.decision.rule) == (pb.OUTCOME_RETRACTED, "retract")
    assert not reply.HasField("belief")

    served_within_rounds(fed, k, {n.node_id: None for n in fed})
    for node in fed:
        history = node.history(k)
        assert history is not None, node.node_id
        [version] = history.versions
        assert version.status == pb.VERSION_STATUS_RETRACTED, node.node_id
        [interval] = version.intervals
        assert interval.HasField("end"), node.node_id  # ended, at the retraction's time
    assert fed.sync_until_quiet() == 1  # and nothing is left to move
