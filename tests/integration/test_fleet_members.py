"""Members, not a mesh (specification §7): in-process members with real certificates, each knowing
one seed, learn every member from the records that gossip; a bad record is refused and
counted; a restarted member remembers the fleet; a revoked member is never dialed and its
record is kept, marked; rounds choose `fanout` members at random, reproducibly."""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.certs import ensure_ca, issue_node_cert, revoke
from factnode.config import Settings
from factnode.core import Policy
from factnode.core.members import MemberRecord
from factnode.federation.members import Roster
from factnode.federation.trust import Authority, Signer
from factnode.ledger import Ledger
from factnode.server.app import Node
from factnode.store import SqlRepository, StoredMember
from factnode.testing import FakeClock, Fleet

IDS = [f"m{i}" for i in range(8)]
# Each member knows one seed: the member before it (m0 knows m7), a ring.
RING = {n: [Fleet.address(IDS[i - 1])] for i, n in enumerate(IDS)}
ROUNDS = 10  # bound on the rounds for eight members to learn each other


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    """Eight members on a ring of seeds, fanout 3."""
    f = Fleet(IDS, RING, fanout=3, seed=7)
    yield f
    f.close()


async def _until_everyone_known(fleet: Fleet, bound: int = ROUNDS) -> int:
    for r in range(1, bound + 1):
        await fleet.round(concurrent=False)
        if fleet.knows_everyone():
            return r
    raise AssertionError(f"members still unknown after {bound} rounds")


async def test_members_learn_every_member_from_one_seed_each(fleet: Fleet) -> None:
    """Eight members that each know one seed address each hold every member's record, with
    its address and certificate, within the bound; nobody was configured with another."""
    rounds = await _until_everyone_known(fleet)
    assert rounds <= ROUNDS
    for node_id, roster in fleet.rosters.items():
        dialable = {p.node_id: p.address for p in roster.dialable()}
        assert dialable == {n: Fleet.address(n) for n in IDS if n != node_id}
        for other in IDS:
            record = roster.record(other)
            assert record is not None and record.incarnation == 1


async def test_an_idle_round_moves_no_record(fleet: Fleet) -> None:
    """Once every member knows every member, a round compares one root bucket per set and
    sends no member record: its bytes do not grow with the records held."""
    await _until_everyone_known(fleet)
    for _ in range(3):  # also let stragglers settle whatever the fanout missed
        await fleet.round(concurrent=False)
    before = {k: link.bytes for k, link in fleet.links.items()}
    syncer = fleet.syncers["m0"]
    results = await syncer.sync_round()
    assert results and all(r.ok and r.differing_buckets == 0 for r in results)
    sent = sum(link.bytes - before[k] for k, link in fleet.links.items() if k[0] == "m0")
    assert 0 < sent < 600 * len(results)  # a few root buckets each way, no 700-byte certificate


def _push(fleet: Fleet, to: str, by: str, records: list[MemberRecord]) -> pb.PushDeltaResponse:
    delta = pb.Delta(members=[wire.member_record_pb(r) for r in records])
    return fleet.endpoints[to].push_delta(by, delta)


async def test_bad_records_are_refused_one_by_one_and_counted(fleet: Fleet, tmp_path: Path) -> None:
    """A record with an altered address, one whose node id is not its certificate's, one
    signed by another member's key, and one with a certificate from another CA are each
    refused with the reason and counted; a good record in the same delta is taken."""
    counted: list[int] = []
    victim = fleet.rosters["m0"]
    victim.on_refused(counted.append)
    good = fleet.rosters["m4"].record("m4")
    honest = fleet.rosters["m5"].record("m5")
    assert good is not None and honest is not None
    altered = replace(honest, address="evil.example:7421")
    renamed = replace(honest, node_id="m6")
    m6 = fleet.rosters["m6"].signer
    forged = MemberRecord("m5", "evil.example:7421", honest.certificate, 9)
    forged = replace(forged, signature=m6.sign(forged.payload()))
    other_ca = tmp_path / "other"
    ensure_ca(other_ca, "another CA")
    cert, key = issue_node_cert(other_ca, "m5")
    foreign_signer = Signer(
        Authority((other_ca / "ca.crt").read_bytes()), cert.read_bytes(), key.read_bytes()
    )
    foreign = MemberRecord("m5", "evil.example:7421", foreign_signer.identity.pem, 9)
    foreign = replace(foreign, signature=foreign_signer.sign(foreign.payload()))

    reply = _push(fleet, "m0", "m1", [altered, renamed, forged, foreign, good])
    reasons = [r.reason for r in reply.rejected]
    assert len(reasons) == 4, reasons
    assert "signature is not its certificate's key's" in reasons[0]
    assert "certificate names 'm5', not 'm6'" in reasons[1]
    assert "signature is not its certificate's key's" in reasons[2]
    assert "not issued by the federation CA" in reasons[3]
    assert counted == [4]
    assert victim.record("m4") == good
    assert victim.record("m5") is None  # nothing of m5's was taken from the liars


async def test_a_higher_incarnation_replaces_a_lower_everywhere(fleet: Fleet) -> None:
    """A member that moves signs its record one incarnation up; the new address reaches
    every member and is the one dialed."""
    await _until_everyone_known(fleet)
    moved = fleet.rosters["m3"].publish("m3.elsewhere:9000")
    assert moved.incarnation == 2
    for _ in range(ROUNDS):
        await fleet.round(concurrent=False)
        if all(r.record("m3") == moved for r in fleet.rosters.values()):
            break
    for node_id, roster in fleet.rosters.items():
        assert roster.record("m3") == moved, node_id
        if node_id != "m3":
            assert {p.node_id: p.address for p in roster.dialable()}["m3"] == "m3.elsewhere:9000"


async def test_a_member_answers_a_later_record_of_itself_by_signing_above_it(
    fleet: Fleet,
) -> None:
    """A record of m2 numbered above m2's own (from an earlier life of its store) makes m2
    sign its current record one incarnation higher, so the fleet keeps what m2 says now."""
    m2 = fleet.rosters["m2"]
    old = MemberRecord("m2", "m2.old:1", m2.own.pem, 41)
    old = replace(old, signature=m2.signer.sign(old.payload()))
    reply = _push(fleet, "m2", "m1", [old])
    assert not reply.rejected
    now = m2.record("m2")
    assert now is not None and now.incarnation == 42 and now.address == Fleet.address("m2")


def test_a_restarted_member_remembers_the_fleet(tmp_path: Path) -> None:
    """Records taken are in the store: a roster opened again on it knows every member and
    its own record, and signs no new incarnation for an unchanged address."""
    ca = tmp_path / "ca"
    authority = Authority(ensure_ca(ca)[0].public_bytes(serialization.Encoding.PEM))
    signers = {}
    for n in ("a", "b", "c"):
        cert, key = issue_node_cert(ca, n)
        signers[n] = Signer(authority, cert.read_bytes(), key.read_bytes())
    url = f"sqlite:///{tmp_path / 'a.db'}"
    clock = FakeClock()
    others = []
    for n in ("b", "c"):
        ledger = Ledger(SqlRepository("sqlite://"), Policy(), n, clock)
        roster = Roster(ledger, authority, signers[n])
        others.append(roster.publish(f"{n}.host:7421"))
        ledger.repo.close()

    ledger = Ledger(SqlRepository(url), Policy(), "a", clock)
    first = Roster(ledger, authority, signers["a"])
    own = first.publish("a.host:7421")
    assert first.take(others, "b") == []
    ledger.repo.close()

    again = Ledger(SqlRepository(url), Policy(), "a", clock)
    try:
        roster = Roster(again, authority, signers["a"])
        assert roster.publish("a.host:7421") == own  # the same incarnation: nothing moved
        assert [(p.node_id, p.address) for p in roster.dialable()] == [
            ("b", "b.host:7421"),
            ("c", "c.host:7421"),
        ]
        assert {m.node_id: m.incarnation for m in roster.members(dt.datetime.now(dt.UTC))} == {
            "a": 1,
            "b": 1,
            "c": 1,
        }
    finally:
        again.repo.close()


async def test_a_revoked_member_is_never_dialed_and_its_record_is_kept_marked(
    fleet: Fleet,
) -> None:
    """Handed a list revoking m3, m0 keeps m3's record (stored as revoked), never dials it
    again, and refuses its calls; the list gossips, and within the bound no member dials m3."""
    await _until_everyone_known(fleet)
    path, _number = revoke(fleet.ca_dir, ["m3"])
    done = fleet.rosters["m0"].revoke(path.read_bytes())
    assert done.revoked == ("m3",)
    assert "m3" not in {p.node_id for p in fleet.rosters["m0"].dialable()}
    with fleet.ledgers["m0"].repo.read() as tx:
        stored = {m.record.node_id: m.revoked for m in tx.member_records()}
    assert stored["m3"] is True and stored["m1"] is False
    for _ in range(ROUNDS):
        await fleet.round(concurrent=False)
        if all(r.is_revoked("m3") for n, r in fleet.rosters.items() if n != "m3"):
            break
    calls = {k: link.calls for k, link in fleet.links.items() if k[1] == "m3"}
    for _ in range(3):
        await fleet.round(concurrent=False)
    assert {k: link.calls for k, link in fleet.links.items() if k[1] == "m3"} == calls
    for node_id, roster in fleet.rosters.items():
        if node_id != "m3":
            assert roster.is_revoked("m3") and roster.record("m3") is not None
    # m3 itself still dials others; each call is refused, as mTLS refuses a revoked certificate.
    results = await fleet.syncers["m3"].sync_round(force=True)
    assert results and not any(r.ok for r in results)
    assert all("revoked" in r.error or "PermissionError" in r.error for r in results)


async def test_rounds_pick_fanout_members_at_random_reproducibly(fleet: Fleet) -> None:
    """With every member known, each round syncs with exactly `fanout` members; the same
    seed picks the same members, and over many rounds every member gets picked."""
    await _until_everyone_known(fleet)
    twin = Fleet(IDS, RING, fanout=3, seed=7, certs_dir=fleet.ca_dir)
    try:
        await _until_everyone_known(twin)
        picked: collections.Counter[str] = collections.Counter()
        for _ in range(12):
            a = [r.node_id for r in await fleet.syncers["m0"].sync_round(force=True)]
            b = [r.node_id for r in await twin.syncers["m0"].sync_round(force=True)]
            assert sorted(a) == sorted(b) and len(a) == 3 and "m0" not in a
            picked.update(a)
        assert set(picked) == set(IDS) - {"m0"}
    finally:
        twin.close()


def test_member_records_round_trip_and_replace_on_every_backend(
    repository: SqlRepository,
) -> None:
    """Stored records read back as written (certificate, signature bytes, a 63-bit
    incarnation, the revoked mark), and a record replaces the one held for its node id."""
    first = MemberRecord("alpha", "10.0.0.1:7421", b"-----BEGIN CERTIFICATE-----\n", 1, b"\x00\xff")
    later = replace(first, address="10.0.0.9:7421", incarnation=2**63 - 1, signature=b"\x01")
    other = MemberRecord("beta", "10.0.0.2:7421", b"pem", 3, b"\x02")
    with repository.write() as tx:
        tx.put_member_records([StoredMember(first, False), StoredMember(other, False)])
    with repository.write() as tx:
        tx.put_member_records([StoredMember(later, True)])
    with repository.read() as tx:
        assert tx.member_records() == [StoredMember(later, True), StoredMember(other, False)]


def test_a_nodes_refused_member_records_are_counted_in_its_metrics(tmp_path: Path) -> None:
    """A node built from settings counts each refused member record in
    factnode_peer_items_refused_total{kind="member_record"}; a good one is not counted."""
    certs = tmp_path / "certs"
    for n in ("n1", "n2"):
        issue_node_cert(certs, n)
    settings = Settings(
        data_dir=tmp_path / "data",
        federation_listen="127.0.0.1:0",
        federation_cert=certs / "n1.crt",
        federation_key=certs / "n1.key",
        federation_ca=certs / "ca.crt",
    )
    node = Node(settings)
    try:
        assert node.roster is not None
        signer = Signer(
            node.roster.authority, (certs / "n2.crt").read_bytes(), (certs / "n2.key").read_bytes()
        )
        good = MemberRecord("n2", "127.0.0.1:7999", signer.identity.pem, 1)
        good = replace(good, signature=signer.sign(good.payload()))
        bad = replace(good, address="127.0.0.1:6666")
        assert len(node.roster.take([good, bad, replace(bad, incarnation=5)], "n2")) == 2
        counted = node.metrics.registry.get_sample_value(
            "factnode_peer_items_refused_total", {"kind": "member_record"}
        )
        assert counted == 2
    finally:
        node.repo.close()
        if node.store_lock is not None:
            node.store_lock.release()
