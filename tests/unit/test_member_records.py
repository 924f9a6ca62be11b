"""Member records' pure rules: the bytes signed, which of two records is kept, and the
shape checks made before any signature is verified."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from factnode.core.members import (
    MAX_INCARNATION,
    MemberRecord,
    can_answer,
    member_item_id,
    record_problem,
    supersedes,
)

RECORD = MemberRecord("alpha", "10.0.0.1:7421", b"-----BEGIN CERTIFICATE-----", 3, b"sig")


def test_the_signed_bytes_cover_every_field_but_the_signature() -> None:
    """Changing any field but the signature changes the payload; the signature does not."""
    changed = [
        replace(RECORD, node_id="beta"),
        replace(RECORD, address="10.0.0.2:7421"),
        replace(RECORD, certificate=b"other"),
        replace(RECORD, incarnation=4),
    ]
    assert all(c.payload() != RECORD.payload() for c in changed)
    assert replace(RECORD, signature=b"other").payload() == RECORD.payload()
    assert replace(RECORD, signature=b"other").content_hash == RECORD.content_hash


def test_fields_are_framed_so_no_two_splits_sign_alike() -> None:
    """Moving bytes between node id and address gives other signed bytes (length framing)."""
    a = MemberRecord("ab", "c:1", b"x", 1)
    b = MemberRecord("a", "bc:1", b"x", 1)
    assert a.payload() != b.payload()


@pytest.mark.parametrize(
    ("offered", "held", "kept"),
    [
        (replace(RECORD, incarnation=4), RECORD, True),
        (replace(RECORD, incarnation=2), RECORD, False),
        (RECORD, None, True),
        (replace(RECORD, signature=b"resigned"), RECORD, False),  # the same content
    ],
)
def test_a_higher_incarnation_replaces_a_lower(
    offered: MemberRecord, held: MemberRecord | None, kept: bool
) -> None:
    """A record replaces the held one only with a higher incarnation (or none held)."""
    assert supersedes(offered, held) is kept


@pytest.mark.parametrize(
    ("incarnation", "certificates", "kept"),
    [
        (1, 1, True),  # a reissued certificate's record beats any number under the old one
        (MAX_INCARNATION, -1, False),  # the old key's record never beats the new one's
        (4, 0, True),  # the same certificate: the incarnations decide
    ],
)
def test_a_later_certificate_replaces_whatever_the_incarnations(
    incarnation: int, certificates: int, kept: bool
) -> None:
    """Records are ordered by certificate first (as the shell compares them), then
    incarnation, so reissuing a certificate overcomes a record at the highest incarnation."""
    held = replace(RECORD, incarnation=MAX_INCARNATION if certificates > 0 else 3)
    offered = replace(RECORD, incarnation=incarnation, certificate=b"other")
    assert supersedes(offered, held, certificates) is kept


def test_a_member_can_sign_above_every_record_but_the_highest() -> None:
    """One below the bound leaves room to sign above; at the bound there is none, and the
    bound sits far inside the wire's uint64 and the store's signed 64-bit column."""
    assert can_answer(replace(RECORD, incarnation=MAX_INCARNATION - 1))
    assert not can_answer(replace(RECORD, incarnation=MAX_INCARNATION))
    assert MAX_INCARNATION + 1 < 2**63 - 1


def test_two_records_numbered_alike_resolve_the_same_way_in_any_order() -> None:
    """Of records with one incarnation and different content, every order keeps the one
    with the lowest content hash, so all nodes converge on the same record."""
    records = [replace(RECORD, address=f"10.0.0.{i}:7421") for i in range(1, 5)]
    expected = min(records, key=lambda r: r.content_hash)
    for order in itertools.permutations(records):
        held: MemberRecord | None = None
        for r in order:
            if supersedes(r, held):
                held = r
        assert held == expected


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (replace(RECORD, node_id=""), "node_id is empty"),
        (replace(RECORD, node_id="a" * 257), "node_id is over 256 bytes"),
        (replace(RECORD, node_id="a\x00b"), "node_id must not contain NUL"),
        (replace(RECORD, address="no-port"), "is not host:port"),
        (replace(RECORD, address="host:99999"), "is not host:port"),
        (replace(RECORD, incarnation=0), "incarnation must be in"),
        (replace(RECORD, incarnation=MAX_INCARNATION + 1), "incarnation must be in"),
        (replace(RECORD, incarnation=2**63 - 1), "incarnation must be in"),
        (replace(RECORD, certificate=b""), "certificate must be"),
        (replace(RECORD, certificate=b"x" * 20_000), "certificate must be"),
        (replace(RECORD, signature=b""), "signature must be"),
    ],
)
def test_a_malformed_record_is_named_before_any_signature_is_checked(
    record: MemberRecord, problem: str
) -> None:
    """Each malformed field is named; a well-formed record has no problem."""
    assert problem in record_problem(record)
    assert record_problem(RECORD) == ""


def test_a_members_digest_item_is_its_node_id_hashed() -> None:
    """One member is one digest item (32 hex digits), whatever its record says."""
    assert member_item_id("alpha") == member_item_id("alpha")
    assert member_item_id("alpha") != member_item_id("beta")
    assert len(member_item_id("alpha")) == 32 and int(member_item_id("alpha"), 16) >= 0
