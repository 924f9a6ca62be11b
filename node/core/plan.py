"""Write batches as load, plan, apply: the plan step, pure.

The shell reads everything a batch of submissions needs up front (`IngestLoad`), `plan_ingest`
turns that and the batch's items into everything the batch writes (`IngestPlan`), and the
shell writes it; an erasure likewise (`ErasureLoad`, `plan_erasure`, `ErasurePlan`), an
operator's resolution (`ResolutionLoad`, `plan_resolution`); a peer's delta has its own
module (`core.delta`). No I/O and no clock here:
the same load and items give the same plan, which the tests assert row for row
(tests/unit/test_plan.py).

What the plan leaves to the shell: recomputing the served belief and this node's vote of the
keys it names in `refresh` (`Serving.refresh`, shared by every kind of write).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from factnode.core import ids
from factnode.core._model import (
    BeliefState,
    Confirmation,
    Decision,
    Evidence,
    EvidenceStatus,
    Instant,
    Key,
    Outcome,
    Rule,
    iso,
)
from factnode.core.arbitration import serves_alike
from factnode.core.consensus import Vote
from factnode.core.decay import holds
from factnode.core.decide import Arbitrated, KeyState, Ruling, decide
from factnode.core.policy import Policy

# One piece of evidence to store: its status and the idempotency key it came with.
EvidenceRow = tuple[Evidence, EvidenceStatus, str | None]


@dataclass(frozen=True, slots=True)
class IngestLoad:
    """What a batch of submissions reads before it decides anything."""

    # Every key the batch may change (its items' keys, and the keys they bear on).
    states: Mapping[Key, KeyState]
    # How each key's state was last arbitrated, where that is remembered.
    remembered: Mapping[Key, Arbitrated] = field(default_factory=dict)
    # Evidence ids already stored (in any status), among the batch's.
    stored: frozenset[str] = frozenset()
    # Evidence first stored under each of the batch's idempotency keys.
    by_idempotency: Mapping[str, str] = field(default_factory=dict)
    # The batch's evidence ids an erasure covers.
    erased: frozenset[str] = frozenset()
    # Keys some peer votes on: new evidence there can count for a version the votes favour.
    peer_voted: frozenset[Key] = frozenset()
    # The batch's instant: assertions expired by then count no more (None: none expire).
    at: Instant | None = None
    # The node that takes clients' restatements (a DUPLICATE of held evidence confirms it,
    # specification §6); None where the items are not clients' statements (a peer's relay).
    restated_by: str | None = None


@dataclass(frozen=True, slots=True)
class IngestPlan:
    """Everything a batch of submissions writes, in the order the shell applies it."""

    # Each item as decided (a retry as the evidence its idempotency key first stored).
    rulings: tuple[tuple[Evidence, Ruling], ...]
    evidence: tuple[EvidenceRow, ...]
    # Evidence that counts as a retraction on another key (`contradicts`, corrections).
    bears_on: tuple[tuple[Key, Evidence], ...]
    # Arbitrations worth remembering: those the batch worked out.
    remember: Mapping[Key, Arbitrated]
    decisions: tuple[Decision, ...]
    # Keys whose served belief and own vote must be recomputed, with their states after the
    # batch and, where known, those states arbitrated.
    refresh: frozenset[Key]
    states: Mapping[Key, KeyState]
    arbitrated: Mapping[Key, Arbitrated]
    # Restatements: the confirmations to keep, and the held evidence they moved.
    confirmations: tuple[Confirmation, ...] = ()
    confirmed: tuple[Evidence, ...] = ()


class _Batch:
    """The keys' states as the batch grows them, in lists appended to in place."""

    __slots__ = ("decayed", "evidence", "held", "known", "retractions")

    def __init__(self, load: IngestLoad, policy: Policy) -> None:
        at = load.at
        # Every assertion held, expired or not (a restatement may revive one).
        self.held = {k: {e.evidence_id: e for e in s.evidence} for k, s in load.states.items()}
        self.evidence = {
            k: [e for e in s.evidence if at is None or holds(e, policy, at)]
            for k, s in load.states.items()
        }
        self.retractions = {k: list(s.retractions) for k, s in load.states.items()}
        # Keys whose state lost expired evidence: an arbitration remembered for the whole
        # state does not hold for them, and none worked out here is remembered.
        self.decayed = {
            k for k, s in load.states.items() if len(self.evidence[k]) != len(s.evidence)
        }
        self.known = {k: a for k, a in load.remembered.items() if k not in self.decayed}

    def state(self, key: Key) -> KeyState:
        return KeyState(self.evidence.setdefault(key, []), self.retractions.setdefault(key, []))


def plan_ingest(
    load: IngestLoad,
    items: Sequence[tuple[Evidence, str | None]],
    policy: Policy,
    reasons: Mapping[str, str] | None = None,
) -> IngestPlan:
    """Decides `items` in order against `load`. `reasons` (by evidence id) go before the
    detail of their decisions (a Retract's reason)."""
    batch = _Batch(load, policy)
    restated: list[tuple[Confirmation, Evidence]] = []
    stored = set(load.stored)
    by_idempotency = dict(load.by_idempotency)
    rows: list[EvidenceRow] = []
    rulings: list[tuple[Evidence, Ruling]] = []
    touched: set[Key] = set()  # keys whose served belief or own vote may have moved
    grown: set[Key] = set()  # keys with new evidence
    across: list[tuple[Key, Evidence]] = []
    for e, idem in items:
        retry = idem is not None and idem in by_idempotency
        duplicate = e.evidence_id in stored or retry
        known = batch.known.get(e.key)
        ruling = decide(
            e,
            batch.state(e.key),
            policy,
            duplicate=duplicate,
            erased=e.evidence_id in load.erased,
            known=known,
        )
        if retry:
            assert idem is not None
            e, ruling = _retried(e, ruling, by_idempotency[idem])
        elif duplicate and load.restated_by is not None:
            confirmed = _restate(batch, e, load.restated_by, touched)
            if confirmed is not None:
                restated.append(confirmed)
                ruling = replace(
                    ruling,
                    decision=replace(
                        ruling.decision,
                        detail="restated: this evidence is already stored, and its age now "
                        f"counts from {iso(e.recorded_at)} (confirmed_at)",
                    ),
                )
        if ruling.candidate is not None:
            rows.append(
                (e, EvidenceStatus.ACTIVE if ruling.candidate else EvidenceStatus.REJECTED, idem)
            )
            stored.add(e.evidence_id)
            if idem is not None:
                by_idempotency[idem] = e.evidence_id
        if ruling.candidate:
            _grow(batch, e, ruling, policy, touched, across)
            grown.add(e.key)
        rulings.append((e, _annotated(e, ruling, reasons)))
    # Where peers vote, new evidence can count for a version the votes favour even when
    # the local belief stands (`serving.serve`): those keys are recounted too.
    touched.update(k for k in grown - touched if k in load.peer_voted)
    return IngestPlan(
        rulings=tuple(rulings),
        evidence=tuple(rows),
        bears_on=tuple(across),
        remember={
            k: a
            for k, a in batch.known.items()
            if load.remembered.get(k) is not a and k not in batch.decayed
        },
        decisions=tuple(r.decision for _, r in rulings),
        refresh=frozenset(touched),
        states={k: batch.state(k) for k in touched},
        arbitrated={k: batch.known[k] for k in touched if k in batch.known},
        confirmations=tuple(c for c, _ in restated),
        confirmed=tuple(e for _, e in restated),
    )


def _restate(
    batch: _Batch, e: Evidence, node_id: str, touched: set[Key]
) -> tuple[Confirmation, Evidence] | None:
    """A client's DUPLICATE of a held assertion confirms it: its `confirmed_at` moves to the
    restatement's ingestion time, and the key's state holds it again if it had expired.
    None where nothing moves (not a held assertion, or confirmed later already)."""
    held = batch.held.get(e.key, {}).get(e.evidence_id)
    if held is None or e.recorded_at <= held.confirmed:
        return None
    moved = replace(held, confirmed_at=e.recorded_at)
    batch.held[e.key][e.evidence_id] = moved
    kept = batch.state(e.key).evidence
    assert isinstance(kept, list)
    at = next((i for i, h in enumerate(kept) if h.evidence_id == e.evidence_id), None)
    if at is None:
        kept.append(moved)
    else:
        kept[at] = moved
    batch.known.pop(e.key, None)
    touched.add(e.key)
    return Confirmation(e.evidence_id, node_id, e.recorded_at, e.recorded_at), moved


def _retried(e: Evidence, ruling: Ruling, first: str) -> tuple[Evidence, Ruling]:
    """A retry answers, and logs, the evidence its idempotency key first stored."""
    decision = replace(ruling.decision, evidence_id=first)
    return replace(e, evidence_id=first), replace(ruling, decision=decision)


def _grow(
    batch: _Batch,
    e: Evidence,
    ruling: Ruling,
    policy: Policy,
    touched: set[Key],
    across: list[tuple[Key, Evidence]],
) -> None:
    """Adds a candidate to its key's state (and, as a retraction, to the keys it bears on),
    marking the keys whose served belief may have moved."""
    assert ruling.arbitrated is not None
    batch.state(e.key)
    (batch.retractions if e.retracts else batch.evidence)[e.key].append(e)
    batch.known[e.key] = ruling.arbitrated
    if (
        e.retracts
        or not serves_alike(ruling.before, ruling.after)
        or policy.is_multi_valued(e.key.predicate)
    ):
        touched.add(e.key)
    for other, r in bears_on(e, batch.evidence.get(e.key, ())):
        batch.state(other)
        if all(h.evidence_id != r.evidence_id for h in batch.retractions[other]):
            batch.retractions[other].append(r)
            across.append((other, r))
        batch.known.pop(other, None)
        touched.add(other)


def bears_on(e: Evidence, held: Sequence[Evidence]) -> list[tuple[Key, Evidence]]:
    """What joins other keys' states with `e` (specification §5), given the evidence `held` on its
    key: `e` on the key it contradicts, with the evidence held that corrects it; and `e` on
    the key contradicted by the assertion it corrects."""
    out: list[tuple[Key, Evidence]] = []
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


def _annotated(e: Evidence, ruling: Ruling, reasons: Mapping[str, str] | None) -> Ruling:
    """The ruling as logged: after the caller's reason, and never with an erased key's text."""
    if reasons and reasons.get(e.evidence_id):
        detail = f"{reasons[e.evidence_id]}; {ruling.decision.detail}"
        ruling = replace(ruling, decision=replace(ruling.decision, detail=detail))
    if ruling.decision.rule is Rule.ERASED:
        # Logged and countable, but the key's text must not come back after an erasure.
        ruling = replace(ruling, decision=replace(ruling.decision, key=erased_key(e.key)))
    return ruling


def erased_key(key: Key) -> Key:
    """A stand-in key for logging a rejection by erasure: its hash, never its text."""
    return Key("erased", ids.key_id(key), "-")


@dataclass(frozen=True, slots=True)
class ErasureLoad:
    """What an erasure reads before it destroys anything."""

    # The evidence in the erasure's scope, as held.
    doomed: Sequence[Evidence]
    # Other keys the doomed evidence bears on (`contradicts`, and corrections of one).
    bearing: frozenset[Key] = frozenset()
    # Every vote (any voter's) resting on evidence the erasure names.
    votes_on_evidence: Sequence[Vote] = ()
    # The votes held on each key an erasure by key or subject forgets.
    votes_on_keys: Mapping[Key, Sequence[Vote]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ErasurePlan:
    """What an erasure destroys and recomputes (specification §6)."""

    evidence_ids: tuple[str, ...]
    # The keys the doomed evidence belongs to (their decisions about it go).
    held_by: frozenset[Key]
    # Keys forgotten whole (erasure by key or subject): their votes, log and pins go too.
    forget: frozenset[Key]
    # Keys whose served belief and votes are recomputed after the erasure.
    refresh: frozenset[Key]
    # (voter, key) of every vote removed, in the order removed.
    votes_removed: tuple[tuple[str, Key], ...]


def plan_erasure(
    scope: str, named: Sequence[str], load: ErasureLoad, also: Collection[Key] = ()
) -> ErasurePlan:
    """An erasure of `scope` ("evidence", "key" or "subject") naming the evidence ids
    `named`, over what `load` read; `also` are keys to recompute though no held evidence of
    theirs is erased (the key an erasure by key names)."""
    keys = {e.key for e in load.doomed} | set(also) | load.bearing
    forget = frozenset(keys) if scope != "evidence" else frozenset()
    removed = list(dict.fromkeys((v.voter, v.key) for v in load.votes_on_evidence))
    # Every vote on a forgotten key goes, abstentions too: they carry the key's text.
    on_keys = ((v.voter, key) for key in sorted(forget) for v in load.votes_on_keys.get(key, ()))
    seen = set(removed)
    removed += [pair for pair in dict.fromkeys(on_keys) if pair not in seen]
    return ErasurePlan(
        evidence_ids=tuple(sorted({e.evidence_id for e in load.doomed} | set(named))),
        held_by=frozenset(e.key for e in load.doomed),
        forget=forget,
        refresh=frozenset(keys | {v.key for v in load.votes_on_evidence}),
        votes_removed=tuple(removed),
    )


class ServedRow(Protocol):
    """The parts of a served belief row a resolution reads."""

    @property
    def version_id(self) -> str: ...
    @property
    def rule(self) -> Rule: ...
    @property
    def state(self) -> BeliefState: ...


@dataclass(frozen=True, slots=True)
class ResolutionLoad:
    """What an operator's resolution reads before it writes."""

    # The key's evidence and retractions.
    state: KeyState
    # What the key serves before the resolution.
    served: Sequence[ServedRow] = ()


@dataclass(frozen=True, slots=True)
class ResolutionPlan:
    """What a resolution writes (the pin of `decision.version_id` and the decision), or why it
    writes nothing (`not_held`: the chosen version is not held; `settled`: the rules decide
    the key)."""

    decision: Decision | None
    # The chosen version's evidence held here.
    held: tuple[Evidence, ...] = ()
    not_held: str = ""
    settled: str = ""


def plan_resolution(
    key: Key,
    chosen: str,
    load: ResolutionLoad,
    *,
    operator: str,
    reason: str,
    now: Instant,
    what: str = "",
) -> ResolutionPlan:
    """An operator's pin of version `chosen` (`what` names it as the operator did) on `key`
    (specification §6): refused where no evidence of the version is held (a pin chooses among
    held versions), or where the rules settle the key (nothing served otherwise than
    BELIEVED by a rule, or nothing served): a pin there would only wait, unseen, for the key
    to split again. Else a RESOLVED decision naming the belief it replaces, if another."""
    held = tuple(e for e in load.state.evidence if e.version_id == chosen)
    if not held:
        what = what or f"version {chosen}"
        return ResolutionPlan(
            None, not_held=f"no {what} for {key}: a pin chooses among held versions"
        )
    before = load.served
    if not any(
        b.state is not BeliefState.BELIEVED or b.rule is Rule.OPERATOR_RESOLUTION for b in before
    ):
        standing = ", ".join(f"{b.state.name} by rule {b.rule}" for b in before)
        return ResolutionPlan(
            None,
            held,
            settled=f"{key} is not under review ({standing or 'no belief'}): the rules decide "
            "it; to overrule them, submit evidence as user_confirmed with source "
            f"operator:{operator}",
        )
    decision = Decision(
        key=key,
        outcome=Outcome.RESOLVED,
        rule=Rule.OPERATOR_RESOLUTION,
        decided_at=now,
        version_id=chosen,
        supersedes=before[0].version_id if before and before[0].version_id != chosen else None,
        detail=f"pinned by {operator}: {reason}",
    )
    return ResolutionPlan(decision, held)
