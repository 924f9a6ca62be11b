"""What the console reads from a request's query or form, checked before anything is sent:
keys, filters, times and the erase confirmation. Pure: text in, values or FieldErrors out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from factnode.client import Decision, FieldError, InvalidFact
from factnode.core import Key
from factnode.core.validation import time_problem

QUEUE_STATES = ("CONTESTED", "AMBIGUOUS")
MAX_PAGE_SIZE = 200


def refuse(errors: list[FieldError]) -> None:
    """Raises InvalidFact naming every bad field, as the node would."""
    if errors:
        raise InvalidFact("; ".join(f"{e.field}: {e.reason}" for e in errors), tuple(errors))


def text(params: Mapping[str, str], name: str) -> str:
    return (params.get(name) or "").strip()


def key_of(params: Mapping[str, str]) -> Key:
    """The key named by `namespace`, `subject` and `predicate`; each is required."""
    parts = [text(params, f) for f in ("namespace", "subject", "predicate")]
    refuse(
        [
            FieldError(f, "is required")
            for f, v in zip(("namespace", "subject", "predicate"), parts, strict=True)
            if not v
        ]
    )
    return Key(*parts)


def page_size(params: Mapping[str, str], default: int) -> int:
    raw = text(params, "page_size")
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE_SIZE:
        refuse([FieldError("page_size", f"must be a whole number from 1 to {MAX_PAGE_SIZE}")])
    return int(raw)


def when(params: Mapping[str, str], name: str) -> datetime | None:
    """An ISO 8601 time (a date alone means its midnight UTC; no zone means UTC)."""
    raw = text(params, name)
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        refuse([FieldError(name, f"{raw!r} is not an ISO 8601 time, e.g. 2026-12-01T10:00Z")])
        raise AssertionError("unreachable") from None
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    problem = time_problem(at)
    if problem:
        refuse([FieldError(name, f"{raw!r} {problem}")])
    return at


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """The decision log's filters: the node selects by key or namespace; the console by
    outcome, rule and time."""

    key: Key | None
    namespace: str
    outcome: str
    rule: str
    since: datetime | None
    until: datetime | None

    @classmethod
    def of(cls, params: Mapping[str, str]) -> DecisionFilter:
        namespace = text(params, "namespace")
        subject, predicate = text(params, "subject"), text(params, "predicate")
        key = None
        if subject or predicate:
            key = key_of(params)
        since, until = when(params, "since"), when(params, "until")
        if since and until and until < since:
            refuse([FieldError("until", "is before since")])
        return cls(
            key, namespace, text(params, "outcome").upper(), text(params, "rule"), since, until
        )

    def keeps(self, d: Decision) -> bool:
        """A decision passes every filter given."""
        return (
            (not self.outcome or d.outcome == self.outcome)
            and (not self.rule or d.rule == self.rule)
            and (self.since is None or d.decided_at >= self.since)
            and (self.until is None or d.decided_at <= self.until)
        )

    def select(self, decisions: Iterable[Decision]) -> list[Decision]:
        return [d for d in decisions if self.keeps(d)]


def erase_phrase(key: Key, scope: str) -> str:
    """What the operator types to confirm an erase: the key, or the subject, as shown."""
    if scope == "subject":
        return f"{key.namespace}/{key.subject}"
    return f"{key.namespace}/{key.subject}/{key.predicate}"


def check_erase(key: Key, params: Mapping[str, str]) -> str:
    """The erase scope, once the confirmation matches and a reason is given."""
    scope = text(params, "scope") or "key"
    errors = []
    if scope not in ("key", "subject"):
        errors.append(FieldError("scope", "must be key or subject"))
    elif text(params, "confirm") != erase_phrase(key, scope):
        errors.append(
            FieldError(
                "confirm", f"type {erase_phrase(key, scope)!r} to confirm; nothing was erased"
            )
        )
    if not text(params, "reason"):
        errors.append(FieldError("reason", "is required"))
    refuse(errors)
    return scope
