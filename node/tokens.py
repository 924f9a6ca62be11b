"""Page and resume tokens: opaque to clients, versioned and strictly checked here.

A token is the URL-safe base64 (no padding) of ``"1:<kind>:<position>"``: the format
version, what the token pages through, and the position after which the next page
starts. Decoding accepts exactly what encoding produces, with bounded lengths and digits,
so a token a client altered is InvalidInput naming the field, never a crash deeper down.
A token of one kind (say, a decision-log position) is refused where another is expected.
"""

from __future__ import annotations

import base64
import binascii
import re

from factnode.core import FieldViolation, InvalidInput

VERSION = "1"
MAX_TOKEN_CHARS = 1024  # a subjects token holds a subject (256 bytes) in hex
# Decision-log and belief-change positions: their seq columns are INTEGER on PostgreSQL, so
# a larger position could only fail its query there (INTERNAL, where SQLite answered OK).
MAX_SEQ = 2**31 - 1
# A review-queue position's time: BIGINT microseconds.
MAX_SINCE = 2**63 - 1

KEYS = "keys"  # a (key id, version id) position in key order: ListBeliefs
QUEUE = "queue"  # a (since, key id, version id) position, oldest first: ListContested
DECISIONS = "decisions"  # a decision-log seq: ListDecisions
CHANGES = "changes"  # a decision-log seq: WatchBeliefs
ERASURES = "erasures"  # an (erased_at, erasure id) position, newest first: ListErasures
SUBJECTS = "subjects"  # a subject (hex of its UTF-8), in the database's order: ListSubjects
SEARCH = "search"  # (search fingerprint, offset) into one search's ranking: SearchBeliefs
MAX_SEARCH_OFFSET = 100_000

_HEX_ID = re.compile(r"[0-9a-f]{32}")
_SEQ = re.compile(r"(0|[1-9][0-9]{0,18})")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def _encode(kind: str, *parts: str) -> str:
    raw = ":".join((VERSION, kind, *parts)).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(token: str, kind: str, field: str, n: int) -> list[str]:
    bad = InvalidInput([FieldViolation(field, "is not a token this node issued")])
    if len(token) > MAX_TOKEN_CHARS or not _BASE64URL.fullmatch(token):
        raise bad
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    parts = text.split(":")
    if len(parts) != 2 + n or parts[0] != VERSION or parts[1] != kind:
        raise bad
    # Only the canonical spelling: one token per position.
    if _encode(kind, *parts[2:]) != token:
        raise bad
    return parts[2:]


def search_position(fingerprint: str, offset: int) -> str:
    """A token for the page of a search (by its fingerprint) starting at `offset`."""
    return _encode(SEARCH, fingerprint, str(offset))


def decode_search_position(token: str, fingerprint: str, field: str = "page_token") -> int:
    """The offset of a search page token; InvalidInput naming `field` for one that is not
    this node's, or that another search (other words, filters or view) made."""
    got, offset = _decode(token, SEARCH, field, 2)
    if not _HEX_ID.fullmatch(got) or not _SEQ.fullmatch(offset):
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    if got != fingerprint:
        raise InvalidInput(
            [FieldViolation(field, "belongs to another search (query, filters or time differ)")]
        )
    n = int(offset)
    if n > MAX_SEARCH_OFFSET:
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    return n


def key_position(key_id: str, version_id: str) -> str:
    """A token for the page after the served belief (key id, version id)."""
    return _encode(KEYS, key_id, version_id)


def decode_key_position(token: str, field: str = "page_token") -> tuple[str, str]:
    """The (key id, version id) a key-order token names; InvalidInput when it is not one."""
    key_id, version_id = _decode(token, KEYS, field, 2)
    if not _HEX_ID.fullmatch(key_id) or not (version_id == "" or _HEX_ID.fullmatch(version_id)):
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    return key_id, version_id


def queue_position(since: int, key_id: str, version_id: str) -> str:
    """A token for the review-queue page after the entry (since, key id, version id)."""
    return _encode(QUEUE, str(since), key_id, version_id)


def decode_queue_position(token: str, field: str = "page_token") -> tuple[int, str, str]:
    """The (since, key id, version id) a review-queue token names; InvalidInput otherwise."""
    since, key_id, version_id = _decode(token, QUEUE, field, 3)
    if not _SEQ.fullmatch(since) or int(since) > MAX_SINCE or not _HEX_ID.fullmatch(key_id):
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    if not (version_id == "" or _HEX_ID.fullmatch(version_id)):
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    return int(since), key_id, version_id


def subject_position(subject: str) -> str:
    """A token for the page of subjects after `subject`."""
    return _encode(SUBJECTS, subject.encode().hex())


def decode_subject_position(token: str, field: str = "page_token") -> str:
    """The subject a subjects token names; InvalidInput otherwise."""
    (raw,) = _decode(token, SUBJECTS, field, 1)
    try:
        subject = bytes.fromhex(raw).decode()
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")]) from None
    if not subject or len(raw) > 2 * 256 or raw != raw.lower():
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    return subject


def erasure_position(erased_at: int, erasure_id: str) -> str:
    """A token for the page of erasures after (erased_at, erasure id), newest first."""
    return _encode(ERASURES, str(erased_at), erasure_id)


def decode_erasure_position(token: str, field: str = "page_token") -> tuple[int, str]:
    """The (erased_at, erasure id) an erasures token names; InvalidInput otherwise."""
    at, erasure_id = _decode(token, ERASURES, field, 2)
    if not _SEQ.fullmatch(at) or int(at) > MAX_SINCE or not _HEX_ID.fullmatch(erasure_id):
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    return int(at), erasure_id


def seq_position(seq: int, kind: str = DECISIONS) -> str:
    """A token for the position after decision-log entry `seq`."""
    return _encode(kind, str(seq))


def decode_seq_position(token: str, kind: str = DECISIONS, field: str = "page_token") -> int:
    """The decision-log seq a token names; InvalidInput when it is not one of `kind`."""
    (seq,) = _decode(token, kind, field, 1)
    if not _SEQ.fullmatch(seq) or int(seq) > MAX_SEQ:
        raise InvalidInput([FieldViolation(field, "is not a token this node issued")])
    return int(seq)


def check(token: str, kind: str, field: str) -> None:
    """Raises InvalidInput unless `token` is empty or a well-formed token of `kind`."""
    if not token:
        return
    if kind == KEYS:
        decode_key_position(token, field)
    elif kind == QUEUE:
        decode_queue_position(token, field)
    elif kind == ERASURES:
        decode_erasure_position(token, field)
    elif kind == SUBJECTS:
        decode_subject_position(token, field)
    elif kind == SEARCH:
        fingerprint = _decode(token, SEARCH, field, 2)[0]
        decode_search_position(token, fingerprint, field)
    else:
        decode_seq_position(token, kind, field)
