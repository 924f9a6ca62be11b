"""Member records' incarnations are bounded (issue 41, finding 6): a record past the highest
incarnation is refused everywhere, a record a member cannot sign above never breaks it, and
a record signed with a leaked key is overcome by reissuing the member's certificate and
revoking the old one (docs/federation.md, "A leaked key")."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.config import Peer
from factnode.core.members import MAX_INCARNATION, MemberRecord
from factnode.federation.members import Roster
from factnode.federation.sync import FederationEndpoint
from factnode.federation.trust import Signer
from factnode.testing import Federation

EVIL = "evil.example:7421"
ROUNDS = 6  # bound on the rounds for three fully meshed members to settle


@pytest.fixture
def fed() -> Iterator[Federation]:
    """Three signed members, each having published its record."""
    federation = Federation(["a", "b", "c"])
    try:
        for n, roster in federation.rosters.items():
            assert roster is not None
            roster.publish(_address(n))
        yield federation
    finally:
        federation.close()


def _address(node: str) -> str:
    return f"127.0.0.1:{7400 + ord(node)}"


def _roster(fed: Federation, node: str) -> Roster:
    roster = fed.rosters[node]
    assert roster is not None
    return roster


def _forged(signer: Signer, incarnation: int) -> MemberRecord:
    """A record of the signer's node naming EVIL, signed with its key (as a thief would)."""
    record = MemberRecord(signer.identity.node_id, EVIL, signer.identity.pem, incarnation)
    return replace(record, signature=signer.sign(record.payload()))


def _push(fed: Federation, to: str, by: str, records: list[MemberRecord]) -> pb.PushDeltaResponse:
    delta = pb.Delta(members=[wire.member_record_pb(r) for r in records])
    return fed.endpoints[to].push_delta(by, delta)


def _dialed(fed: Federation, node: str, member: str) -> str:
    return {p.node_id: p.address for p in _roster(fed, node).dialable()}[member]


@pytest.mark.parametrize("incarnation", [2**63 - 1, MAX_INCARNATION + 1, 2**64 - 1])
async def test_a_record_past_the_highest_incarnation_is_refused_everywhere(
    fed: Federation, incarnation: int
) -> None:
    """A validly signed record of a past the bound is refused by a peer (which keeps
    dialing a's own address) and by a itself, with the reason, never an error."""
    a = _roster(fed, "a")
    honest = a.record("a")
    forged = _forged(a.signer, incarnation)
    for to in ("b", "a"):
        reply = _push(fed, to, "c", [forged])
        assert [r.reason for r in reply.rejected] == [
            f"member record: incarnation must be in [1, {MAX_INCARNATION}], got {incarnation}"
        ]
    assert a.record("a") == honest
    assert _dialed(fed, "b", "a") != EVIL


async def test_a_record_at_the_highest_incarnation_never_breaks_its_member(
    fed: Federation,
) -> None:
    """A record of a at the highest incarnation that a did not sign (its key leaked): a
    cannot sign above it, so it refuses it naming the leak and keeps its own record; its
    rounds go on without error."""
    a = _roster(fed, "a")
    honest = a.record("a")
    forged = _forged(a.signer, MAX_INCARNATION)
    reply = _push(fed, "a", "c", [forged])
    [refused] = reply.rejected
    assert "its key may have leaked; reissue this node's certificate" in refused.reason
    assert a.record("a") == honest
    results = await fed.syncers["a"].sync_round()
    assert results and all(r.ok for r in results)


async def test_a_forged_record_just_below_the_bound_is_answered_above_it(
    fed: Federation,
) -> None:
    """One below the bound, a signs its own record at the highest incarnation: exact, and
    storable on the store's 64-bit column."""
    a = _roster(fed, "a")
    _push(fed, "a", "c", [_forged(a.signer, MAX_INCARNATION - 1)])
    own = a.record("a")
    assert own is not None and own.incarnation == MAX_INCARNATION
    assert own.address == _address("a")


def _reissue(fed: Federation, node: str) -> Roster:
    """`node` restarts with a certificate (and key) the CA reissued it, as an operator does
    after a leak; it publishes its record signed with the new key."""
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


async def test_reissuing_the_certificate_overcomes_a_leaked_keys_record(fed: Federation) -> None:
    """a's key leaks and a record of a at the highest incarnation naming another address
    reaches b and c, which dial it. The operator revokes a's certificate and reissues it:
    within a few rounds every member holds a's record signed with the new key and dials a's
    own address, and the thief's records, old or new, are never taken again."""
    assert fed.credentials is not None
    old = _roster(fed, "a").signer
    forged = _forged(old, MAX_INCARNATION)
    _push(fed, "b", "c", [forged])
    _push(fed, "c", "b", [forged])
    assert _dialed(fed, "b", "a") == EVIL and _dialed(fed, "c", "a") == EVIL

    revocation = fed.credentials.revocation_list(["a"])  # a's leaked certificate
    a = _reissue(fed, "a")
    a.revoke(revocation)
    for _ in range(ROUNDS):
        await fed.round()
        if all(_roster(fed, n).record("a") == a.record("a") for n in ("b", "c")):
            break
    for n in ("b", "c"):
        held = _roster(fed, n).record("a")
        assert held == a.record("a") and held is not None and held.certificate == a.own.pem
        assert _dialed(fed, n, "a") == _address("a")
        assert not _push(fed, n, "c", [_forged(old, MAX_INCARNATION)]).rejected
        assert _roster(fed, n).record("a") == a.record("a")  # taken as older: not held
