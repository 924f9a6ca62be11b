"""The store's interface: what the node needs from persistence, in the core's types."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from factnode.core import (
    Arbitrated,
    BeliefState,
    Confirmation,
    Decision,
    Evidence,
    EvidenceStatus,
    Instant,
    Key,
    KeyState,
    Outcome,
    Rule,
)
from factnode.core.consensus import Vote
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.members import MemberRecord
from factnode.core.plan import ErasurePlan
from factnode.core.recall import Embedding
from factnode.core.receipts import Receipt
from factnode.core.refresh import StoredBelief
from factnode.core.serving import Pin
from factnode.core.signed import Equivocation

T = TypeVar("T")


class StorageFull(Exception):
    """The store's disk has no room for a write: nothing of it was written, reads are still
    served, and writes succeed again once space is freed. `where` names the disk (the data
    directory, or the database server)."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"no space left on the disk holding {where}: writes are refused until space "
            "is freed; reads are served"
        )
        self.where = where


@dataclass(frozen=True, slots=True)
class BeliefChange:
    """One change of a served belief; `seq` resumes a watch after it."""

    seq: int
    key: Key
    version_id: str | None
    state: BeliefState | None
    rule: Rule | None
    changed_at: Instant


@dataclass(frozen=True, slots=True)
class LoggedDecision:
    """A decision as stored, with its position in the log."""

    seq: int
    decision: Decision


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What an erasure leaves: hashes, time, operator and reason, never values."""

    erasure_id: str
    scope: str  # "evidence", "key" or "subject"
    scope_hash: str
    erased_at: Instant
    operator: str
    reason: str
    evidence_ids: tuple[str, ...]
    origin_node: str = ""  # the node where the erasure was made ("" from older peers)
    # The origin's signature of `signed.tombstone_payload` (specification §7), kept and passed on
    # unchanged; b"" for one made before tombstones were signed, or one a node re-dated before
    # erasures were bounded by signed bounds (migration r27_erasure_bounds).
    signature: bytes = b""


class RefusedData(Exception):
    """The database refused a value a write carried (PostgreSQL's DataError: a NUL in text,
    say): the transaction wrote nothing. Raised in place of the driver's error, whose text
    quotes SQL and the values it carried."""


@dataclass(frozen=True, slots=True)
class Counts:
    """Sizes for status and metrics."""

    evidence: int
    keys: int
    decisions: int
    contested: int
    ambiguous: int
    rejected: int
    decayed: int
    erasures: int


@dataclass(frozen=True, slots=True)
class Match:
    """An assertion a search matches, with its rank score (higher is better)."""

    key: Key
    version_id: str
    evidence_id: str
    score: float


class SearchTransaction(Protocol):
    """Recall's index (`store._search`): words and callers' vectors of active assertions."""

    def put_vectors(self, vectors: Sequence[tuple[str, Embedding]]) -> None: ...

    def search_matches(
        self,
        terms: Sequence[str],
        *,
        every_word: bool,
        namespace_prefix: str = "",
        subject: str | None = None,
        predicate: str | None = None,
        window: int = ...,
        limit: int = ...,
    ) -> list[Match]: ...

    def vector_matches(
        self,
        embedding: Embedding,
        *,
        namespace_prefix: str = "",
        subject: str | None = None,
        predicate: str | None = None,
        scan: int,
        limit: int,
    ) -> list[Match]: ...


class EvidenceTransaction(Protocol):
    """Evidence (assertions and retractions): key states, lookups by id, lineage, the decay
    sweep."""

    def key_states(self, keys: Collection[Key]) -> dict[Key, KeyState]: ...

    def stored_evidence_ids(self, evidence_ids: Collection[str]) -> set[str]: ...

    def evidence(self, evidence_ids: Collection[str]) -> dict[str, Evidence]: ...

    def lineage(self, key: Key) -> list[tuple[str, str]]: ...

    def confirmations(self, evidence_ids: Collection[str]) -> list[Confirmation]:
        """Every confirmation held on the evidence `evidence_ids`, oldest first."""
        ...

    def confirmations_under(self, prefixes: Collection[str]) -> list[Confirmation]:
        """Every confirmation held on evidence whose id starts with one of `prefixes` ("":
        all of them)."""
        ...

    def decaying_keys(self, attributions: Collection[str], after: str, limit: int) -> list[Key]:
        """Keys holding active assertions attributed to (or capped at) `attributions`, in
        key id order after the key id `after`: the decay job's pages."""
        ...


class DecisionTransaction(Protocol):
    """The decision log and the feed of served-belief changes."""

    def decisions(
        self, key: Key | None, namespace: str | None, after_seq: int, limit: int
    ) -> list[LoggedDecision]: ...

    def latest_decision(self, key: Key, outcomes: Collection[Outcome]) -> LoggedDecision | None: ...

    def belief_changes(
        self, namespace: str | None, after_seq: int, limit: int
    ) -> list[BeliefChange]: ...

    def last_change_seq(self) -> int: ...

    def logged_seqs(self, decisions: Sequence[Decision]) -> list[int]:
        """Where each of `decisions` (objects this write transaction logged) stands in the
        decision log: the `seq` ListDecisions lists for it."""
        ...


class BeliefTransaction(Protocol):
    """Served beliefs: by key, in pages, and counted for status."""

    def beliefs(self, keys: Collection[Key]) -> dict[Key, list[StoredBelief]]: ...

    def list_beliefs(
        self,
        namespace: str,
        subject: str | None,
        after: tuple[str, str] | None,
        limit: int,
        subject_prefix: str = "",
    ) -> list[StoredBelief]: ...

    def list_subjects(
        self, namespace: str, subject_prefix: str, after: str | None, limit: int
    ) -> list[str]: ...

    def queued_beliefs(
        self, namespace: str, after: tuple[int, str, str] | None, limit: int
    ) -> list[StoredBelief]: ...

    def counts(self) -> Counts: ...


class VoteTransaction(Protocol):
    """Votes: one per voter and key."""

    def votes(self, keys: Collection[Key]) -> dict[Key, list[Vote]]: ...

    def votes_on_evidence(self, evidence_ids: Collection[str]) -> list[Vote]: ...

    def voted_keys_in_scope(self, scope: str, scope_hash: str) -> set[Key]: ...

    def waiting_votes(self, voter: str) -> int: ...

    def keys_held(self, keys: Collection[Key]) -> set[Key]: ...


class PinTransaction(Protocol):
    """Operators' pins on keys under review."""

    def pins(self, keys: Collection[Key]) -> dict[Key, Pin]: ...


class TombstoneTransaction(Protocol):
    """What erasures left: tombstones, the evidence in an erasure's scope, erasure bounds."""

    def evidence_in_scope(
        self, scope: str, evidence_id: str | None, key: Key | None, subject: tuple[str, str] | None
    ) -> list[Evidence]: ...

    def erased_ids(self, evidence_ids: Collection[str]) -> set[str]: ...

    def erased_keys(self, keys: Collection[Key]) -> set[Key]: ...

    def known_erasures(self, erasure_ids: Collection[str]) -> set[str]: ...

    def evidence_covered(self, tombstone: Tombstone) -> list[Evidence]: ...

    def erasure_bounds(self, erasure_ids: Collection[str]) -> dict[str, dict[str, Instant]]: ...


class DigestTransaction(Protocol):
    """The sync reads: everything held, and what lies under digest buckets."""

    def all_evidence_ids(self) -> Iterator[str]: ...

    def evidence_breaking_text_rule(self) -> list[Evidence]:
        """Active evidence stored before the text rule that the rule refuses now."""
        ...

    def all_erasure_ids(self) -> Iterator[str]: ...

    def all_votes(self) -> Iterator[Vote]: ...

    def evidence_under(self, prefixes: Collection[str]) -> list[Evidence]: ...

    def tombstones_under(self, prefixes: Collection[str]) -> list[Tombstone]: ...

    def all_erasure_bounds(self) -> Iterator[ErasureBound]: ...

    def receipts(self, erasure_ids: Collection[str]) -> dict[str, Receipt]: ...

    def put_receipts(self, receipts: Sequence[Receipt]) -> None: ...

    def erasures_page(
        self, after: tuple[int, str] | None, limit: int, erasure_id: str | None = None
    ) -> list[Tombstone]: ...

    def all_receipts(self) -> Iterator[Receipt]: ...

    def unconfirmed_erasures(self, current: Collection[str]) -> tuple[int, int | None]: ...

    def receipts_under(self, prefixes: Collection[str]) -> list[Receipt]: ...

    def all_receipts_signed(self) -> list[Receipt]: ...

    def bounds_under(self, prefixes: Collection[str]) -> list[ErasureBound]:
        """The erasure bounds held under erasure-id `prefixes`, with their signatures."""
        ...

    def votes_under(self, voter: str | None, prefixes: Collection[str]) -> list[Vote]:
        """The votes of `voter` (None: of every voter) on keys whose id starts with one of
        `prefixes`."""
        ...

    def votes_of(self, items: Collection[tuple[str, str]]) -> list[Vote]:
        """The votes held for these (key id, voter) pairs (their keys' votes read, the others
        left out)."""
        ...


@dataclass(frozen=True, slots=True)
class StoredMember:
    """A member record as stored, and whether the revocation list held revokes it."""

    record: MemberRecord
    revoked: bool


class MemberTransaction(Protocol):
    """Member records (specification §7): every member heard of, kept across restarts."""

    def member_records(self) -> list[StoredMember]: ...


class SignatureTransaction(Protocol):
    """Signatures kept beside what they sign: relayed evidence's, and equivocation proofs."""

    def evidence_signatures(self, evidence_ids: Collection[str]) -> dict[str, bytes]: ...

    def equivocations_under(self, prefixes: Collection[str]) -> list[tuple[Vote, Vote]]: ...

    def all_equivocations(self) -> list[tuple[Vote, Vote]]: ...


class MetaTransaction(Protocol):
    """Named values the node keeps about itself."""

    def meta(self, name: str) -> str | None: ...


class Touched:
    """What one write transaction changed that a served read answers from: the keys whose
    served rows or votes it wrote, or `every` where it cannot say (erasure, decay, bulk vote
    removal, a write by another process noticed)."""

    __slots__ = ("every", "keys")

    def __init__(self) -> None:
        self.keys: set[Key] = set()
        self.every = False

    def __bool__(self) -> bool:
        return self.every or bool(self.keys)


@dataclass(frozen=True, slots=True)
class TouchLog:
    """The log as one read transaction sees it past a position: its `head` (None: empty),
    and the key ids logged after the position up to the head, None where they cannot be
    listed (a write that could not say which keys, or rows pruned under the position)."""

    head: int | None
    key_ids: frozenset[str] | None


class CommitWatcher(Protocol):
    """Told what each write transaction touched, once just before its database commit and
    once just after (still under the writer lock), so a memory of served answers kept
    outside the store (the ledger's) never outlives a commit."""

    def forget(self, touched: Touched) -> None: ...


class ExportTransaction(Protocol):
    """What a logical backup reads, in the order it is replayed."""

    def exported_evidence(self) -> Iterator[tuple[Evidence, EvidenceStatus, str | None]]: ...

    def exported_tombstones(self) -> list[Tombstone]: ...

    def exported_confirmations(self) -> list[Confirmation]: ...

    def exported_pins(self) -> list[tuple[Key, str, str, str, Instant]]: ...


# A pin as stored: the key, the chosen version, the operator, the reason and when.
PinRow = tuple[Key, str, str, str, Instant]


@dataclass(frozen=True, slots=True)
class Writes:
    """What one step of a write transaction writes, as data: `Transaction.apply` writes it in
    the order of these fields, and the ledger announces it once committed. Every field
    defaults to nothing written."""

    # Named values the node keeps about itself.
    meta: Mapping[str, str] = field(default_factory=dict)
    members: Sequence[StoredMember] = ()
    # Erasure bounds, each the lowest now known for its erasure and node (`erasure_bounds`).
    erasure_bounds: Sequence[ErasureBound] = ()
    # What an erasure destroys: its evidence, the votes resting on it and every vote and log
    # row of the keys it forgets (`core.plan.plan_erasure`); and the tombstone it leaves.
    erasure: ErasurePlan | None = None
    tombstone: Tombstone | None = None
    evidence: Sequence[tuple[Evidence, EvidenceStatus, str | None]] = ()
    # Evidence that counts as a retraction on another key (`contradicts`, corrections).
    bears_on: Sequence[tuple[Key, Evidence]] = ()
    # Keys' states as they now stand in this transaction, arbitrated: the store may keep
    # them for the next write's load (`Loaded.remembered`).
    arbitrated: Mapping[Key, Arbitrated] = field(default_factory=dict)
    # Restatements of held evidence, with that evidence as its `confirmed_at` now stands
    # (specification §6).
    confirmations: Sequence[Confirmation] = ()
    confirmed: Sequence[Evidence] = ()
    # Erasure receipts that change what is held (`core.receipts.newer_receipts`).
    receipts: Sequence[Receipt] = ()
    # Relayed evidence's origin signatures, by evidence id.
    signatures: Mapping[str, bytes] = field(default_factory=dict)
    equivocations: Sequence[Equivocation] = ()
    # Votes removed: each voter's votes on these keys.
    votes_removed: Mapping[str, Collection[Key]] = field(default_factory=dict)
    votes: Sequence[Vote] = ()
    pins: Sequence[PinRow] = ()
    # Served rows replaced: (key, its rows now, whether the change is logged for watchers).
    beliefs: Sequence[tuple[Key, Sequence[StoredBelief], bool]] = ()
    decisions: Sequence[Decision] = ()
    # When the served rows changed (the change log's time).
    changed_at: Instant = 0


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a write batch reads before it decides anything (`Transaction.load`)."""

    states: dict[Key, KeyState]
    # How each key's state was last arbitrated, where the store still knows it unchanged.
    remembered: dict[Key, Arbitrated]
    # Which of the batch's evidence ids are stored already (in any status).
    stored: frozenset[str]
    # The evidence first stored under each of the batch's idempotency keys.
    by_idempotency: dict[str, str]
    # The batch's evidence ids an erasure covers.
    erased: frozenset[str]
    votes: dict[Key, list[Vote]]


class Transaction(
    EvidenceTransaction,
    SearchTransaction,
    DecisionTransaction,
    BeliefTransaction,
    VoteTransaction,
    PinTransaction,
    TombstoneTransaction,
    DigestTransaction,
    MemberTransaction,
    MetaTransaction,
    SignatureTransaction,
    ExportTransaction,
    Protocol,
):
    """One unit of work over one connection: the queries of every aggregate, and for a write
    transaction (which holds the store's write lock) `load` and `apply`."""

    def load(
        self, keys: Collection[Key], evidence: Sequence[tuple[Evidence, str | None]]
    ) -> Loaded:
        """Everything deciding `evidence` (with its idempotency keys) on `keys` reads, in as
        few round trips as the store can."""
        ...

    def apply(self, changes: Writes) -> None:
        """Writes `changes`, in the order of its fields; what this transaction reads later
        sees them."""
        ...

    def after_commit(self, then: Callable[[Touched], None]) -> None: ...

    def touch_log(self, after: int | None) -> TouchLog | None: ...


class Repository(Protocol):
    """Opens transactions; `write()` serialises writers (SQLite: BEGIN IMMEDIATE). Each
    `watch`er is told what every write touched around its commit; a write transaction's
    `after_commit` callbacks run once it has committed, before the next write can begin.
    A write given the `keys` and `evidence_ids` it is about to decide may read them ahead
    (what `Transaction.load` will read) as it opens. `cache_keys` is how many hot keys its caches keep
    (0: none), the bound a watcher's memory follows too; `unwatch` stops telling one."""

    @property
    def cache_keys(self) -> int: ...

    @property
    def shared(self) -> bool: ...

    def watch(self, watcher: CommitWatcher) -> None: ...

    def unwatch(self, watcher: CommitWatcher) -> None: ...

    def write(
        self, keys: Collection[Key] = (), evidence_ids: Collection[str] = ()
    ) -> AbstractContextManager[Transaction]: ...

    def read(self) -> AbstractContextManager[Transaction]: ...

    def snapshot(self) -> AbstractContextManager[Transaction]: ...

    def after_erase(self) -> None: ...

    def close(self) -> None: ...


def chunks(items: Sequence[T], size: int = 500) -> Iterator[Sequence[T]]:
    """Splits long IN lists so no database hits its bound-parameter limit."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
