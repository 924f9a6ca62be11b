"""factnode.langgraph's pure mapping: LangGraph names to factnode keys and back, values to
canonical JSON, provenance, and search filters and namespace listings as InMemoryStore
answers them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import MatchCondition
from langgraph.store.memory import _compare_values, _does_match

from factnode.langgraph import _mapping as m

labels = st.text(st.characters(blacklist_characters=".\x00", blacklist_categories=("Cs",)),
                 min_size=1, max_size=8)  # fmt: skip
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text("abé\"\\", max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("xy", max_size=2), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@given(st.lists(labels, min_size=1, max_size=5))
def test_namespace_encoding_is_reversible(namespace: list[str]) -> None:
    """Any LangGraph namespace tuple comes back unchanged from its subject."""
    assert m.namespace_of(m.subject_of(namespace)) == tuple(namespace)


@given(st.dictionaries(st.text("abc", max_size=3), json_values, max_size=4))
def test_object_is_canonical_json_of_the_value(value: dict[str, Any]) -> None:
    """The object decodes to the value, and equal values give the same text in any key order."""
    text = m.object_of(value)
    assert m.value_of(text) == value
    assert m.object_of(dict(reversed(list(value.items())))) == text
    assert text == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_value_of_only_takes_json_objects() -> None:
    """A fact whose value is not a JSON object is not a store item."""
    assert [m.value_of(t) for t in ("Porto", "[1]", "3", '{"a":1}')] == [None, None, None, {"a": 1}]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: m.subject_of(()), "namespace"),
        (lambda: m.subject_of(("a.b",)), "namespace"),
        (lambda: m.subject_of(("x" * 257,)), "namespace"),
        (lambda: m.predicate_of("", frozenset()), "key"),
        (lambda: m.predicate_of("\ud800", frozenset()), "key"),
        (lambda: m.predicate_of("knows", frozenset({"knows"})), "key"),
        (lambda: m.object_of({"a": "é" * 2048}), "value"),
        (lambda: m.object_of({"a": float("inf")}), "value.a"),
        (lambda: m.object_of(["not", "a", "dict"]), "value"),  # type: ignore[arg-type]
        (lambda: m.split_provenance({"_factnode": "user_stated"}, m.Provenance()), "value._factnode"),
        (lambda: m.split_provenance({"_factnode": {"source": 3}}, m.Provenance()), "value._factnode.source"),
        (lambda: m.split_provenance({"_factnode": {"confidence": True}}, m.Provenance()), "value._factnode.confidence"),
        (lambda: m.matches_filter({"n": 1}, {"n": {"$gt": "many"}}), "filter.$gt"),
        (lambda: m.matches_filter({"n": 1}, {"n": {"$in": [1]}}), "filter.$in"),
        (lambda: m.listed_namespaces([("a",)], [("middle", ("a",))], None, 10, 0), "match_conditions"),
    ],
)  # fmt: skip
def test_refusals_name_the_field(call: Any, field: str) -> None:
    """Each unmappable input raises ItemError naming the part that is wrong."""
    with pytest.raises(m.ItemError) as err:
        call()
    assert err.value.field == field


def test_provenance_comes_from_the_reserved_key_over_the_defaults() -> None:
    """The reserved key overrides the defaults field by field and leaves the value."""
    defaults = m.Provenance("agent_inferred", "bot", 0.5, None, None)
    value, p = m.split_provenance(
        {"city": "Porto", "_factnode": {"source": "user:ana", "confidence": 1, "valid_from": "2025-03-01"}},
        defaults,
    )  # fmt: skip
    assert value == {"city": "Porto"}
    assert p == m.Provenance(
        "agent_inferred", "user:ana", 0.5, 1.0, datetime(2025, 3, 1, tzinfo=UTC)
    )
    assert m.split_provenance({"city": "Porto"}, defaults) == ({"city": "Porto"}, defaults)


filter_values = (
    st.integers(0, 3) | st.text("xy", max_size=1) | st.lists(st.integers(0, 2), max_size=2)
)
item_values = st.dictionaries(st.sampled_from(["n", "s", "d"]), filter_values | st.dictionaries(st.just("n"), st.integers(0, 3)), max_size=3)  # fmt: skip
filters = st.dictionaries(
    st.sampled_from(["n", "s", "d"]),
    filter_values
    | st.dictionaries(st.sampled_from(["$eq", "$ne"]), filter_values, min_size=1)
    | st.dictionaries(st.just("n"), st.integers(0, 3), min_size=1),
    max_size=2,
)


@given(item_values, filters)
def test_filters_match_as_in_memory_store(value: dict[str, Any], filter: dict[str, Any]) -> None:
    """Equality, $eq, $ne, lists and nested dicts match exactly as InMemoryStore's filter."""
    expected = all(_compare_values(value.get(k), v) for k, v in filter.items())
    assert m.matches_filter(value, filter) == expected


@given(st.dictionaries(st.just("n"), st.integers(0, 5)), st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), st.integers(0, 5))  # fmt: skip
def test_ranges_match_as_in_memory_store(value: dict[str, Any], op: str, bound: int) -> None:
    """Range operators agree with InMemoryStore; a missing field is out of range (where
    InMemoryStore raises TypeError)."""
    if "n" not in value:
        assert not m.matches_filter(value, {"n": {op: bound}})
        return
    assert m.matches_filter(value, {"n": {op: bound}}) == _compare_values(value["n"], {op: bound})


namespaces = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3).map(tuple)
paths = st.lists(st.sampled_from(["a", "b", "*"]), min_size=1, max_size=2).map(tuple)


@given(namespaces, paths, st.booleans())
def test_paths_match_as_in_memory_store(
    ns: tuple[str, ...], path: tuple[str, ...], suffix: bool
) -> None:
    """Prefix and suffix paths, with "*" for any one label, match as InMemoryStore's."""
    condition = MatchCondition("suffix" if suffix else "prefix", path)
    assert m.matches_path(ns, path, suffix) == _does_match(condition, ns)


def test_listed_namespaces_cut_sort_and_page() -> None:
    """max_depth cuts and dedupes, the answer is sorted, then offset and limit apply."""
    held = [("b", "x"), ("a", "x", "y"), ("a", "z"), ("a",)]
    assert m.listed_namespaces(held, [], 1, 10, 0) == [("a",), ("b",)]
    assert m.listed_namespaces(held, [("prefix", ("a",))], None, 2, 1) == [
        ("a", "x", "y"),
        ("a", "z"),
    ]
    assert m.listed_namespaces(held, [("suffix", ("x",))], None, 10, 0) == [("b", "x")]


def test_stamps_are_first_evidence_and_latest_believed_evidence() -> None:
    """created_at is the key's first recording; updated_at the believed value's latest."""
    t = [datetime(2025, 1, d, tzinfo=UTC) for d in (1, 2, 3, 4)]
    stamped = m.stamps([("v1", t[0]), ("v2", t[1]), ("v1", t[2]), ("v2", t[3])], "v1", t[3])
    assert (stamped.created_at, stamped.updated_at) == (t[0], t[2])


def test_the_anchor_may_be_given_by_its_former_name_attribution() -> None:
    """`anchor` names the trust anchor; `attribution`, its former name, is an alias; both
    given and different is refused naming `anchor`."""
    defaults = m.Provenance()
    for raw in ({"anchor": "user_stated"}, {"attribution": "user_stated"},
                {"anchor": "user_stated", "attribution": "user_stated"}):  # fmt: skip
        _, p = m.split_provenance({"v": 1, "_factnode": raw}, defaults)
        assert p.anchor == "user_stated", raw
    with pytest.raises(m.ItemError) as err:
        m.split_provenance({"_factnode": {"anchor": "user_stated", "attribution": "x"}}, defaults)
    assert err.value.field == "value._factnode.anchor"
