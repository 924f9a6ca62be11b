"""The node's plain Python interface: the imperative shell around the pure core.

It loads what a key holds from the repository, asks the core for decisions and
verdicts, and persists them. The gRPC servicers call this and nothing else.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from node.clock import Clock
from node.core import (
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
from node.core.validation import check_instant, check_key
from node.store import BeliefChange, Counts, LoggedDecision, Repository, StoredBelief, Tombstone
from node.store.repository import Transaction

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
class _Batch:
    """Mutable per-transaction view of the keys a batch touches."""

    evidence: dict[Key, list[Evidence]] = field(default_factory=dict)
    retractions: dict[Key, list[Retraction]] = field(default_factory=dict)

    def state(self, key: Key) -> KeyState:
        return KeyState(self.evidence.setdefault(key, []), self.retractions.setdefault(key, []))


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
        with self.repo.write() as tx:
            keys = {e.key for e, _ in items} | {e.contradicts for e, _ in items if e.contradicts}
            batch = _Batch()
            for key, state in tx.key_states(keys).items():
                batch.evidence[key] = list(state.evidence)
                batch.retractions[key] = list(state.retractions)
            stored = tx.stored_evidence_ids([e.evidence_id for e, _ in items])
            by_idempotency = tx.evidence_for_idempotency_keys([k for _, k in items if k])
            erased = tx.erased([e for e, _ in items])

            rows: list[tuple[Evidence, EvidenceStatus, str | None]] = []
            rulings: list[tuple[Evidence, Ruling]] = []
            touched: set[Key] = set()
            for e, idem in items:
                duplicate = e.evidence_id in stored or (idem is not None and idem in by_idempotency)
                ruling = decide(
                    e,
                    batch.state(e.key),
                    self.policy,
                    duplicate=duplicate,
                    erased=e.evidence_id in erased,
                    contradicted=batch.state(e.contradicts) if e.contradicts else None,
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
                    if idem is not None:
                        by_idempotency[idem] = e.evidence_id
                if ruling.candidate:
                    batch.evidence[e.key].append(e)
                    touched.add(e.key)
                for r in ruling.retractions:
                    batch.retractions.setdefault(r.key, []).append(r)
                    touched.add(r.key)
                rulings.append((e, ruling))

            tx.add_evidence(rows)
            tx.add_retractions([r for _, ruling in rulings for r in ruling.retractions])
            tx.add_decisions([ruling.decision for _, ruling in rulings])
            self._refresh(tx, {k: batch.state(k) for k in touched}, self.clock.now())
            beliefs = self._beliefs(tx, {e.key for e, _ in items})
        return [
            Submitted(ruling.decision, e.evidence_id, e.version_id, beliefs.get(e.key))
            for e, ruling in rulings
        ]

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
                raise NotFound(f"no current belief for {key}" + (f" with that value" if obj else ""))
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
            self._refresh(
                tx, {key: KeyState(state.evidence, [*state.retractions, retraction])}, now
            )
        return decision

    def _refresh(self, tx: Transaction, states: dict[Key, KeyState], now: Instant) -> None:
        """Recomputes the served belief of each key and records the ones that changed."""
        if not states:
            return
        current = tx.beliefs(list(states))
        for key, state in states.items():
            rows = self._served_rows(key, state, now)
            old = current.get(key, [])
            if [(b.version_id, b.evidence_id, b.rule, b.state) for b in old] != [
                (b.version_id, b.evidence_id, b.rule, b.state) for b in rows
            ]:
                tx.replace_beliefs(key, rows, now)

    def _served_rows(self, key: Key, state: KeyState, now: Instant) -> list[StoredBelief]:
        evidence = visible(state.evidence, state.retractions)
        verdict = arbitrate(evidence, self.policy)
        if verdict is None:
            return []
        reps = representatives(evidence, self.policy)
        served = BeliefState.AMBIGUOUS if verdict.ambiguous else BeliefState.BELIEVED
        return [
            StoredBelief(key, vid, reps[vid].object, reps[vid].evidence_id, verdict.rule, served, now)
            for vid in believed_versions(verdict)
        ]

    # -- reads --------------------------------------------------------------

    def _beliefs(self, tx: Transaction, keys: Iterable[Key]) -> dict[Key, Belief]:
        rows = tx.beliefs(list(keys))
        reps = tx.evidence([b.evidence_id for bs in rows.values() for b in bs])
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

    def review_queue(self, namespace: str = "", page_size: int = 0, page_token: str = "") -> Page[Belief]:
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
        return history(state.evidence, state.retractions, self.policy, known_at=known_at, lineage=lineage)

    def explain(
        self, key: Key, as_of: Instant | None = None, known_at: Instant | None = None
    ) -> Explanation:
        """The belief and, for every other version, the first rule by which the belief beats it."""
        _check_key(key)
        _check_times(as_of, known_at)
        with self.repo.read() as tx:
            state = tx.key_states([key])[key]
            served = self._beliefs(tx, [key]).get(key) if as_of is None and known_at is None else None
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

    def changes(self, namespace: str = "", after_seq: int = 0, limit: int = 100) -> list[BeliefChange]:
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
        if belief is not None and chosen in {v for v, _ in belief.values} | {belief.version_id}:
            return Resolution(submitted, True, f"{key} now believes {obj!r} (rule {belief.rule})")
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
        with self.repo.write() as tx:
            doomed = tx.evidence_in_scope(scope, evidence_id, key, subject)
            keys = {e.key for e in doomed} | ({key} if key else set())
            erased_ids = sorted({e.evidence_id for e in doomed} | ({evidence_id} if evidence_id else set()))
            forget = keys if scope != "evidence" else set()
            tombstone = Tombstone(
                erasure_id=ids.value_hash(f"{scope}:{scope_hash}:{now}"),
                scope=scope,
                scope_hash=scope_hash,
                erased_at=now,
                operator=operator.strip(),
                reason=reason,
                evidence_ids=tuple(erased_ids),
            )
            # Read before erasing: belief rows resting on erased evidence no longer join to it.
            current = tx.beliefs(list(keys))
            tx.erase(erased_ids, forget)
            tx.add_tombstone(tombstone)
            states = tx.key_states(keys)
            for k, state in states.items():
                rows = self._served_rows(k, state, now)
                if rows or current.get(k):
                    tx.replace_beliefs(k, rows, now, announce=k not in forget)
        self.repo.after_erase()
        return ErasureReport(tombstone.erasure_id, len(doomed), len(keys), now)

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
                1 for e in page if effective_confidence_milli(e, self.policy, now) < e.confidence_milli
            )
            cold = set(cold_evidence(page, self.policy, now))
            if not cold:
                continue
            tombstoned += len(cold)
            keys = {e.key for e in page if e.evidence_id in cold}
            with self.repo.write() as tx:
                tx.set_status(cold, EvidenceStatus.DECAYED)
                self._refresh(tx, tx.key_states(keys), self.clock.now())
        return DecayReport(decayed, tombstoned)

    # -- node identity --------------------------------------------------------

    def meta(self, name: str) -> str | None:
        """A persisted node fact."""
        with self.repo.read() as tx:
            return tx.meta(name)


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
    values = tuple((b.version_id, b.object) for b in rows) if len(rows) > 1 or first.rule is Rule.MULTI_VALUED else ()
    return Belief(first.key, first.version_id, first.object, first.state, first.rule, reps[first.evidence_id], values)


def _belief_from_verdict(key: Key, evidence: Sequence[Evidence], policy: Policy) -> Belief | None:
    verdict: Verdict | None = arbitrate(evidence, policy)
    if verdict is None:
        return None
    by_id = {e.evidence_id: e for e in evidence}
    rep = by_id[verdict.evidence_id]
    values = ()
    if verdict.believed:
        values = tuple(
            (vid, next(e.object for e in evidence if e.version_id == vid)) for vid in verdict.believed
        )
    state = BeliefState.AMBIGUOUS if verdict.ambiguous else BeliefState.BELIEVED
    return Belief(key, verdict.version_id, rep.object, state, verdict.rule, rep, values)
