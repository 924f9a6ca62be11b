"""What a node does with bad or partial peer traffic: refuse item by item, lose nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import MICROS_PER_DAY, Key, Submission
from factnode.federation._index import index_of, vote_hash
from factnode.ledger import Committed
from factnode.testing import Federation

KEY = Key("team:infra", "build", "python_version")


@pytest.fixture
def fed() -> Iterator[Federation]:
    """Two in-process nodes, a and b, that know each other and send unsigned votes (the
    delta checks here are those of their content; signatures are pinned in
    tests/integration/federation/test_signed_votes.py)."""
    federation = Federation(["a", "b"], signed=False)
    try:
        yield federation
    finally:
        federation.close()


def _submit(
    fed: Federation, node: str, value: str, anchor: str = "agent_observed", key: Key = KEY
) -> str:
    now = fed.clock.now()
    sub = Submission(
        key.namespace,
        key.subject,
        key.predicate,
        value,
        anchor,
        f"{node}-src",
        0.5,
        0.9,
        now - MICROS_PER_DAY,
    )
    return fed.ledgers[node].submit(sub).evidence_id


def _vote(
    version_id: str, evidence_id: str, anchor: int = 60, worth: int = 500, subject: str = "build"
) -> pb.Vote:
    return pb.Vote(
        key=pb.Key(namespace=KEY.namespace, subject=subject, predicate=KEY.predicate),
        version_id=version_id,
        evidence_id=evidence_id,
        anchor=anchor,
        worth_milli=worth,
    )


def test_bad_items_in_a_pushed_delta_are_refused_one_by_one(fed: Federation) -> None:
    """Unknown versions, weights out of range, oversized keys, unparsable tombstones and forged
    evidence ids are refused with reasons; the good items in the same delta are taken."""
    good_id = _submit(fed, "a", "3.12")
    offered = fed.endpoints["a"].pull_delta(
        "b", pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_EVIDENCE, prefix="")])
    )
    [good] = offered.evidence
    forged = pb.RelayedEvidence()
    forged.CopyFrom(good)
    forged.object = "3.13"  # the id no longer matches the content
    version = fed.ledgers["a"].belief(KEY).version_id
    delta = pb.Delta(
        evidence=[good, forged],
        votes=[
            _vote("f" * 32, good_id),  # a version this node holds no evidence for
            _vote(version, good_id, worth=5000),  # weight out of range
            _vote(version, good_id, subject="x" * 300),  # key over the size limit
        ],
        tombstones=[
            pb.ErasureTombstone(erasure_id="not-hex", scope=pb.ERASURE_SCOPE_KEY, scope_hash="zz")
        ],
    )
    reply = fed.endpoints["b"].push_delta("a", delta)
    reasons = [r.reason for r in reply.rejected]
    assert any("does not match" in r for r in reasons), reasons
    assert any("unknown version" in r for r in reasons), reasons
    assert any("out of range" in r for r in reasons), reasons
    assert any("longer than" in r for r in reasons), reasons
    assert any("hex" in r for r in reasons), reasons
    assert len(reply.rejected) == 5
    # The good evidence was taken, capped at federation_received on b, and nothing else.
    held = fed.ledgers["b"].belief(KEY)
    assert (held.object, held.evidence.attribution, held.evidence.anchor_cap) == (
        "3.12",
        "agent_observed",
        "federation_received",
    )
    assert fed.ledgers["b"].tally_of(KEY) is not None
    assert [v for v in fed.ledgers["b"].tally_of(KEY).versions if "a" in v.voters] == []  # type: ignore[union-attr]


async def test_a_sync_that_breaks_midway_loses_nothing_and_resumes(fed: Federation) -> None:
    """A round cut after a few messages leaves both stores consistent; the next round completes it."""
    for i in range(200):
        _submit(fed, "a", f"v{i}", key=Key("team:infra", f"svc-{i}", "owner"))
    link = fed.links[("b", "a")]
    link.breaks_after = 3  # digest, one descent, then the first pull breaks
    results = await fed.syncers["b"].sync_round(force=True)
    assert not results[0].ok
    partial = fed.ledgers["b"].counts().evidence
    assert partial < 200
    link.up, link.breaks_after = True, None
    for _ in range(3):
        await fed.round()
    assert fed.ledgers["b"].counts().evidence == 200
    index_a, index_b = index_of(fed.ledgers["a"]), index_of(fed.ledgers["b"])
    assert index_a.evidence.bucket("") == index_b.evidence.bucket("")


async def test_erasing_a_key_drops_every_vote_on_it(fed: Federation) -> None:
    """After an erase by key no vote for it stays, not even another node's abstention."""
    _submit(fed, "a", "3.12")
    _submit(fed, "b", "3.11", anchor="agent_observed")
    _submit(
        fed, "b", "3.10", anchor="agent_observed"
    )  # b is AMBIGUOUS between its two: it abstains
    for _ in range(2):
        await fed.round()
    with fed.ledgers["a"].repo.read() as tx:
        held = {v.voter: v.version_id for v in tx.votes([KEY])[KEY]}
    assert held["b"] is None  # b's abstention is held on a
    fed.ledgers["a"].erase(key=KEY, operator="op", reason="test")
    with fed.ledgers["a"].repo.read() as tx:
        assert tx.votes([KEY])[KEY] == []


def test_oversized_node_ids_and_keys_in_relayed_items_are_refused_one_by_one(
    fed: Federation,
) -> None:
    """A relayed fact whose origin node or contradicted key is over the size limit, and a
    tombstone naming an oversized origin node, are refused; the good fact beside them is taken
    (on PostgreSQL an oversized value would otherwise fail the whole delta's transaction)."""
    _submit(fed, "a", "3.12")
    offered = fed.endpoints["a"].pull_delta(
        "b", pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_EVIDENCE, prefix="")])
    )
    [good] = offered.evidence
    long_origin = pb.RelayedEvidence()
    long_origin.CopyFrom(good)
    long_origin.origin_node = "n" * 300
    long_contradicts = pb.RelayedEvidence()
    long_contradicts.CopyFrom(good)
    long_contradicts.contradicts.CopyFrom(
        pb.Key(namespace="team:infra", subject="s" * 300, predicate="python_version")
    )
    tombstone = pb.ErasureTombstone(
        erasure_id="a" * 32,
        scope=pb.ERASURE_SCOPE_KEY,
        scope_hash="b" * 32,
        operator="dpo",
        origin_node="n" * 300,
    )
    tombstone.erased_at.FromMicroseconds(fed.clock.now())
    reply = fed.endpoints["b"].push_delta(
        "a", pb.Delta(evidence=[long_origin, long_contradicts, good], tombstones=[tombstone])
    )
    reasons = sorted(r.reason for r in reply.rejected)
    assert len(reasons) == 3, reasons
    assert sum("origin_node" in r for r in reasons) == 2, reasons
    assert any("contradicts.subject" in r for r in reasons), reasons
    assert fed.ledgers["b"].belief(KEY).object == "3.12"
    assert fed.ledgers["b"].counts().erasures == 0


async def test_a_replicated_erasure_names_the_node_where_it_was_made(fed: Federation) -> None:
    _submit(fed, "a", "3.12")
    for _ in range(2):
        await fed.round()
    report = fed.ledgers["a"].erase(key=KEY, operator="dpo", reason="request 7")
    for _ in range(2):
        await fed.round()
    with fed.ledgers["b"].repo.read() as tx:
        [held] = tx.tombstones_under([""])
    assert (held.erasure_id, held.origin_node, held.operator) == (report.erasure_id, "a", "dpo")


async def test_a_withdrawn_vote_spreads_when_its_voter_pushes(fed: Federation) -> None:
    """A node whose belief ended stops voting; its next push tells the peer so, without
    waiting for the peer to pull from it."""
    _submit(fed, "a", "3.12")
    for _ in range(2):
        await fed.round()

    def voters_on_b() -> set[str]:
        with fed.ledgers["b"].repo.read() as tx:
            return {v.voter for v in tx.votes([KEY])[KEY]}

    assert "a" in voters_on_b()
    fed.ledgers["a"].retract(KEY, reason="no longer true")  # a no longer believes anything
    [result] = await fed.syncers["a"].sync_round(force=True)  # only a acts: pull, then push
    assert result.ok
    assert "a" not in voters_on_b()


async def test_a_long_round_that_keeps_moving_completes_and_a_stalled_one_fails(
    fed: Federation,
) -> None:
    """The round timeout bounds each step (an RPC, or applying what it brought), not the
    whole exchange: many slow steps complete; one step slower than the timeout fails."""
    for i in range(40):
        _submit(fed, "a", f"v{i}", key=Key("team:infra", f"svc-{i}", "owner"))
    link = fed.links[("b", "a")]
    link.latency = 0.3  # each call; the round makes five or more
    started = asyncio.get_running_loop().time()
    [done] = await fed.syncers["b"].sync_round(force=True, timeout=1.0)
    took = asyncio.get_running_loop().time() - started
    assert done.ok, done.error
    assert took > 1.0  # longer in all than the timeout allows any one step
    assert fed.ledgers["b"].counts().evidence == 40

    _submit(fed, "a", "late", key=Key("team:infra", "svc-late", "owner"))
    link.latency = 1.0
    [stalled] = await fed.syncers["b"].sync_round(force=True, timeout=0.2)
    assert not stalled.ok and "timed out" in stalled.error


async def test_a_delta_erasing_a_vote_it_recast_leaves_the_digest_equal_to_the_store(
    fed: Federation,
) -> None:
    """A delta carrying an erasure by id (b's vote moves to its other version) and then an
    erasure of the key (the vote goes) leaves b's vote digest as its store: no vote, and the
    next rounds with a are quiet. (Found by the fault campaign, tests/faults: rounds that
    never went quiet while every store held the same data.)"""
    first = _submit(fed, "b", "3.12", "user_stated")
    _submit(fed, "b", "3.13")
    index = index_of(fed.ledgers["b"])
    fed.ledgers["a"].erase(evidence_id=first, operator="op", reason="campaign")
    fed.ledgers["a"].erase(key=KEY, operator="op", reason="campaign")
    offered = fed.endpoints["a"].pull_delta(
        "b", pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_TOMBSTONES, prefix="")])
    )
    by_id_first = sorted(offered.tombstones, key=lambda t: t.scope != pb.ERASURE_SCOPE_EVIDENCE)
    assert [t.scope for t in by_id_first] == [pb.ERASURE_SCOPE_EVIDENCE, pb.ERASURE_SCOPE_KEY]
    reply = fed.endpoints["b"].push_delta("a", pb.Delta(tombstones=by_id_first))
    assert not reply.rejected

    with fed.ledgers["b"].repo.read() as tx:
        stored = {(v.voter, v.key): vote_hash(v) for v in tx.all_votes()}
    assert stored == {}
    assert len(index.votes("b")) == 0, "the digest still counts a vote the store dropped"
    await fed.syncers["b"].sync_round(force=True)
    again = await fed.syncers["b"].sync_round(force=True)
    assert [(r.ok, r.differing_buckets) for r in again] == [(True, 0)]


def test_a_later_commits_observers_never_run_before_an_earlier_ones(fed: Federation) -> None:
    """A commit's observers (the digests among them) run before the next write can commit:
    an erasure racing a submission whose observers are slow waits for them, so the evidence
    digest ends equal to the store (seed 200's 20-minute campaign found it kept evidence the
    store had erased when the erasure's observers ran first)."""
    ledger = fed.ledgers["a"]
    index = index_of(ledger)
    first_seen, release = threading.Event(), threading.Event()
    seen: list[str] = []
    added: list[str] = []

    def slow_first(fx: Committed) -> None:
        seen.append("added" if fx.evidence_added else "removed")
        added.extend(fx.evidence_added)
        if len(seen) == 1:
            first_seen.set()
            release.wait(10)

    ledger.on_commit(slow_first)
    submitted: list[str] = []
    writer = threading.Thread(target=lambda: submitted.append(_submit(fed, "a", "3.12")))
    writer.start()
    try:
        # (Not read from the store: an in-memory store's one connection is the writer's.)
        assert first_seen.wait(10), "the submission committed"
        [evidence_id] = added
        erasing = threading.Thread(
            target=lambda: ledger.erase(evidence_id=evidence_id, operator="op", reason="race")
        )
        erasing.start()
        erasing.join(0.5)
        # The erasure waits behind the submission's observers, not past them.
        assert erasing.is_alive() and seen == ["added"]
    finally:
        release.set()
    writer.join(10)
    erasing.join(10)
    assert not writer.is_alive() and not erasing.is_alive()
    assert seen == ["added", "removed"]
    with ledger.repo.read() as tx:
        assert set(tx.all_evidence_ids()) == set()
    assert len(index.evidence) == 0, "the digest kept evidence the store erased"
