"""A member reissued a certificate with a new key (specification §7): what it signed with its
earlier key (votes, evidence, tombstones) still checks on every member while that
certificate is valid and unrevoked, on members that only ever met the new one too, and
after a restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode.config import Peer
from factnode.core import Key, Submission
from factnode.core.signed import Signature, vote_payload
from factnode.federation.members import Roster
from factnode.federation.sync import FederationEndpoint
from factnode.federation.trust import signed_by
from factnode.metrics import Metrics
from factnode.testing import Federation

KEY = Key("user:ana", "ana", "lives_in")


@pytest.fixture
def fed() -> Iterator[Federation]:
    federation = Federation(["a", "b", "c"])
    try:
        for n, roster in federation.rosters.items():
            assert roster is not None
            roster.publish(_address(n))  # as a served node does on start
        yield federation
    finally:
        federation.close()


def _address(node: str) -> str:
    """Where a member says it listens (in-process links dial by node id)."""
    return f"127.0.0.1:{7400 + ord(node)}"


def _restart_with_new_certificate(fed: Federation, node: str) -> Roster:
    """`node` comes back with a certificate (and key) reissued by the CA: a new roster over
    the same store, as the composition root builds on start."""
    assert fed.credentials is not None
    fed.credentials.reissue(node)
    peers = [Peer(f"inproc:{p}", p) for p in fed.ledgers if p != node]
    roster = fed.credentials.roster(fed.ledgers[node], peers)
    roster.publish(_address(node))
    fed.rosters[node] = roster
    fed.endpoints[node] = FederationEndpoint(fed.ledgers[node], peers, roster=roster)
    fed.syncers[node].roster = roster
    for (_caller, callee), link in fed.links.items():
        if callee == node:
            link.endpoint = fed.endpoints[node]
    return roster


def _refused(metrics: Metrics) -> float:
    total = 0.0
    for kind in ("vote", "evidence", "tombstone"):
        value = metrics.registry.get_sample_value(
            "factnode_peer_items_refused_total", {"kind": kind}
        )
        total += value or 0.0
    return total


async def test_items_signed_before_a_reissue_check_on_a_member_that_met_only_the_new_one(
    fed: Federation,
) -> None:
    """a votes and records evidence, b takes them, a is reissued a certificate with a new
    key; c, cut off until then, meets a's new certificate first and gets a's earlier items
    from b: it takes them all (none refused) and counts a's vote."""
    metrics = Metrics()
    fed.ledgers["c"].on_refused(metrics.peer_refused)
    fed.partition(["a", "b"], ["c"])
    sub = Submission(*KEY, "Lisbon", "user_stated", "agent:a", 0.5, 0.9)
    evidence_id = fed.ledgers["a"].submit(sub).evidence_id
    fed.ledgers["a"].erase(key=Key("user:ana", "ana", "age"), operator="dpo", reason="asked")
    await fed.round()
    [old_vote] = [v for v in fed.ledgers["b"].offer({"all_votes": [""]})[2] if v.voter == "a"]
    roster_a = _restart_with_new_certificate(fed, "a")
    await fed.round()  # b learns a's new certificate from a
    roster_b = fed.rosters["b"]
    assert roster_b is not None
    assert roster_b.certificate_of("a") == roster_a.own
    fed.partition(["b", "c"], ["a"])
    syncer = fed.syncers["c"]
    await syncer.round_with(syncer.states["b"].peer)
    await syncer.round_with(syncer.states["b"].peer)
    assert _refused(metrics) == 0
    with fed.ledgers["c"].repo.read() as tx:
        assert evidence_id in set(tx.all_evidence_ids())
        assert len(list(tx.all_erasure_ids())) == 1
    tally = fed.ledgers["c"].tally_of(KEY)
    assert tally is not None and any("a" in t.voters for t in tally.versions)
    roster_c = fed.rosters["c"]
    assert roster_c is not None and roster_c.certificate_of("a") == roster_a.own
    assert roster_c.verify_vote(old_vote) is Signature.VALID


async def test_earlier_certificates_are_kept_across_a_restart(fed: Federation) -> None:
    """b restarts after a's reissue: its new roster still checks a's earlier vote, and still
    passes a's earlier certificate on beside it."""
    sub = Submission(*KEY, "Lisbon", "user_stated", "agent:a", 0.5, 0.9)
    fed.ledgers["a"].submit(sub)
    await fed.round()
    [old_vote] = [v for v in fed.ledgers["b"].offer({"all_votes": [""]})[2] if v.voter == "a"]
    old_certificate = fed.rosters["b"].certificate_of("a")  # type: ignore[union-attr]
    assert old_certificate is not None
    _restart_with_new_certificate(fed, "a")
    await fed.round()
    assert fed.credentials is not None
    again = fed.credentials.roster(fed.ledgers["b"], [])
    assert again.verify_vote(old_vote) is Signature.VALID
    assert old_certificate.der in again.certificates(["a"])


async def test_a_revoked_earlier_certificate_no_longer_checks(fed: Federation) -> None:
    """A certificate reissued because its key leaked is revoked: what carries the earlier
    key's signature is refused from then on, whatever date it claims."""
    sub = Submission(*KEY, "Lisbon", "user_stated", "agent:a", 0.5, 0.9)
    fed.ledgers["a"].submit(sub)
    await fed.round()
    [old_vote] = [v for v in fed.ledgers["b"].offer({"all_votes": [""]})[2] if v.voter == "a"]
    roster_b = fed.rosters["b"]
    assert roster_b is not None and fed.credentials is not None
    old_certificate = roster_b.certificate_of("a")
    assert old_certificate is not None
    revocation = fed.credentials.revocation_list(["a"])  # a's certificate at this point
    _restart_with_new_certificate(fed, "a")
    await fed.round()
    assert roster_b.verify_vote(old_vote) is Signature.VALID
    roster_b.revoke(revocation)
    assert roster_b.verify_vote(old_vote) is Signature.BAD


async def test_a_reissued_member_signs_its_votes_anew_with_its_new_key(fed: Federation) -> None:
    """On its first start with a reissued certificate a member numbers its votes anew and
    signs them with the new key: its peers replace theirs, which then check against the new
    certificate alone (they outlive the earlier one); a later start re-signs nothing."""
    sub = Submission(*KEY, "Lisbon", "user_stated", "agent:a", 0.5, 0.9)
    fed.ledgers["a"].submit(sub)
    await fed.round()
    [old_vote] = [v for v in fed.ledgers["b"].offer({"all_votes": [""]})[2] if v.voter == "a"]
    roster_a = _restart_with_new_certificate(fed, "a")
    await fed.round()
    [new_vote] = [v for v in fed.ledgers["b"].offer({"all_votes": [""]})[2] if v.voter == "a"]
    assert new_vote.seq > old_vote.seq
    assert signed_by(roster_a.own, vote_payload(new_vote), new_vote.signature)
    assert not signed_by(roster_a.own, vote_payload(old_vote), old_vote.signature)
    assert fed.ledgers["a"].resign_own_votes(f"{roster_a.own.serial:x}") == 0
