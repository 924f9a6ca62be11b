"""Value types of the core: keys, evidence, verdicts and decisions.

Times are integer microseconds since the Unix epoch, UTC (`Instant`), so that
comparisons and hashes never depend on time zones or float rounding.
Worth and confidence are integer thousandths (`*_milli`) for the same reason.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

Instant = int
"""Microseconds since 1970-01-01T00:00:00Z."""

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso(at: Instant) -> str:
    """An instant as ISO 8601 UTC, e.g. 2025-03-01T00:00:00Z."""
    return (_EPOCH + timedelta(microseconds=at)).isoformat().replace("+00:00", "Z")


class Outcome(enum.StrEnum):
    """What a submission did; every valid submission gets exactly one."""

    REJECTED = "REJECTED"
    DUPLICATE = "DUPLICATE"
    CORROBORATED = "CORROBORATED"
    ACCEPTED = "ACCEPTED"
    SUPERSEDED = "SUPERSEDED"
    HISTORICAL = "HISTORICAL"
    DISBELIEVED = "DISBELIEVED"
    AMBIGUOUS = "AMBIGUOUS"
    # A retraction that ended or changed the belief (and, on a key named in `contradicts`,
    # the change an assertion on another key made to its belief).
    RETRACTED = "RETRACTED"
    # Not a submission outcome: an operator's resolution in the log.
    RESOLVED = "RESOLVED"
    # Federation transitions of the served belief.
    CONTESTED = "CONTESTED"
    # Not a submission outcome: a peer's erasure applied on this node (rule peer_erasure).
    ERASED = "ERASED"
    # Not a submission outcome: the decay job's record of a served belief that changed
    # because a claim reached its expiry (rule decay).
    DECAYED = "DECAYED"
    # Not a submission outcome: retention purged evidence expired for longer than
    # `retain_decayed_days`, as an erasure does (rule decay; no value, no evidence id).
    PURGED = "PURGED"


class Rule(enum.StrEnum):
    """The named rule behind a decision or a verdict."""

    # Arbitration (in the order of `_rules.RULES`, which defines them).
    TRUST_ANCHOR = "trust_anchor"
    RECENCY = "recency"
    WORTH = "worth"
    CONFIDENCE = "confidence"
    TIEBREAK = "tiebreak"
    # Gates before arbitration.
    MIN_CONFIDENCE = "min_confidence"
    NO_PROVENANCE = "no_provenance"
    ERASED = "erased"
    DUPLICATE = "duplicate"
    # Decisions and verdicts that need no arbitration. SOLE_VERSION names a belief (one
    # version counts now: the first, or the last left after retractions, corrections or
    # erasures); FIRST_VERSION a decision (this submission gave the key its first version).
    # One name for both would say a key's belief was "first" after its rivals ended.
    SOLE_VERSION = "sole_version"
    FIRST_VERSION = "first_version"
    CORROBORATION = "corroboration"
    MULTI_VALUED = "multi_valued"
    RETRACT = "retract"
    # A served belief changed because a claim reached its expiry (specification §6).
    DECAY = "decay"
    CORRECTION = "correction"
    # Federation.
    FEDERATION_CONSENSUS = "federation_consensus"
    # An operator's pin on a key under review (specification §7).
    OPERATOR_RESOLUTION = "operator_resolution"
    # A peer's erasure tombstone, applied here (specification §6).
    PEER_ERASURE = "peer_erasure"


class BeliefState(enum.StrEnum):
    """How settled a served belief is."""

    BELIEVED = "BELIEVED"
    AMBIGUOUS = "AMBIGUOUS"
    CONTESTED = "CONTESTED"


class EvidenceStatus(enum.StrEnum):
    """Life of one piece of evidence in the store."""

    ACTIVE = "ACTIVE"
    REJECTED = "REJECTED"
    DECAYED = "DECAYED"


class Key(NamedTuple):
    """A fact key; keys compare exactly, no synonyms are guessed.

    A named tuple: keys are dictionary keys all over the write path, and a tuple hashes
    and compares in C (bench/arbitration.py)."""

    namespace: str
    subject: str
    predicate: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.subject}/{self.predicate}"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One stored statement about a key, with its provenance: an assertion that the key has
    a value or, with `retracts`, a retraction (specification §5): the value `object` (every value
    of the key when `object` and `version_id` are empty) stopped being true at `valid_from`.
    A retraction is never a belief candidate and never a vote; it ends the assertions it
    outranks (`arbitration.ends`)."""

    evidence_id: str
    key: Key
    object: str
    version_id: str
    attribution: str
    source: str
    worth_milli: int
    confidence_milli: int
    valid_from: Instant
    valid_from_defaulted: bool
    recorded_at: Instant
    origin_node: str
    corrects: str | None = None
    contradicts: Key | None = None
    # For relayed evidence: the anchor ceiling of the peer it came through.
    anchor_cap: str | None = None
    # For relayed evidence: when its origin node recorded it (erasures compare with this).
    origin_recorded_at: Instant | None = None
    retracts: bool = False
    # Its origin's signature of `signed.evidence_payload` as it travels (specification §7); empty on
    # evidence read from the store, which keeps signatures apart (`evidence_signatures`).
    signature: bytes = b""
    # When a client last stated it to a member, as this node counts the confirmations it
    # holds (specification §6); None: never restated, so its first recording.
    confirmed_at: Instant | None = None

    @property
    def first_recorded_at(self) -> Instant:
        """When the statement was first recorded anywhere."""
        return self.recorded_at if self.origin_recorded_at is None else self.origin_recorded_at

    @property
    def confirmed(self) -> Instant:
        """When a client last stated it, as far as this node counts: its age starts here."""
        return self.first_recorded_at if self.confirmed_at is None else self.confirmed_at


@dataclass(frozen=True, slots=True)
class Confirmation:
    """A restatement of held evidence (a submission that was its DUPLICATE), signed by the
    node that took it (specification §6): the evidence's age counts from `confirmed_at`."""

    evidence_id: str
    signer: str
    confirmed_at: Instant
    # When this node first held the confirmation (a view as known earlier does not see it).
    received_at: Instant
    signature: bytes = b""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The result of arbitrating one key's evidence."""

    version_id: str
    evidence_id: str
    rule: Rule
    ambiguous: bool
    # For every losing version, the first rule by which the winner beats it.
    beaten_by: tuple[tuple[str, Rule], ...] = ()
    # For multi-valued keys every believed version; empty otherwise.
    believed: tuple[str, ...] = ()

    def rule_against(self, version_id: str) -> Rule | None:
        """The rule by which the belief beats `version_id`, or None if it is the belief."""
        for vid, rule in self.beaten_by:
            if vid == version_id:
                return rule
        return None


@dataclass(frozen=True, slots=True)
class Decision:
    """One entry of the decision log."""

    key: Key
    outcome: Outcome
    rule: Rule
    decided_at: Instant
    evidence_id: str | None = None
    version_id: str | None = None
    # Lineage: the belief this decision replaced, if any.
    supersedes: str | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Interval:
    """A half-open event-time interval [start, end); end None means still open."""

    start: Instant
    end: Instant | None


@dataclass(frozen=True, slots=True)
class VersionHistory:
    """One version of a key over event time."""

    version_id: str
    object: str
    intervals: tuple[Interval, ...]
    evidence_ids: tuple[str, ...]
    status: str
    supersedes: tuple[str, ...] = field(default=())
    superseded_by: tuple[str, ...] = field(default=())
    # Retractions (and facts on other keys naming this key in `contradicts`) that end some
    # of this version's evidence, as they count now: the answer to "why not any more?".
    ended_by: tuple[str, ...] = field(default=())
    # For the served version the rule it is served by; for another, the rule the served
    # version beats it by (RETRACT or CORRECTION where it no longer counts); else None.
    rule: Rule | None = None
    # For a version served at no event time now that was served, as known just before an
    # operator's resolution chose another: when the resolution was recorded (believed until
    # then). None otherwise.
    served_until: Instant | None = None
    # For a version whose every claim has expired (status DECAYED): when the last expired,
    # and the `confirmed_at` it decayed from (specification §6). None otherwise.
    decayed_at: Instant | None = None
    confirmed_at: Instant | None = None
