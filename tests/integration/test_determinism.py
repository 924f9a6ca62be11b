"""Determinism through the real write path (ledger and store, every shortcut on): the same
evidence in any arrival order gives the same beliefs, states, rules and histories, and
federated nodes that exchanged everything hold the same evidence and tallies."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from factnode.core import MICROS_PER_DAY, Key, Submission
from factnode.ledger import Ledger, NotFound
from factnode.testing import FakeClock, Federation, memory_ledger

NS = "user:ana"
KEYS = (Key(NS, "ana", "lives_in"), Key(NS, "ana", "works_at"), Key(NS, "ana", "speaks"))
START = 20_000 * MICROS_PER_DAY


@st.composite
def submissions(draw: st.DrawFn) -> list[Submission]:
    """Facts over three keys (one multi-valued), with resubmissions of a statement at other
    worths and confidences, and corrections naming earlier evidence."""
    out: list[Submission] = []
    for _ in range(draw(st.integers(2, 10))):
        key = draw(st.sampled_from(KEYS))
        if out and draw(st.integers(0, 4)) == 0:
            # The same statement again with other numbers: other evidence, never a duplicate.
            base = draw(st.sampled_from(out))
            out.append(
                Submission(
                    base.namespace,
                    base.subject,
                    base.predicate,
                    base.object,
                    base.attribution,
                    base.source,
                    draw(st.sampled_from([0.1, 0.5, 0.9])),
                    draw(st.sampled_from([0.5, 0.9])),
                    base.valid_from,
                )
            )
            continue
        out.append(
            Submission(
                key.namespace,
                key.subject,
                key.predicate,
                draw(st.sampled_from(["Porto", "Lisbon", "Faro"])),
                draw(st.sampled_from(["user_stated", "api_response", "llm_generated"])),
                draw(st.sampled_from(["ana", "bob"])),
                draw(st.sampled_from([0.1, 0.5, 0.7, 0.9])),
                draw(st.sampled_from([0.3, 0.5, 0.9])),
                START + draw(st.integers(0, 5)) * MICROS_PER_DAY,
            )
        )
    return out


def _with_corrections(ledger: Ledger, subs: list[Submission], picks: list[int]) -> list[Submission]:
    """Adds corrections naming the evidence of some submissions (ids computed, not stored)."""
    out = list(subs)
    for i in picks:
        target = subs[i % len(subs)]
        corrected = ledger.evidence_of(target, START).evidence_id
        out.append(
            Submission(
                target.namespace,
                target.subject,
                target.predicate,
                target.object + "-fixed",
                target.attribution,
                target.source,
                target.worth,
                target.confidence,
                target.valid_from,
                corrects=corrected,
            )
        )
    return out


def _view(ledger: Ledger) -> dict[Key, object]:
    out: dict[Key, object] = {}
    for key in KEYS:
        try:
            b = ledger.belief(key)
            belief: object = (b.version_id, b.state, b.rule, b.values)
        except NotFound:
            belief = None
        try:
            # Lineage (which arrival superseded which) is the decision log's record of events,
            # so it follows arrival order by design; intervals, statuses and evidence do not.
            hist: object = [
                replace(v, supersedes=(), superseded_by=()) for v in ledger.history(key)
            ]
        except NotFound:
            hist = None
        out[key] = (belief, hist)
    return out


@settings(max_examples=40, deadline=None)
@given(subs=submissions(), picks=st.lists(st.integers(0, 50), max_size=2), seed=st.integers())
def test_any_arrival_order_gives_the_same_beliefs_and_histories(
    subs: list[Submission], picks: list[int], seed: int
) -> None:
    """Three permutations of one evidence set, each through its own ledger (one at a time and
    in one batch), end with identical beliefs, states, rules and histories."""
    probe = memory_ledger(clock=FakeClock(START))
    everything = _with_corrections(probe, subs, picks)
    probe.repo.close()
    rng = random.Random(seed)
    views = []
    for attempt in range(3):
        order = list(everything)
        rng.shuffle(order)
        ledger = memory_ledger(clock=FakeClock(START))
        try:
            if attempt == 2:
                ledger.submit_many(order)
            else:
                for sub in order:
                    ledger.submit(sub)
            views.append(_view(ledger))
        finally:
            ledger.repo.close()
    assert views[0] == views[1] == views[2]


@settings(max_examples=8, deadline=None)
@given(subs=submissions(), seed=st.integers())
async def test_three_nodes_synced_in_random_order_with_drops_agree(
    subs: list[Submission], seed: int
) -> None:
    """The evidence split across three in-process nodes, synced in random order with random
    dropped links, ends with the same evidence set and the same tallies on every node."""
    rng = random.Random(seed)
    fed = Federation(["n1", "n2", "n3"], clock=FakeClock(START), seed=seed)
    try:
        for sub in subs:
            fed.ledgers[rng.choice(["n1", "n2", "n3"])].submit(sub)
        for _ in range(4):
            for link in fed.links.values():
                link.up = rng.random() > 0.3
            for node in rng.sample(sorted(fed.syncers), 3):
                syncer = fed.syncers[node]
                for state in syncer.states.values():
                    state.next_attempt = 0.0
                await syncer.sync_round()
        fed.heal()
        for _ in range(4):
            await fed.round()
        evidence = {n: {e for e in _evidence_ids(lg)} for n, lg in fed.ledgers.items()}
        assert evidence["n1"] == evidence["n2"] == evidence["n3"]
        tallies = {n: [_tally(lg, k) for k in KEYS] for n, lg in fed.ledgers.items()}
        assert tallies["n1"] == tallies["n2"] == tallies["n3"]
    finally:
        fed.close()


def _evidence_ids(ledger: Ledger) -> set[str]:
    with ledger.repo.read() as tx:
        return set(tx.all_evidence_ids())


def _tally(ledger: Ledger, key: Key) -> object:
    t = ledger.tally_of(key)
    return None if t is None else (t.consensus, t.versions)
