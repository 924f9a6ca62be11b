"""Properties: the belief is a function of the set of evidence, whatever the arrival order."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence

from _facts import DAY, LIVES_IN, NS, POLICY, Replay, fact, replay, retraction
from hypothesis import given, settings
from hypothesis import strategies as st

from factnode.core import (
    Evidence,
    Key,
    Outcome,
    arbitrate,
    explain,
    history,
    representatives,
    visible,
)
from factnode.core.arbitration import with_evidence

SPEAKS = Key(NS, "ana", "speaks")
KEYS = (LIVES_IN, SPEAKS)
FAST = settings(max_examples=150, deadline=None)


ANCHORS = ["user_stated", "api_response", "llm_generated"]
# First-party (None) or relayed under a peer's cap: federation_received brings every anchor
# to one counted value, agent_observed some of them, so the stated anchors must decide ties.
CAPS = [None, None, "federation_received", "agent_observed"]


@st.composite
def evidence_and_retractions(draw: st.DrawFn) -> list[Evidence]:
    """A small mix over two keys of evidence (some gated, some correcting, some naming the
    other key in `contradicts`, in both directions, some relayed under a cap), resubmissions
    of a statement with other worths, and retractions of one value or of a whole key, of
    every strength."""
    out: list[Evidence] = []
    seen: set[str] = set()

    def add(e: Evidence) -> None:
        # One id is one piece of evidence.
        if e.evidence_id not in seen:
            seen.add(e.evidence_id)
            out.append(e)

    for _ in range(draw(st.integers(1, 9))):
        day = draw(st.integers(0, 6))
        key = draw(st.sampled_from(KEYS))
        earlier = [e for e in out if not e.retracts and e.key == key]
        corrects = None
        if earlier and draw(st.integers(0, 5)) == 0:
            corrects = draw(st.sampled_from(earlier)).evidence_id
        other = next(k for k in KEYS if k != key)
        e = fact(
            draw(st.sampled_from(["Porto", "Lisbon", "Faro"])),
            day=day,
            at=day + draw(st.integers(0, 3)),
            key=key,
            anchor=draw(st.sampled_from(ANCHORS)),
            source=draw(st.sampled_from(["ana", "bob", ""])),
            worth=draw(st.sampled_from([0.1, 0.3, 0.5, 0.7, 0.701])),
            confidence=draw(st.sampled_from([0.3, 0.5, 0.8, 0.9])),
            corrects=corrects,
            contradicts=other if draw(st.integers(0, 5)) == 0 else None,
            cap=draw(st.sampled_from(CAPS)),
        )
        add(e)
        if draw(st.integers(0, 4)) == 0:
            # The same statement resubmitted with another worth: other evidence, same version.
            add(replace_worth(e, draw(st.sampled_from([0.1, 0.9]))))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(KEYS))
        objects = sorted({e.object for e in out if not e.retracts and e.key == key})
        at = draw(st.integers(0, 7))
        add(
            retraction(
                draw(st.sampled_from([None, *objects])),
                day=at,
                at=at + draw(st.integers(0, 2)),
                key=key,
                anchor=draw(st.sampled_from(ANCHORS)),
                source=draw(st.sampled_from(["ana", "bob", ""])),
                worth=draw(st.sampled_from([0.1, 0.5, 0.9])),
                confidence=draw(st.sampled_from([0.3, 0.5, 0.9])),
                cap=draw(st.sampled_from(CAPS)),
            )
        )
    return out


def replace_worth(e: Evidence, worth: float) -> Evidence:
    """`e` restated with another worth (and so another id)."""
    return fact(
        e.object,
        day=e.valid_from // DAY,
        at=e.recorded_at // DAY,
        key=e.key,
        anchor=e.attribution,
        source=e.source,
        worth=worth,
        confidence=e.confidence_milli / 1000,
        corrects=e.corrects,
        contradicts=e.contradicts,
        cap=e.anchor_cap,
    )


def _final(run: Replay) -> dict[Key, object]:
    """Everything a reader can see of each key once all evidence is in."""
    views: dict[Key, object] = {}
    for key in KEYS:
        state = run.state(key)
        vis = visible(state.evidence, state.retractions, policy=POLICY)
        views[key] = (
            state.belief(POLICY),
            explain(vis, POLICY),
            history(state.evidence, state.retractions, POLICY),
        )
    return views


@FAST
@given(st.data())
def test_any_arrival_order_gives_the_same_belief_explanation_and_history(
    data: st.DataObject,
) -> None:
    """Any permutation of the same evidence gives identical belief, explain output and history."""
    items = data.draw(evidence_and_retractions())
    shuffled = data.draw(st.permutations(items))
    assert _final(replay(shuffled)) == _final(replay(items))


@FAST
@given(evidence_and_retractions())
def test_ingesting_everything_twice_changes_nothing(items: Sequence[Evidence]) -> None:
    """A second pass over the same evidence is all DUPLICATE and leaves every belief as it was."""
    run = replay(items)
    first = _final(run)
    stored = {k: list(v) for k, v in run.evidence.items()}
    rulings = [run.submit(e) for e in items]
    assert all(r is not None and r.decision.outcome is Outcome.DUPLICATE for r in rulings)
    assert all(r is not None and r.candidate is None for r in rulings)
    assert {k: list(v) for k, v in run.evidence.items()} == stored
    assert _final(run) == first


@FAST
@given(st.data())
def test_replayed_belief_equals_arbitration_of_the_set(data: st.DataObject) -> None:
    """The belief after replay in any order equals arbitrate() over the set of candidates."""
    items = data.draw(evidence_and_retractions())
    run = replay(data.draw(st.permutations(items)))
    for key in KEYS:
        kept = [e for e in items if e.source and e.confidence_milli >= POLICY.min_confidence_milli]
        candidates = [e for e in kept if not e.retracts and e.key == key]
        against = [e for e in kept if (e.key if e.retracts else e.contradicts) == key]
        against_ids = {e.evidence_id for e in against}
        correctors = [e for e in kept if e.corrects in against_ids and e.key != key]
        rets = [*against, *correctors]
        assert run.state(key).belief(POLICY) == arbitrate(
            visible(candidates, rets, policy=POLICY), POLICY
        )


@st.composite
def competing_evidence(draw: st.DrawFn) -> list[Evidence]:
    """One key's evidence with few values and coarse metrics, some relayed under a cap, so
    that versions often hold several pieces of equal strength and the lowest evidence id
    must decide."""
    drawn = [
        fact(
            draw(st.sampled_from(["Porto", "Lisbon"])),
            day=draw(st.integers(0, 1)),
            anchor=draw(st.sampled_from(["user_stated", "llm_generated"])),
            source=draw(st.sampled_from(["ana", "bob", "cid", "dee"])),
            worth=draw(st.sampled_from([0.5, 0.7])),
            confidence=0.9,
            cap=draw(st.sampled_from(CAPS)),
        )
        for _ in range(draw(st.integers(1, 8)))
    ]
    # One id is one piece of evidence: a node holds a statement under one cap (its origin's).
    first: dict[str, Evidence] = {}
    for e in drawn:
        first.setdefault(e.evidence_id, e)
    return [e for e in drawn if first[e.evidence_id] == e]


@FAST
@given(competing_evidence())
def test_representatives_built_one_piece_at_a_time_equal_those_of_the_whole_set(
    evidence: list[Evidence],
) -> None:
    """The ledger's shortcut: folding `with_evidence` over the evidence in arrival order gives
    exactly `representatives` of the whole set, ties to the lowest evidence id included."""
    reps: Mapping[str, Evidence] = {}
    for e in evidence:
        reps = with_evidence(reps, e, POLICY)
    assert dict(reps) == representatives(evidence, POLICY)


def test_core_imports_nothing_from_the_shell() -> None:
    """Importing every node.core module pulls in no gRPC, SQL or protobuf module."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import factnode.core\n"
        "for m in pkgutil.walk_packages(factnode.core.__path__, 'factnode.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules\n"
        "             if n.split('.')[0] in ('grpc', 'sqlmodel', 'sqlalchemy')\n"
        "             or n == 'google.protobuf' or n.startswith('google.protobuf.'))\n"
        "print(len(list(pkgutil.walk_packages(factnode.core.__path__))))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    count, bad = done.stdout.splitlines()
    assert int(count) >= 7
    assert bad == ""
