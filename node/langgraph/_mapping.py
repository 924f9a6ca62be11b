"""How LangGraph's store items map to factnode keys and back: pure functions, no I/O.

A store lives in one factnode namespace (its `root`). A LangGraph namespace tuple becomes
the subject, its labels joined with "." (LangGraph refuses "." in a label, so the join is
reversible, as in LangGraph's own PostgresStore); the item's key becomes the predicate; the
value becomes the object as canonical JSON. Provenance comes from the store's defaults or
from the value's reserved key `PROVENANCE_KEY`, which is taken out before the value is stored.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from factnode.core import Key
from factnode.core.validation import (
    MAX_KEY_PART_BYTES,
    MAX_OBJECT_BYTES,
    MAX_SOURCE_BYTES,
    FieldViolation,
    check_instant,
    check_key,
    check_text,
    quoted,
    text_problem,
    time_problem,
)

SEPARATOR = "."
# How deep a value may nest, a dict or a list being one level (docs/agents/langgraph.md).
# Python's JSON coders stop near 1,000 levels with RecursionError; a value must read back.
MAX_VALUE_DEPTH = 100
# A dict key an error names after a dot; any other is quoted in brackets.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
# The value's reserved key for per-put provenance: {"anchor": ..., "source": ..., ...}.
PROVENANCE_KEY = "_factnode"


class ItemError(ValueError):
    """An item the store refuses before sending anything: `field` names the bad part, and
    `index`, where the item is an op of a batch, that op's position in it."""

    def __init__(self, field: str, reason: str, index: int | None = None) -> None:
        where = "" if index is None else f"op {index}: "
        super().__init__(f"{where}{field}: {reason}")
        self.field = field
        self.reason = reason
        self.index = index

    def at(self, index: int) -> ItemError:
        """The same refusal, naming the batch op it is about."""
        return ItemError(self.field, self.reason, index)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who says an item's value, and how strongly: what factnode arbitrates with."""

    anchor: str = "agent_inferred"
    source: str = "langgraph"
    worth: float | None = None
    confidence: float | None = None
    valid_from: datetime | None = None


# "attribution" is the former name of "anchor", still accepted (the same field: give one).
_PROVENANCE_FIELDS = ("anchor", "attribution", "source", "worth", "confidence", "valid_from")


def _utf8_len(text: str, field: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ItemError(field, f"is not valid Unicode text ({exc.reason})") from None


def _label_text(namespace: Sequence[str]) -> tuple[str, ...]:
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise ItemError("namespace", f"labels must be non-empty strings, got {label!r}")
        if SEPARATOR in label:
            raise ItemError("namespace", f"label {quoted(label)} contains {SEPARATOR!r}")
        if text_problem(label):
            raise ItemError("namespace", f"label {quoted(label)} {text_problem(label)}")
    return tuple(namespace)


def subject_of(namespace: Sequence[str]) -> str:
    """The factnode subject for a LangGraph namespace tuple."""
    labels = _label_text(namespace)
    if not labels:
        raise ItemError("namespace", "must have at least one label")
    subject = SEPARATOR.join(labels)
    if _utf8_len(subject, "namespace") > MAX_KEY_PART_BYTES:
        raise ItemError(
            "namespace", f"joined with {SEPARATOR!r} is longer than {MAX_KEY_PART_BYTES} bytes"
        )
    return subject


def namespace_of(subject: str) -> tuple[str, ...]:
    """The LangGraph namespace tuple a subject encodes (subject_of's inverse)."""
    return tuple(subject.split(SEPARATOR))


def predicate_of(key: str, multi_valued: frozenset[str]) -> str:
    """The factnode predicate for a LangGraph key; a multi-valued predicate is refused, since
    the node would keep every value of it instead of one belief."""
    if not isinstance(key, str) or not key.strip():
        raise ItemError("key", "is required (a non-blank string)")
    if text_problem(key):
        raise ItemError("key", text_problem(key))
    if _utf8_len(key, "key") > MAX_KEY_PART_BYTES:
        raise ItemError("key", f"is longer than {MAX_KEY_PART_BYTES} bytes")
    if key in multi_valued:
        raise ItemError(
            "key", f"{key!r} is a multi-valued predicate on the node; choose another key"
        )
    return key


def check_value(value: Any, field: str = "value", depth: int = 1) -> None:
    """Refuses, naming where, what would not read back as it was put: a value nested deeper
    than MAX_VALUE_DEPTH, a dict key that is not a string (JSON would turn 1 into "1"), a
    number JSON has no spelling for (NaN, infinities), text that is not Unicode (a lone
    surrogate), and any other type than dict, list, tuple, str, int, float, bool and None.
    A tuple reads back as a list, as in LangGraph's PostgresStore."""
    if isinstance(value, str):
        if _text_problem(value):
            raise ItemError(field, _text_problem(value))
        return
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ItemError(field, f"{value} is not a JSON number (NaN and infinities are refused)")
        return
    if not isinstance(value, Mapping | list | tuple):
        raise ItemError(
            field,
            f"{type(value).__name__} is not JSON (a value holds dict, list, str, int, float, "
            "bool and None)",
        )
    if depth > MAX_VALUE_DEPTH:
        where = field if len(field) <= 60 else f"{field[:60]}…"
        raise ItemError(where, f"nests deeper than {MAX_VALUE_DEPTH} levels of dicts and lists")
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ItemError(
                    field,
                    f"has the key {quoted(repr(k))} ({type(k).__name__}): JSON keys are "
                    "strings, so it would not read back as put; use string keys",
                )
            if _text_problem(k):
                raise ItemError(f"{field}[{quoted(k)}]", f"key {_text_problem(k)}")
            check_value(v, f"{field}.{k}" if _PLAIN_KEY.fullmatch(k) else f"{field}[{quoted(k)}]",
                        depth + 1)  # fmt: skip
        return
    for i, item in enumerate(value):
        check_value(item, f"{field}[{i}]", depth + 1)


def _text_problem(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain a lone surrogate (U+D800..U+DFFF)"
    return ""


def object_of(value: Mapping[str, Any]) -> str:
    """The value as canonical JSON (sorted keys, no spaces), within the node's object limit."""
    if not isinstance(value, Mapping):
        raise ItemError("value", f"must be a dict, got {type(value).__name__}")
    check_value(value)
    try:
        text = json.dumps(
            dict(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
            allow_nan=False,
        )  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise ItemError("value", f"is not JSON: {exc}") from None
    size = _utf8_len(text, "value")
    if size > MAX_OBJECT_BYTES:
        raise ItemError(
            "value", f"is {size} bytes as canonical JSON; the node keeps at most {MAX_OBJECT_BYTES}"
        )
    return text


@dataclass(frozen=True, slots=True)
class Write:
    """One put (or, `object` None, one delete) of a batch as the node is sent it, checked."""

    key: tuple[str, str, str]
    object: str | None
    provenance: Provenance


# The node's names for a submission's fields, as the store's user knows them.
_FIELD_NAMES = {"subject": "namespace", "predicate": "key", "object": "value"}


def write_of(
    root: str,
    namespace: Sequence[str],
    key: str,
    value: Mapping[str, Any] | None,
    defaults: Provenance,
    multi_valued: frozenset[str],
) -> Write:
    """A put (a delete where `value` is None) converted to what the node is sent, and checked
    by the node's own text, size and time rules, so that a batch is refused before any of it
    is written (only the trust anchor is the node's to check). Raises ItemError by field."""
    subject = subject_of(namespace)
    predicate = predicate_of(key, multi_valued)
    obj: str | None = None
    provenance = defaults
    if value is not None:
        rest, provenance = split_provenance(value, defaults)
        obj = object_of(rest)
    out: list[FieldViolation] = []
    check_key(out, Key(root, subject, predicate))
    if obj is not None:
        check_text(out, "object", obj, MAX_OBJECT_BYTES, required=True)
    check_text(out, "source", provenance.source, MAX_SOURCE_BYTES, required=False)
    if provenance.valid_from is not None:
        check_instant(out, "valid_from", _micros(provenance.valid_from))
    if out:
        v = out[0]
        raise ItemError(_FIELD_NAMES.get(v.field, v.field), v.reason)
    return Write((root, subject, predicate), obj, provenance)


def _micros(at: datetime) -> int:
    """Microseconds since the epoch, exact for any aware datetime (no UTC conversion, which
    overflows past 9999-12-31 or before 0001-01-01)."""
    return (at - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def value_of(obj: str) -> dict[str, Any] | None:
    """The item value an object holds; None when it is not a JSON object (a fact written by
    something other than the store is not a store item)."""
    try:
        value = json.loads(obj)
    except (ValueError, RecursionError):  # written by something else, deeper than we allow
        return None
    return value if isinstance(value, dict) else None


def split_provenance(
    value: Mapping[str, Any], defaults: Provenance
) -> tuple[dict[str, Any], Provenance]:
    """The value without its reserved provenance key, and the provenance it asks for."""
    if not isinstance(value, Mapping):
        raise ItemError("value", f"must be a dict, got {type(value).__name__}")
    rest = {k: v for k, v in value.items() if k != PROVENANCE_KEY}
    if PROVENANCE_KEY not in value:
        return rest, defaults
    return rest, provenance_of(value[PROVENANCE_KEY], defaults, f"value.{PROVENANCE_KEY}")


def provenance_of(raw: Any, defaults: Provenance, field: str) -> Provenance:
    """Provenance from a dict of its fields over `defaults`; bad fields are refused by name."""
    if not isinstance(raw, Mapping):
        raise ItemError(field, f"must be a dict of {', '.join(_PROVENANCE_FIELDS)}")
    unknown = sorted(str(k) for k in raw if k not in _PROVENANCE_FIELDS)
    if unknown:
        raise ItemError(
            f"{field}.{unknown[0]}", f"is not a provenance field ({', '.join(_PROVENANCE_FIELDS)})"
        )
    out = defaults
    for name in ("anchor", "attribution", "source"):
        if name in raw and raw[name] is not None and not isinstance(raw[name], str):
            raise ItemError(f"{field}.{name}", "must be a string")
        if isinstance(raw.get(name), str) and text_problem(raw[name]):
            raise ItemError(f"{field}.{name}", text_problem(raw[name]))
    anchor, former = raw.get("anchor"), raw.get("attribution")
    if anchor is not None and former is not None and anchor != former:
        raise ItemError(f"{field}.anchor", "give anchor or its former name attribution, not both")
    out = replace(
        out,
        anchor=anchor if anchor is not None else former if former is not None else out.anchor,
        source=raw.get("source", out.source),
    )
    for name in ("worth", "confidence"):
        if name in raw:
            number = raw[name]
            if isinstance(number, bool) or not isinstance(number, int | float):
                raise ItemError(f"{field}.{name}", "must be a number in [0, 1]")
            if math.isnan(number) or not 0 <= number <= 1:
                raise ItemError(f"{field}.{name}", f"must be in [0, 1], got {number}")
            out = (
                replace(out, worth=float(number))
                if name == "worth"
                else replace(out, confidence=float(number))
            )
    if "valid_from" in raw:
        out = replace(out, valid_from=instant_of(raw["valid_from"], f"{field}.valid_from"))
    return out


def instant_of(raw: Any, field: str) -> datetime:
    """An aware datetime from a datetime or an ISO 8601 text (UTC where it names no offset)."""
    if isinstance(raw, str):
        try:
            raw = datetime.fromisoformat(raw)
        except ValueError:
            raise ItemError(field, f"{raw!r} is not an ISO 8601 date or time") from None
    if not isinstance(raw, datetime):
        raise ItemError(field, "must be a datetime or an ISO 8601 text")
    at = raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    problem = time_problem(at)
    if problem:
        raise ItemError(field, problem)
    return at


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a search filter, with InMemoryStore's semantics: each
    field equals, or passes operators $eq, $ne, $gt, $gte, $lt, $lte; dicts match nested."""
    if not filter:
        return True
    return all(_compare(value.get(k), v) for k, v in filter.items())


def _compare(item: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(item, op, operand) for op, operand in wanted.items())
        if not isinstance(item, dict):
            return False
        return all(_compare(item.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(item, list | tuple)
            and len(item) == len(wanted)
            and all(_compare(i, w) for i, w in zip(item, wanted, strict=True))
        )
    return bool(item == wanted)


def _operator(item: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(item == operand)
    if op == "$ne":
        return bool(item != operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        b = _number(operand)
        if b is None:
            raise ItemError(f"filter.{op}", f"compares with a number, got {operand!r}")
        a = _number(item)
        if a is None:  # a missing or non-numeric field is not in range (InMemoryStore raises)
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ItemError(f"filter.{op}", "is not an operator ($eq, $ne, $gt, $gte, $lt, $lte)")


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float | str):
        return None
    try:
        return float(x)
    except ValueError:
        return None


def matches_path(namespace: tuple[str, ...], path: Sequence[str], suffix: bool) -> bool:
    """Whether a namespace starts (or ends) with `path`, where "*" matches any one label."""
    if len(namespace) < len(path):
        return False
    labels = namespace[len(namespace) - len(path) :] if suffix else namespace[: len(path)]
    return all(p in ("*", n) for n, p in zip(labels, path, strict=True))


def listed_namespaces(
    namespaces: Iterable[tuple[str, ...]],
    conditions: Iterable[tuple[str, Sequence[str]]],
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """list_namespaces' answer from the namespaces that hold items, as InMemoryStore gives it:
    those matching every (match_type, path) condition, cut to `max_depth`, sorted, paged."""
    conds = list(conditions)
    for match_type, _ in conds:
        if match_type not in ("prefix", "suffix"):
            raise ItemError("match_conditions", f"{match_type!r} is not 'prefix' or 'suffix'")
    kept = {ns for ns in namespaces if all(matches_path(ns, p, t == "suffix") for t, p in conds)}
    if max_depth is not None:
        kept = {ns[:max_depth] for ns in kept}
    return sorted(kept)[offset : offset + limit]


@dataclass(frozen=True, slots=True)
class Stamped:
    """When an item was created (its key's first evidence) and updated (the believed
    value's latest evidence), both as the node recorded them."""

    created_at: datetime
    updated_at: datetime


def stamps(
    recorded: Iterable[tuple[str, datetime]], believed_version: str, fallback: datetime
) -> Stamped:
    """created_at and updated_at from (version_id, recorded_at) of a key's evidence."""
    rows = list(recorded)
    created = min((at for _, at in rows), default=fallback)
    updated = max((at for v, at in rows if v == believed_version), default=fallback)
    return Stamped(created, max(updated, created))
