"""Terse evidence for the unit tests, and a replay of it through `decide` as the shell does."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from factnode.core import (
    MICROS_PER_DAY,
    Arbitrated,
    Evidence,
    Key,
    KeyState,
    Outcome,
    Policy,
    Ruling,
    Submission,
    decide,
    make_evidence,
    make_retraction,
    representatives,
)

DAY = MICROS_PER_DAY
POLICY = Policy()
NS = "user:ana"
LIVES_IN = Key(NS, "ana", "lives_in")


def fact(
    obj: str,
    *,
    day: int | None = 1,
    at: int | None = None,
    anchor: str = "user_stated",
    source: str = "ana",
    worth: float = 0.5,
    confidence: float = 0.9,
    key: Key = LIVES_IN,
    corrects: str | None = None,
    contradicts: Key | None = None,
    policy: Policy = POLICY,
    cap: str | None = None,
) -> Evidence:
    """Evidence that `key` is `obj` from event day `day`, recorded on day `at` (default: `day`);
    with `cap`, as relayed from peer n2 under that anchor ceiling."""
    recorded = at if at is not None else (day if day is not None else 0)
    sub = Submission(
        key.namespace,
        key.subject,
        key.predicate,
        obj,
        anchor,
        source,
        worth,
        confidence,
        None if day is None else day * DAY,
        corrects,
        contradicts,
    )
    e = make_evidence(sub, policy, recorded_at=recorded * DAY, origin_node="n1")
    return e if cap is None else replace(e, origin_node="n2", anchor_cap=cap)


def retraction(
    obj: str | None = None,
    *,
    day: int = 1,
    at: int | None = None,
    anchor: str = "user_stated",
    source: str = "ana",
    worth: float = 0.5,
    confidence: float = 0.9,
    key: Key = LIVES_IN,
    policy: Policy = POLICY,
    cap: str | None = None,
) -> Evidence:
    """A retraction of `obj` (None: every value of `key`) from event day `day`, recorded on
    day `at` (default: `day`); with `cap`, as relayed from peer n2 under that ceiling."""
    r = make_retraction(
        key,
        obj,
        attribution=anchor,
        source=source,
        at=day * DAY,
        worth=worth,
        confidence=confidence,
        policy=policy,
        recorded_at=(day if at is None else at) * DAY,
        origin_node="n1",
    )
    return r if cap is None else replace(r, origin_node="n2", anchor_cap=cap)


@dataclass
class Replay:
    """What a store would hold after a sequence of submissions, and what each one got."""

    policy: Policy = POLICY
    evidence: dict[Key, list[Evidence]] = field(default_factory=lambda: defaultdict(list))
    retractions: dict[Key, list[Evidence]] = field(default_factory=lambda: defaultdict(list))
    stored: set[str] = field(default_factory=set)
    rulings: list[Ruling] = field(default_factory=list)
    lineage: list[tuple[str, str]] = field(default_factory=list)
    # Each key's state as the last ruling arbitrated it, as the ledger keeps it.
    known: dict[Key, Arbitrated] = field(default_factory=dict)

    def state(self, key: Key = LIVES_IN) -> KeyState:
        """The key's candidate evidence and retractions, as `decide` is given them."""
        return KeyState(tuple(self.evidence[key]), tuple(self.retractions[key]))

    def submit(self, item: Evidence) -> Ruling:
        """One submission or retraction, persisted like the shell."""
        state = self.state(item.key)

        def ruling_with(known: Arbitrated | None) -> Ruling:
            return decide(
                item,
                state,
                self.policy,
                duplicate=item.evidence_id in self.stored,
                known=known,
            )

        ruling = ruling_with(None)
        if item.key in self.known:
            # Every replay also checks the ledger's shortcut: deciding from the remembered
            # arbitration (for a plain state, only the new evidence is weighed) rules alike.
            assert ruling_with(self.known[item.key]) == ruling
        if ruling.candidate is not None:
            self.stored.add(item.evidence_id)
        if ruling.candidate:
            (self.retractions if item.retracts else self.evidence)[item.key].append(item)
            assert ruling.arbitrated is not None
            self.known[item.key] = ruling.arbitrated
            after = self.state(item.key)
            assert ruling.arbitrated.verdict == after.belief(self.policy)
            if ruling.arbitrated.reps is not None:
                assert not after.retractions and not any(e.corrects for e in after.evidence)
                assert dict(ruling.arbitrated.reps) == representatives(after.evidence, self.policy)
            # Counted on the other key too: a `contradicts` (with what already corrects it),
            # or a correction of one.
            held = self.evidence[item.key]
            bearing: list[tuple[Key, Evidence]] = []
            if item.contradicts is not None:
                bearing.append((item.contradicts, item))
                bearing += [(item.contradicts, c) for c in held if c.corrects == item.evidence_id]
            bearing += [
                (c.contradicts, item)
                for c in held
                if c.evidence_id == item.corrects and c.contradicts is not None
            ]
            for other, r in bearing:
                if r not in self.retractions[other]:
                    self.retractions[other].append(r)
                self.known.pop(other, None)
        d = ruling.decision
        if d.outcome is Outcome.SUPERSEDED and d.supersedes and d.version_id:
            self.lineage.append((d.version_id, d.supersedes))
        self.rulings.append(ruling)
        return ruling


def replay(items: Iterable[Evidence], policy: Policy = POLICY) -> Replay:
    """Submits every item in order."""
    run = Replay(policy)
    for item in items:
        run.submit(item)
    return run


def outcomes(run: Replay) -> list[tuple[Outcome, str]]:
    """(outcome, rule) of every decision so far, in order."""
    return [(r.decision.outcome, r.decision.rule.value) for r in run.rulings]
