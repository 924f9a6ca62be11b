"""Times and values at the edges (issue 41, finding 7): a time whose UTC instant falls outside
0001-01-01..9999-12-31 and a LangGraph value JSON would not give back as it was put are
refused with the invalid-input error naming the field, on every face that reads them
before the node does (client library, MCP, LangGraph store, console), never OverflowError
or RecursionError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from factnode.api.v1 import factnode_pb2 as pb
from factnode.client import InvalidFact
from factnode.client import _calls as calls
from factnode.console._forms import DecisionFilter
from factnode.core.validation import time_problem
from factnode.langgraph import _mapping as m
from factnode.mcp_server import parse_time

# Valid datetimes whose UTC instant is in year 0 or year 10000.
EARLY = "0001-01-01T00:00:00+14:00"
LATE = "9999-12-31T23:00:00-05:00"
OUT_OF_RANGE = "is outside 0001-01-01..9999-12-31 in UTC"


@pytest.mark.parametrize(
    ("at", "problem"),
    [
        (datetime.fromisoformat(EARLY), OUT_OF_RANGE),
        (datetime.fromisoformat(LATE), OUT_OF_RANGE),
        (datetime(1, 1, 1, tzinfo=UTC), ""),
        (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), ""),
        (datetime(1, 1, 1, 14, tzinfo=timezone(timedelta(hours=14))), ""),
        (datetime(2025, 3, 1), ""),  # no offset: UTC
    ],
)
def test_time_problem_is_the_timestamp_range_in_utc(at: datetime, problem: str) -> None:
    """A time is sendable exactly when its UTC instant lies in the Timestamp range."""
    assert time_problem(at) == problem


@pytest.mark.parametrize("text", [EARLY, LATE])
@pytest.mark.parametrize("field", ["valid_from", "as_of", "known_at"])
def test_the_client_refuses_an_unsendable_time_naming_the_field(text: str, field: str) -> None:
    """The client library answers InvalidFact naming the field, not protobuf's OverflowError."""
    at = datetime.fromisoformat(text)
    with pytest.raises(InvalidFact) as refused:
        if field == "valid_from":
            calls.submit_request(("n", "s", "p"), "o", "user_stated", "src", valid_from=at)
        else:
            times = {"as_of": None, "known_at": None, field: at}
            calls.time_travel(pb.GetBeliefRequest(), times["as_of"], times["known_at"])
    assert [(e.field, e.reason) for e in refused.value.field_errors] == [(field, OUT_OF_RANGE)]


@pytest.mark.parametrize("text", [EARLY, LATE])
@pytest.mark.parametrize("field", ["valid_from", "as_of"])
def test_mcp_refuses_an_unsendable_time_as_invalid_input(text: str, field: str) -> None:
    """MCP's tools answer 'invalid input: <field>: ... is outside ...' for such a time."""
    with pytest.raises(ToolError) as refused:
        parse_time(text, field)
    assert str(refused.value) == f"invalid input: {field}: {text!r} {OUT_OF_RANGE}"


@pytest.mark.parametrize("text", [EARLY, LATE])
def test_the_console_refuses_an_unsendable_filter_time(text: str) -> None:
    """The console's decision filter names `since` for a time outside the range."""
    with pytest.raises(InvalidFact) as refused:
        DecisionFilter.of({"since": text})
    assert [e.field for e in refused.value.field_errors] == ["since"]
    assert OUT_OF_RANGE in refused.value.field_errors[0].reason


@pytest.mark.parametrize("raw", [EARLY, LATE, datetime.fromisoformat(EARLY)])
def test_a_langgraph_valid_from_outside_the_range_is_refused(raw: Any) -> None:
    """A put's valid_from outside the range is an ItemError naming the provenance field."""
    value = {"city": "Porto", m.PROVENANCE_KEY: {"valid_from": raw}}
    with pytest.raises(m.ItemError) as refused:
        m.split_provenance(value, m.Provenance())
    assert refused.value.field == "value._factnode.valid_from"
    assert refused.value.reason == OUT_OF_RANGE


def _nested(depth: int) -> dict[str, Any]:
    """A value `depth` dicts deep, built without recursion."""
    value: dict[str, Any] = {}
    inner = value
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    return value


def test_a_value_nested_100000_deep_is_an_item_error_not_recursion() -> None:
    """A value nested 100,000 deep is refused naming where and the documented depth limit."""
    with pytest.raises(m.ItemError) as refused:
        m.object_of(_nested(100_000))
    assert refused.value.field.startswith("value.a.a")
    assert (
        refused.value.reason == f"nests deeper than {m.MAX_VALUE_DEPTH} levels of dicts and lists"
    )


def test_the_depth_limit_is_exact() -> None:
    """A value exactly MAX_VALUE_DEPTH deep is kept and reads back; one level more is refused."""
    deepest = _nested(m.MAX_VALUE_DEPTH)
    assert m.value_of(m.object_of(deepest)) == deepest
    with pytest.raises(m.ItemError):
        m.object_of(_nested(m.MAX_VALUE_DEPTH + 1))
    with pytest.raises(m.ItemError):
        m.object_of({"a": [[[_nested(m.MAX_VALUE_DEPTH - 3)]]]})


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [
        ({1: "a"}, "value", "has the key '1' (int)"),
        ({"a": {"b": [0, {True: 1}]}}, "value.a.b[1]", "has the key 'True' (bool)"),
        ({"a": {None: 1}}, "value.a", "has the key 'None' (NoneType)"),
        ({"a": {(1, 2): 1}}, "value.a", "has the key '(1, 2)' (tuple)"),
        ({"x": float("nan")}, "value.x", "nan is not a JSON number"),
        ({"x": [float("inf")]}, "value.x[0]", "inf is not a JSON number"),
        ({"x y": {"s": {1, 2}}}, "value['x y'].s", "set is not JSON"),
        ({"t": datetime(2025, 1, 1)}, "value.t", "datetime is not JSON"),
        ({"s": "\ud800"}, "value.s", "must not contain a lone surrogate"),
        ({"\udfff": 1}, "value['\\udfff']", "key must not contain a lone surrogate"),
    ],
)
def test_a_value_that_would_not_read_back_is_refused_naming_where(
    value: dict[Any, Any], field: str, reason: str
) -> None:
    """Non-string keys, NaN, non-JSON types and lone surrogates are refused with the path."""
    with pytest.raises(m.ItemError) as refused:
        m.object_of(value)
    assert refused.value.field == field
    assert refused.value.reason.startswith(reason), refused.value.reason


def test_a_tuple_reads_back_as_a_list_and_a_nul_as_itself() -> None:
    """The documented round trip: tuples become lists; any string, NUL included, comes back."""
    assert m.value_of(m.object_of({"t": (1, "a"), "s": "a\x00b"})) == {"t": [1, "a"], "s": "a\x00b"}
