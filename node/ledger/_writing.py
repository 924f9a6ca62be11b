"""Writing: every submission and retraction (first-party or relayed) decided in order and
recorded."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TypeVar

from factnode.core import (
    Arbitrated,
    Decision,
    Evidence,
    EvidenceStatus,
    Instant,
    Key,
    KeyState,
    Outcome,
    Rule,
    Ruling,
    Submission,
    believed_versions,
    decide,
    ids,
    make_evidence,
    make_retraction,
)
from factnode.core.arbitration import serves_alike
from factnode.core.validation import DEFAULT_RETRACTION_ANCHOR, DEFAULT_UNIT
from factnode.ledger._model import Belief, Committed, NotFound, Submitted, belief_from_rows
from factnode.ledger._serving import Serving, bearing_on, check_key_input
from factnode.store.repository import RefusedData, StoredBelief, Transaction


@dataclass(slots=True)
class _Batch:
    """Mutable per-transaction view of the keys a batch touches."""

    evidence: dict[Key, list[Evidence]] = field(default_factory=dict)
    # Retraction-like evidence bearing on each key (`KeyState.retractions`).
    retractions: dict[Key, list[Evidence]] = field(default_factory=dict)
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
    key cache among them): a visible share of the write path's time (bench/arbitration.py,
    bench/README.md).
    Left alone where something else turned the collector off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


T = TypeVar("T")
R = TypeVar("R")


def isolating(
    apply: Callable[[Sequence[T]], list[R]],
    items: Sequence[T],
    refused: Callable[[T, RefusedData], R],
) -> list[R]:
    """`apply(items)` in one transaction; where the database refuses one item's data (and so
    the whole transaction), the items are halved until the bad one stands alone: it gets
    `refused(item, error)` and every other item is applied, in the same order. Other errors
    (the database being down, say) are the batch's and propagate."""
    try:
        return apply(items)
    except RefusedData as exc:
        if len(items) == 1:
            return [refused(items[0], exc)]
    middle = len(items) // 2
    return isolating(apply, items[:middle], refused) + isolating(apply, items[middle:], refused)


def _erased_key(key: Key) -> Key:
    """A stand-in key for logging a rejection by erasure: its hash, never its text."""
    return Key("erased", ids.key_id(key), "-")


class Writing(Serving):
    """Submissions decided and recorded, one transaction per batch."""

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
        fx = Committed()
        keys = {e.key for e, _ in items}
        ids = [e.evidence_id for e, _ in items]
        with _collector_paused(), self.repo.write(keys, ids) as tx:
            rulings, beliefs = self._ingest_in(tx, items, fx)
            untouched = keys - set(beliefs)
            # Their state was just loaded (and is in the write cache): no evidence read-back.
            held = {
                e.evidence_id: e for st in tx.key_states(untouched).values() for e in st.evidence
            }
            beliefs.update(self._beliefs(tx, untouched, held))
            self._publish(tx, beliefs)
        self._after(fx)
        return [
            Submitted(ruling.decision, e.evidence_id, e.version_id, beliefs.get(e.key))
            for e, ruling in rulings
        ]

    def ingest_each(
        self, items: Sequence[tuple[Evidence, str | None]]
    ) -> list[Submitted | RefusedData]:
        """`ingest`, except that an item whose data the database refuses gets the error as its
        answer alone, and the others are decided and committed as if it had not been sent."""

        def apply(chunk: Sequence[tuple[Evidence, str | None]]) -> list[Submitted | RefusedData]:
            return [*self.ingest(chunk)]

        def refused(item: tuple[Evidence, str | None], exc: RefusedData) -> RefusedData:
            return exc

        return isolating(apply, items, refused)

    def _ingest_in(
        self,
        tx: Transaction,
        items: Sequence[tuple[Evidence, str | None]],
        fx: Committed,
        *,
        reasons: Mapping[str, str] | None = None,
    ) -> tuple[list[tuple[Evidence, Ruling]], dict[Key, Belief]]:
        """Decides `items` in order; returns the rulings and the served beliefs of the keys
        whose evidence changed (built from what was just computed, not read back). `reasons`
        (by evidence id) go before the detail of their decisions (a Retract's reason)."""
        # A `contradicts`, or a correction of one, changes the other key too.
        keys = {e.key for e, _ in items} | bearing_on(tx, [e for e, _ in items])
        # What the decisions below read, read ahead at once.
        tx.preload(keys, [e.evidence_id for e, _ in items])
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
        across: list[tuple[Key, Evidence]] = []  # evidence that counts on another key

        for e, idem in items:
            duplicate = e.evidence_id in stored or (idem is not None and idem in by_idempotency)
            ruling = decide(
                e,
                batch.state(e.key),
                self.policy,
                duplicate=duplicate,
                erased=e.evidence_id in erased,
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
                if ruling.candidate:  # peers compare, and are offered, active evidence only
                    fx.evidence_added.add(e.evidence_id)
                if idem is not None:
                    by_idempotency[idem] = e.evidence_id
            if ruling.candidate:
                assert ruling.arbitrated is not None
                batch.state(e.key)
                (batch.retractions if e.retracts else batch.evidence)[e.key].append(e)
                batch.known[e.key] = ruling.arbitrated
                grown.add(e.key)
                if (
                    e.retracts
                    or not serves_alike(ruling.before, ruling.after)
                    or self.policy.is_multi_valued(e.key.predicate)
                ):
                    touched.add(e.key)
                for other, r in self._bears_on(e, batch):
                    batch.state(other)
                    if all(h.evidence_id != r.evidence_id for h in batch.retractions[other]):
                        batch.retractions[other].append(r)
                        across.append((other, r))
                    batch.known.pop(other, None)
                    touched.add(other)
            if reasons and reasons.get(e.evidence_id):
                detail = f"{reasons[e.evidence_id]}; {ruling.decision.detail}"
                ruling = replace(ruling, decision=replace(ruling.decision, detail=detail))
            if ruling.decision.rule is Rule.ERASED:
                # Logged and countable, but the key's text must not come back after an erasure.
                ruling = replace(ruling, decision=replace(ruling.decision, key=_erased_key(e.key)))
            rulings.append((e, ruling))

        tx.add_evidence(rows)
        tx.bears_on(across)
        tx.remember({k: a for k, a in batch.known.items() if remembered.get(k) is not a})
        tx.add_decisions([ruling.decision for _, ruling in rulings])
        # Where peers vote, new evidence can count for a version the votes favour even when
        # the local belief stands (`_served_rows`): those keys are recounted too.
        touched.update(
            key for key, held in tx.votes(grown - touched).items() if self._peer_voted(held)
        )
        now = self.clock.now()
        others = {k for k, _ in across}
        current = tx.beliefs(list(touched))
        served = self._refresh(
            tx,
            {k: batch.state(k) for k in touched},
            now,
            fx,
            current=current,
            known=batch.known,
        )
        tx.add_decisions(
            [
                d
                for key in sorted(others)
                for d in _contradicted(key, current.get(key, []), served.get(key, []), across, now)
            ]
        )
        beliefs: dict[Key, Belief] = {}
        for key, served_rows in served.items():
            if served_rows:
                by_id = {e.evidence_id: e for e in batch.evidence[key]}
                beliefs[key] = belief_from_rows(served_rows, by_id)
        return rulings, beliefs

    def _bears_on(self, e: Evidence, batch: _Batch) -> list[tuple[Key, Evidence]]:
        """What joins other keys' states with `e` (DESIGN §5): `e` on the key it contradicts,
        with the evidence already held that corrects it; and `e` on the key contradicted by
        the assertion it corrects."""
        out: list[tuple[Key, Evidence]] = []
        held = batch.evidence.get(e.key, ())
        if e.contradicts is not None:
            out.append((e.contradicts, e))
            out.extend((e.contradicts, c) for c in held if c.corrects == e.evidence_id)
        if e.corrects is not None:
            out.extend(
                (c.contradicts, e)
                for c in held
                if c.evidence_id == e.corrects and c.contradicts is not None
            )
        return out

    def retract(
        self,
        key: Key,
        obj: str | None = None,
        at: Instant | None = None,
        reason: str = "",
        *,
        attribution: str = DEFAULT_RETRACTION_ANCHOR,
        source: str = "local",
        worth: float = DEFAULT_UNIT,
        confidence: float = DEFAULT_UNIT,
    ) -> Decision:
        """Records a retraction (DESIGN §5): evidence that the belief (or the value `obj`)
        stopped being true at `at` (default now). It ends what it outranks; an outranked
        retraction is stored all the same and decided DISBELIEVED. A key with no served
        belief (or without that value) is NotFound, and nothing is written. `source` is who
        says so (the server passes the caller's identity; "local" as a local operator is)."""
        check_key_input(key)
        now = self.clock.now()
        r = make_retraction(
            key,
            obj,
            attribution=attribution,
            source=source,
            at=at,
            worth=worth,
            confidence=confidence,
            policy=self.policy,
            recorded_at=now,
            origin_node=self.node_id,
        )
        fx = Committed()
        with self.repo.write() as tx:
            state = tx.key_states([key])[key]
            verdict = state.belief(self.policy)
            # What is served counts as believed too (a pinned or consensus version).
            held = set(believed_versions(verdict)) | {b.version_id for b in tx.beliefs([key])[key]}
            if verdict is None or (obj is not None and r.version_id not in held):
                raise NotFound(f"no current belief for {key}" + (" with that value" if obj else ""))
            [(_, ruling)], _ = self._ingest_in(tx, [(r, None)], fx, reasons={r.evidence_id: reason})
        self._after(fx)
        return ruling.decision


def _contradicted(
    key: Key,
    before: Sequence[StoredBelief],
    after: Sequence[StoredBelief],
    across: Sequence[tuple[Key, Evidence]],
    now: Instant,
) -> list[Decision]:
    """The decision logged for a key whose served belief an assertion on another key
    changed by naming it in `contradicts` (or a correction of one): none if it did not."""
    if {b.version_id for b in before} == {b.version_id for b in after}:
        return []
    by = [e for k, e in across if k == key][-1]  # the last that bore on it
    ended = sorted({b.version_id for b in before} - {b.version_id for b in after})
    return [
        Decision(
            key=key,
            outcome=Outcome.RETRACTED,
            rule=Rule.RETRACT,
            decided_at=now,
            evidence_id=by.evidence_id,
            version_id=ended[0] if ended else (after[0].version_id if after else None),
            supersedes=ended[0] if ended else None,
            detail=f"contradicted by evidence {by.evidence_id} on {by.key}"
            if by.contradicts == key
            else f"changed by evidence {by.evidence_id} on {by.key}, which corrects a contradiction",
        )
    ]
