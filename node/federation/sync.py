"""Anti-entropy sync: compare digests, descend where they differ, move only the difference.

Transport-independent: the server side is `FederationEndpoint`, called with the node id
the connection proved; the client side talks to a `PeerLink` (gRPC over mTLS in a
node, an in-process link in simulations and benchmarks).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
import random
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.clock import describe_skew
from factnode.config import Peer
from factnode.core import FieldViolation, InvalidInput
from factnode.core.consensus import Vote
from factnode.core.members import MemberRecord
from factnode.federation._digest import DEPTH, SetDigest
from factnode.federation._index import index_of, signed_vote_hash, signed_vote_id
from factnode.federation.members import Roster
from factnode.federation.trust import NotAMember
from factnode.ledger import Ledger

log = logging.getLogger("factnode.federation")

T = TypeVar("T")

# The longest any one step of the current round may take: an RPC, or applying what it
# brought. A round that keeps making progress is not cut short, however much it moves.
_STEP_TIMEOUT: ContextVar[float | None] = ContextVar("factnode_sync_step_timeout", default=None)


async def _step(aw: Awaitable[T]) -> T:
    timeout = _STEP_TIMEOUT.get()
    return await (aw if timeout is None else asyncio.wait_for(aw, timeout))


EVIDENCE = pb.DIGEST_SET_EVIDENCE
TOMBSTONES = pb.DIGEST_SET_TOMBSTONES
PEER_VOTES = pb.DIGEST_SET_PEER_VOTES
YOUR_VOTES = pb.DIGEST_SET_YOUR_VOTES
VOTES = pb.DIGEST_SET_VOTES
MEMBERS = pb.DIGEST_SET_MEMBERS
RECEIPTS = pb.DIGEST_SET_RECEIPTS
# A node that signs its votes compares VOTES, every voter's signed votes in one set, so a
# vote reaches every member through whichever members it meets (specification §7); one that signs
# none (no federation certificate) compares PEER_VOTES and YOUR_VOTES, its own votes and the
# peer's, as before votes were signed (`Syncer._mine`).
SETS = (EVIDENCE, TOMBSTONES, PEER_VOTES, YOUR_VOTES, VOTES, MEMBERS, RECEIPTS)

# A child digest costs about 30 bytes on the wire, less than resending one vote or one piece of
# evidence, so descend until a bucket holds a single item (or DEPTH is reached).
LEAF_ITEMS = 1  # stop descending once a bucket holds at most this many items
# A bucket of at most this many items has at most as many non-empty children at any depth, so
# asking two levels down costs no more bytes than one and saves a round trip. A larger bucket
# descends one level at a time: two levels at once would return up to 256 children to find
# the one that differs, and that overhead, not the changed items, dominated sparse rounds.
TWO_LEVEL_ITEMS = 16
DESCEND_BATCH = 256  # buckets per GetDigest when descending: at most 4,096 children back
DELTA_ITEMS = 512  # about this many items per PullDelta / PushDelta
# What a peer may ask for and what one answer holds. An honest round asks for at most
# DESCEND_BATCH buckets per GetDigest and DELTA_ITEMS buckets per PullDelta; a digest answer
# of DESCEND_BATCH buckets at depth 1 holds at most 4,096 buckets.
MAX_REQUEST_REFS = 1024
MAX_HAVE_IDS = 20_000
MAX_DIGEST_BUCKETS = 4096
MAX_DELTA_ITEMS = 2048
MAX_DELTA_BYTES = 2 * 1024 * 1024  # half the default message limit
MAX_BACKOFF_SECONDS = 300.0


class PeerLink(Protocol):
    """The client side of one authenticated peer connection."""

    async def get_digest(self, request: pb.DigestRequest) -> pb.Digest: ...

    async def pull_delta(self, request: pb.DeltaRequest) -> pb.Delta: ...

    async def push_delta(self, delta: pb.Delta) -> pb.PushDeltaResponse: ...


class FederationEndpoint:
    """The server side of sync for one node; `caller` is the peer the connection proved.

    Every answer is bounded before it is built: a request names at most `MAX_REQUEST_REFS`
    buckets and `MAX_HAVE_IDS` held ids, a digest answer holds at most `max_digest_buckets`
    buckets and a delta at most `max_delta_items` items and about `max_delta_bytes` bytes.
    What does not fit is named in the answer's `unanswered` for the caller to ask again,
    so the memory an answer takes never depends on what the caller asked for."""

    def __init__(
        self,
        ledger: Ledger,
        peers: Sequence[Peer],
        *,
        max_digest_buckets: int = MAX_DIGEST_BUCKETS,
        max_delta_items: int = MAX_DELTA_ITEMS,
        max_delta_bytes: int = MAX_DELTA_BYTES,
        roster: Roster | None = None,
    ) -> None:
        self.ledger = ledger
        self.peers = {p.node_id: p for p in peers}
        # The revocation list this node holds and passes on; None: it gossips none.
        self.roster = roster
        self.max_digest_buckets = max_digest_buckets
        self.max_delta_items = max_delta_items
        self.max_delta_bytes = max_delta_bytes

    def _digest(self, caller: str, digest_set: pb.DigestSet) -> SetDigest:
        index = index_of(self.ledger)
        if digest_set == EVIDENCE:
            return index.evidence
        if digest_set == TOMBSTONES:
            return index.tombstones
        if digest_set == PEER_VOTES:
            return index.votes(self.ledger.node_id)
        if digest_set == YOUR_VOTES:
            return index.votes(caller)
        if digest_set == VOTES:
            return index.signed_votes
        if digest_set == MEMBERS:
            return index.members
        if digest_set == RECEIPTS:
            return index.receipts
        raise InvalidInput([FieldViolation("buckets.set", f"unknown digest set {digest_set}")])

    def get_digest(self, caller: str, request: pb.DigestRequest) -> pb.Digest:
        """Root buckets of every set, or the children of the requested buckets, up to the
        answer's bucket limit (the rest named in `unanswered`)."""
        _check_refs(request.buckets, ())
        refs = list(request.buckets) or [pb.BucketRef(set=s, prefix="") for s in SETS]
        depth = min(request.depth, 2)
        out = pb.Digest()
        index = index_of(self.ledger)
        for ref in refs:
            _check_prefix(ref.prefix)
            self._digest(caller, ref.set)  # an unknown set is refused before anything is built
        with index.lock:
            for i, ref in enumerate(refs):
                children = self._digest(caller, ref.set).children(ref.prefix, depth)
                if out.buckets and len(out.buckets) + len(children) > self.max_digest_buckets:
                    out.unanswered.extend(refs[i:])
                    break
                for prefix, digest, count in children:
                    out.buckets.add(set=ref.set, prefix=prefix, hash=digest, count=count)
        out.answered_at.CopyFrom(wire.timestamp(self.ledger.clock.now()))
        if self.roster is not None and not request.buckets:  # a round's first request
            out.revocation_list_number = self.roster.number
            later = self.roster.later_than(request.revocation_list_number)
            if later is not None:
                out.revocation_list = later
        return out

    def pull_delta(self, caller: str, request: pb.DeltaRequest) -> pb.Delta:
        """What this node holds under the requested buckets, less what the caller has, built
        bucket by bucket up to the answer's limits: a bucket holding more than one answer's
        items is replaced by its children, and what does not fit is named in `unanswered`."""
        _check_refs(request.buckets, request.have_ids)
        for ref in request.buckets:
            _check_prefix(ref.prefix)
            if ref.set not in _PULLED:
                raise InvalidInput(
                    [FieldViolation("buckets.set", f"cannot pull digest set {ref.set}")]
                )
        have = set(request.have_ids)
        marks = _vote_marks(request.have_ids)
        unlike = self._unlike_votes(caller, request.buckets, marks) if marks else None
        out = pb.Delta()
        items = size = 0
        work = collections.deque((ref.set, ref.prefix) for ref in request.buckets)
        while work:
            s, prefix = work.popleft()
            digest = self._digest(caller, s)
            with index_of(self.ledger).lock:
                if s == VOTES and unlike is not None:
                    count = unlike.count(prefix)  # only the votes it would send count
                else:
                    count = digest.bucket(prefix)[1]
                split = (
                    [c for c, _d, _n in digest.children(prefix, 1)]
                    if count > self.max_delta_items and len(prefix) < DEPTH
                    else None
                )
            if split is not None:
                work.extendleft((s, c) for c in reversed(split))
                continue
            if count == 0:
                continue  # nothing held here: answered, with nothing
            if items and items + count > self.max_delta_items:
                work.appendleft((s, prefix))
                break
            if s == VOTES and unlike is not None:
                # Read with the next buckets' that fit this answer: one store read or a few.
                later = [p for ws, p in work if ws == VOTES]
                unlike.read_under(prefix, later, self.max_delta_items - items)
            piece, left_out = self._piece(s, prefix, have, unlike)
            piece_size = piece.ByteSize()
            if piece_size > self.max_delta_bytes and len(prefix) < DEPTH and count > 1:
                # Too many bytes for one answer: its children, one at a time, fit better.
                with index_of(self.ledger).lock:
                    smaller = [c for c, _d, _n in digest.children(prefix, 1)]
                work.extendleft((s, c) for c in reversed(smaller))
                continue
            if items and size + piece_size > self.max_delta_bytes:
                work.appendleft((s, prefix))
                break
            out.MergeFrom(piece)
            items += _items(piece)
            size += piece_size
            if left_out:
                # A leaf bucket larger than one answer: the caller asks again with what it
                # got among its held ids.
                work.appendleft((s, prefix))
                break
        out.unanswered.extend(pb.BucketRef(set=s, prefix=p) for s, p in work)
        out.votes_marked = True
        out.wanted_votes.extend(self._wanted(caller, request.buckets, out.unanswered, marks))
        # One certificate per signer, beyond the items' byte budget: bounded by the members.
        _vouch(out, self.roster)
        return out

    def _unlike_votes(
        self, caller: str, refs: Sequence[pb.BucketRef], marks: dict[str, str]
    ) -> _UnlikeVotes:
        """The signed votes under the requested VOTES buckets that the caller's marks do not
        show it holding alike: named from the digest now, read as the answer takes them."""
        prefixes = [r.prefix for r in refs if r.set == VOTES]
        digest = self._digest(caller, VOTES)
        by_leaf: dict[str, list[str]] = collections.defaultdict(list)
        if prefixes:
            with index_of(self.ledger).lock:
                for i in digest.ids_under(prefixes):
                    if not _marked_alike(i, marks, digest):
                        by_leaf[i[:DEPTH]].append(i)
        return _UnlikeVotes(by_leaf, self.ledger.offer_votes)

    def _piece(
        self,
        s: pb.DigestSet,
        prefix: str,
        have: set[str],
        unlike: _UnlikeVotes | None,
    ) -> tuple[pb.Delta, bool]:
        """The items under one bucket, and whether evidence was left out of it (a leaf
        bucket larger than one answer). Signed votes: `unlike`'s, when the caller marked
        what it holds."""
        if s == MEMBERS:
            records = self.roster.records_under([prefix]) if self.roster is not None else []
            return pb.Delta(members=[wire.member_record_pb(r) for r in records]), False
        if s == VOTES and unlike is not None:
            return pb.Delta(votes=[wire.vote_pb(v) for v in unlike.under(prefix)]), False
        if s == RECEIPTS:
            # Not left out by `have`: a newer receipt replaces an item the caller holds.
            receipts = self.ledger.peer_input.offer_receipts([prefix])
            return pb.Delta(erasure_receipts=[wire.receipt_pb(r) for r in receipts]), False
        tombstones, evidence, votes = self.ledger.offer({_PULLED[s]: [prefix]}, have)
        bounds = self.ledger.offer_bounds([prefix], have) if s == TOMBSTONES else []
        confirmations = self.ledger.offer_confirmations([prefix]) if s == EVIDENCE else []
        piece = pb.Delta(
            tombstones=[wire.tombstone_pb(t) for t in tombstones],
            erasure_bounds=[wire.bound_pb(b) for b in bounds],
            confirmations=[wire.confirmation_pb(c) for c in confirmations],
            evidence=[wire.relayed_pb(e) for e in evidence[: self.max_delta_items]],
            votes=[wire.vote_pb(v) for v in votes],
        )
        return piece, len(evidence) > len(piece.evidence)

    def _wanted(
        self,
        caller: str,
        asked: Sequence[pb.BucketRef],
        unanswered: Sequence[pb.BucketRef],
        marks: dict[str, str],
    ) -> list[str]:
        """The signed-vote items the caller marked under the answered VOTES buckets that
        this node lacks or holds differently: what the caller's push should carry."""
        answered = {r.prefix for r in asked if r.set == VOTES}
        left = {r.prefix for r in unanswered if r.set == VOTES}
        if not answered or not marks:
            return []
        digest = self._digest(caller, VOTES)
        with index_of(self.ledger).lock:
            return sorted(
                item
                for item in marks
                if _under(item, answered)
                and not _under(item, left)
                and not _marked_alike(item, marks, digest)
            )

    def push_delta(self, caller: str, delta: pb.Delta) -> pb.PushDeltaResponse:
        """Takes what the caller offers; its votes count for the caller only."""
        for prefix in delta.votes_complete_under:
            _check_prefix(prefix)
        refused = []
        if delta.revocation_list and self.roster is not None:
            problem = self.roster.offered(delta.revocation_list, caller)
            if problem:
                refused.append(pb.RejectedItem(id="revocation_list", reason=problem))
        if self.roster is not None:
            self.roster.learn(delta.certificates, caller)
        if delta.members and self.roster is not None:
            taken = self.roster.take([wire.member_record(m) for m in delta.members], caller)
            refused.extend(pb.RejectedItem(id=i, reason=r) for i, r in taken)
        result = self.ledger.receive(
            caller,
            self.ledger.policy.cap_for(caller),
            [wire.tombstone(t) for t in delta.tombstones],
            [wire.relayed(e) for e in delta.evidence],
            [wire.vote(v, caller) for v in delta.votes],
            list(delta.votes_complete_under),
            [wire.bound(b) for b in delta.erasure_bounds],
            [wire.confirmation(c, 0) for c in delta.confirmations],
            [wire.receipt(r) for r in delta.erasure_receipts],
        )
        return pb.PushDeltaResponse(
            accepted=result.accepted,
            rejected=[*refused, *(pb.RejectedItem(id=i, reason=r) for i, r in result.rejected)],
        )


def _vouch(delta: pb.Delta, roster: Roster | None) -> None:
    """Adds the certificates of the delta's signers (voters, evidence and erasure origins),
    each once, so a receiver that does not know one can check its signature (it checks the
    certificate against the CA first)."""
    if roster is not None:
        signers = {v.voter for v in delta.votes if v.signature}
        signers |= {e.origin_node for e in delta.evidence if e.signature}
        signers |= {t.origin_node for t in delta.tombstones if t.signature}
        signers |= {b.node_id for b in delta.erasure_bounds if b.signature}
        signers |= {c.signer for c in delta.confirmations if c.signature}
        signers |= {r.node_id for r in delta.erasure_receipts if r.signature}
        delta.certificates.extend(roster.certificates(signers))


# The sets a peer may pull, and what the ledger calls them (members come from the roster).
_PULLED = {
    EVIDENCE: "evidence",
    TOMBSTONES: "tombstones",
    PEER_VOTES: "votes",
    VOTES: "all_votes",
    MEMBERS: "members",
    RECEIPTS: "receipts",
}


def _items(delta: pb.Delta) -> int:
    return (
        len(delta.tombstones)
        + len(delta.evidence)
        + len(delta.votes)
        + len(delta.members)
        + len(delta.erasure_bounds)
        + len(delta.confirmations)
        + len(delta.erasure_receipts)
    )


def vote_mark(item: str, h: int) -> str:
    """A signed-vote item as its holder holds it, for DeltaRequest.have_ids: "<item>#<hash>"."""
    return f"{item}#{_hex(h)}"


def _hex(h: int) -> str:
    """An item hash as a vote mark writes it: 32 hex digits."""
    return f"{h:032x}"


def _vote_marks(have_ids: Collection[str]) -> dict[str, str]:
    """The vote marks among a pull's held ids: item -> hash (hex)."""
    out = {}
    for held in have_ids:
        item, sep, h = held.rpartition("#")
        if sep:
            out[item] = h
    return out


def _marked_alike(item: str, marks: dict[str, str], digest: SetDigest) -> bool:
    """Whether the caller's mark of `item` is this node's: the same signed bytes."""
    h = digest.get(item)
    return h is not None and marks.get(item) == _hex(h)


def _item(item: str) -> tuple[str, str]:
    """A signed-vote item id ("<key id>/<voter>") as (key id, voter)."""
    key_id, _, voter = item.partition("/")
    return key_id, voter


def _under(item: str, prefixes: set[str]) -> bool:
    return any(item[:n] in prefixes for n in range(DEPTH + 1))


def _check_refs(refs: Sequence[pb.BucketRef], have_ids: Sequence[str]) -> None:
    """Refuses, before anything is read, a request naming more buckets or held ids than
    any honest round sends."""
    out = []
    if len(refs) > MAX_REQUEST_REFS:
        out.append(
            FieldViolation(
                "buckets", f"at most {MAX_REQUEST_REFS} buckets per request, got {len(refs)}"
            )
        )
    if len(have_ids) > MAX_HAVE_IDS:
        out.append(
            FieldViolation(
                "have_ids", f"at most {MAX_HAVE_IDS} ids per request, got {len(have_ids)}"
            )
        )
    if out:
        raise InvalidInput(out)


def _check_prefix(prefix: str) -> None:
    if len(prefix) > DEPTH or any(c not in "0123456789abcdef" for c in prefix):
        raise InvalidInput(
            [
                FieldViolation(
                    "buckets.prefix", f"{prefix[:40]!r} is not up to {DEPTH} lowercase hex digits"
                )
            ]
        )


@dataclass
class PeerState:
    """What this node knows about syncing with one peer."""

    peer: Peer
    last_sync: float | None = None  # wall-clock seconds of the last successful round
    last_error: str = ""
    failures: int = 0
    next_attempt: float = 0.0  # monotonic seconds
    # The peer's clock minus this node's, in microseconds, on the last round that reached it.
    clock_skew: int | None = None


@dataclass
class RoundResult:
    """What one round with one peer did."""

    node_id: str
    address: str
    ok: bool = True
    error: str = ""
    differing_buckets: int = 0
    evidence_received: int = 0
    evidence_sent: int = 0
    votes_received: int = 0
    votes_sent: int = 0
    tombstones_received: int = 0
    tombstones_sent: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    clock_skew: int | None = None  # the peer's clock minus this node's, in microseconds


# Identifies the member listening at a seed's address: its certificate (PEM), which the
# roster checks against the CA before the seed is dialed as that member.
Identify = Callable[[str], Awaitable[bytes]]


class Syncer:
    """Runs anti-entropy rounds with members: each round pulls from and pushes to `fanout`
    members (0: every one) chosen at random among those it may dial.

    With a roster, the members it may dial are those the roster knows (from member records
    and configured peers) that are not revoked or expired, and the seeds (addresses) whose
    node id it has not learned yet; without one, the configured peers. `rng` chooses, so a
    test passes a seeded one."""

    def __init__(
        self,
        ledger: Ledger,
        peers: Sequence[Peer],
        link_for: Callable[[Peer], PeerLink],
        *,
        fanout: int = 0,
        interval: float = 10.0,
        rng: random.Random | None = None,
        refused: Callable[[str], bool] = lambda node_id: False,
        roster: Roster | None = None,
        seeds: Sequence[str] = (),
        identify: Identify | None = None,
    ) -> None:
        self.ledger = ledger
        # Members this node no longer dials (a revoked certificate), by node id.
        self.refused = refused
        # The members this node knows and the revocation list it holds; None: configured
        # peers only, and it gossips neither records nor lists.
        self.roster = roster
        self.peers = tuple(peers)
        self.states = {p.node_id: PeerState(p) for p in peers}
        # Seeds whose node id is not known yet, by address (their Peer's node_id is "").
        self.seeds = {a: PeerState(Peer(a, "")) for a in seeds if roster is not None}
        self.identify = identify
        self.link_for = link_for
        self.fanout = fanout
        self.interval = interval
        self.rng = rng or random.Random()
        # Called (in a thread) after each round with a member that completed.
        self.on_synced: list[Callable[[], None]] = []

    def members(self) -> list[PeerState]:
        """The state of every member this node may dial now, by node id."""
        known = self.roster.dialable() if self.roster is not None else self.peers
        out = []
        for peer in known:
            state = self.states.get(peer.node_id)
            if state is None:
                state = self.states[peer.node_id] = PeerState(peer)
            elif state.peer != peer:  # a newer record moved it, or its cap changed
                state.peer = peer
            if not self.refused(peer.node_id):
                out.append(state)
        return out

    def _choose(self, only: str | None, force: bool) -> list[PeerState]:
        members = self.members()
        if only:
            return [s for s in members if s.peer.node_id == only]
        now = time.monotonic()
        due = [s for s in [*members, *self.seeds.values()] if force or s.next_attempt <= now]
        if self.fanout and len(due) > self.fanout:
            due = self.rng.sample(
                sorted(due, key=lambda s: (s.peer.node_id, s.peer.address)), self.fanout
            )
        return due

    async def _identified(self, state: PeerState) -> PeerState | None:
        """The member a seed's address leads to, from its certificate; None when it is this
        node. The seed is dialed from then on as that member."""
        assert self.identify is not None and self.roster is not None
        pem = await _step(self.identify(state.peer.address))
        identity = self.roster.seen(pem)
        self.seeds.pop(state.peer.address, None)  # a concurrent round may have done it
        if identity.node_id == self.ledger.node_id:
            return None
        self.roster.remember(identity.node_id, state.peer.address)
        peer = Peer(
            state.peer.address, identity.node_id, self.ledger.policy.cap_for(identity.node_id)
        )
        found = self.states.setdefault(identity.node_id, PeerState(peer))
        return found if not self.refused(identity.node_id) else None

    async def sync_round(
        self, only: str | None = None, timeout: float = 60.0, force: bool = False
    ) -> list[RoundResult]:
        """One round with every due peer (or `fanout` random ones), concurrently.

        A round with a peer fails when any one step (an RPC, or applying what it brought)
        takes longer than `timeout` seconds; a long exchange that keeps moving completes.
        Peers in backoff after a failure are skipped unless `force` (an operator's SyncNow)."""
        chosen = self._choose(only, force)
        return list(await asyncio.gather(*(self._guarded(s, timeout) for s in chosen)))

    async def _guarded(self, state: PeerState, timeout: float) -> RoundResult:
        result: RoundResult | None = None
        try:
            _STEP_TIMEOUT.set(timeout)  # this peer's task has its own context
            if not state.peer.node_id:
                seed = state.peer.address
                identified = await self._identified(state)
                if identified is None:
                    return RoundResult("", seed, ok=False, error="seed is this node or revoked")
                state = identified
            result = await self.round_with(state.peer)
            state.clock_skew = result.clock_skew
            if result.clock_skew is not None:
                _check_skew(result.clock_skew, self.ledger.policy.clock_skew_micros)
        except Exception as exc:
            state.failures += 1
            state.last_error = _describe(exc)
            backoff = min(self.interval * 2 ** (state.failures - 1), MAX_BACKOFF_SECONDS)
            state.next_attempt = time.monotonic() + backoff
            log.warning(
                "sync with %s failed (%s); retrying in %.0fs",
                state.peer.node_id or f"seed {state.peer.address}",
                state.last_error,
                backoff,
            )
            if result is None:
                return RoundResult(
                    state.peer.node_id, state.peer.address, ok=False, error=state.last_error
                )
            # The exchange itself completed (what it moved stays moved), but the round is
            # the peer's error, not an ok one.
            return replace(result, ok=False, error=state.last_error)
        state.failures = 0
        state.last_error = ""
        state.next_attempt = 0.0
        state.last_sync = time.time()
        for synced in self.on_synced:
            await asyncio.to_thread(synced)
        return result

    async def run_forever(self) -> None:
        """Periodic rounds until cancelled."""
        while True:
            await self.sync_round()
            await asyncio.to_thread(self.ledger.reconsider_if_hour_changed)
            await asyncio.sleep(self.interval)

    async def round_with(self, peer: Peer) -> RoundResult:
        """Compares digests with `peer` and exchanges only what differs."""
        link = self.link_for(peer)
        result = RoundResult(peer.node_id, peer.address)
        mine = self._mine(peer.node_id)
        sent = self.ledger.clock.now()
        request = pb.DigestRequest(sent_at=wire.timestamp(sent))
        if self.roster is not None:
            request.revocation_list_number = self.roster.number
        roots = await _step(link.get_digest(request))
        await self._exchange_revocations(link, peer, roots, result)
        if roots.HasField("answered_at"):
            # The peer read its clock between our two readings: measured from the midpoint,
            # the error is at most half the round trip.
            received = self.ledger.clock.now()
            bad: list[FieldViolation] = []
            theirs = wire.instant(roots.answered_at, "answered_at", bad)
            if theirs is None:
                raise InvalidInput(bad)
            result.clock_skew = theirs - (sent + received) // 2
        frontier = [b for b in roots.buckets if b.set in mine and _differs(b, mine[b.set])]
        leaves: dict[pb.DigestSet, list[str]] = {s: [] for s in SETS}
        while frontier:
            by_depth: dict[int, list[pb.Bucket]] = {1: [], 2: []}
            for b in frontier:
                items = max(b.count, mine[b.set].bucket(b.prefix)[1])
                if len(b.prefix) < DEPTH and items > LEAF_ITEMS:
                    by_depth[2 if items <= TWO_LEVEL_ITEMS else 1].append(b)
                else:
                    leaves[b.set].append(b.prefix)
            frontier = []
            for depth, descend in by_depth.items():
                for i in range(0, len(descend), DESCEND_BATCH):
                    chunk = descend[i : i + DESCEND_BATCH]
                    frontier.extend(await self._children(link, mine, chunk, depth))
        result.differing_buckets = sum(len(v) for v in leaves.values())
        if not result.differing_buckets:
            return result
        wants = _VoteWants()
        pulled = await self._pull(link, peer, mine, leaves, result, wants)
        # What the peer just sent is on the peer: pushing it back would double the traffic.
        await self._push(link, mine, leaves, result, wants, pulled)
        return result

    async def _exchange_revocations(
        self, link: PeerLink, peer: Peer, roots: pb.Digest, result: RoundResult
    ) -> None:
        """Revocation lists gossip like everything signed (specification §7): the peer's, if later
        than this node's, is applied here; this node's, if later than the peer's, is pushed."""
        roster = self.roster
        if roster is None:
            return
        if roots.revocation_list:
            problem = await _step(
                asyncio.to_thread(roster.offered, roots.revocation_list, peer.node_id)
            )
            if problem:
                result.rejected.append(("revocation_list", problem))
        later = roster.later_than(roots.revocation_list_number)
        if later is not None:
            answer = await _step(link.push_delta(pb.Delta(revocation_list=later)))
            result.rejected.extend((r.id, r.reason) for r in answer.rejected)

    async def _children(
        self,
        link: PeerLink,
        mine: dict[pb.DigestSet, SetDigest],
        chunk: list[pb.Bucket],
        depth: int,
    ) -> list[pb.Bucket]:
        """The children `depth` levels below each bucket of `chunk` that differ from ours."""
        theirs: dict[tuple[pb.DigestSet, str], pb.Bucket] = {}
        pending = [pb.BucketRef(set=b.set, prefix=b.prefix) for b in chunk]
        while pending:
            reply = await _step(link.get_digest(pb.DigestRequest(buckets=pending, depth=depth)))
            theirs.update(((b.set, b.prefix), b) for b in reply.buckets)
            if len(reply.unanswered) >= len(pending):
                raise ConnectionError("the peer's digest answer left out every bucket asked for")
            pending = list(reply.unanswered)
        for b in chunk:
            for prefix, _digest, _count in mine[b.set].children(b.prefix, depth):
                if (b.set, prefix) not in theirs:
                    # Only this node has items here: a leaf to push.
                    theirs[(b.set, prefix)] = pb.Bucket(set=b.set, prefix=prefix, hash=b"", count=0)
        return [c for c in theirs.values() if _differs(c, mine[c.set])]

    def _mine(self, peer_id: str) -> dict[pb.DigestSet, SetDigest]:
        index = index_of(self.ledger)
        if self.ledger.signing.sign is not None:
            mine = {
                EVIDENCE: index.evidence,
                TOMBSTONES: index.tombstones,
                VOTES: index.signed_votes,
            }
        else:
            mine = {
                EVIDENCE: index.evidence,
                TOMBSTONES: index.tombstones,
                PEER_VOTES: index.votes(peer_id),
                YOUR_VOTES: index.votes(self.ledger.node_id),
            }
        if self.roster is not None:  # without one, this node neither takes nor passes records
            mine[MEMBERS] = index.members
        mine[RECEIPTS] = index.receipts
        return mine

    def _records_under(self, prefixes: list[str]) -> list[MemberRecord]:
        if not prefixes or self.roster is None:
            return []
        return self.roster.records_under(prefixes)

    async def _take_members(self, delta: pb.Delta, peer: Peer) -> list[tuple[str, str]]:
        """Takes the member records a peer sent; the refused ones, with reasons."""
        if not delta.members or self.roster is None:
            return []
        records = [wire.member_record(m) for m in delta.members]
        return await _step(asyncio.to_thread(self.roster.take, records, peer.node_id))

    async def _pull(
        self,
        link: PeerLink,
        peer: Peer,
        mine: dict[pb.DigestSet, SetDigest],
        leaves: dict[pb.DigestSet, list[str]],
        result: RoundResult,
        wants: _VoteWants,
    ) -> set[str]:
        """Takes what the peer holds under the leaves and we lack, noting in `wants` which of
        our signed votes it asked for; returns the ids of the evidence and tombstones it sent."""
        pulled: set[str] = set()
        refs = [
            (s, p)
            for s in (TOMBSTONES, RECEIPTS, EVIDENCE, PEER_VOTES, VOTES, MEMBERS)
            for p in leaves[s]
        ]
        for chunk in _chunks(refs, mine):
            pending = chunk
            got: set[str] = set()  # what the peer sent for this chunk
            while pending:
                left, new = await self._pull_once(link, peer, mine, pending, got, result, wants)
                if left and sorted(left) == sorted(pending) and not new - got:
                    raise ConnectionError("the peer's delta answers made no progress")
                got |= new
                pulled |= new
                pending = left
        return pulled

    async def _pull_once(
        self,
        link: PeerLink,
        peer: Peer,
        mine: dict[pb.DigestSet, SetDigest],
        pending: list[tuple[pb.DigestSet, str]],
        got: set[str],
        result: RoundResult,
        wants: _VoteWants,
    ) -> tuple[list[tuple[pb.DigestSet, str]], set[str]]:
        """Asks the peer for what it holds under the `pending` buckets (`got`: what it sent
        for them already) and applies the answer; returns the buckets it left out, for
        another request, and the ids of the evidence, tombstones and records it sent."""
        held = _held_under(pending, got, mine)
        wants.marked_as(_vote_marks(held))
        delta = await _step(
            link.pull_delta(
                pb.DeltaRequest(
                    buckets=[pb.BucketRef(set=s, prefix=p) for s, p in pending],
                    have_ids=sorted(held),
                )
            )
        )
        left = [(u.set, u.prefix) for u in delta.unanswered]
        votes = [wire.vote(v, peer.node_id) for v in delta.votes]
        wants.take(delta, votes)
        if self.roster is not None:
            self.roster.learn(delta.certificates, peer.node_id)
        # Abandoning the wait does not stop the thread: what it applies stays applied.
        received = await _step(
            asyncio.to_thread(
                self.ledger.receive,
                peer.node_id,
                self.ledger.policy.cap_for(peer.node_id),
                [wire.tombstone(t) for t in delta.tombstones],
                [wire.relayed(e) for e in delta.evidence],
                votes,
                _votes_complete_under(pending, left),
                [wire.bound(b) for b in delta.erasure_bounds],
                [wire.confirmation(c, 0) for c in delta.confirmations],
                [wire.receipt(r) for r in delta.erasure_receipts],
            )
        )
        result.tombstones_received += len(delta.tombstones)
        result.evidence_received += len(delta.evidence)
        result.votes_received += len(delta.votes)
        result.rejected.extend(received.rejected)
        result.rejected.extend(await self._take_members(delta, peer))
        new = (
            {t.erasure_id for t in delta.tombstones}
            | {wire.bound(b).item_id for b in delta.erasure_bounds}
            | {e.evidence_id for e in delta.evidence}
            | {f"{c.evidence_id}/{c.signer}" for c in delta.confirmations}
            | {wire.receipt(r).item_id for r in delta.erasure_receipts}
            | {_member_mark(wire.member_record(m)) for m in delta.members}
        )
        return left, new

    async def _push(
        self,
        link: PeerLink,
        mine: dict[pb.DigestSet, SetDigest],
        leaves: dict[pb.DigestSet, list[str]],
        result: RoundResult,
        wants: _VoteWants,
        peer_has: Collection[str] = (),
    ) -> None:
        refs = [
            (s, p)
            for s in (TOMBSTONES, RECEIPTS, EVIDENCE, YOUR_VOTES, VOTES, MEMBERS)
            for p in leaves[s]
        ]
        for chunk in _chunks(refs, mine):
            prefixes = {
                "tombstones": [p for s, p in chunk if s == TOMBSTONES],
                "evidence": [p for s, p in chunk if s == EVIDENCE],
                "votes": [p for s, p in chunk if s == YOUR_VOTES],
                "all_votes": [p for s, p in chunk if s == VOTES],
            }
            signed = prefixes["all_votes"] if wants.marked else []
            if signed:  # signed votes: only those the peer asked for, read by item
                prefixes["all_votes"] = []
            tombstones, evidence, votes = await _step(
                asyncio.to_thread(self.ledger.offer, prefixes, peer_has)
            )
            if signed:
                with index_of(self.ledger).lock:
                    items = [
                        i for i in mine[VOTES].ids_under(signed) if wants.wanted(i, mine[VOTES])
                    ]
                if items:
                    votes += await _step(
                        asyncio.to_thread(self.ledger.offer_votes, [_item(i) for i in items])
                    )
            bounds = await _step(
                asyncio.to_thread(self.ledger.offer_bounds, prefixes["tombstones"], peer_has)
            )
            confirmations = await _step(
                asyncio.to_thread(self.ledger.offer_confirmations, prefixes["evidence"])
            )
            receipts = await _step(
                asyncio.to_thread(
                    self.ledger.peer_input.offer_receipts,
                    [p for s, p in chunk if s == RECEIPTS],
                )
            )
            members = [
                r
                for r in self._records_under([p for s, p in chunk if s == MEMBERS])
                if _member_mark(r) not in peer_has
            ]
            # Our votes under a differing bucket are all sent, none or not: what the peer
            # holds there beyond them we withdrew.
            if (
                not (
                    tombstones
                    or evidence
                    or votes
                    or members
                    or bounds
                    or confirmations
                    or receipts
                )
                and not prefixes["votes"]
            ):
                continue
            delta = pb.Delta(
                tombstones=[wire.tombstone_pb(t) for t in tombstones],
                erasure_bounds=[wire.bound_pb(b) for b in bounds],
                confirmations=[wire.confirmation_pb(c) for c in confirmations],
                erasure_receipts=[wire.receipt_pb(r) for r in receipts],
                evidence=[wire.relayed_pb(e) for e in evidence],
                votes=[wire.vote_pb(v) for v in votes],
                votes_complete_under=prefixes["votes"],
                members=[wire.member_record_pb(r) for r in members],
            )
            _vouch(delta, self.roster)
            reply = await _step(link.push_delta(delta))
            result.tombstones_sent += len(tombstones)
            result.evidence_sent += len(evidence)
            result.votes_sent += len(votes)
            result.rejected.extend((r.id, r.reason) for r in reply.rejected)


class _UnlikeVotes:
    """A marked pull's signed votes that differ from the caller's marks, by leaf bucket:
    counted from the digest, read from the store only for the buckets an answer takes (an
    answer that read all of them would read again, at each of the caller's re-asks, the
    ones that did not fit, quadratic where the caller holds few votes and the peer many)."""

    def __init__(
        self,
        by_leaf: dict[str, list[str]],
        read: Callable[[list[tuple[str, str]]], list[Vote]],
    ) -> None:
        self._ids = by_leaf
        self._leaves = sorted(by_leaf)
        self._read = read
        self._votes: dict[str, list[Vote]] = {}

    def _leaves_under(self, prefix: str) -> list[str]:
        at = bisect.bisect_left(self._leaves, prefix)
        out = []
        while at < len(self._leaves) and self._leaves[at].startswith(prefix):
            out.append(self._leaves[at])
            at += 1
        return out

    def count(self, prefix: str) -> int:
        return sum(len(self._ids[leaf]) for leaf in self._leaves_under(prefix))

    def read_under(self, prefix: str, later: Sequence[str], budget: int) -> None:
        """Reads the votes under `prefix` not read yet, with those under the `later` buckets
        while they fit in `budget` items: one store read for what an answer can carry."""
        wanted = [leaf for leaf in self._leaves_under(prefix) if leaf not in self._votes]
        if not wanted:
            return  # read with an earlier bucket's
        taken = set(wanted)
        n = sum(len(self._ids[leaf]) for leaf in wanted)
        for p in later:
            more = [x for x in self._leaves_under(p) if x not in self._votes and x not in taken]
            extra = sum(len(self._ids[leaf]) for leaf in more)
            if n + extra > budget:
                break
            wanted += more
            taken.update(more)
            n += extra
        for leaf in wanted:
            self._votes[leaf] = []
        for v in self._read([_item(i) for leaf in wanted for i in self._ids[leaf]]):
            self._votes[signed_vote_id(v)[:DEPTH]].append(v)

    def under(self, prefix: str) -> list[Vote]:
        """The votes read under `prefix` (`read_under` first)."""
        return [v for leaf in self._leaves_under(prefix) for v in self._votes.get(leaf, ())]


@dataclass
class _VoteWants:
    """What a round's pulls told of the peer's signed votes: the marks this node sent, the
    items the peer asked for and the items it sent."""

    marked: bool = True  # every answer read this node's vote marks
    items: set[str] = field(default_factory=set)
    marks: dict[str, str] = field(default_factory=dict)
    received: dict[str, int] = field(default_factory=dict)  # item -> hash of the vote sent

    def marked_as(self, marks: dict[str, str]) -> None:
        self.marks.update(marks)

    def take(self, delta: pb.Delta, votes: list[Vote]) -> None:
        self.marked = self.marked and delta.votes_marked
        self.items.update(delta.wanted_votes)
        self.received.update((signed_vote_id(v), signed_vote_hash(v)) for v in votes)

    def wanted(self, item: str, mine: SetDigest) -> bool:
        """Whether to push the signed-vote `item` of a peer that read this node's marks: not
        when what this node holds of it is what the peer just sent; otherwise when the peer
        asked for it, or it changed here since it was marked (a vote this node re-cast on
        what the pull brought, or took from another member meanwhile)."""
        h = mine.get(item)
        if h is not None and self.received.get(item) == h:
            return False
        return item in self.items or h is None or self.marks.get(item) != _hex(h)


class ClockSkew(Exception):
    """A peer's clock differs from this node's by more than the clock-skew allowance."""


def _check_skew(skew: int, allowance: int) -> None:
    if abs(skew) > allowance:
        raise ClockSkew(
            f"clock skew: the peer's clock runs {describe_skew(skew)} "
            f"(allowance {describe_skew(allowance, signed=False)}); its erasures dated "
            "beyond the allowance are bounded by this node's clock"
        )


def _describe(exc: BaseException) -> str:
    """A one-line reason for a failed round (gRPC errors by status code and details)."""
    code = getattr(exc, "code", None)
    details = getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {details()}"[:300]
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ClockSkew | NotAMember):
        return str(exc)
    if isinstance(exc, InvalidInput):
        return f"invalid: {exc}"[:300]
    # The type only: a database error's text quotes SQL and the values it carried.
    return f"{type(exc).__name__} on this node"


def _member_mark(record: MemberRecord) -> str:
    """How a member record is named among what a peer already has (its content)."""
    return f"member:{record.content_hash}"


def _differs(bucket: pb.Bucket, mine: SetDigest) -> bool:
    digest, count = mine.bucket(bucket.prefix)
    return (digest, count) != (bucket.hash, bucket.count)


def _held_under(
    pending: list[tuple[pb.DigestSet, str]], got: set[str], mine: dict[pb.DigestSet, SetDigest]
) -> set[str]:
    """The ids a pull need not be sent: what we hold under the buckets asked for, and what
    the peer already sent there (taken or refused here: either way not wanted again)."""
    asked = {p for s, p in pending if s in (EVIDENCE, TOMBSTONES)}
    have = {i for i in got if _under(i, asked)}
    for s, p in pending:
        if s in (EVIDENCE, TOMBSTONES):
            have.update(mine[s].ids_under([p]))
        elif s == VOTES:
            votes = mine[s]
            have.update(
                vote_mark(i, h) for i in votes.ids_under([p]) if (h := votes.get(i)) is not None
            )
    return have


def _votes_complete_under(
    pending: list[tuple[pb.DigestSet, str]], left: list[tuple[pb.DigestSet, str]]
) -> list[str]:
    """The peer-vote buckets a pull's answer holds whole: the peer answered with all its votes
    under the buckets it did not leave out (wholly or in part), so any other we hold there
    it withdrew (a withdrawal has no item of its own to send)."""
    return [
        p
        for s, p in pending
        if s == PEER_VOTES and not any(ls == PEER_VOTES and lp.startswith(p) for ls, lp in left)
    ]


def _chunks(
    refs: list[tuple[pb.DigestSet, str]], mine: dict[pb.DigestSet, SetDigest]
) -> list[list[tuple[pb.DigestSet, str]]]:
    """Groups buckets so that each delta carries about DELTA_ITEMS items."""
    out: list[list[tuple[pb.DigestSet, str]]] = []
    current: list[tuple[pb.DigestSet, str]] = []
    size = 0
    for s, p in refs:
        n = max(mine[s].bucket(p)[1], 1)
        if current and size + n > DELTA_ITEMS:
            out.append(current)
            current, size = [], 0
        current.append((s, p))
        size += n
    if current:
        out.append(current)
    return out
