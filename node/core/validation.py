"""Checking a submission before it becomes evidence: every bad field, with its reason."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from factnode.core import ids
from factnode.core._model import Evidence, Instant, Key
from factnode.core.policy import Policy

# Documented limits (docs/api.md, "Limits"); in UTF-8 bytes.
MAX_KEY_PART_BYTES = 256
MAX_NODE_ID_BYTES = 256
MAX_OBJECT_BYTES = 4096
MAX_SOURCE_BYTES = 1024
MAX_IDEMPOTENCY_KEY_BYTES = 128
MAX_REASON_BYTES = 1024
# How much of a bad value an error may quote: errors travel in a status's trailers.
MAX_QUOTED_CHARS = 40
# The range of google.protobuf.Timestamp: 0001-01-01 to 9999-12-31.
MIN_INSTANT: Instant = -62_135_596_800_000_000
MAX_INSTANT: Instant = 253_402_300_799_999_999
OUT_OF_RANGE = "is outside 0001-01-01..9999-12-31"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field and why."""

    field: str
    reason: str


def describe_violations(violations: Iterable[FieldViolation]) -> str:
    """Violations as one line: "field: reason; field: reason"."""
    return "; ".join(f"{v.field}: {v.reason}" for v in violations)


class InvalidInput(ValueError):
    """A request that is not a decision: nothing was written."""

    def __init__(self, violations: list[FieldViolation]) -> None:
        self.violations = tuple(violations)
        super().__init__(describe_violations(self.violations))


# Worth and confidence when a request gives none (specification §2).
DEFAULT_UNIT = 0.5
# A retraction's anchor when a request names none: the user's own word (specification §5).
DEFAULT_RETRACTION_ANCHOR = "user_stated"


@dataclass(frozen=True, slots=True)
class Submission:
    """What an agent asserts, before the node checks and records it."""

    namespace: str
    subject: str
    predicate: str
    object: str
    attribution: str
    source: str = ""
    worth: float = DEFAULT_UNIT
    confidence: float = DEFAULT_UNIT
    valid_from: Instant | None = None
    corrects: str | None = None
    contradicts: Key | None = None
    idempotency_key: str | None = None

    @property
    def key(self) -> Key:
        return Key(self.namespace, self.subject, self.predicate)


def quoted(value: str) -> str:
    """`value` as an error may quote it: a bounded prefix, repr'd (so a NUL shows as \\x00)."""
    if len(value) <= MAX_QUOTED_CHARS:
        return repr(value)
    return f"{value[:MAX_QUOTED_CHARS]!r}…"


def text_problem(value: str) -> str:
    """Why `value` breaks the text rule (docs/api.md, "Limits"), or "" when any backend stores it.

    Stored text is Unicode without U+0000: PostgreSQL's text refuses NUL, and a lone
    surrogate is not Unicode (protobuf cannot carry one; code paths inside the node could)."""
    if "\x00" in value:
        return "must not contain NUL (U+0000)"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "must not contain a lone surrogate (U+D800..U+DFFF)"
    return ""


def _check_text(
    out: list[FieldViolation], name: str, value: str, limit: int, required: bool
) -> None:
    if not isinstance(value, str):
        out.append(FieldViolation(name, "must be a string"))
        return
    problem = text_problem(value)
    if problem:
        out.append(FieldViolation(name, problem))
    elif required and not value.strip():
        out.append(FieldViolation(name, "is required"))
    elif len(value) * 4 > limit and len(value.encode("utf-8")) > limit:
        out.append(FieldViolation(name, f"is longer than {limit} bytes"))


def _check_unit(out: list[FieldViolation], name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        out.append(FieldViolation(name, "must be a number"))
    elif math.isnan(value):
        out.append(FieldViolation(name, "must be a number in [0, 1], got NaN"))
    elif not 0 <= value <= 1:
        out.append(FieldViolation(name, f"must be in [0, 1], got {value}"))


def check_instant(out: list[FieldViolation], name: str, value: Instant | None) -> None:
    """Adds a violation when a time is outside 0001-01-01..9999-12-31."""
    if value is not None and not MIN_INSTANT <= value <= MAX_INSTANT:
        out.append(FieldViolation(name, OUT_OF_RANGE))


def time_problem(at: datetime) -> str:
    """Why a time cannot be sent (its UTC instant is outside 0001-01-01..9999-12-31, the
    Timestamp range), or "" when it can; a time without an offset counts as UTC.

    `0001-01-01T00:00+14:00` is a valid datetime whose UTC instant is in year 0: converting
    it raises OverflowError, which every face must turn into this reason instead."""
    if at.tzinfo is None or at.utcoffset() is None:
        return ""
    try:
        at.astimezone(UTC)
    except OverflowError:
        return f"{OUT_OF_RANGE} in UTC"
    return ""


def _check_statement(
    out: list[FieldViolation],
    key: Key,
    obj: str,
    source: str,
    attribution: str,
    policy: Policy,
    *,
    object_required: bool = True,
) -> None:
    """The checks a submission and relayed evidence share: key, object, source, anchor."""
    check_key(out, key)
    _check_text(out, "object", obj, MAX_OBJECT_BYTES, object_required)
    _check_text(out, "source", source, MAX_SOURCE_BYTES, False)
    if attribution not in policy.anchors:
        out.append(
            FieldViolation(
                "anchor",  # the request's name for it (FactInput.anchor)
                f"unknown trust anchor {quoted(attribution)}; "
                f"known: {', '.join(sorted(policy.anchors))}",
            )
        )


def check_text(
    out: list[FieldViolation], name: str, value: str, limit: int, *, required: bool
) -> None:
    """Adds a violation for a missing (when required) or oversized text field."""
    _check_text(out, name, value, limit, required)


def check_id(out: list[FieldViolation], name: str, value: str) -> None:
    """Adds a violation unless `value` is an id as the node makes them (32 lowercase hex)."""
    if not _is_id(value):
        out.append(FieldViolation(name, "is not an id (32 lowercase hex digits)"))


def check_node_id(out: list[FieldViolation], name: str, value: str) -> None:
    """Adds a violation for a missing or oversized node id."""
    _check_text(out, name, value, MAX_NODE_ID_BYTES, True)


def check_key(out: list[FieldViolation], key: Key, prefix: str = "") -> None:
    """Adds a violation for every missing or oversized part of a key."""
    _check_text(out, f"{prefix}namespace", key.namespace, MAX_KEY_PART_BYTES, True)
    _check_text(out, f"{prefix}subject", key.subject, MAX_KEY_PART_BYTES, True)
    _check_text(out, f"{prefix}predicate", key.predicate, MAX_KEY_PART_BYTES, True)


def violations_of(sub: Submission, policy: Policy) -> list[FieldViolation]:
    """Every bad field of a submission; empty when it may be decided."""
    out: list[FieldViolation] = []
    _check_statement(out, sub.key, sub.object, sub.source, sub.attribution, policy)
    _check_unit(out, "worth", sub.worth)
    _check_unit(out, "confidence", sub.confidence)
    check_instant(out, "valid_from", sub.valid_from)
    if sub.corrects is not None and not _is_id(sub.corrects):
        out.append(FieldViolation("corrects", "is not an evidence id (32 lowercase hex digits)"))
    if sub.contradicts is not None:
        check_key(out, sub.contradicts, "contradicts.")
        if sub.contradicts == sub.key:
            out.append(FieldViolation("contradicts", "a key cannot contradict itself"))
    if sub.idempotency_key is not None:
        _check_text(out, "idempotency_key", sub.idempotency_key, MAX_IDEMPOTENCY_KEY_BYTES, True)
    return out


def to_milli(value: float) -> int:
    """A unit value as integer thousandths, so no float rounding decides later."""
    return round(value * 1000)


def make_evidence(
    sub: Submission, policy: Policy, *, recorded_at: Instant, origin_node: str
) -> Evidence:
    """Checks a submission and builds its evidence; raises InvalidInput listing every bad field."""
    violations = violations_of(sub, policy)
    if violations:
        raise InvalidInput(violations)
    key = sub.key
    valid_from = recorded_at if sub.valid_from is None else sub.valid_from
    source = sub.source.strip()
    worth_milli, confidence_milli = to_milli(sub.worth), to_milli(sub.confidence)
    return Evidence(
        evidence_id=ids.evidence_id(
            key,
            sub.object,
            sub.attribution,
            source,
            valid_from,
            worth_milli,
            confidence_milli,
            sub.corrects,
            sub.contradicts,
        ),
        key=key,
        object=sub.object,
        version_id=ids.version_id(key, sub.object),
        attribution=sub.attribution,
        source=source,
        worth_milli=worth_milli,
        confidence_milli=confidence_milli,
        valid_from=valid_from,
        valid_from_defaulted=sub.valid_from is None,
        recorded_at=recorded_at,
        origin_node=origin_node,
        corrects=sub.corrects,
        contradicts=sub.contradicts,
    )


def make_retraction(
    key: Key,
    obj: str | None,
    *,
    attribution: str,
    source: str,
    at: Instant | None,
    worth: float,
    confidence: float,
    policy: Policy,
    recorded_at: Instant,
    origin_node: str,
) -> Evidence:
    """Checks a retraction and builds its evidence (specification §5): `obj` None retracts every
    value of the key; `at` (default: the ingestion time) is when it stopped being true.
    Raises InvalidInput listing every bad field."""
    out: list[FieldViolation] = []
    _check_statement(
        out, key, obj or "", source, attribution, policy, object_required=obj is not None
    )
    _check_unit(out, "worth", worth)
    _check_unit(out, "confidence", confidence)
    check_instant(out, "at", at)
    if out:
        raise InvalidInput(out)
    obj = obj or ""
    valid_from = recorded_at if at is None else at
    source = source.strip()
    worth_milli, confidence_milli = to_milli(worth), to_milli(confidence)
    return Evidence(
        evidence_id=ids.evidence_id(
            key,
            obj,
            attribution,
            source,
            valid_from,
            worth_milli,
            confidence_milli,
            None,
            None,
            retracts=True,
        ),
        key=key,
        object=obj,
        version_id=ids.statement_version(key, obj, retracts=True),
        attribution=attribution,
        source=source,
        worth_milli=worth_milli,
        confidence_milli=confidence_milli,
        valid_from=valid_from,
        valid_from_defaulted=at is None,
        recorded_at=recorded_at,
        origin_node=origin_node,
        retracts=True,
    )


def _is_id(text: str | None) -> bool:
    return text is not None and len(text) == 32 and all(c in "0123456789abcdef" for c in text)


def relayed_violations(e: Evidence, policy: Policy) -> list[FieldViolation]:
    """What is wrong with evidence a peer relayed; empty when it may be decided."""
    out: list[FieldViolation] = []
    _check_statement(
        out, e.key, e.object, e.source, e.attribution, policy, object_required=not e.retracts
    )
    if e.retracts and (e.corrects is not None or e.contradicts is not None):
        out.append(
            FieldViolation("retracts", "a retraction names neither corrects nor contradicts")
        )
    if e.anchor_cap is not None and e.anchor_cap not in policy.anchors:
        out.append(FieldViolation("anchor_cap", f"unknown trust anchor {quoted(e.anchor_cap)}"))
    for name, value in (("worth_milli", e.worth_milli), ("confidence_milli", e.confidence_milli)):
        if not 0 <= value <= 1000:
            out.append(FieldViolation(name, "must be in 0..1000"))
    check_instant(out, "valid_from", e.valid_from)
    check_instant(out, "recorded_at", e.first_recorded_at)
    if e.corrects is not None and not _is_id(e.corrects):
        out.append(FieldViolation("corrects", "is not an evidence id (32 lowercase hex digits)"))
    if e.contradicts is not None:
        check_key(out, e.contradicts, "contradicts.")
        if e.contradicts == e.key:
            out.append(FieldViolation("contradicts", "a key cannot contradict itself"))
    check_node_id(out, "origin_node", e.origin_node)
    if not out:
        expected = ids.evidence_id(
            e.key,
            e.object,
            e.attribution,
            e.source,
            e.valid_from,
            e.worth_milli,
            e.confidence_milli,
            e.corrects,
            e.contradicts,
            retracts=e.retracts,
        )
        if e.evidence_id != expected:
            out.append(FieldViolation("evidence_id", "does not match the evidence's content"))
    return out
