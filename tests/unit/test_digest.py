"""Set digests: the ids under a prefix, read from leaf buckets, are exactly those a scan finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from factnode.federation._digest import SetDigest, item_hash

HEX = "0123456789abcdef"
ids = st.text(HEX, min_size=32, max_size=32)
# Two digits for the first six places, so prefixes hit, share leaves and reach below them.
clustered = st.builds(
    lambda head, tail: head + tail[6:], st.text("0a", min_size=6, max_size=6), ids
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), clustered), max_size=60),
    st.lists(st.text("0a", max_size=6), max_size=5),
)
def test_ids_under_equals_a_scan_of_every_item(
    ops: list[tuple[bool, str]], prefixes: list[str]
) -> None:
    digest, held = SetDigest(), set()
    for add, item in ops:
        if add:
            digest.put(item, item_hash(item))
            held.add(item)
        else:
            digest.discard(item)
            held.discard(item)
    expected = sorted(i for i in held if any(i.startswith(p) for p in prefixes))
    assert digest.ids_under(prefixes) == expected
    assert len(digest) == len(held)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), clustered), max_size=60),
    st.text("0a", max_size=3),
    st.integers(min_value=0, max_value=4),
)
def test_children_are_exactly_the_non_empty_buckets_below(
    ops: list[tuple[bool, str]], prefix: str, depth: int
) -> None:
    """`children` lists, in order, every non-empty bucket `depth` digits below a prefix with
    its digest and count, as a scan of the items finds them, after any adds and removes."""
    digest, held = SetDigest(), set()
    for add, item in ops:
        if add:
            digest.put(item, item_hash(item))
            held.add(item)
        else:
            digest.discard(item)
            held.discard(item)
    target = min(len(prefix) + depth, 4)
    expected: dict[str, tuple[int, int]] = {}
    for item in held:
        if item.startswith(prefix):
            x, n = expected.get(item[:target], (0, 0))
            expected[item[:target]] = (x ^ item_hash(item), n + 1)
    if target == len(prefix) and not expected:
        expected[prefix] = (0, 0)  # the bucket itself, empty
    got = [
        (p, int.from_bytes(d, "big") if d else 0, n) for p, d, n in digest.children(prefix, depth)
    ]
    assert got == sorted((p, x, n) for p, (x, n) in expected.items())
