"""A peer's delta as load, plan, apply: the plan steps, pure.

A delta is applied in stages inside one transaction, each reading what the one before wrote:
tombstones (erasures), then relayed evidence, then votes. Before any of it reaches a query,
`screen_delta` refuses what is malformed or badly signed (a refused item's text, a NUL say,
must not fail the transaction that carries the good ones). In the transaction,
`plan_peer_evidence` says which relayed evidence is decided and how it counts here
(`peer_evidence_outcome` reads the decisions back); `plan_peer_votes` which votes are
refused here and why; and, once equivocations are found (`PeerInput._equivocations`),
`withdrawn_keys` and `plan_vote_changes` which peer votes stop counting and which are put.
The tests assert each plan exactly (tests/unit/test_delta.py).

Signatures are checked by functions the shell passes in (the certificates are the shell's),
each called only for an item that is well formed otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from factnode.core import ids
from factnode.core._model import Evidence, Instant, Key, Rule
from factnode.core.consensus import Vote, newer
from factnode.core.decide import Ruling
from factnode.core.peer_checks import ErasureRecord, latest_per_key, tombstone_problem, vote_problem
from factnode.core.policy import Policy
from factnode.core.signed import Signature, refusal, vote_payload
from factnode.core.validation import describe_violations, quoted, relayed_violations, text_problem

T = TypeVar("T", bound=ErasureRecord)
Item = TypeVar("Item")


@dataclass(frozen=True, slots=True)
class Refusal:
    """An item of a delta refused: how the refusal names it, why, and what it counts under
    (`kind`: "tombstone", "evidence" or "vote", or "" for an erasure the node's grants refuse,
    counted apart; `signature`: the signature check that failed, counted as `kind/signature`
    too)."""

    item: str
    reason: str
    kind: str
    signature: str = ""


@dataclass(frozen=True, slots=True)
class Screened(Generic[T]):
    """A delta's items that may reach the store, and those refused before it."""

    tombstones: tuple[T, ...]
    evidence: tuple[Evidence, ...]
    votes: tuple[Vote, ...]
    # This node's own votes relayed back: never replacing its own (`own_votes_to_recast`).
    own_votes: tuple[Vote, ...]
    refused: tuple[Refusal, ...]


def screen_delta(
    tombstones: Sequence[T],
    evidence: Sequence[Evidence],
    votes: Sequence[Vote],
    *,
    peer_id: str,
    node_id: str,
    policy: Policy,
    now: Instant,
    verify_tombstone: Callable[[T], Signature] | None = None,
    verify_evidence: Callable[[Evidence], Signature] | None = None,
    verify_vote: Callable[[Vote], Signature] | None = None,
) -> Screened[T]:
    """Checks every item of a delta from `peer_id` before any of it reaches a query: its form,
    and its signature where a check is given (None: this node checks none of that kind)."""
    refused: list[Refusal] = []
    good_tombstones = screened(
        tombstones,
        tombstone_problem,
        verify_tombstone,
        lambda t: t.erasure_id,
        "tombstone",
        refused,
    )
    good_evidence = screened(
        evidence,
        lambda e: describe_violations(relayed_violations(e, policy)),
        verify_evidence,
        lambda e: e.evidence_id,
        "evidence",
        refused,
    )
    good_votes, own = _screen_votes(votes, peer_id, node_id, policy, now, verify_vote, refused)
    return Screened(
        tuple(good_tombstones), tuple(good_evidence), tuple(good_votes), tuple(own), tuple(refused)
    )


def screened(
    items: Sequence[Item],
    problem_of: Callable[[Item], str],
    verify: Callable[[Item], Signature] | None,
    id_of: Callable[[Item], str],
    kind: str,
    refused: list[Refusal],
) -> list[Item]:
    """The items well formed (`problem_of` gives "") and, where checked, validly signed, in
    order; the others go to `refused` as `kind`, named by their ids."""
    good: list[Item] = []
    for item in items:
        problem, signature = problem_of(item), ""
        if not problem and verify is not None:
            problem, signature = _checked(verify(item))
        if problem:
            refused.append(Refusal(shown_id(id_of(item)), problem, kind, signature))
        else:
            good.append(item)
    return good


def _screen_votes(
    votes: Sequence[Vote],
    peer_id: str,
    node_id: str,
    policy: Policy,
    now: Instant,
    verify: Callable[[Vote], Signature] | None,
    refused: list[Refusal],
) -> tuple[list[Vote], list[Vote]]:
    """The votes that may be kept, and this node's own that came back; refusals go to
    `refused`. A node that checks signatures takes a vote from any relay when its voter
    signed it; one that does not takes only the link's own votes."""
    good: list[Vote] = []
    own: list[Vote] = []
    for v in votes:
        if v.voter == node_id and verify is not None:
            # This node's own vote coming back through a relay: no relay's copy replaces
            # what it holds (`own_votes_to_recast` says when it must outnumber the copy).
            own.append(v)
            continue
        if verify is not None:
            problem, signature = _checked(verify(v))
        elif v.voter != peer_id:
            problem, signature = f"a vote of {v.voter} relayed by {peer_id}, unsigned here", ""
        else:
            problem, signature = "", ""
        problem = problem or vote_problem(v, policy, now)
        if problem:
            refused.append(Refusal(vote_item(v), problem, "vote", signature))
        else:
            good.append(v)
    return good, own


def _checked(check: Signature) -> tuple[str, str]:
    """Why an item is refused for its signature check, or "", and the check's name for the
    count ("" when valid)."""
    return refusal(check), "" if check is Signature.VALID else check.value


def relayed_cap(
    e: Evidence, link_cap: str, policy: Policy, node_id: str, *, signed: bool
) -> str | None:
    """The ceiling relayed evidence counts at here. Signed (a node that checks signatures):
    the one this node sets for its origin, never the path's, and none for its own evidence
    coming back; unsigned: the lower of the sender's and the link's."""
    if signed:
        return None if e.origin_node == node_id else policy.cap_for(e.origin_node)
    return min(
        (c for c in (e.anchor_cap, link_cap) if c is not None),
        key=lambda name: policy.anchors[name],
    )


@dataclass(frozen=True, slots=True)
class PeerEvidencePlan:
    """Which relayed evidence a delta decides, as it counts here."""

    # Items held already, in any status, or repeated in the delta: taken as held.
    held: int
    # The rest, in order, as decided here (no idempotency key: a peer's item has none).
    items: tuple[tuple[Evidence, None], ...]


def plan_peer_evidence(
    evidence: Sequence[Evidence],
    held_ids: Collection[str],
    *,
    link_cap: str,
    policy: Policy,
    node_id: str,
    signed: bool,
    now: Instant,
) -> PeerEvidencePlan:
    """Relayed evidence `held_ids` does not name, recorded now with its statement's version,
    its origin's time and its ceiling here (`relayed_cap`). Evidence held already was decided
    when it first arrived: a replayed or repeated item is taken as held, not decided and
    logged again, so no peer can grow the decision log by resending what it sent."""
    seen = set(held_ids)
    held = 0
    items: list[tuple[Evidence, None]] = []
    for e in evidence:
        if e.evidence_id in seen:
            held += 1
            continue
        seen.add(e.evidence_id)
        counted = replace(
            e,
            version_id=ids.statement_version(e.key, e.object, retracts=e.retracts),
            anchor_cap=relayed_cap(e, link_cap, policy, node_id, signed=signed),
            recorded_at=now,
            origin_recorded_at=e.first_recorded_at,
        )
        items.append((counted, None))
    return PeerEvidencePlan(held, tuple(items))


def peer_evidence_outcome(
    rulings: Iterable[tuple[Evidence, Ruling]],
) -> tuple[int, tuple[Refusal, ...], dict[str, bytes]]:
    """What relayed evidence's rulings tell its peer: evidence an erasure covers is refused,
    the rest accepted; returns how many were accepted, the refusals, and the accepted
    evidence's signatures to keep (only its origin could sign it, so it passes on unchanged)."""
    accepted = 0
    refused: list[Refusal] = []
    signatures: dict[str, bytes] = {}
    for e, ruling in rulings:
        if ruling.decision.rule is Rule.ERASED:
            refused.append(Refusal(e.evidence_id, "covered by an erasure", "evidence"))
            continue
        accepted += 1
        if e.signature:
            signatures[e.evidence_id] = e.signature
    return accepted, tuple(refused), signatures


@dataclass(frozen=True, slots=True)
class PeerVotesLoad:
    """What the votes of a delta read before any is decided (after its evidence is stored)."""

    # Evidence the votes name that an erasure covers here.
    erased: frozenset[str] = frozenset()
    # Evidence the votes name that is held here.
    held: Mapping[str, Evidence] = field(default_factory=dict)
    # Keys the abstentions name that hold evidence here.
    keys_held: frozenset[Key] = frozenset()
    # Keys the votes name that were erased here.
    erased_keys: frozenset[Key] = frozenset()
    # How many votes of each voter in `voters_waiting` wait here already.
    waiting: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PeerVotesPlan:
    """A delta's votes taken here (before equivocations are looked for) and those refused."""

    taken: tuple[Vote, ...]
    refused: tuple[Refusal, ...]

    @property
    def accepted(self) -> int:
        """How many votes the peer is told were accepted: one per voter and key."""
        return len({(v.voter, v.key) for v in self.taken})


def _unheld(v: Vote, load: PeerVotesLoad) -> bool:
    """Whether a vote must wait: an abstention on a key held nowhere here waits like a vote
    on evidence not held (both share the voter's one bound)."""
    if v.version_id is None:
        return v.key not in load.keys_held
    return v.evidence_id not in load.held


def voters_waiting(votes: Iterable[Vote], load: PeerVotesLoad) -> set[str]:
    """The voters some of whose votes would wait, whose waiting votes `load.waiting` counts."""
    return {
        v.voter
        for v in votes
        if _unheld(v, load)
        and not (v.version_id is not None and v.evidence_id in load.erased)
        and v.key not in load.erased_keys
    }


def plan_peer_votes(votes: Sequence[Vote], load: PeerVotesLoad, policy: Policy) -> PeerVotesPlan:
    """Which screened votes are refused here, and why: one resting on erased evidence; one
    naming evidence not held on a key erased here (the evidence, if it ever came, would be
    judged against the erasure, and its voter, who erased the key too, withdrew the vote by
    deleting it: no signed withdrawal may carry the key); one waiting beyond the voter's
    bound (`max_waiting_votes_per_peer`); one naming evidence for another version."""
    taken: list[Vote] = []
    refused: list[Refusal] = []
    most = policy.max_waiting_votes_per_peer
    room: dict[str, int] = {}  # how many more of each voter's votes may wait
    for v in votes:
        problem = ""
        named = load.held.get(v.evidence_id) if v.version_id is not None else None
        unheld = _unheld(v, load)
        if v.version_id is not None and v.evidence_id in load.erased:
            problem = "the vote rests on erased evidence"
        elif unheld and v.key in load.erased_keys:
            problem = "its key was erased here and the evidence it names is not held"
        elif unheld:
            room.setdefault(v.voter, most - load.waiting.get(v.voter, 0))
            if room[v.voter] <= 0:
                problem = (
                    "too many of this voter's votes wait for evidence this node "
                    f"does not hold (at most {most})"
                )
            room[v.voter] -= 1
        elif named is not None and (named.key, named.version_id) != (v.key, v.version_id):
            problem = "unknown version: the evidence it names is for another version"
        if problem:
            refused.append(Refusal(vote_item(v), problem, "vote"))
        else:
            taken.append(v)
    return PeerVotesPlan(tuple(taken), tuple(refused))


def own_votes_to_recast(
    returned: Iterable[Vote], held: Mapping[Key, Vote], keys_held: Collection[Key]
) -> tuple[Key, ...]:
    """The keys on which this node must cast its vote again, numbered after the copy of its
    own vote a relay sent back (`returned`; `held`: its own vote on each key held here;
    `keys_held`: the keys holding evidence here). A copy it holds alike, or one its held
    vote outnumbers, needs nothing: the held vote replaces it wherever it goes. Any other
    copy would stay on the members that hold it, since only a higher number replaces a
    signed vote: one cast before an erasure here and relayed late, after new evidence
    arrived for its key, or one this node signed before a restore from an older backup.
    Without evidence for the key nothing is cast (the peers that erased it would refuse the
    vote); the copy returns once the evidence has, and is outnumbered then."""
    keys: dict[Key, None] = {}
    for r in returned:
        mine = held.get(r.key)
        if mine is None:
            if r.key in keys_held:
                keys[r.key] = None
        elif not mine.equivocated and r.seq >= mine.seq and vote_payload(r) != vote_payload(mine):
            keys[r.key] = None
    return tuple(keys)


def withdrawn_keys(peer_id: str, sent: Iterable[Vote], held: Iterable[Vote]) -> frozenset[Key]:
    """The keys of `peer_id`'s votes `held` here that it did not send (`sent`: every vote of
    a delta holding all the peer's votes under some prefixes; `held`: its votes held here
    under them): votes it withdrew, which stop counting."""
    voted = {v.key for v in sent if v.voter == peer_id}
    return frozenset(v.key for v in held if v.key not in voted)


@dataclass(frozen=True, slots=True)
class VoteChanges:
    """What a delta's votes change here."""

    # The votes put: each newer than the one held from its voter on the key.
    put: tuple[Vote, ...]
    # The keys whose tally is recounted: those of the votes put, withdrawn or newly proven.
    recount: frozenset[Key]


def plan_vote_changes(
    votes: Iterable[Vote],
    held: Mapping[Key, Sequence[Vote]],
    withdrawn: Collection[Key] = (),
    proven: Collection[Key] = (),
) -> VoteChanges:
    """The votes taken, one per voter and key (the latest cast), that replace what is `held`
    (the votes on their keys before the delta): an older vote arriving late never replaces a
    newer one; a newer one is kept even when it says the same (its later time must be held,
    so a vote cast between the two and arriving later still loses to it)."""
    put: list[Vote] = []
    for v in latest_per_key(votes):
        held_vote = next((o for o in held.get(v.key, ()) if o.voter == v.voter), None)
        if held_vote is None or newer(v, held_vote):
            put.append(v)
    return VoteChanges(tuple(put), frozenset({v.key for v in put} | set(withdrawn) | set(proven)))


def shown_id(item_id: str) -> str:
    """An item's id as a refusal names it: ids are short hex, a peer's could be anything."""
    return item_id if len(item_id) <= 64 and not text_problem(item_id) else quoted(item_id)


def vote_item(v: Vote) -> str:
    """How a refusal names a vote: its key's id, or its text when that cannot be hashed."""
    try:
        return ids.key_id(v.key)
    except UnicodeEncodeError:
        return "vote with a key that is not text"
