"""Forgetting: privacy erasure (values and sources destroyed, a hash tombstone kept) and
the decay job, which records the served beliefs that expiries changed (specification §6)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace

from factnode.core import (
    MICROS_PER_DAY,
    Decision,
    Evidence,
    FieldViolation,
    Instant,
    InvalidInput,
    Key,
    KeyState,
    Outcome,
    Rule,
    expiry,
    ids,
    iso,
)
from factnode.core.plan import ErasureLoad, plan_erasure
from factnode.core.receipts import Receipt
from factnode.core.story import (
    BelievedAgain,
    ServedBefore,
    believed_again_by_erasure,
)
from factnode.core.validation import (
    MAX_KEY_PART_BYTES,
    MAX_NODE_ID_BYTES,
    MAX_REASON_BYTES,
    check_id,
    check_key,
    check_text,
)
from factnode.ledger._model import Committed, DecayReport, ErasureReport
from factnode.ledger._serving import Component, bearing_on
from factnode.store import Tombstone
from factnode.store.repository import Transaction, Writes

# Set by migration r28 where the old decay's marks were lifted (`recount_after_upgrade`).
RECOUNT_META = "recount_after_r28"
# The operator named on retention's tombstones (specification §6).
RETENTION = "retention"


class Forgetting(Component):
    """Erase and decay."""

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
        if evidence_id is not None:
            check_id(out, "evidence_id", evidence_id)
        if subject is not None and not (subject[0].strip() and subject[1].strip()):
            out.append(FieldViolation("subject", "needs both namespace and subject"))
        if subject is not None:
            check_text(out, "subject.namespace", subject[0], MAX_KEY_PART_BYTES, required=False)
            check_text(out, "subject.subject", subject[1], MAX_KEY_PART_BYTES, required=False)
        check_text(out, "operator", operator, MAX_NODE_ID_BYTES, required=True)
        check_text(out, "reason", reason, MAX_REASON_BYTES, required=False)
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
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.announce(tx, fx)
            if key is not None:
                doomed = tx.evidence_in_scope("key", None, key, None)
            elif subject is not None:
                doomed = tx.evidence_in_scope("subject", None, None, subject)
            else:
                doomed = tx.evidence_in_scope("evidence", evidence_id, None, None)
            erased_ids = {e.evidence_id for e in doomed} | ({evidence_id} if evidence_id else set())
            tombstone = replace(tombstone, evidence_ids=tuple(sorted(erased_ids)))
            keys, again = self.apply_erasure(
                tx, tombstone, doomed, fx, extra_keys={key} if key else set()
            )
        self.repo.after_erase()
        return ErasureReport(tombstone.erasure_id, len(doomed), len(keys), now, tuple(again))

    def apply_erasure(
        self,
        tx: Transaction,
        tombstone: Tombstone,
        doomed: Sequence[Evidence],
        fx: Committed,
        extra_keys: set[Key] | None = None,
        *,
        receipt: bool = True,
    ) -> tuple[set[Key], list[BelievedAgain]]:
        """Destroys the doomed evidence, records the tombstone and recomputes the keys: load,
        plan (`core.plan.plan_erasure`), apply. Returns the keys recomputed and each version
        the erasure made believed again, whose story it logs (rule erased, without any value).
        `receipt`: this node records its receipt of the erasure (specification §6), saying
        now and how many pieces of evidence it removed (an import's replay records none: the
        export's receipts come with it)."""
        named = list(tombstone.evidence_ids)
        # Every vote on a key in a key or subject erasure's scope goes, also where the evidence
        # it rests on never arrived here: that evidence is erased everywhere and can never
        # come, so a vote kept waiting for it would be held here for ever, and digests would
        # never agree. A vote on evidence recorded after the erasure comes back by sync.
        extra_keys = (extra_keys or set()) | tx.voted_keys_in_scope(
            tombstone.scope, tombstone.scope_hash
        )
        load = ErasureLoad(
            doomed=doomed,
            bearing=frozenset(bearing_on(tx, doomed)),
            votes_on_evidence=tx.votes_on_evidence({e.evidence_id for e in doomed} | set(named)),
        )
        # Which keys it forgets depends on nothing their votes say: a first plan names the
        # keys whose votes the load then reads.
        plan = plan_erasure(tombstone.scope, named, load, extra_keys or ())
        if plan.forget:
            load = replace(load, votes_on_keys=tx.votes(plan.forget))
            plan = plan_erasure(tombstone.scope, named, load, extra_keys or ())
        # Read before erasing: belief rows resting on erased evidence no longer join to it.
        current = tx.beliefs(list(plan.refresh))
        told = [k for k in plan.refresh if k not in plan.forget]
        before = tx.key_states(told) if told else {}
        self._serving.apply(tx, Writes(erasure=plan, tombstone=tombstone), fx)
        if receipt:
            own = Receipt(tombstone.erasure_id, self.node_id, self.clock.now(), len(doomed))
            self._serving.put_receipts(tx, [own], fx)
        # The states after the erasure are read back: the store destroyed the rows.
        after = tx.key_states(plan.refresh)
        served = self._serving.refresh(
            tx, after, tombstone.erased_at, fx, current=current, quiet=plan.forget
        )
        again = []
        for k in sorted(told):
            held = {e.evidence_id: e for e in after[k].evidence}
            story = believed_again_by_erasure(
                k,
                before[k],
                [ServedBefore(b.version_id, b.rule) for b in current.get(k, [])],
                after[k],
                [(b.version_id, held[b.evidence_id]) for b in served.get(k, [])],
                self.policy,
                tombstone.erasure_id,
            )
            if story is not None:
                again.append((story, served[k]))
        if again:
            now = self.clock.now()
            logged = [
                Decision(
                    key=story.key,
                    outcome=Outcome.ERASED,
                    rule=Rule.ERASED,
                    decided_at=now,
                    # Its version's evidence: erasing that later takes this entry too.
                    evidence_id=next(
                        b.evidence_id for b in rows if b.version_id == story.version_id
                    ),
                    version_id=story.version_id,
                    detail=story.logged,
                )
                for story, rows in again
            ]
            self._serving.apply(tx, Writes(decisions=logged), fx)
        return set(plan.refresh), [story for story, _ in again]

    def run_decay(self, now: Instant | None = None, batch: int = 2000) -> DecayReport:
        """Materialises decay up to `now` (default, and at most, the node's clock): every key
        holding a decaying assertion whose expiry passed since its served rows were worked
        out is recomputed, and each served belief that changed gets one DECAYED decision
        (rule decay). Every view asks expiry itself (`KeyState.holding`, `serving.view`),
        so running this or not changes no answer: only the log and the counters."""
        clock = self.clock.now()
        if now is not None and now > clock:
            raise InvalidInput([FieldViolation("now", "must not be after the node's clock")])
        now = clock if now is None else now
        decaying = {a for a in self.policy.anchors if self.policy.half_life_micros(a) is not None}
        decayed = purged = 0
        for keys in self._pages(decaying, batch):
            fx = Committed()
            with self.repo.write(set(keys)) as tx:
                self._serving.announce(tx, fx)
                decayed += self._serving.materialise(tx, keys, now, fx)
                states = tx.key_states(keys)
            purged += self._purge(states, now)
        return DecayReport(decayed, purged)

    def _pages(self, anchors: Collection[str], batch: int) -> Iterator[list[Key]]:
        """The keys holding active evidence attributed to (or capped at) `anchors`, a page of
        at most `batch` at a time, in key id order, each read in its own transaction."""
        after = ""
        while True:
            with self.repo.read() as tx:
                keys = tx.decaying_keys(anchors, after, batch)
            if not keys:
                return
            after = ids.key_id(keys[-1])
            yield keys

    def recount_after_upgrade(self, batch: int = 2000) -> int:
        """Once after migration r28 brought back evidence the old decay had marked (and whose
        keys it left serving nothing): works out every key holding evidence again, as of now.
        Returns how many keys were recomputed (0 where nothing was pending)."""
        with self.repo.read() as tx:
            if not tx.meta(RECOUNT_META):
                return 0
        done = 0
        for keys in self._pages(set(self.policy.anchors), batch):
            fx = Committed()
            with self.repo.write(set(keys)) as tx:
                self._serving.announce(tx, fx)
                self._serving.refresh(tx, tx.key_states(keys), self.clock.now(), fx)
            done += len(keys)
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.apply(tx, Writes(meta={RECOUNT_META: ""}), fx)
        return done

    def _purge(self, states: Mapping[Key, KeyState], now: Instant) -> int:
        """Retention (specification §6): evidence expired for longer than
        `retain_decayed_days` is erased as an erasure by id does (its values destroyed, a
        hash tombstone that replicates), each with a PURGED decision. Returns how many."""
        days = self.policy.retain_decayed_days
        if days is None:
            return 0
        cutoff = now - days * MICROS_PER_DAY
        doomed = sorted(
            ((e, end) for st in states.values() for e in st.evidence
             if (end := expiry(e, self.policy)) is not None and end <= cutoff),
            key=lambda pair: pair[0].evidence_id,
        )  # fmt: skip
        purged = 0
        for e, end in doomed:
            tombstone = Tombstone(
                erasure_id=ids.value_hash(f"evidence:{e.evidence_id}:{now}:{self.node_id}"),
                scope="evidence",
                scope_hash=e.evidence_id,
                erased_at=now,
                operator=RETENTION,
                reason=f"expired at {iso(end)}, kept {days} days (retain_decayed_days)",
                evidence_ids=(e.evidence_id,),
                origin_node=self.node_id,
            )
            fx = Committed()
            with self.repo.write() as tx:
                self._serving.announce(tx, fx)
                held = tx.evidence_in_scope("evidence", e.evidence_id, None, None)
                if not held:
                    continue
                self.apply_erasure(tx, tombstone, held, fx)
                told = Decision(
                    key=e.key,
                    outcome=Outcome.PURGED,
                    rule=Rule.DECAY,
                    decided_at=now,
                    detail=f"retention purged a piece of evidence that expired at {iso(end)}, "
                    f"more than {days} days ago (erasure {tombstone.erasure_id})",
                )
                self._serving.apply(tx, Writes(decisions=[told]), fx)
            self.repo.after_erase()
            purged += 1
        return purged
