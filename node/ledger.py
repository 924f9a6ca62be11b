"""The node's plain Python interface: the imperative shell around the pure core.

It loads what a key holds from the repository, asks the core for decisions and
verdicts, and persists them. The gRPC servicers call this and nothing else.
"""

from __future__ import annotations

import base64
import binascii
import gc
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from factnode.clock import Clock
from factnode.core import (
    Arbitrated,
    BeliefState,
    Comparison,
    Decision,
    Evidence,
    EvidenceStatus,
    FieldViolation,
    Instant,
    InvalidInput,
    Key,
    KeyState,
    Outcome,
    Policy,
    Retraction,
    Rule,
    Ruling,
    Submission,
    Verdict,
    VersionHistory,
    arbitrate,
    believed_versions,
    cold_evidence,
    decide,
    effective_confidence_milli,
    explain,
    history,
    ids,
    make_evidence,
    representatives,
    visible,
)
from factnode.core.consensus import Served, Tally, Vote, hour_of, served, tally
from factnode.core.validation import (
    _is_id,
    check_instant,
    check_key,
    check_node_id,
    describe_violations,
    relayed_violations,
)
from factnode.federation._digest import FederationIndex, vote_item_hash
from factnode.store import BeliefChange, Counts, LoggedDecision, Repository, StoredBelief, Tombstone
from factnode.store.repository import Transaction

T = TypeVar("T")

MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100


class NotFound(LookupError):
    """The thing asked for does not exist on this node."""


@dataclass(frozen=True, slots=True)
class Submitted:
    """The answer to one submission: its decision and the key's belief after it."""

    decision: Decision
    evidence_id: str
    version_id: str
    belief: Belief | None


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


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a key's belief beats each other version."""

    belief: Belief | None
    comparisons: tuple[Comparison, ...]


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


@dataclass(frozen=True, slots=True)
class ErasureReport:
    """What an erase removed."""

    erasure_id: str
    evidence_erased: int
    keys_affected: int
    erased_at: Instant


@dataclass(frozen=True, slots=True)
class DecayReport:
    """What a decay run did."""

    decayed: int
    tombstoned: int


@dataclass(slots=True)
class _Effects:
    """What a write transaction changed that the federation digests must follow after commit."""

    evidence_added: set[str] = field(default_factory=set)
    evidence_removed: set[str] = field(default_factory=set)
    erasures_added: set[str] = field(default_factory=set)
    votes_put: list[Vote] = field(default_factory=list)
    votes_removed: list[tuple[str, Key]] = field(default_factory=list)


def _vote_content(v: Vote | None) -> tuple[object, ...] | None:
    """A vote without its cast time: re-casting the same vote is no change."""
    if v is None:
        return None
    return (v.version_id, v.evidence_id, v.anchor, v.worth_milli, v.fresh_since)


@dataclass(slots=True)
class _Batch:
    """Mutable per-transaction view of the keys a batch touches."""

    evidence: dict[Key, list[Evidence]] = field(default_factory=dict)
    retractions: dict[Key, list[Retraction]] = field(default_factory=dict)
    # A key's state above arbitrated, where a decision (or an earlier batch) worked it out.
    known: dict[Key, Arbitrated] = field(default_factory=dict)
    # Views of the lists above, which grow in place: one per key is enough.
    states: dict[Key, KeyState] = field(default_factory=dict)

    def state(self, key: Key) -> KeyState:
        found = self.states.get(key)
        if found is None:
            found = self.states[key] = KeyState(
                self.evidence.setdefault(key, []), self.retractions.setdefault(key, [])
            )
        return found


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off for one write batch.

    A batch allocates many small objects that live exactly as long as the batch and form no
    cycles, so reference counting frees them. Collections during the batch only promote them
    to the oldest generation, whose full collections then scan every long-lived object (the
    key cache among them): about a tenth of the write path's time (bench/arbitration.py).
    Left alone where something else turned the collector off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _serves_alike(a: Verdict | None, b: Verdict | None) -> bool:
    """Whether two local verdicts on a single-valued key give it the same served row and the
    same own vote when no peer votes: the same winner, resting on the same evidence, by the
    same rule, equally (un)ambiguous. Only the losers differ."""
    if a is None or b is None:
        return a is b
    return (a.version_id, a.evidence_id, a.rule, a.ambiguous) == (
        b.version_id,
        b.evidence_id,
        b.rule,
        b.ambiguous,
    )


class _Representatives:
    """Each version's strongest evidence over a key's visible evidence, worked out only when a
    version other than the verdict's is asked for (the verdict names its own) and not
    already known."""

    __slots__ = ("_all", "_policy", "_state", "_verdict")

    def __init__(
        self,
        state: KeyState,
        verdict: Verdict | None,
        policy: Policy,
        known: Mapping[str, Evidence] | None = None,
    ):
        self._state = state
        self._verdict = verdict
        self._policy = policy
        self._all = known

    def of(self, version_id: str) -> Evidence | None:
        v = self._verdict
        if v is not None and version_id == v.version_id:
            for e in self._state.evidence:  # the verdict's own evidence is visible
                if e.evidence_id == v.evidence_id:
                    return e
        if self._all is None:
            state = self._state
            self._all = representatives(visible(state.evidence, state.retractions), self._policy)
        return self._all.get(version_id)


def _encode_token(*parts: str | int) -> str:
    raw = "\x1f".join(str(p) for p in parts).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_token(token: str, n: int) -> list[str]:
    try:
        parts = base64.urlsafe_b64decode(token.encode()).decode().split("\x1f")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        parts = []
    if len(parts) != n:
        raise InvalidInput([FieldViolation("page_token", "is not a token this node issued")])
    return parts


def _decode_seq(token: str) -> int:
    (seq,) = _decode_token(token, 1)
    if not seq.isdigit():
        raise InvalidInput([FieldViolation("page_token", "is not a token this node issued")])
    return int(seq)


def _page_size(size: int) -> int:
    if size < 0:
        raise InvalidInput([FieldViolation("page_size", "must not be negative")])
    return min(size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def _check_key(key: Key) -> None:
    out: list[FieldViolation] = []
    check_key(out, key)
    if out:
        raise InvalidInput(out)


class Ledger:
    """One node's beliefs: submit, read, explain, retract, erase and decay."""

    def __init__(self, repo: Repository, policy: Policy, node_id: str, clock: Clock) -> None:
        self.repo = repo
        self.policy = policy
        self.node_id = node_id
        self.clock = clock
        self._index: FederationIndex | None = None
        self._counted_hour: Instant | None = None

    # -- federation digests ---------------------------------------------------

    def index(self) -> FederationIndex:
        """The digests this node compares with peers, built from the store on first use."""
        if self._index is None:
            index = FederationIndex()
            with index.lock, self.repo.read() as tx:
                for eid in tx.all_evidence_ids():
                    index.put_evidence(eid)
                for erasure_id in tx.all_erasure_ids():
                    index.put_tombstone(erasure_id)
                for v in tx.all_votes():
                    index.put_vote(v.voter, ids.key_id(v.key), _vote_hash(v))
                self._index = index
        return self._index

    def _after(self, fx: _Effects) -> None:
        """Brings the digests up to date with a committed transaction."""
        index = self._index
        if index is None:
            return
        with index.lock:
            for eid in fx.evidence_added:
                index.put_evidence(eid)
            for eid in fx.evidence_removed:
                index.evidence.discard(eid)
            for erasure_id in fx.erasures_added:
                index.put_tombstone(erasure_id)
            for voter, key in fx.votes_removed:
                index.discard_vote(voter, ids.key_id(key))
            for v in fx.votes_put:
                index.put_vote(v.voter, ids.key_id(v.key), _vote_hash(v))

    def offer(
        self, prefixes: dict[str, list[str]], have_ids: Collection[str] = ()
    ) -> tuple[list[Tombstone], list[Evidence], list[Vote]]:
        """What this node holds under the given buckets ("evidence", "tombstones", "votes":
        its own votes), leaving out ids the caller already has."""
        have = set(have_ids)
        with self.repo.read() as tx:
            tombstones = [
                t
                for t in tx.tombstones_under(prefixes.get("tombstones", []))
                if t.erasure_id not in have
            ]
            evidence = [
                e
                for e in tx.evidence_under(prefixes.get("evidence", []))
                if e.evidence_id not in have
            ]
            votes = tx.votes_under(self.node_id, prefixes.get("votes", []))
        relayed = [replace(e, origin_recorded_at=e.first_recorded_at) for e in evidence]
        return tombstones, relayed, votes

    def receive(
        self,
        peer_id: str,
        peer_cap: str | None,
        tombstones: Sequence[Tombstone],
        evidence: Sequence[Evidence],
        votes: Sequence[Vote],
        votes_complete_under: Collection[str] = (),
    ) -> Received:
        """Applies what a peer sent, tombstones first: erased evidence cannot come back in the
        same delta. Relayed evidence counts with its anchor capped at the peer's ceiling; votes
        count for `peer_id`, the node the connection proved, and must rest on evidence held here.

        `votes_complete_under` names key-id prefixes under which `votes` are all the peer's
        votes (a pull answers with every vote the peer holds there): a vote of the peer's held
        under them and not sent is one the peer withdrew, and it stops counting."""
        cap_name = peer_cap or self.policy.default_max_anchor
        rejected: list[tuple[str, str]] = []
        accepted = 0
        now = self.clock.now()
        fx = _Effects()
        with self.repo.write() as tx:
            known = tx.known_erasures([t.erasure_id for t in tombstones])
            for t in tombstones:
                problem = _tombstone_problem(t)
                if problem:
                    rejected.append((t.erasure_id, problem))
                    continue
                accepted += 1
                if t.erasure_id in known:
                    continue
                known.add(t.erasure_id)
                self._apply_erasure(tx, t, tx.evidence_covered(t), fx)

            items: list[tuple[Evidence, str | None]] = []
            for e in evidence:
                problems = relayed_violations(e, self.policy)
                if problems:
                    rejected.append((e.evidence_id, describe_violations(problems)))
                    continue
                cap = min(
                    (c for c in (e.anchor_cap, cap_name) if c is not None),
                    key=lambda name: self.policy.anchors[name],
                )
                items.append(
                    (
                        replace(
                            e,
                            version_id=ids.version_id(e.key, e.object),
                            anchor_cap=cap,
                            recorded_at=now,
                            origin_recorded_at=e.first_recorded_at,
                        ),
                        None,
                    )
                )
            for e, ruling in self._ingest_in(tx, items, fx)[0]:
                if ruling.decision.rule is Rule.ERASED:
                    rejected.append((e.evidence_id, "covered by an erasure"))
                else:
                    accepted += 1

            held = tx.evidence([v.evidence_id for v in votes if v.version_id is not None])
            good: list[Vote] = []
            for v in votes:
                problem = _vote_problem(v, held, self.policy)
                if problem:
                    rejected.append((ids.key_id(v.key), problem))
                    continue
                good.append(replace(v, voter=peer_id))
            withdrawn: set[Key] = set()
            if votes_complete_under:
                sent = {v.key for v in votes}
                withdrawn = {
                    v.key
                    for v in tx.votes_under(peer_id, votes_complete_under)
                    if v.key not in sent
                }
                if withdrawn:
                    tx.delete_votes(peer_id, withdrawn)
                    fx.votes_removed.extend((peer_id, k) for k in withdrawn)
            fresh: list[Vote] = []
            if good:
                current = tx.votes({v.key for v in good})
                fresh = [
                    v
                    for v in good
                    if _vote_content(next((o for o in current[v.key] if o.voter == peer_id), None))
                    != _vote_content(v)
                ]
                tx.put_votes(fresh)
                fx.votes_put.extend(fresh)
            self._refresh(tx, tx.key_states({v.key for v in fresh} | withdrawn), now, fx)
            accepted += len(good)
        self._after(fx)
        if fx.erasures_added:
            # As after a local erase: the erased bytes must not linger in the WAL or old pages.
            self.repo.after_erase()
        return Received(accepted, rejected)

    def tally_of(self, key: Key) -> Tally | None:
        """The vote count for a key as this node sees it now."""
        with self.repo.read() as tx:
            votes = tx.votes([key])[key]
        return tally(
            votes,
            now=self.clock.now(),
            threshold=self.policy.consensus_threshold,
            half_life_days=self.policy.vote_half_life_days,
            self_id=self.node_id,
        )

    def reconsider_if_hour_changed(self) -> bool:
        """Vote weights move with the UTC hour: recount every voted key once per hour."""
        hour = hour_of(self.clock.now())
        if hour == self._counted_hour:
            return False
        self._counted_hour = hour
        self.reconsider()
        return True

    def reconsider(self, keys: Collection[Key] | None = None) -> None:
        """Recounts votes (freshness moves with the UTC hour) for `keys`, or every voted key."""
        fx = _Effects()
        with self.repo.write() as tx:
            if keys is None:
                keys = {v.key for v in tx.all_votes()}
            self._refresh(tx, tx.key_states(keys), self.clock.now(), fx)
        self._after(fx)

    # -- writes -------------------------------------------------------------

    def evidence_of(self, sub: Submission, recorded_at: Instant | None = None) -> Evidence:
        """Checks a submission and builds its evidence; raises InvalidInput naming every bad field."""
        return make_evidence(
            sub,
            self.policy,
            recorded_at=self.clock.now() if recorded_at is None else recorded_at,
            origin_node=self.node_id,
        )

    def submit(self, sub: Submission) -> Submitted:
        """Decides one submission and records the decision."""
        return self.submit_many([sub])[0]

    def submit_many(self, subs: Sequence[Submission]) -> list[Submitted]:
        """Decides a batch in one transaction; all items must be valid (checked first)."""
        now = self.clock.now()
        evidence = [self.evidence_of(s, now) for s in subs]
        return self.ingest(list(zip(evidence, [s.idempotency_key for s in subs], strict=True)))

    def ingest(self, items: Sequence[tuple[Evidence, str | None]]) -> list[Submitted]:
        """Decides checked evidence in order, in one write transaction."""
        fx = _Effects()
        with _collector_paused(), self.repo.write() as tx:
            rulings, beliefs = self._ingest_in(tx, items, fx)
            untouched = {e.key for e, _ in items} - set(beliefs)
            # Their state was just loaded (and is in the write cache): no evidence read-back.
            held = {
                e.evidence_id: e for st in tx.key_states(untouched).values() for e in st.evidence
            }
            beliefs.update(self._beliefs(tx, untouched, held))
        self._after(fx)
        return [
            Submitted(ruling.decision, e.evidence_id, e.version_id, beliefs.get(e.key))
            for e, ruling in rulings
        ]

    def _ingest_in(
        self, tx: Transaction, items: Sequence[tuple[Evidence, str | None]], fx: _Effects
    ) -> tuple[list[tuple[Evidence, Ruling]], dict[Key, Belief]]:
        """Decides `items` in order; returns the rulings and the served beliefs of the keys
        whose evidence changed (built from what was just computed, not read back)."""
        keys = {e.key for e, _ in items} | {e.contradicts for e, _ in items if e.contradicts}
        batch = _Batch()
        for key, state in tx.key_states(keys).items():
            batch.evidence[key] = list(state.evidence)
            batch.retractions[key] = list(state.retractions)
        remembered = tx.remembered(keys)
        batch.known.update(remembered)
        stored = tx.stored_evidence_ids([e.evidence_id for e, _ in items])
        by_idempotency = tx.evidence_for_idempotency_keys([k for _, k in items if k])
        erased = tx.erased([e for e, _ in items])

        rows: list[tuple[Evidence, EvidenceStatus, str | None]] = []
        rulings: list[tuple[Evidence, Ruling]] = []
        touched: set[Key] = set()  # keys whose served belief or own vote may have moved
        grown: set[Key] = set()  # keys with new evidence

        for e, idem in items:
            duplicate = e.evidence_id in stored or (idem is not None and idem in by_idempotency)
            ruling = decide(
                e,
                batch.state(e.key),
                self.policy,
                duplicate=duplicate,
                erased=e.evidence_id in erased,
                contradicted=batch.state(e.contradicts) if e.contradicts else None,
                known=batch.known.get(e.key),
            )
            if duplicate and idem is not None and idem in by_idempotency:
                # A retry answers, and logs, the evidence its idempotency key first stored.
                e = replace(e, evidence_id=by_idempotency[idem])
                ruling = replace(
                    ruling, decision=replace(ruling.decision, evidence_id=e.evidence_id)
                )
            if ruling.candidate is not None:
                status = EvidenceStatus.ACTIVE if ruling.candidate else EvidenceStatus.REJECTED
                rows.append((e, status, idem))
                stored.add(e.evidence_id)
                fx.evidence_added.add(e.evidence_id)
                if idem is not None:
                    by_idempotency[idem] = e.evidence_id
            if ruling.candidate:
                assert ruling.arbitrated is not None
                batch.evidence[e.key].append(e)
                batch.known[e.key] = ruling.arbitrated
                grown.add(e.key)
                if not _serves_alike(ruling.before, ruling.after) or self.policy.is_multi_valued(
                    e.key.predicate
                ):
                    touched.add(e.key)
            for r in ruling.retractions:
                batch.retractions.setdefault(r.key, []).append(r)
                batch.known.pop(r.key, None)
                touched.add(r.key)
            if ruling.decision.rule is Rule.ERASED:
                # Logged and countable, but the key's text must not come back after an erasure.
                ruling = replace(ruling, decision=replace(ruling.decision, key=_erased_key(e.key)))
            rulings.append((e, ruling))

        tx.add_evidence(rows)
        tx.add_retractions([r for _, ruling in rulings for r in ruling.retractions])
        tx.remember({k: a for k, a in batch.known.items() if remembered.get(k) is not a})
        tx.add_decisions([ruling.decision for _, ruling in rulings])
        # Where peers vote, new evidence can count for a version the votes favour even when
        # the local belief stands (`_served_rows`): those keys are recounted too.
        touched.update(
            key for key, held in tx.votes(grown - touched).items() if self._peer_voted(held)
        )
        served = self._refresh(
            tx,
            {k: batch.state(k) for k in touched},
            self.clock.now(),
            fx,
            known=batch.known,
        )
        beliefs: dict[Key, Belief] = {}
        for key, served_rows in served.items():
            if served_rows:
                by_id = {e.evidence_id: e for e in batch.evidence[key]}
                beliefs[key] = _belief_from_rows(served_rows, by_id)
        return rulings, beliefs

    def retract(
        self,
        key: Key,
        obj: str | None = None,
        at: Instant | None = None,
        reason: str = "",
    ) -> Decision:
        """Ends the belief's validity at `at` (default now) without a replacement."""
        _check_key(key)
        out: list[FieldViolation] = []
        check_instant(out, "at", at)
        if out:
            raise InvalidInput(out)
        now = self.clock.now()
        with self.repo.write() as tx:
            state = tx.key_states([key])[key]
            verdict = state.belief(self.policy)
            vid = ids.version_id(key, obj) if obj is not None else None
            if verdict is None or (vid is not None and vid not in believed_versions(verdict)):
                raise NotFound(f"no current belief for {key}" + (" with that value" if obj else ""))
            if vid is None and self.policy.is_multi_valued(key.predicate):
                vid = None  # the whole multi-valued key ends
            retraction = Retraction(key, vid, now if at is None else at, now, reason)
            decision = Decision(
                key=key,
                outcome=Outcome.RETRACTED,
                rule=Rule.RETRACT,
                decided_at=now,
                version_id=vid or verdict.version_id,
                detail=reason,
            )
            tx.add_retractions([retraction])
            tx.add_decisions([decision])
            fx = _Effects()
            self._refresh(
                tx, {key: KeyState(state.evidence, [*state.retractions, retraction])}, now, fx
            )
        self._after(fx)
        return decision

    def _refresh(
        self,
        tx: Transaction,
        states: dict[Key, KeyState],
        now: Instant,
        fx: _Effects,
        *,
        current: dict[Key, list[StoredBelief]] | None = None,
        quiet: Collection[Key] = (),
        known: Mapping[Key, Arbitrated] | None = None,
    ) -> dict[Key, list[StoredBelief]]:
        """Recomputes each key's local belief, this node's vote and the served belief,
        records what changed, and returns every key's served rows. `quiet` keys change
        without announcing (erased keys); `known` holds the given states already
        arbitrated."""
        if not states:
            return {}
        keys = list(states)
        if current is None:
            current = tx.beliefs(keys)
        votes = tx.votes(keys)
        served: dict[Key, list[StoredBelief]] = {}
        changes: list[tuple[Key, Sequence[StoredBelief], bool]] = []
        put: list[Vote] = []
        removed: list[Key] = []
        transitions: list[Decision] = []
        for key, state in states.items():
            memo = known.get(key) if known is not None else None
            if memo is not None:
                verdict = memo.verdict
            else:
                verdict = arbitrate(visible(state.evidence, state.retractions), self.policy)
            reps = _Representatives(state, verdict, self.policy, memo.reps if memo else None)
            mine = self._own_vote(key, verdict, reps, now)
            others = [v for v in votes.get(key, []) if v.voter != self.node_id]
            old_mine = next((v for v in votes.get(key, []) if v.voter == self.node_id), None)
            if _vote_content(old_mine) != _vote_content(mine):
                if mine is None:
                    removed.append(key)
                else:
                    put.append(mine)
            else:
                mine = old_mine
            rows, result = self._served_rows(
                key, verdict, reps, [*others, *([mine] if mine else [])], now
            )
            served[key] = rows
            old = current.get(key, [])
            if [(b.version_id, b.evidence_id, b.rule, b.state) for b in old] != [
                (b.version_id, b.evidence_id, b.rule, b.state) for b in rows
            ] or (key in quiet and old):
                changes.append((key, rows, key not in quiet))
                transition = _consensus_transition(key, old, rows, result, now)
                if transition is not None:
                    transitions.append(transition)
        if removed:
            tx.delete_votes(self.node_id, removed)
            fx.votes_removed.extend((self.node_id, k) for k in removed)
        if put:
            tx.put_votes(put)
            fx.votes_put.extend(put)
        tx.replace_beliefs(changes, now)
        tx.add_decisions(transitions)
        return served

    def _peer_voted(self, votes: Iterable[Vote]) -> bool:
        """Whether any node but this one votes among `votes`."""
        return any(v.voter != self.node_id for v in votes)

    def _own_vote(
        self, key: Key, verdict: Verdict | None, reps: _Representatives, now: Instant
    ) -> Vote | None:
        """This node's vote is its local belief; it abstains where that is AMBIGUOUS."""
        if verdict is None or self.policy.is_multi_valued(key.predicate):
            return None
        if verdict.ambiguous:
            return Vote(self.node_id, key, None, "", 0, 0, 0, now)
        rep = reps.of(verdict.version_id)
        assert rep is not None
        return Vote(
            self.node_id,
            key,
            verdict.version_id,
            rep.evidence_id,
            self.policy.anchor_value(rep.attribution, rep.anchor_cap),
            rep.worth_milli,
            rep.valid_from,
            now,
        )

    def _served_rows(
        self,
        key: Key,
        verdict: Verdict | None,
        reps: _Representatives,
        votes: Sequence[Vote],
        now: Instant,
    ) -> tuple[list[StoredBelief], Tally | None]:
        if verdict is not None and verdict.believed:
            believed = [(vid, reps.of(vid)) for vid in verdict.believed]
            return [
                StoredBelief(
                    key, vid, rep.object, rep.evidence_id, verdict.rule, BeliefState.BELIEVED, now
                )
                for vid, rep in believed
                if rep is not None
            ], None
        result = None
        if self._peer_voted(votes):
            # Without a peer's vote the count cannot change what is served (`served`).
            result = tally(
                votes,
                now=now,
                threshold=self.policy.consensus_threshold,
                half_life_days=self.policy.vote_half_life_days,
                self_id=self.node_id,
            )
        local_rep = reps.of(verdict.version_id) if verdict else None
        protected = (
            local_rep is not None
            and self.policy.anchor_value(local_rep.attribution, local_rep.anchor_cap)
            >= self.policy.anchors[self.policy.protect_anchor]
        )
        answer = served(
            verdict.version_id if verdict else None,
            verdict.rule if verdict else None,
            verdict.ambiguous if verdict else False,
            protected,
            result,
        )
        rep = reps.of(answer.version_id) if answer is not None else None
        if answer is not None and rep is None and verdict is not None:
            # The consensus version's evidence has not reached this node yet.
            answer = Served(verdict.version_id, BeliefState.CONTESTED, verdict.rule)
            rep = local_rep
        if answer is None or rep is None:
            return [], result
        row = StoredBelief(
            key, answer.version_id, rep.object, rep.evidence_id, answer.rule, answer.state, now
        )
        return [row], result

    # -- reads --------------------------------------------------------------

    def _beliefs(
        self, tx: Transaction, keys: Iterable[Key], held: Mapping[str, Evidence] | None = None
    ) -> dict[Key, Belief]:
        """The served beliefs of `keys`; `held` is evidence the caller already has in hand."""
        rows = tx.beliefs(list(keys))
        wanted = [b.evidence_id for bs in rows.values() for b in bs]
        reps = {i: held[i] for i in wanted if i in held} if held else {}
        if len(reps) < len(wanted):
            reps.update(tx.evidence([i for i in wanted if i not in reps]))
        out = {}
        for key, bs in rows.items():
            if bs:
                out[key] = _belief_from_rows(bs, reps)
        return out

    def belief(
        self, key: Key, as_of: Instant | None = None, known_at: Instant | None = None
    ) -> Belief:
        """The served belief now, or the local belief as of an event time / as known at a time."""
        _check_key(key)
        _check_times(as_of, known_at)
        with self.repo.read() as tx:
            if as_of is None and known_at is None:
                found = self._beliefs(tx, [key]).get(key)
            else:
                state = tx.key_states([key])[key]
                found = _belief_from_verdict(
                    key,
                    visible(state.evidence, state.retractions, as_of=as_of, known_at=known_at),
                    self.policy,
                )
        if found is None:
            raise NotFound(f"no belief for {key}")
        return found

    def list_beliefs(
        self, namespace: str, subject: str | None = None, page_size: int = 0, page_token: str = ""
    ) -> Page[Belief]:
        """Current beliefs of a namespace (and subject), a page at a time."""
        return self._list(namespace, subject, page_size, page_token, None)

    def review_queue(
        self, namespace: str = "", page_size: int = 0, page_token: str = ""
    ) -> Page[Belief]:
        """Every key whose served state is CONTESTED or AMBIGUOUS, and only those."""
        return self._list(
            namespace, None, page_size, page_token, (BeliefState.AMBIGUOUS, BeliefState.CONTESTED)
        )

    def _list(
        self,
        namespace: str,
        subject: str | None,
        page_size: int,
        page_token: str,
        states: tuple[BeliefState, ...] | None,
    ) -> Page[Belief]:
        size = _page_size(page_size)
        after = tuple(_decode_token(page_token, 2)) if page_token else None
        with self.repo.read() as tx:
            rows = tx.list_beliefs(namespace, subject, after, size + 1, states)  # type: ignore[arg-type]
            more = len(rows) > size
            if more:
                extra, rows = rows[size], rows[:size]
                if extra.key == rows[-1].key:
                    # The page would end between two values of one multi-valued key: take
                    # all of them, so no key is split into two partial beliefs across pages.
                    last = extra.key
                    rest = [
                        b
                        for b in tx.beliefs([last])[last]
                        if after is None or (ids.key_id(last), b.version_id) > after
                    ]
                    rows = [b for b in rows if b.key != last] + rest
            reps = tx.evidence([b.evidence_id for b in rows])
        grouped: dict[Key, list[StoredBelief]] = {}
        for b in rows:
            grouped.setdefault(b.key, []).append(b)
        items = [_belief_from_rows(bs, reps) for bs in grouped.values()]
        token = _encode_token(ids.key_id(rows[-1].key), rows[-1].version_id) if more else ""
        return Page(items, token)

    def history(self, key: Key, known_at: Instant | None = None) -> list[VersionHistory]:
        """Every version of a key with its validity intervals, statuses and lineage."""
        _check_key(key)
        _check_times(None, known_at)
        with self.repo.read() as tx:
            state = tx.key_states([key])[key]
            lineage = tx.lineage(key)
        if not state.evidence:
            raise NotFound(f"no evidence for {key}")
        return history(
            state.evidence, state.retractions, self.policy, known_at=known_at, lineage=lineage
        )

    def explain(
        self, key: Key, as_of: Instant | None = None, known_at: Instant | None = None
    ) -> Explanation:
        """The belief and, for every other version, the first rule by which the belief beats it."""
        _check_key(key)
        _check_times(as_of, known_at)
        with self.repo.read() as tx:
            state = tx.key_states([key])[key]
            served = (
                self._beliefs(tx, [key]).get(key) if as_of is None and known_at is None else None
            )
        evidence = visible(state.evidence, state.retractions, as_of=as_of, known_at=known_at)
        verdict, comparisons = explain(evidence, self.policy)
        if verdict is None:
            raise NotFound(f"no belief for {key}")
        return Explanation(served or _belief_from_verdict(key, evidence, self.policy), comparisons)

    def evidence_by_ids(self, evidence_ids: Sequence[str]) -> dict[str, Evidence]:
        """Stored evidence by id (any status)."""
        with self.repo.read() as tx:
            return tx.evidence(evidence_ids)

    def evidence_of_version(self, key: Key, version_id: str) -> list[Evidence]:
        """The active evidence for one version of a key."""
        with self.repo.read() as tx:
            state = tx.key_states([key])[key]
        return [e for e in state.evidence if e.version_id == version_id]

    def decisions(
        self, key: Key | None = None, namespace: str = "", page_size: int = 0, page_token: str = ""
    ) -> Page[LoggedDecision]:
        """The decision log, oldest first, optionally for one key or namespace."""
        if key is not None:
            _check_key(key)
        size = _page_size(page_size)
        after = _decode_seq(page_token) if page_token else 0
        with self.repo.read() as tx:
            rows = tx.decisions(key, namespace or None, after, size + 1)
        more = len(rows) > size
        rows = rows[:size]
        return Page(rows, _encode_token(rows[-1].seq) if more else "")

    def changes(
        self, namespace: str = "", after_seq: int = 0, limit: int = 100
    ) -> list[BeliefChange]:
        """Belief changes after a resume point, oldest first."""
        with self.repo.read() as tx:
            return tx.belief_changes(namespace or None, after_seq, limit)

    def counts(self) -> Counts:
        """Sizes of the store."""
        with self.repo.read() as tx:
            return tx.counts()

    # -- review ---------------------------------------------------------------

    def resolve(
        self, key: Key, *, version_id: str | None, obj: str | None, reason: str, operator: str
    ) -> Resolution:
        """Records an operator's choice as user_confirmed evidence, arbitrated like any other."""
        _check_key(key)
        out: list[FieldViolation] = []
        if (version_id is None) == (obj is None):
            out.append(FieldViolation("choice", "give exactly one of version_id or object"))
        if not operator.strip():
            out.append(FieldViolation("operator", "is required"))
        if out:
            raise InvalidInput(out)
        if version_id is not None:
            evidence = self.evidence_of_version(key, version_id)
            if not evidence:
                raise NotFound(f"no version {version_id} for {key}")
            obj = evidence[0].object
        assert obj is not None
        submitted = self.submit(
            Submission(
                key.namespace,
                key.subject,
                key.predicate,
                obj,
                "user_confirmed",
                f"operator:{operator.strip()}",
                worth=1.0,
                confidence=1.0,
            )
        )
        chosen = ids.version_id(key, obj)
        belief = submitted.belief
        if belief is not None and chosen in {v for v, _ in belief.values}:
            return Resolution(submitted, True, f"{key} now believes {obj!r} (rule {belief.rule})")
        if belief is not None and belief.version_id == chosen:
            if belief.state is BeliefState.BELIEVED:
                return Resolution(
                    submitted, True, f"{key} now believes {obj!r} (rule {belief.rule})"
                )
            return Resolution(
                submitted,
                False,
                f"{key} serves {obj!r} but is still {belief.state.value} (rule {belief.rule}): "
                "the operator's user_confirmed evidence does not outrank what keeps the key "
                "under review; retract or correct the competing evidence",
            )
        keeper = belief.version_id if belief else "none"
        return Resolution(
            submitted,
            False,
            f"stronger local evidence still keeps version {keeper} by rule "
            f"{submitted.decision.rule}; retract or correct that evidence instead",
        )

    # -- forgetting -----------------------------------------------------------

    def erase(
        self,
        *,
        evidence_id: str | None = None,
        key: Key | None = None,
        subject: tuple[str, str] | None = None,
        operator: str,
        reason: str,
    ) -> ErasureReport:
        """Destroys values and sources in scope; only a hash tombstone stays."""
        given = [x for x in (evidence_id, key, subject) if x is not None]
        out: list[FieldViolation] = []
        if len(given) != 1:
            out.append(FieldViolation("scope", "give exactly one of evidence_id, key or subject"))
        if key is not None:
            check_key(out, key)
        if subject is not None and not (subject[0].strip() and subject[1].strip()):
            out.append(FieldViolation("subject", "needs both namespace and subject"))
        if not operator.strip():
            out.append(FieldViolation("operator", "is required"))
        if out:
            raise InvalidInput(out)
        if evidence_id is not None:
            scope, scope_hash = "evidence", evidence_id
        elif key is not None:
            scope, scope_hash = "key", ids.key_id(key)
        else:
            assert subject is not None
            scope, scope_hash = "subject", ids.subject_id(*subject)
        now = self.clock.now()
        tombstone = Tombstone(
            erasure_id=ids.value_hash(f"{scope}:{scope_hash}:{now}:{self.node_id}"),
            scope=scope,
            scope_hash=scope_hash,
            erased_at=now,
            operator=operator.strip(),
            reason=reason,
            evidence_ids=(),
            origin_node=self.node_id,
        )
        fx = _Effects()
        with self.repo.write() as tx:
            if key is not None:
                doomed = tx.evidence_in_scope("key", None, key, None)
            elif subject is not None:
                doomed = tx.evidence_in_scope("subject", None, None, subject)
            else:
                doomed = tx.evidence_in_scope("evidence", evidence_id, None, None)
            erased_ids = {e.evidence_id for e in doomed} | ({evidence_id} if evidence_id else set())
            tombstone = replace(tombstone, evidence_ids=tuple(sorted(erased_ids)))
            keys = self._apply_erasure(
                tx, tombstone, doomed, fx, extra_keys={key} if key else set()
            )
        self._after(fx)
        self.repo.after_erase()
        return ErasureReport(tombstone.erasure_id, len(doomed), len(keys), now)

    def _apply_erasure(
        self,
        tx: Transaction,
        tombstone: Tombstone,
        doomed: Sequence[Evidence],
        fx: _Effects,
        extra_keys: set[Key] | None = None,
    ) -> set[Key]:
        """Destroys the doomed evidence, records the tombstone and recomputes the keys."""
        keys = {e.key for e in doomed} | (extra_keys or set())
        ids_ = sorted({e.evidence_id for e in doomed} | set(tombstone.evidence_ids))
        forget = keys if tombstone.scope != "evidence" else set()
        # Read before erasing: belief rows resting on erased evidence no longer join to it.
        current = tx.beliefs(list(keys))
        for v in tx.votes_on_evidence(ids_):
            keys.add(v.key)
            fx.votes_removed.append((v.voter, v.key))
        tx.delete_votes_on_evidence(ids_)
        if forget:
            # Every vote on an erased key goes, abstentions too: they carry the key's text.
            for key, held in tx.votes(forget).items():
                fx.votes_removed.extend((v.voter, key) for v in held)
            tx.delete_votes_on_keys(forget)
        tx.erase(ids_, {e.key for e in doomed}, forget)
        tx.add_tombstone(tombstone)
        fx.evidence_removed.update(ids_)
        fx.erasures_added.add(tombstone.erasure_id)
        current.update({k: v for k, v in tx.beliefs([k for k in keys if k not in current]).items()})
        self._refresh(
            tx, tx.key_states(keys), tombstone.erased_at, fx, current=current, quiet=forget
        )
        return keys

    def run_decay(self, now: Instant | None = None, batch: int = 2000) -> DecayReport:
        """Tombstones evidence whose effective confidence fell below min_confidence."""
        now = self.clock.now() if now is None else now
        decaying = {a for a in self.policy.anchors if self.policy.half_life_micros(a) is not None}
        decayed = tombstoned = 0
        after = ""
        while True:
            with self.repo.read() as tx:
                page = tx.decaying_evidence(decaying, after, batch)
            if not page:
                break
            after = page[-1].evidence_id
            decayed += sum(
                1
                for e in page
                if effective_confidence_milli(e, self.policy, now) < e.confidence_milli
            )
            cold = set(cold_evidence(page, self.policy, now))
            if not cold:
                continue
            tombstoned += len(cold)
            keys = {e.key for e in page if e.evidence_id in cold}
            fx = _Effects()
            with self.repo.write() as tx:
                tx.set_status(cold, EvidenceStatus.DECAYED)
                self._refresh(tx, tx.key_states(keys), self.clock.now(), fx)
            self._after(fx)
        return DecayReport(decayed, tombstoned)

    # -- node identity --------------------------------------------------------

    def meta(self, name: str) -> str | None:
        """A persisted node fact."""
        with self.repo.read() as tx:
            return tx.meta(name)


def _erased_key(key: Key) -> Key:
    """A stand-in key for logging a rejection by erasure: its hash, never its text."""
    return Key("erased", ids.key_id(key), "-")


def _consensus_transition(
    key: Key,
    old: Sequence[StoredBelief],
    new: Sequence[StoredBelief],
    result: Tally | None,
    now: Instant,
) -> Decision | None:
    """A decision-log entry, with the tallies, when votes change what a key serves."""
    if result is None or not result.peer_voted or not new:
        return None
    row = new[0]
    before = old[0] if old else None
    if row.state is BeliefState.CONTESTED:
        if (
            before is not None
            and before.state is BeliefState.CONTESTED
            and before.version_id == row.version_id
        ):
            return None
        outcome = Outcome.CONTESTED
    elif row.rule is Rule.FEDERATION_CONSENSUS:
        if (
            before is not None
            and before.rule is Rule.FEDERATION_CONSENSUS
            and before.version_id == row.version_id
        ):
            return None
        outcome = (
            Outcome.SUPERSEDED
            if before and before.version_id != row.version_id
            else Outcome.CORROBORATED
        )
    else:
        return None
    tallies = "; ".join(
        f"{t.version_id}: {result.share_milli(t.version_id) / 10:.1f}% by {', '.join(t.voters)}"
        for t in result.versions
    )
    return Decision(
        key=key,
        outcome=outcome,
        rule=Rule.FEDERATION_CONSENSUS,
        decided_at=now,
        version_id=row.version_id,
        supersedes=before.version_id if before and before.version_id != row.version_id else None,
        detail=f"tally: {tallies}",
    )


def _tombstone_problem(t: Tombstone) -> str:
    if t.scope not in ("evidence", "key", "subject"):
        return f"unknown erasure scope {t.scope!r}"
    if (
        not _is_id(t.erasure_id)
        or not _is_id(t.scope_hash)
        or not all(_is_id(i) for i in t.evidence_ids)
    ):
        return "erasure ids must be 32 lowercase hex digits"
    out: list[FieldViolation] = []
    check_instant(out, "erased_at", t.erased_at)
    if t.origin_node:  # older peers send none
        check_node_id(out, "origin_node", t.origin_node)
    return describe_violations(out)


def _vote_problem(v: Vote, held: dict[str, Evidence], policy: Policy) -> str:
    out: list[FieldViolation] = []
    check_key(out, v.key)
    check_instant(out, "fresh_since", v.fresh_since)
    if out:
        return describe_violations(out)
    if not 0 <= v.worth_milli <= 1000 or not 0 <= v.anchor <= max(policy.anchors.values()):
        return "vote weight out of range"
    if v.version_id is None:
        return ""
    e = held.get(v.evidence_id)
    if e is None or e.key != v.key or e.version_id != v.version_id:
        return "unknown version: the vote does not rest on evidence this node holds"
    return ""


def _vote_hash(v: Vote) -> int:
    return vote_item_hash(
        ids.key_id(v.key), v.version_id, v.evidence_id, v.anchor, v.worth_milli, v.fresh_since
    )


def ensure_node_id(repo: Repository, configured: str | None, fresh: str) -> str:
    """The node id persisted on first start; a configured id must match the stored one."""
    with repo.write() as tx:
        stored = tx.meta("node_id")
        if stored is None:
            tx.set_meta("node_id", configured or fresh)
            return configured or fresh
    if configured and configured != stored:
        raise ValueError(
            f"node_id {configured!r} is configured but this database belongs to node {stored!r}"
        )
    return stored


def _check_times(as_of: Instant | None, known_at: Instant | None) -> None:
    out: list[FieldViolation] = []
    check_instant(out, "as_of", as_of)
    check_instant(out, "known_at", known_at)
    if out:
        raise InvalidInput(out)


def _belief_from_rows(rows: Sequence[StoredBelief], reps: dict[str, Evidence]) -> Belief:
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


def _belief_from_verdict(key: Key, evidence: Sequence[Evidence], policy: Policy) -> Belief | None:
    verdict: Verdict | None = arbitrate(evidence, policy)
    if verdict is None:
        return None
    by_id = {e.evidence_id: e for e in evidence}
    rep = by_id[verdict.evidence_id]
    values: tuple[tuple[str, str], ...] = ()
    if verdict.believed:
        values = tuple(
            (vid, next(e.object for e in evidence if e.version_id == vid))
            for vid in verdict.believed
        )
    state = BeliefState.AMBIGUOUS if verdict.ambiguous else BeliefState.BELIEVED
    return Belief(key, verdict.version_id, rep.object, state, verdict.rule, rep, values)
