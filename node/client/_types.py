"""Plain values a client returns: frozen dataclasses, datetimes, enum names as strings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Generic, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.clock import describe_skew
from factnode.core import Key


def when(ts: Timestamp) -> datetime:
    """A protobuf Timestamp as an aware UTC datetime."""
    return ts.ToDatetime(tzinfo=UTC)


def key_of(msg: pb.Key) -> Key:
    return Key(msg.namespace, msg.subject, msg.predicate)


def threshold_of(msg: pb.ConsensusThreshold) -> Fraction | None:
    """The node's consensus threshold as an exact fraction; None where the node sent none."""
    return Fraction(msg.numerator, msg.denominator) if msg.denominator else None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One recorded statement and who made it."""

    evidence_id: str
    key: Key
    object: str
    version_id: str
    anchor: str
    source: str
    worth: float
    confidence: float
    valid_from: datetime
    recorded_at: datetime
    origin_node: str
    corrects: str
    # A retraction: `object`'s version (empty: the whole key) stopped being true at valid_from.
    retracts: bool = False

    @property
    def attribution(self) -> str:
        """`anchor` by its former name (an alias kept for existing code)."""
        return self.anchor

    @classmethod
    def of(cls, m: pb.Evidence) -> Evidence:
        return cls(
            m.evidence_id, key_of(m.key), m.object, m.version_id, m.anchor, m.source,
            m.worth, m.confidence, when(m.valid_from), when(m.recorded_at), m.origin_node,
            m.corrects, m.retracts,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Decision:
    """What the node decided for one request, and by which rule."""

    key: Key
    outcome: str  # "ACCEPTED", "REJECTED", ... (the proto's Outcome without its prefix)
    rule: str
    decided_at: datetime
    evidence_id: str
    version_id: str
    supersedes: str
    detail: str
    seq: int

    @classmethod
    def of(cls, m: pb.Decision) -> Decision:
        outcome = pb.Outcome.Name(m.outcome).removeprefix("OUTCOME_")
        return cls(
            key_of(m.key), outcome, m.rule, when(m.decided_at), m.evidence_id, m.version_id,
            m.supersedes, m.detail, m.seq,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Tally:
    """One version's federated support for a key."""

    version_id: str
    object: str
    weight: int
    share_milli: int
    voters: tuple[str, ...]
    local_belief: bool

    @classmethod
    def of(cls, m: pb.VersionTally) -> Tally:
        return cls(m.version_id, m.object, m.weight, m.share_milli, tuple(m.voters), m.local_belief)


@dataclass(frozen=True, slots=True)
class Belief:
    """What the node believes for a key; `state` is BELIEVED, AMBIGUOUS or CONTESTED."""

    key: Key
    version_id: str
    object: str
    state: str
    rule: str
    evidence: Evidence | None
    values: tuple[str, ...]
    tallies: tuple[Tally, ...]
    # The threshold the tallies are measured against (sent with them).
    threshold: Fraction | None = None
    # When the node first recorded evidence for the key, and last for a served value (None
    # where the answer carries none: a write's reply, a change feed).
    first_recorded_at: datetime | None = None
    last_recorded_at: datetime | None = None

    @classmethod
    def of(cls, m: pb.Belief) -> Belief:
        stamps = m.HasField("first_recorded_at")
        return cls(
            key_of(m.key), m.version_id, m.object,
            pb.BeliefState.Name(m.state).removeprefix("BELIEF_STATE_"), m.rule,
            Evidence.of(m.evidence) if m.HasField("evidence") else None,
            tuple(v.object for v in m.believed_values), tuple(Tally.of(t) for t in m.tallies),
            threshold_of(m.consensus_threshold),
            when(m.first_recorded_at) if stamps else None,
            when(m.last_recorded_at) if stamps else None,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Hit:
    """A belief a search found: the key's belief, the value that matched (one of a
    multi-valued key's), the anchor behind it and the rank score (higher is better)."""

    belief: Belief
    version_id: str
    object: str
    anchor: str
    score: float
    # When the node first recorded evidence for the key, and last for the matched value.
    first_recorded_at: datetime
    last_recorded_at: datetime

    @classmethod
    def of(cls, m: pb.SearchHit) -> Hit:
        return cls(
            Belief.of(m.belief), m.version_id, m.object, m.anchor, m.score,
            when(m.first_recorded_at), when(m.last_recorded_at),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Submitted:
    """The decision on one submitted fact and the belief after it."""

    decision: Decision
    evidence_id: str
    version_id: str
    belief: Belief | None

    @property
    def rejected(self) -> bool:
        return self.decision.outcome == "REJECTED"


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """One item of submit_many: its decision, or the node's reason for refusing it."""

    index: int
    decision: Decision | None
    error: str
    field_errors: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Interval:
    start: datetime
    end: datetime | None


@dataclass(frozen=True, slots=True)
class Version:
    """One value a key has had: its status, when it held, and the evidence for it."""

    version_id: str
    object: str
    status: str
    intervals: tuple[Interval, ...]
    evidence: tuple[Evidence, ...]
    supersedes: tuple[str, ...]
    superseded_by: tuple[str, ...]
    # What ends some of its evidence now: retractions, and facts that moved keys.
    ended_by: tuple[Evidence, ...] = ()
    # The served version's rule, as GetBelief names it; for another version, the rule the
    # served one beats it by ("retract" or "correction" where it no longer counts).
    rule: str = ""
    # For a version believed at no event time now that was served until an operator's
    # resolution chose another: when that resolution was recorded.
    served_until: datetime | None = None
    # For a DECAYED version: when its last claim expired, and the confirmed_at it counted from.
    decayed_at: datetime | None = None
    confirmed_at: datetime | None = None

    @classmethod
    def of(cls, m: pb.VersionHistory) -> Version:
        return cls(
            m.version_id, m.object, pb.VersionStatus.Name(m.status).removeprefix("VERSION_STATUS_"),
            tuple(Interval(when(i.start), when(i.end) if i.HasField("end") else None)
                  for i in m.intervals),
            tuple(Evidence.of(e) for e in m.evidence), tuple(m.supersedes), tuple(m.superseded_by),
            tuple(Evidence.of(e) for e in m.ended_by), m.rule,
            when(m.served_until) if m.HasField("served_until") else None,
            when(m.decayed_at) if m.HasField("decayed_at") else None,
            when(m.confirmed_at) if m.HasField("confirmed_at") else None,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Comparison:
    """Why one version lost to the believed one."""

    version_id: str
    object: str
    rule: str
    reason: str
    # Where the votes or an operator's pin chose the belief: the first rule that separates
    # the two versions' evidence (the reason says which way it goes); "" otherwise.
    evidence_rule: str = ""


@dataclass(frozen=True, slots=True)
class Explanation:
    """A belief with every comparison that decided it."""

    belief: Belief
    comparisons: tuple[Comparison, ...]
    # Whether the key is under review and why, where it is or an operator's pin bears on it.
    review: str = ""
    # Where a retraction or an erasure made the belief believed again: the story in one line.
    believed_again: str = ""


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; pass `next_page_token` back for the next one ("" at the end)."""

    items: tuple[T, ...]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class Change:
    """One belief change seen by watch; `resume_token` resumes after it."""

    key: Key
    belief: Belief
    decision: Decision
    resume_token: str


@dataclass(frozen=True, slots=True)
class Contested:
    """A key the node will not decide alone; an operator resolves it."""

    key: Key
    state: str
    served_version_id: str
    detail: str
    versions: tuple[Tally, ...]
    # The node's consensus threshold, against which the versions' shares are measured.
    threshold: Fraction | None = None

    @classmethod
    def of(cls, m: pb.ContestedKey) -> Contested:
        return cls(
            key_of(m.key), pb.BeliefState.Name(m.state).removeprefix("BELIEF_STATE_"),
            m.served_version_id, m.detail, tuple(Tally.of(t) for t in m.versions),
            threshold_of(m.consensus_threshold),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Resolved:
    decision: Decision
    belief: Belief
    note: str


@dataclass(frozen=True, slots=True)
class Erased:
    erasure_id: str
    evidence_erased: int
    keys_affected: int
    erased_at: datetime
    # One line per key where the erasure made a version believed again (no erased value).
    believed_again: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Receipt:
    """A member's signed statement that it applied an erasure: when, and how many pieces of
    evidence it removed."""

    node_id: str
    applied_at: datetime
    removed: int


@dataclass(frozen=True, slots=True)
class ErasureCoverage:
    """An erasure the node holds and which members have confirmed it (`GetErasure`)."""

    erasure_id: str
    scope: str
    erased_at: datetime
    operator: str
    reason: str
    origin_node: str
    receipts: tuple[Receipt, ...]
    waiting: tuple[str, ...]
    revoked: tuple[str, ...]
    complete: bool
    summary: str

    @classmethod
    def of(cls, m: pb.ErasureCoverage) -> ErasureCoverage:
        return cls(
            m.erasure_id, m.scope, when(m.erased_at), m.operator, m.reason, m.origin_node,
            tuple(Receipt(r.node_id, when(r.applied_at), r.removed) for r in m.receipts),
            tuple(m.waiting), tuple(m.revoked), m.complete, m.summary,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Decayed:
    decayed: int
    tombstoned: int


@dataclass(frozen=True, slots=True)
class PeerState:
    node_id: str
    address: str
    last_sync: datetime | None
    lag_seconds: int
    last_error: str
    max_anchor: str
    # The peer's clock minus this node's, in milliseconds; None: never measured.
    clock_skew_ms: int | None = None

    @property
    def clock_skew(self) -> str:
        """The peer's clock against this node's for people ("2h00m00s ahead"), or "-"."""
        return "-" if self.clock_skew_ms is None else describe_skew(self.clock_skew_ms * 1000)


@dataclass(frozen=True, slots=True)
class Status:
    """The node's identity, counts and peers."""

    node_id: str
    version: str
    listen_address: str
    database: str
    counts: dict[str, int]
    peers: tuple[PeerState, ...]
    members: tuple[Member, ...] = ()  # every member known (ListMembers); empty: no federation
    # The replica answering (host:pid), and the one running background work under the lease.
    replica: str = ""
    lease_holder: str = ""
    # Evidence quarantined when the node opened its store: (evidence id, key, field, why).
    quarantined: tuple[tuple[str, Key, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    """One peer's sync round: whether it worked and what moved."""

    node_id: str
    address: str
    ok: bool
    error: str
    counts: dict[str, int]


@dataclass(frozen=True, slots=True)
class Member:
    """One member of the federation as the node knows it (`ListMembers`)."""

    node_id: str
    address: str
    last_heard: datetime | None
    certificate_expires: datetime | None
    revoked: bool
    max_anchor: str
    is_self: bool
    refused: str  # why it is not a member now; empty while it is
    incarnation: int = 0  # of its signed record held; 0: none yet (a configured peer or seed)


@dataclass(frozen=True, slots=True)
class Members:
    """Every member the node knows, and the number of the revocation list it holds (0: none)."""

    members: tuple[Member, ...]
    revocation_list_number: int


@dataclass(frozen=True, slots=True)
class Revoked:
    """What handing the node a revocation list did (`Revoke`)."""

    applied: bool
    number: int
    revoked: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Restored:
    """What an import replayed into the node (`Import`)."""

    node_id: str
    evidence: int
    tombstones: int
    pins: int
    decisions: int
    policy_differed: bool


@dataclass(frozen=True, slots=True)
class BackedUp:
    """A physical copy the node wrote on its host (`Backup`)."""

    destination: str
    bytes: int
