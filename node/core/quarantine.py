"""Quarantine: evidence a store holds from before the text rule, which refuses it now.

Such evidence (a NUL in a key part, say, which SQLite stored before the rule existed) is
found when the node opens its store. It stays held and readable, but it is never offered to
peers again, who would refuse it every round; an operator removes it by erasing it by id.
"""

from __future__ import annotations

from dataclasses import dataclass

from factnode.core._model import Evidence, Key
from factnode.core.validation import text_problem


@dataclass(frozen=True, slots=True)
class Quarantined:
    """One piece of evidence the text rule refuses: the first field that breaks it, and why."""

    evidence_id: str
    key: Key
    field: str
    reason: str


def text_fields(e: Evidence) -> list[tuple[str, str]]:
    """Every text field of stored evidence, by name."""
    out = [
        ("namespace", e.key.namespace),
        ("subject", e.key.subject),
        ("predicate", e.key.predicate),
        ("object", e.object),
        ("attribution", e.attribution),
        ("source", e.source),
        ("origin_node", e.origin_node),
    ]
    if e.corrects is not None:
        out.append(("corrects", e.corrects))
    if e.contradicts is not None:
        c = e.contradicts
        out += [
            ("contradicts.namespace", c.namespace),
            ("contradicts.subject", c.subject),
            ("contradicts.predicate", c.predicate),
        ]
    if e.anchor_cap is not None:
        out.append(("anchor_cap", e.anchor_cap))
    return out


def quarantined(e: Evidence) -> Quarantined | None:
    """Why `e` is quarantined (its first field the text rule refuses), or None."""
    for name, value in text_fields(e):
        problem = text_problem(value)
        if problem:
            return Quarantined(e.evidence_id, e.key, name, problem)
    return None


def key_breaks_text_rule(key: Key) -> bool:
    """A part of `key` breaks the text rule (a vote on it is not offered either)."""
    return any(text_problem(part) for part in (key.namespace, key.subject, key.predicate))


__all__ = ["Quarantined", "key_breaks_text_rule", "quarantined", "text_fields"]
