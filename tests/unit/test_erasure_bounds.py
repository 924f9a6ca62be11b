"""Erasures dated beyond a node's clock (specification §6): when a node bounds one, what the
erasure covers of each origin's evidence given the bounds held, and that nodes holding the
same bounds, in any order, judge alike."""

from __future__ import annotations

import dataclasses
from functools import reduce

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factnode.core.erasure_bounds import (
    ErasureBound,
    bound_on_arrival,
    bound_problem,
    covers_recorded,
    effective_erased_at,
    lowered_bounds,
    lowest_bounds,
)
from factnode.core.signed import bound_payload

SKEW = 300_000_000  # the default allowance: 5 minutes
T = 1_000_000_000_000


@pytest.mark.parametrize(
    ("erased_at", "now", "bound"),
    [
        (T, T, None),  # made now
        (T + SKEW, T, None),  # at the edge of the allowance: takes effect at its own time
        (T + SKEW + 1, T, T),  # beyond it: bounded by this node's clock
        (T + 600_000_000, T, T),
        (T - 600_000_000, T, None),  # made in the past: never bounded
    ],
)
def test_a_node_bounds_only_an_erasure_dated_beyond_its_clock_and_the_allowance(
    erased_at: int, now: int, bound: int | None
) -> None:
    """The bound is the receiver's clock, and only for an erasure dated beyond it plus the
    allowance."""
    assert bound_on_arrival(erased_at, now, SKEW) == bound


@pytest.mark.parametrize(
    ("origin", "recorded_at", "covered"),
    [
        ("n1", T, True),  # n1 recorded it when it applied the erasure
        ("n1", T + 1, False),  # after: a later write of n1's
        ("n2", T + 1, True),  # n2's bound is later
        ("n2", T + 5, True),
        ("n2", T + 6, False),
        ("n3", T + 599, True),  # no bound from n3: its erased_at decides
        ("n3", T + 600, True),
        ("n3", T + 601, False),
        ("", T + 1, True),  # evidence of an unknown origin (older peers): erased_at
    ],
)
def test_coverage_of_each_origins_evidence_follows_that_origins_bound(
    origin: str, recorded_at: int, covered: bool
) -> None:
    """Evidence in scope is covered when its origin recorded it at or before the bound that
    origin signed (its own clock against its own clock), or at or before erased_at without one."""
    bounds = {"n1": T, "n2": T + 5}
    assert covers_recorded(T + 600, bounds, origin, recorded_at) is covered


def test_a_bound_later_than_the_erasure_changes_nothing() -> None:
    """A bound never pushes an erasure's effect past its own time."""
    assert effective_erased_at(T, {"n1": T + 10}, "n1") == T


def test_a_bound_covers_only_its_signers_evidence() -> None:
    """One member's bound, however early, leaves every other member's evidence to the
    erasure's own time: a member's bound gives it no power over anyone else's evidence."""
    bounds = {"mallory": 0}
    assert effective_erased_at(T, bounds, "mallory") == 0
    assert effective_erased_at(T, bounds, "n1") == T


_nodes = st.sampled_from(["n1", "n2", "n3", "n4"])
_bounds = st.lists(st.tuples(_nodes, st.integers(0, 1_000)), max_size=12)


@given(_bounds, st.randoms())
def test_bounds_merge_alike_in_any_order_and_repeated(
    bounds: list[tuple[str, int]], rnd: object
) -> None:
    """Merging the same bounds in any order, any number of times, keeps each node's lowest:
    coverage is a function of the set of bounds held, not of the order they arrived."""
    shuffled = list(bounds) + list(bounds)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    one = reduce(lambda held, b: lowest_bounds(held, {b[0]: b[1]}), bounds, {})
    other = reduce(lambda held, b: lowest_bounds(held, {b[0]: b[1]}), shuffled, {})
    assert one == other
    assert one == {n: min(t for m, t in bounds if m == n) for n, _ in bounds}


@given(_bounds, _nodes, st.integers(0, 1_000), st.integers(0, 1_000))
def test_more_bounds_only_ever_uncover(
    bounds: list[tuple[str, int]], origin: str, recorded_at: int, erased_at: int
) -> None:
    """Each bound a node learns can only uncover evidence (a later write), never cover what
    was not: nothing a node accepted under fewer bounds is ever erased by more of them."""
    held: dict[str, int] = {}
    covered = covers_recorded(erased_at, held, origin, recorded_at)
    for node, at in bounds:
        held = lowest_bounds(held, {node: at})
        now = covers_recorded(erased_at, held, origin, recorded_at)
        assert covered or not now
        covered = now


@pytest.mark.parametrize("change", [{"erasure_id": "f" * 32}, {"node": "n2"}, {"bound_at": T + 1}])
def test_the_signed_bytes_cover_every_field_of_a_bound(change: dict[str, object]) -> None:
    """A relay can neither move a bound to another erasure, credit it to another node, nor
    change its time."""
    b = ErasureBound("e" * 32, "n1", T)
    assert bound_payload(dataclasses.replace(b, **change)) != bound_payload(b)  # type: ignore[arg-type]
    assert bound_payload(dataclasses.replace(b, signature=b"x")) == bound_payload(b)


@pytest.mark.parametrize(
    ("bound", "problem"),
    [
        (ErasureBound("e" * 32, "n1", T), ""),
        (ErasureBound("E" * 32, "n1", T), "erasure ids must be 32 lowercase hex digits"),
        (ErasureBound("e" * 32, "", T), "node"),
        (ErasureBound("e" * 32, "n1", 10**20), "bound_at"),
    ],
)
def test_a_malformed_bound_is_refused(bound: ErasureBound, problem: str) -> None:
    """A bound must name a well-formed erasure id, a node, and a time in range."""
    found = bound_problem(bound)
    assert (found == "") if not problem else problem in found


def test_only_bounds_new_or_lower_than_those_held_are_written_one_per_erasure_and_node() -> None:
    """What a write stores of offered bounds (the store writes exactly these): a node's first
    bound of an erasure, or one lower than it holds; of several offered for one erasure and
    node, the lowest; a bound no lower than the one held, nothing."""
    e, f = "e" * 32, "f" * 32
    held = {e: {"n1": 50, "n2": 10}}
    offered = [
        ErasureBound(e, "n1", 60),  # higher than held: nothing
        ErasureBound(e, "n1", 40),  # lower: kept
        ErasureBound(e, "n1", 45),  # lower than held, not than the 40 offered first
        ErasureBound(e, "n2", 10),  # the same as held: nothing
        ErasureBound(e, "n3", 30),
        ErasureBound(e, "n3", 20, b"\x01"),  # lower than the 30 offered: replaces it
        ErasureBound(f, "n1", 70),  # an erasure with no bounds held
    ]
    assert lowered_bounds(held, offered) == [
        ErasureBound(e, "n1", 40),
        ErasureBound(e, "n3", 20, b"\x01"),
        ErasureBound(f, "n1", 70),
    ]
    assert lowered_bounds(held, []) == []
