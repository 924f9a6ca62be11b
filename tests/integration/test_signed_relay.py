"""Signed votes through the real ledgers and sync (in-process links): refusals counted by
reason, skewed clocks, and votes stored before votes were signed (specification §7)."""

from __future__ import annotations

import dataclasses

import pytest

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import MICROS_PER_DAY, BeliefState, Key, Submission, ids
from factnode.core.consensus import Vote
from factnode.core.signed import Signature, vote_payload
from factnode.federation._index import index_of
from factnode.ledger import NotFound
from factnode.metrics import Metrics
from factnode.testing import Credentials, FakeClock, Federation, memory_ledger

KEY = Key("user:ana", "ana", "lives_in")


def _submit(fed: Federation, node: str, value: str, anchor: str = "agent_observed") -> None:
    sub = Submission(*KEY, value, anchor, f"agent:{node}", 0.5, 0.9)
    fed.ledgers[node].submit(sub)


def _voters(fed: Federation, node: str) -> dict[str, str]:
    tally = fed.ledgers[node].tally_of(KEY)
    assert tally is not None
    return {v: t.version_id for t in tally.versions for v in t.voters}


async def test_refused_signatures_are_counted_by_reason(fed: Federation) -> None:
    """An unsigned vote, an altered one and one of a voter nobody vouched for are refused
    one by one: each counts once as a refused vote and once under its reason."""
    metrics = Metrics()
    fed.ledgers["a"].on_refused(metrics.peer_refused)
    _submit(fed, "b", "Lisbon")
    await fed.round()
    genuine = next(v for v in fed.ledgers["b"].offer({"votes": [""]})[2] if v.key == KEY)
    unsigned = dataclasses.replace(genuine, signature=b"")
    altered = dataclasses.replace(genuine, anchor=100)
    stranger = dataclasses.replace(genuine, voter="stranger")
    reply = fed.endpoints["a"].push_delta(
        "c", pb.Delta(votes=[wire.vote_pb(v) for v in (unsigned, altered, stranger)])
    )
    assert len(reply.rejected) == 3

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert sample("factnode_peer_items_refused_total", kind="vote") == 3
    for reason in ("unsigned", "bad_signature", "unknown_signer"):
        assert sample("factnode_peer_signatures_refused_total", kind="vote", reason=reason) == 1


async def test_a_vote_delivered_by_another_member_counts_for_its_signer(fed: Federation) -> None:
    """b and c never meet (their links are cut); a meets both: each counts the other's vote,
    relayed unchanged by a, for its signer."""
    fed.links[("b", "c")].up = fed.links[("c", "b")].up = False
    _submit(fed, "b", "Lisbon")
    _submit(fed, "c", "Porto")
    for _ in range(3):
        await fed.round()
    lisbon = ids.version_id(KEY, "Lisbon")
    assert _voters(fed, "c")["b"] == lisbon
    assert _voters(fed, "b")["c"] == ids.version_id(KEY, "Porto")
    assert fed.links[("c", "b")].calls == fed.links[("b", "c")].calls == 0


async def test_a_skewed_clock_neither_freezes_nor_loses_a_vote() -> None:
    """A member whose clock runs a day ahead has its vote counted (numbered, not dated); once
    its clock is put back, its next vote, dated before the first, replaces it everywhere."""
    base = FakeClock()
    ahead = FakeClock(base.now() + MICROS_PER_DAY)
    fed = Federation(["a", "fast"], clock=base, clocks={"fast": ahead})
    try:
        _submit(fed, "fast", "Lisbon")
        await fed.round()
        assert _voters(fed, "a")["fast"] == ids.version_id(KEY, "Lisbon")
        first = fed.ledgers["a"].tally_of(KEY)
        assert first is not None
        ahead.current = base.now()  # the clock is corrected: now behind its last vote
        _submit(fed, "fast", "Porto", anchor="user_stated")
        await fed.round()
        assert _voters(fed, "a")["fast"] == ids.version_id(KEY, "Porto")
    finally:
        fed.close()


def test_votes_stored_unsigned_are_signed_on_open() -> None:
    """A store from before votes were signed: on open the node numbers and signs its own
    votes (they verify against its certificate) and drops the unsigned votes held from peers."""
    credentials = Credentials(["a", "p"])
    ledger = memory_ledger(node_id="a")
    try:
        ledger.submit(Submission(*KEY, "Lisbon", "agent_observed", "agent:a", 0.5, 0.9))
        with ledger.repo.write() as tx:
            [own] = [v for v in tx.votes([KEY])[KEY] if v.voter == "a"]
            old = dataclasses.replace(own, seq=0, signature=b"")
            peer = dataclasses.replace(old, voter="p")
            tx.put_votes([old, peer])
        roster = credentials.roster(ledger, [])
        assert ledger.sign_own_votes() == 1
        with ledger.repo.read() as tx:
            held = tx.votes([KEY])[KEY]
        [signed] = held
        assert signed.voter == "a" and signed.seq > 0
        assert roster.verify_vote(signed) is Signature.VALID
        assert ledger.sign_own_votes() == 0  # nothing left to sign
    finally:
        ledger.repo.close()


def test_a_vote_signed_by_one_member_does_not_verify_as_another() -> None:
    """The same bytes signed by p do not verify as a's vote."""
    credentials = Credentials(["a", "p", "q"])
    ledger = memory_ledger(node_id="q")
    try:
        roster = credentials.roster(ledger, [])
        roster.learn([credentials.signer(n).identity.der for n in ("a", "p")], by="test")
        v = Vote("a", KEY, None, "", 0, 0, 0, 1, seq=1)
        by_p = dataclasses.replace(v, signature=credentials.signer("p").sign(vote_payload(v)))
        by_a = dataclasses.replace(v, signature=credentials.signer("a").sign(vote_payload(v)))
        assert roster.verify_vote(by_p) is Signature.BAD
        assert roster.verify_vote(by_a) is Signature.VALID
    finally:
        ledger.repo.close()


async def test_a_revoked_origins_evidence_is_refused_after_the_revocation(
    fed: Federation,
) -> None:
    """Once b holds a list revoking a, evidence a originates reaches b only through c and is
    refused there as not a member's (counted), while what b took before stays; c, which
    holds no list, takes it."""
    assert fed.credentials is not None
    metrics = Metrics()
    fed.ledgers["b"].on_refused(metrics.peer_refused)
    _submit(fed, "a", "Lisbon")
    await fed.round()
    before = fed.ledgers["b"].belief(KEY)
    roster = fed.rosters["b"]
    assert roster is not None
    roster.revoke(fed.credentials.revocation_list(["a"]))
    fed.links[("a", "b")].up = fed.links[("b", "a")].up = False
    later = Key("user:ana", "ana", "works_at")
    fed.ledgers["a"].submit(Submission(*later, "Acme", "agent_observed", "agent:a", 0.5, 0.9))
    for _ in range(2):
        await fed.round()
    assert fed.ledgers["c"].belief(later).object == "Acme"
    with fed.ledgers["b"].repo.read() as tx:
        assert tx.key_states([later])[later].evidence == ()
    assert fed.ledgers["b"].belief(KEY) == before
    refused = metrics.registry.get_sample_value(
        "factnode_peer_signatures_refused_total", {"kind": "evidence", "reason": "not_a_member"}
    )
    assert refused is not None and refused >= 1


async def _equivocating_e(fed: Federation, worths: tuple[int, ...]) -> tuple[list[Vote], bytes]:
    """a, b and c hold evidence for KEY and have synced, and e is cut off from them: votes e
    signs with one number on KEY, one per worth (so they differ), and e's certificate."""
    assert fed.credentials is not None
    for n in ("a", "b", "c"):
        _submit(fed, n, "Lisbon")
    for _ in range(2):
        await fed.round()
    for n in ("a", "b", "c"):
        fed.links[(n, "e")].up = fed.links[("e", n)].up = False
    held = next(v for v in fed.ledgers["b"].offer({"votes": [""]})[2] if v.key == KEY)
    signer = fed.credentials.signer("e")
    # Numbered after every vote e cast, as its next vote would be.
    seq = max((v.seq for v in fed.ledgers["e"].offer({"votes": [""]})[2]), default=0) + 1
    votes = []
    for worth in worths:
        v = dataclasses.replace(held, voter="e", worth_milli=worth, seq=seq, signature=b"")
        votes.append(dataclasses.replace(v, signature=signer.sign(vote_payload(v))))
    return votes, signer.identity.der


async def test_an_equivocation_proof_reaches_every_member_and_digests_agree() -> None:
    """e signs two votes with one number on one key and hands one to a, the other to c,
    then goes silent: after a few rounds among a, b and c, each holds the proof, counts e
    zero, serves the key CONTESTED, and their vote digests are equal (the proof is gossiped
    as one item, so idle rounds move nothing)."""
    fed = Federation(["a", "b", "c", "e"])
    try:
        conflicting, cert = await _equivocating_e(fed, (500, 400))
        for node, v in zip(("a", "c"), conflicting, strict=True):
            delta = pb.Delta(votes=[wire.vote_pb(v)], certificates=[cert])
            assert list(fed.endpoints[node].push_delta("b", delta).rejected) == []
        for _ in range(3):
            await fed.round()
        for n in ("a", "b", "c"):
            tally = fed.ledgers[n].tally_of(KEY)
            assert tally is not None and tally.equivocators == ("e",), n
            assert all("e" not in t.voters for t in tally.versions)
            belief = fed.ledgers[n].belief(KEY)
            assert belief.state is BeliefState.CONTESTED, n
            with fed.ledgers[n].repo.read() as tx:
                assert len(tx.all_equivocations()) == 1
        digests = {index_of(fed.ledgers[n]).signed_votes.bucket("") for n in ("a", "b", "c")}
        assert len(digests) == 1
    finally:
        fed.close()


async def test_three_conflicting_votes_leave_every_member_the_same_proof() -> None:
    """e signs three different votes with one number on one key and hands a, b and c a
    different pair each, so each finds a different proof first: after a few rounds every
    member holds the same one (the canonical pair, `signed.canonical_proof`), and their
    vote digests are equal."""
    fed = Federation(["a", "b", "c", "e"])
    try:
        variants, cert = await _equivocating_e(fed, (500, 400, 300))
        first, second, third = variants
        for node, pair in (("a", (first, second)), ("b", (second, third)), ("c", (third, first))):
            delta = pb.Delta(votes=[wire.vote_pb(v) for v in pair], certificates=[cert])
            assert list(fed.endpoints[node].push_delta("e", delta).rejected) == []
        found = {}
        for n in ("a", "b", "c"):
            with fed.ledgers[n].repo.read() as tx:
                [found[n]] = tx.all_equivocations()
        assert len(set(found.values())) == 3  # each found its own pair first
        for _ in range(3):
            await fed.round()
        expected = tuple(sorted(variants, key=vote_payload)[:2])
        for n in ("a", "b", "c"):
            with fed.ledgers[n].repo.read() as tx:
                assert tx.all_equivocations() == [expected], n
            tally = fed.ledgers[n].tally_of(KEY)
            assert tally is not None and tally.equivocators == ("e",), n
        digests = {index_of(fed.ledgers[n]).signed_votes.bucket("") for n in ("a", "b", "c")}
        assert len(digests) == 1
    finally:
        fed.close()


async def test_a_tombstone_signed_by_its_eraser_travels_through_a_relay(
    fed: Federation,
) -> None:
    """a's operator erases a key; c, with no link to a, applies a's signed tombstone relayed
    by b and logs a as where it was made. The same tombstone re-attributed to b by a relay
    (b never made it) is refused for its signature."""
    fed.links[("a", "c")].up = fed.links[("c", "a")].up = False
    _submit(fed, "a", "Lisbon")
    for _ in range(2):
        await fed.round()
    assert fed.ledgers["c"].belief(KEY).object == "Lisbon"
    fed.ledgers["a"].erase(key=KEY, operator="ops", reason="asked to")
    [tombstone] = fed.ledgers["a"].offer({"tombstones": [""]})[0]
    assert tombstone.signature
    forged = dataclasses.replace(tombstone, origin_node="b")
    reply = fed.endpoints["c"].push_delta("b", pb.Delta(tombstones=[wire.tombstone_pb(forged)]))
    assert [r.reason for r in reply.rejected] == [
        "its signature does not verify against its signer's certificate"
    ]
    assert fed.ledgers["c"].belief(KEY).object == "Lisbon"
    for _ in range(2):
        await fed.round()
    with pytest.raises(NotFound):
        fed.ledgers["c"].belief(KEY)
    [logged] = [
        d.decision
        for d in fed.ledgers["c"].decisions(page_size=100).items
        if d.decision.rule.value == "peer_erasure"
    ]
    assert "made on a" in logged.detail and "delivered by b" in logged.detail
