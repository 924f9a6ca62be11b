"""Erasure receipts, pure (`core.receipts`): which receipts a node keeps, in any order, and an
erasure's coverage: confirmed, waited for, revoked."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from factnode.core.receipts import MAX_REMOVED, Receipt, coverage, newer_receipts, receipt_problem
from factnode.core.signed import receipt_payload

ERASURE = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def test_a_well_formed_receipt_has_no_problem_and_each_bad_field_is_named() -> None:
    assert receipt_problem(Receipt(ERASURE, "n1", 5, 0)) == ""
    assert "erasure ids" in receipt_problem(Receipt("not-an-id", "n1", 5, 0))
    assert "node" in receipt_problem(Receipt(ERASURE, "", 5, 0))
    assert "applied_at" in receipt_problem(Receipt(ERASURE, "n1", -(2**62), 0))
    assert "removed" in receipt_problem(Receipt(ERASURE, "n1", 5, -1))
    assert "removed" in receipt_problem(Receipt(ERASURE, "n1", 5, MAX_REMOVED + 1))


def test_the_signed_bytes_cover_every_field_but_the_signature() -> None:
    base = Receipt(ERASURE, "n1", 5, 2)
    altered = [
        Receipt(OTHER, "n1", 5, 2),
        Receipt(ERASURE, "n2", 5, 2),
        Receipt(ERASURE, "n1", 6, 2),
        Receipt(ERASURE, "n1", 5, 3),
    ]
    assert all(receipt_payload(a) != receipt_payload(base) for a in altered)
    assert receipt_payload(Receipt(ERASURE, "n1", 5, 2, b"sig")) == receipt_payload(base)


def test_the_latest_receipt_of_a_member_is_kept_and_an_older_one_changes_nothing() -> None:
    old, new = Receipt(ERASURE, "n1", 5, 2), Receipt(ERASURE, "n1", 9, 0)
    assert newer_receipts({}, [old, new]) == [new]
    assert newer_receipts({new.item_id: new}, [old]) == []
    assert newer_receipts({old.item_id: old}, [new]) == [new]
    assert newer_receipts({new.item_id: new}, [new]) == []  # a repeat: nothing to store


receipts = st.builds(
    Receipt,
    st.sampled_from([ERASURE, OTHER]),
    st.sampled_from(["n1", "n2", "n3"]),
    st.integers(0, 20),
    st.integers(0, 3),
)


@given(st.lists(receipts, max_size=12), st.randoms(use_true_random=False))
def test_what_is_kept_does_not_depend_on_the_order_of_arrival(
    items: list[Receipt], rnd: object
) -> None:
    """Applying receipts one by one, in any order, keeps the same receipt per (erasure,
    member) as applying them all at once."""

    def kept(order: list[Receipt]) -> dict[str, Receipt]:
        held: dict[str, Receipt] = {}
        for r in order:
            for n in newer_receipts(held, [r]):
                held[n.item_id] = n
        return held

    shuffled = list(items)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    at_once = {r.item_id: r for r in newer_receipts({}, items)}
    assert kept(items) == kept(shuffled) == at_once


def test_coverage_waits_for_current_members_and_never_for_revoked_ones() -> None:
    members = {"n1": False, "n2": False, "n3": False, "n4": True, "n5": True}
    held = [Receipt(ERASURE, "n1", 5, 1), Receipt(ERASURE, "n5", 6, 0), Receipt(OTHER, "n2", 7, 0)]
    c = coverage(ERASURE, members, held)
    assert [r.node for r in c.confirmed] == ["n1", "n5"]
    assert c.waiting == ("n2", "n3")
    assert c.revoked == ("n4", "n5")
    assert not c.complete
    # n5's receipt is kept and shown, but a revoked member does not count among the current.
    assert c.summary() == "confirmed by 1 of 3 members; waiting: n2, n3; revoked: n4, n5"
    done = coverage(
        ERASURE, members, [*held, Receipt(ERASURE, "n2", 8, 0), Receipt(ERASURE, "n3", 9, 4)]
    )
    assert done.complete and done.summary() == "confirmed by 3 of 3 members; revoked: n4, n5"
