"""Writing: every submission and retraction (first-party or relayed) decided in order and
recorded."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TypeVar

from factnode.core import (
    Confirmation,
    Decision,
    Evidence,
    Instant,
    Key,
    Outcome,
    Rule,
    Ruling,
    Submission,
    believed_versions,
    make_evidence,
    make_retraction,
)
from factnode.core.plan import IngestLoad, IngestPlan, plan_ingest
from factnode.core.recall import Embedding, stored_vectors
from factnode.core.refresh import StoredBelief
from factnode.core.signed import confirmation_payload
from factnode.core.validation import DEFAULT_RETRACTION_ANCHOR, DEFAULT_UNIT
from factnode.ledger._model import (
    Belief,
    Committed,
    NotFound,
    Submitted,
    belief_from_rows,
    stamped,
)
from factnode.ledger._serving import Component, bearing_on, check_key_input
from factnode.store.repository import (
    LoggedDecision,
    RefusedData,
    Transaction,
    Writes,
)


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


class Writing(Component):
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

    def ingest(
        self,
        items: Sequence[tuple[Evidence, str | None]],
        vectors: Mapping[str, Sequence[Embedding]] | None = None,
    ) -> list[Submitted]:
        """Decides checked evidence in order, in one write transaction. `vectors` (by evidence
        id) are the callers' embeddings, kept beside the evidence this call stores."""
        fx = Committed()
        keys = {e.key for e, _ in items}
        ids = [e.evidence_id for e, _ in items]
        with _collector_paused(), self.repo.write(keys, ids) as tx:
            self._serving.announce(tx, fx)
            rulings, beliefs = self.ingest_in(tx, items, fx, restating=True)
            if vectors:
                tx.put_vectors(stored_vectors(rulings, vectors))
            untouched = keys - set(beliefs)
            # Their state was just loaded (and is in the write cache): no evidence read-back.
            held = {
                e.evidence_id: e for st in tx.key_states(untouched).values() for e in st.evidence
            }
            beliefs.update(self._serving.beliefs(tx, untouched, held))
            # Stamped as reads stamp them (from the key's evidence, in the write's key cache).
            states = tx.key_states(list(beliefs))
            beliefs = {k: stamped(b, states[k].evidence) for k, b in beliefs.items()}
            self._serving.publish(tx, beliefs)
            seqs = tx.logged_seqs([ruling.decision for _, ruling in rulings])
        return [
            Submitted(ruling.decision, e.evidence_id, e.version_id, beliefs.get(e.key), seq)
            for (e, ruling), seq in zip(rulings, seqs, strict=True)
        ]

    def _signed(self, confirmations: Sequence[Confirmation]) -> tuple[Confirmation, ...]:
        """This node's confirmations, signed where it has a key (specification §6)."""
        sign = self._serving.sign
        if sign is None:
            return tuple(confirmations)
        return tuple(replace(c, signature=sign(confirmation_payload(c))) for c in confirmations)

    def ingest_in(
        self,
        tx: Transaction,
        items: Sequence[tuple[Evidence, str | None]],
        fx: Committed,
        *,
        reasons: Mapping[str, str] | None = None,
        restating: bool = False,
    ) -> tuple[list[tuple[Evidence, Ruling]], dict[Key, Belief]]:
        """Decides `items` in order: load, plan (`core.plan.plan_ingest`), apply. Returns the
        rulings and the served beliefs of the keys whose evidence changed (built from what
        was just computed, not read back). `reasons` (by evidence id) go before the detail of
        their decisions (a Retract's reason). `restating`: the items are clients' statements,
        so a DUPLICATE of held evidence confirms it (specification §6)."""
        load = self._load(tx, items, restating)
        # An expiry the key's stored present has not caught up with is logged as such, not
        # folded into this batch's decisions (its reads were loaded above, with the rest).
        self._serving.materialise(tx, {e.key for e, _ in items}, self.clock.now(), fx)
        plan = plan_ingest(load, items, self.policy, reasons)
        return list(plan.rulings), self._apply(tx, plan, fx)

    def _load(
        self, tx: Transaction, items: Sequence[tuple[Evidence, str | None]], restating: bool
    ) -> IngestLoad:
        """Everything deciding `items` reads, read before any of it is decided."""
        # A `contradicts`, or a correction of one, changes the other key too.
        keys = {e.key for e, _ in items} | bearing_on(tx, [e for e, _ in items])
        loaded = tx.load(keys, items)
        return IngestLoad(
            states=loaded.states,
            remembered=loaded.remembered,
            stored=loaded.stored,
            by_idempotency=loaded.by_idempotency,
            erased=loaded.erased,
            peer_voted=frozenset(
                k for k, held in loaded.votes.items() if self._serving.peer_voted(held)
            ),
            at=self.clock.now(),
            restated_by=self.node_id if restating else None,
        )

    def _apply(self, tx: Transaction, plan: IngestPlan, fx: Committed) -> dict[Key, Belief]:
        """Writes what `plan` says, recomputes the keys it names (`Serving.refresh`) and
        returns their served beliefs."""
        self._serving.apply(
            tx,
            Writes(
                evidence=plan.evidence,
                bears_on=plan.bears_on,
                arbitrated=plan.remember,
                decisions=plan.decisions,
                confirmations=self._signed(plan.confirmations),
                confirmed=plan.confirmed,
            ),
            fx,
        )
        now = self.clock.now()
        current = tx.beliefs(list(plan.refresh))
        served = self._serving.refresh(
            tx, dict(plan.states), now, fx, current=current, known=plan.arbitrated
        )
        contradicted = [
            d
            for key in sorted({k for k, _ in plan.bears_on})
            for d in _contradicted(
                key, current.get(key, []), served.get(key, []), plan.bears_on, now
            )
        ]
        self._serving.apply(tx, Writes(decisions=contradicted), fx)
        beliefs: dict[Key, Belief] = {}
        for key, served_rows in served.items():
            if served_rows:
                by_id = {e.evidence_id: e for e in plan.states[key].evidence}
                beliefs[key] = belief_from_rows(served_rows, by_id)
        return beliefs

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
    ) -> LoggedDecision:
        """Records a retraction (specification §5): evidence that the belief (or the value `obj`)
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
            self._serving.announce(tx, fx)
            self._serving.materialise(tx, [key], now, fx)
            state = tx.key_states([key])[key].holding(self.policy, now)
            verdict = state.belief(self.policy)
            # What is served counts as believed too (a pinned or consensus version).
            held = set(believed_versions(verdict)) | {b.version_id for b in tx.beliefs([key])[key]}
            if verdict is None or (obj is not None and r.version_id not in held):
                raise NotFound(f"no current belief for {key}" + (" with that value" if obj else ""))
            [(_, ruling)], _ = self.ingest_in(tx, [(r, None)], fx, reasons={r.evidence_id: reason})
            [seq] = tx.logged_seqs([ruling.decision])
        return LoggedDecision(seq, ruling.decision)


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
