"""Content-addressed identifiers: the same statement gets the same id on any node."""

from __future__ import annotations

import functools
import hashlib

from factnode.core._model import Instant, Key


def _digest(kind: str, *parts: str) -> str:
    # Length-prefixed fields, so ("ab", "c") and ("a", "bc") never collide.
    h = hashlib.sha256(kind.encode())
    for part in parts:
        raw = part.encode("utf-8")
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.hexdigest()[:32]


@functools.lru_cache(maxsize=65_536)
def key_id(key: Key) -> str:
    """Stable id of a key, used to index and to erase by key without its text."""
    return _digest("key", key.namespace, key.subject, key.predicate)


@functools.lru_cache(maxsize=65_536)
def subject_id(namespace: str, subject: str) -> str:
    """Stable id of a subject within a namespace."""
    return _digest("subject", namespace, subject)


def version_id(key: Key, obj: str) -> str:
    """Id of the claim "key has value obj"."""
    return _digest("version", key.namespace, key.subject, key.predicate, obj)


def statement_version(key: Key, obj: str, *, retracts: bool) -> str:
    """The version a statement is about; empty for a retraction of every value of its key."""
    return "" if retracts and not obj else version_id(key, obj)


def evidence_id(
    key: Key,
    obj: str,
    attribution: str,
    source: str,
    valid_from: Instant,
    worth_milli: int,
    confidence_milli: int,
    corrects: str | None,
    contradicts: Key | None,
    *,
    retracts: bool = False,
) -> str:
    """Id of one statement over everything arbitration reads: the same statement with another
    worth or confidence is other evidence, so no arrival order decides which is kept.
    ("evidence/2": ids of the first form, without worth, confidence, corrects and
    contradicts, were rewritten by migration 0005.) A retraction's id is of its own kind
    ("retraction/1"), so no assertion's id changed when retractions became evidence."""
    return _digest(
        "retraction/1" if retracts else "evidence/2",
        key.namespace,
        key.subject,
        key.predicate,
        obj,
        attribution,
        source,
        str(valid_from),
        str(worth_milli),
        str(confidence_milli),
        corrects or "",
        *(("", "", "") if contradicts is None else contradicts),
    )


def value_hash(text: str) -> str:
    """Hash kept in place of an erased value or source."""
    return _digest("value", text)
