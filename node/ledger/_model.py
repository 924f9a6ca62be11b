"""What the ledger answers: plain values built from the core's types and the store's rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from factnode.core import (
    BeliefState,
    Comparison,
    Confirmation,
    Decision,
    Evidence,
    EvidenceStatus,
    Instant,
    Key,
    Rule,
)
from factnode.core.consensus import Tally, Vote
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.receipts import Coverage, Receipt
from factnode.core.refresh import StoredBelief
from factnode.core.serving import Answer
from factnode.core.signed import Equivocation, Signature
from factnode.core.story import BelievedAgain
from factnode.store import Tombstone
from factnode.store.repository import Writes

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Signing:
    """This node's signing key (specification §7) and the checks of what peers send against
    their signers' certificates, wired once by the composition root on a federated node (the
    ledger never imports the federation). A None field: that kind of item is neither signed
    nor checked here (the default: none at all)."""

    sign: Callable[[bytes], bytes] | None = None
    verify_vote: Callable[[Vote], Signature] | None = None
    verify_evidence: Callable[[Evidence], Signature] | None = None
    verify_tombstone: Callable[[Tombstone], Signature] | None = None
    verify_bound: Callable[[ErasureBound], Signature] | None = None
    verify_confirmation: Callable[[Confirmation], Signature] | None = None
    verify_receipt: Callable[[Receipt], Signature] | None = None


class NotFound(LookupError):
    """The thing asked for does not exist on this node."""


class NotUnderReview(Exception):
    """The key is not AMBIGUOUS or CONTESTED (nor held by a pin), so there is nothing to
    resolve; the message names the key's state and rule."""


@dataclass(frozen=True, slots=True)
class Belief:
    """What the node believes for a key, with the rule that decided it."""

    key: Key
    version_id: str
    object: str
    state: BeliefState
    rule: Rule
    evidence: Evidence
    # Multi-valued keys: every believed (version_id, object).
    values: tuple[tuple[str, str], ...] = ()
    # When this node first recorded evidence for the key, and last for a served value (0:
    # not worked out; reads set them, `stamped`).
    first_recorded_at: Instant = 0
    last_recorded_at: Instant = 0


def stamped(belief: Belief, held: Sequence[Evidence]) -> Belief:
    """`belief` with its stamps, from `held`, the key's active assertions."""
    if not held:
        return belief
    first = min(e.recorded_at for e in held)
    served = {v for v, _ in belief.values} or {belief.version_id}
    last = max((e.recorded_at for e in held if e.version_id in served), default=first)
    return replace(belief, first_recorded_at=first, last_recorded_at=max(first, last))


@dataclass(frozen=True, slots=True)
class Hit:
    """A belief a search found: the key's served belief, the value of it that matched (one of
    a multi-valued key's), the anchor of the evidence behind that value, and the rank score
    (higher is better; comparable within one search only)."""

    belief: Belief
    version_id: str
    object: str
    anchor: str
    score: float
    # When this node first recorded evidence for the key, and last for the matched value.
    first_recorded_at: Instant = 0
    last_recorded_at: Instant = 0


def hit_of(
    belief: Belief | None,
    version_id: str,
    evidence_id: str,
    score: float,
    held: Sequence[Evidence],
    evidence: Callable[[Sequence[str]], Mapping[str, Evidence]],
) -> Hit | None:
    """The hit a matched value makes, or None where `belief` (what the view serves for its
    key) does not serve that value. The anchor is the served evidence's (for another value of
    a multi-valued key, the matched assertion's); `held` is the key's evidence, `evidence`
    loads evidence by id."""
    if belief is None:
        return None
    served = dict(belief.values) if belief.values else {belief.version_id: belief.object}
    obj = served.get(version_id)
    if obj is None:
        return None
    if version_id == belief.evidence.version_id:
        anchor = belief.evidence.attribution
    else:
        anchor = evidence([evidence_id])[evidence_id].attribution
    first = min((e.recorded_at for e in held), default=belief.evidence.recorded_at)
    last = max(
        (e.recorded_at for e in held if e.version_id == version_id),
        default=belief.evidence.recorded_at,
    )
    return Hit(belief, version_id, obj, anchor, score, first, max(last, first))


@dataclass(frozen=True, slots=True)
class Submitted:
    """The answer to one submission: its decision (at `seq` in the decision log) and the
    key's belief after it."""

    decision: Decision
    evidence_id: str
    version_id: str
    belief: Belief | None
    seq: int = 0


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a key's belief beats each other version: by the rule that served it (arbitration,
    federation consensus or an operator's pin), with the local arbitration and the votes."""

    belief: Belief | None
    comparisons: tuple[Comparison, ...]
    # Local arbitration's chain (the same as `comparisons` when the local belief is served).
    local_comparisons: tuple[Comparison, ...] = ()
    tally: Tally | None = None
    # Whether the key is under review and why, where it is or an operator's pin bears on it.
    review: str = ""
    # The served version, where a retraction or an erasure made it believed again.
    believed_again: BelievedAgain | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing and the token of the next (empty at the end)."""

    items: list[T]
    next_page_token: str = ""


@dataclass(frozen=True, slots=True)
class Resolution:
    """What an operator's resolution did."""

    submitted: Submitted
    resolved: bool
    note: str


@dataclass(frozen=True, slots=True)
class Received:
    """What this node took from a peer's delta, and what it refused and why."""

    accepted: int
    rejected: list[tuple[str, str]]
    # How many items of each kind ("tombstone", "evidence", "vote") were refused; and, as
    # "kind/reason" (e.g. "vote/bad_signature"), how many of those for their signature.
    refused: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ErasureReport:
    """What an erase removed."""

    erasure_id: str
    evidence_erased: int
    keys_affected: int
    erased_at: Instant
    # Each version the erasure made believed again, with what had outranked it.
    believed_again: tuple[BelievedAgain, ...] = ()


@dataclass(frozen=True, slots=True)
class ErasureStatus:
    """An erasure held here (its tombstone, without the evidence ids) and which members
    have confirmed it (`core.receipts.coverage`)."""

    tombstone: Tombstone
    coverage: Coverage


@dataclass(frozen=True, slots=True)
class DecayReport:
    """What a decay run did."""

    decayed: int
    tombstoned: int


@dataclass(slots=True)
class Committed:
    """What one committed write transaction changed in the sets peers compare: evidence,
    erasures and votes. Observers registered with `Ledger.on_commit` receive it."""

    evidence_added: set[str] = field(default_factory=set)
    evidence_removed: set[str] = field(default_factory=set)
    erasures_added: set[str] = field(default_factory=set)
    votes_put: list[Vote] = field(default_factory=list)
    votes_removed: list[tuple[str, Key]] = field(default_factory=list)
    # Peers' tombstones this write refused by `federation.accept_erasures_from`.
    erasures_refused: int = 0
    # Each refreshed key's tally as the transaction last counted it (for the decision log).
    tallies: dict[Key, Tally | None] = field(default_factory=dict)
    # Proofs of equivocation this write stored (the digests gossip them, specification §7).
    equivocations: list[Equivocation] = field(default_factory=list)
    # Erasure bounds this write stored or lowered (they gossip with the tombstones).
    bounds_put: list[ErasureBound] = field(default_factory=list)
    # Confirmations this write stored (they gossip with the evidence).
    confirmations_put: list[Confirmation] = field(default_factory=list)
    # Erasure receipts this write stored (they gossip in a digest set of their own).
    receipts_put: list[Receipt] = field(default_factory=list)

    def note(self, changes: Writes) -> None:
        """Adds what `changes`, applied in this transaction, change in the sets peers compare."""
        self.evidence_added.update(
            e.evidence_id for e, status, _ in changes.evidence if status is EvidenceStatus.ACTIVE
        )
        if changes.erasure is not None:
            self.evidence_removed.update(changes.erasure.evidence_ids)
            self.votes_removed.extend(changes.erasure.votes_removed)
        if changes.tombstone is not None:
            self.erasures_added.add(changes.tombstone.erasure_id)
        self.bounds_put.extend(changes.erasure_bounds)
        self.confirmations_put.extend(changes.confirmations)
        self.receipts_put.extend(changes.receipts)
        self.equivocations.extend(changes.equivocations)
        self.votes_removed.extend((v, k) for v, keys in changes.votes_removed.items() for k in keys)
        self.votes_put.extend(changes.votes)


def belief_from_rows(rows: Sequence[StoredBelief], reps: dict[str, Evidence]) -> Belief:
    """A served belief from its stored rows (several for a multi-valued key)."""
    first = rows[0]
    values = (
        tuple((b.version_id, b.object) for b in rows)
        if len(rows) > 1 or first.rule is Rule.MULTI_VALUED
        else ()
    )
    return Belief(
        first.key,
        first.version_id,
        first.object,
        first.state,
        first.rule,
        reps[first.evidence_id],
        values,
    )


def belief_of(key: Key, answer: Answer) -> Belief | None:
    """The belief a key serves in a view (`serving.view`), or None where nothing is."""
    first = answer.first
    if first is None:
        return None
    values = (
        tuple((v.version_id, v.evidence.object) for v in answer.values)
        if len(answer.values) > 1 or first.rule is Rule.MULTI_VALUED
        else ()
    )
    return Belief(
        key,
        first.version_id,
        first.evidence.object,
        first.state,
        first.rule,
        first.evidence,
        values,
    )
