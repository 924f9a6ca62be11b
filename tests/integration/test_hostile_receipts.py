"""Erasure receipts a hostile relay crafts (specification §6, "Erasure receipts"; §7): each
member's real certificate signs, the real ledgers check, in-process links carry real
serialization. A badly signed receipt, one altered after signing (its `removed` or its
`applied_at`), one signed by another member than the one it names, and one for an erasure
the receiver does not hold are refused item by item, with the reason, and counted in the
refusal counts; an older receipt of a member arriving after a newer one changes nothing.
In every case the receiver's coverage of the erasure stays as it was."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key, Submission
from factnode.core.receipts import Receipt
from factnode.core.signed import receipt_payload
from factnode.federation._index import index_of
from factnode.ledger import ErasureStatus
from factnode.metrics import Metrics
from factnode.testing import Federation

KEY = Key("user:ana", "ana", "lives_in")
BAD_SIGNATURE = "its signature does not verify against its signer's certificate"
NOT_A_MEMBER = (
    "its signer is not a member (certificate revoked, expired or not signed by the federation CA)"
)


def _erasure(fed: Federation, node: str, erasure_id: str) -> ErasureStatus:
    """The erasure as `node`'s AdminService answers it: coverage among its roster's members."""
    roster = fed.rosters[node]
    members = roster.membership() if roster is not None else {}
    return fed.ledgers[node].reading.erasure(erasure_id, members)


@pytest.fixture
def fed() -> Iterator[Federation]:
    """Members a, b and c, each with a real certificate; `h` stands for a hostile relay: its
    deltas reach c as a member's would (the relay's identity is the link's, not the items')."""
    federation = Federation(["a", "b", "c", "h"])
    try:
        yield federation
    finally:
        federation.close()


async def _erased_everywhere(fed: Federation) -> str:
    """a's operator erases KEY, which every member holds; after a few rounds every member
    holds every member's receipt. The erasure's id."""
    fed.ledgers["b"].submit(Submission(*KEY, "Lisbon", "agent_observed", "agent:b", 0.5, 0.9))
    for _ in range(2):
        await fed.round()
    erasure_id = fed.ledgers["a"].erase(key=KEY, operator="dpo", reason="asked to").erasure_id
    for _ in range(3):
        await fed.round()
    for n in fed.ledgers:
        status = _erasure(fed, n, erasure_id)
        assert status.coverage.complete, (n, status.coverage)
        assert {r.node for r in status.coverage.confirmed} == set(fed.ledgers), n
    return erasure_id


def _held_receipt(fed: Federation, node: str, erasure_id: str, signer: str) -> Receipt:
    """`signer`'s receipt of the erasure as `node` offers it to a peer (signed)."""
    offered = fed.ledgers[node].peer_input.offer_receipts([erasure_id])
    return next(r for r in offered if r.node == signer)


def _said(r: Receipt) -> Receipt:
    """What a receipt says, without its signature (a member signs its own anew, ECDSA is
    randomized, each time it offers it)."""
    return dataclasses.replace(r, signature=b"")


def _signed(fed: Federation, by: str, r: Receipt) -> Receipt:
    """`r` signed with `by`'s certificate key, whatever member it names."""
    assert fed.credentials is not None
    return dataclasses.replace(r, signature=fed.credentials.signer(by).sign(receipt_payload(r)))


def _push(fed: Federation, to: str, *receipts: Receipt) -> pb.PushDeltaResponse:
    """Receipts pushed to `to` by the hostile relay h, with the certificates of every member
    (a relay vouches for the signers; the receiver checks against them)."""
    assert fed.credentials is not None
    certs = [fed.credentials.signer(n).identity.der for n in ("a", "b", "c")]
    delta = pb.Delta(erasure_receipts=[wire.receipt_pb(r) for r in receipts], certificates=certs)
    return fed.endpoints[to].push_delta("h", delta)


def _view(status: ErasureStatus) -> tuple[object, ...]:
    c = status.coverage
    return (c.confirmed, c.waiting, c.revoked, c.complete)


async def test_crafted_receipts_are_refused_counted_and_change_no_coverage(fed: Federation) -> None:
    """Each crafted receipt, pushed to c alone, is refused with its reason and counted once as
    a refused receipt (and, for a signature, once under its reason); c's coverage of the
    erasure and the receipt it holds for b are unchanged."""
    erasure_id = await _erased_everywhere(fed)
    metrics = Metrics()
    fed.ledgers["c"].on_refused(metrics.peer_refused)
    genuine = _held_receipt(fed, "b", erasure_id, "b")
    before = _erasure(fed, "c", erasure_id)
    held_before = _held_receipt(fed, "c", erasure_id, "b")
    assert _said(held_before) == _said(genuine)  # c holds b's receipt as b signed it

    forged_signature = dataclasses.replace(genuine, signature=genuine.signature[::-1])
    more_removed = dataclasses.replace(genuine, removed=genuine.removed + 5)
    later_applied = dataclasses.replace(genuine, applied_at=genuine.applied_at + 1)
    earlier_applied = dataclasses.replace(genuine, applied_at=genuine.applied_at - 1)
    # a signs a receipt that names b: not b's statement, whoever relays it.
    by_another = _signed(fed, "a", dataclasses.replace(genuine, applied_at=genuine.applied_at + 7))
    not_held = _signed(fed, "b", dataclasses.replace(genuine, erasure_id="f" * 32))
    cases = [
        (forged_signature, BAD_SIGNATURE, "bad_signature"),
        (more_removed, BAD_SIGNATURE, "bad_signature"),
        (later_applied, BAD_SIGNATURE, "bad_signature"),
        (earlier_applied, BAD_SIGNATURE, "bad_signature"),
        (by_another, BAD_SIGNATURE, "bad_signature"),
        (dataclasses.replace(genuine, signature=b""), "", "unsigned"),
        (not_held, "its erasure is not held here", ""),
    ]

    def sample(name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, labels) or 0.0

    for n, (crafted, reason, signature_reason) in enumerate(cases, start=1):
        reply = _push(fed, "c", crafted)
        assert reply.accepted == 0, crafted
        [rejected] = reply.rejected
        assert rejected.reason.startswith("erasure receipt: "), rejected.reason
        if reason:
            assert rejected.reason == f"erasure receipt: {reason}", rejected.reason
        assert rejected.id.startswith(crafted.erasure_id[:8]), rejected
        assert sample("factnode_peer_items_refused_total", kind="receipt") == n
        if signature_reason:
            assert (
                sample(
                    "factnode_peer_signatures_refused_total",
                    kind="receipt",
                    reason=signature_reason,
                )
                >= 1
            )
        assert _view(_erasure(fed, "c", erasure_id)) == _view(before), crafted
        assert _held_receipt(fed, "c", erasure_id, "b") == held_before
    assert (
        sample("factnode_peer_signatures_refused_total", kind="receipt", reason="bad_signature")
        == 5
    )
    # The same crafted receipts in one delta: refused item by item, the genuine one beside
    # them taken as held.
    reply = _push(fed, "c", *(c for c, _, _ in cases), genuine)
    assert len(reply.rejected) == len(cases)
    assert sample("factnode_peer_items_refused_total", kind="receipt") == 2 * len(cases)
    assert _view(_erasure(fed, "c", erasure_id)) == _view(before)


async def test_an_older_receipt_after_a_newer_one_changes_nothing(fed: Federation) -> None:
    """b signs a later receipt of the erasure (as b would after its clock was put back and
    a restore made it erase again); c takes it. b's earlier receipt, genuine and validly
    signed, replayed to c afterwards (alone or in one delta with the newer one, in either
    order) replaces nothing and is not a refusal: c keeps the newer and its coverage stays as
    it was. Gossip then leaves every member, b included, the newer one, with equal receipt
    digests, so idle rounds move nothing."""
    erasure_id = await _erased_everywhere(fed)
    metrics = Metrics()
    fed.ledgers["c"].on_refused(metrics.peer_refused)
    older = _held_receipt(fed, "b", erasure_id, "b")
    newer = _signed(fed, "b", dataclasses.replace(older, applied_at=older.applied_at + 1_000_000))
    taken = _push(fed, "c", newer)
    assert (taken.accepted, list(taken.rejected)) == (1, [])
    assert _held_receipt(fed, "c", erasure_id, "b") == newer
    after_newer = _view(_erasure(fed, "c", erasure_id))
    for delta in ([older], [older, newer], [newer, older]):
        reply = _push(fed, "c", *delta)
        assert reply.accepted == 0 and list(reply.rejected) == [], delta
        assert _held_receipt(fed, "c", erasure_id, "b") == newer
        assert _view(_erasure(fed, "c", erasure_id)) == after_newer
    refused = metrics.registry.get_sample_value(
        "factnode_peer_items_refused_total", {"kind": "receipt"}
    )
    assert refused is None
    for _ in range(3):
        await fed.round()
    for n in fed.ledgers:
        assert _said(_held_receipt(fed, n, erasure_id, "b")) == _said(newer), n
    digests = {index_of(fed.ledgers[n]).receipts.bucket("") for n in fed.ledgers}
    assert len(digests) == 1


async def test_a_revoked_members_receipt_is_refused(fed: Federation) -> None:
    """Once c holds a list revoking b, b's receipts (genuine, and newer than the one c holds)
    are refused as not a member's and counted; the receipt c held stays. (How coverage shows
    a revoked member, not waited for, is shown over real processes with member records in
    federation/test_fed_receipts.py.)"""
    assert fed.credentials is not None
    erasure_id = await _erased_everywhere(fed)
    metrics = Metrics()
    fed.ledgers["c"].on_refused(metrics.peer_refused)
    roster = fed.rosters["c"]
    assert roster is not None
    roster.revoke(fed.credentials.revocation_list(["b"]))
    before = _erasure(fed, "c", erasure_id)
    older = _held_receipt(fed, "b", erasure_id, "b")
    newer = _signed(fed, "b", dataclasses.replace(older, applied_at=older.applied_at + 1))
    reply = _push(fed, "c", newer)
    [rejected] = reply.rejected
    assert rejected.reason == f"erasure receipt: {NOT_A_MEMBER}", rejected.reason
    labels = {"kind": "receipt"}
    assert metrics.registry.get_sample_value("factnode_peer_items_refused_total", labels) == 1
    labels["reason"] = "not_a_member"
    assert metrics.registry.get_sample_value("factnode_peer_signatures_refused_total", labels) == 1
    assert _said(_held_receipt(fed, "c", erasure_id, "b")) == _said(older)
    assert _view(_erasure(fed, "c", erasure_id)) == _view(before)
