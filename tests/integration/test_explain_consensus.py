"""Explain tells the truth when votes decide what is served, and leaving consensus is logged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode.core import MICROS_PER_DAY, Key, Outcome, Rule, Submission
from factnode.testing import Federation

KEY = Key("team:infra", "build", "python_version")


@pytest.fixture
def fed() -> Iterator[Federation]:
    """Three in-process nodes; a believes 3.11 first-hand, b and c say 3.12."""
    federation = Federation(["a", "b", "c"])
    try:
        now = federation.clock.now()
        for node, value, anchor, worth in (
            ("a", "3.11", "agent_observed", 0.5),
            ("b", "3.12", "agent_inferred", 1.0),
            ("c", "3.12", "agent_inferred", 1.0),
        ):
            federation.ledgers[node].submit(
                Submission(
                    KEY.namespace,
                    KEY.subject,
                    KEY.predicate,
                    value,
                    anchor,
                    f"{node}-src",
                    worth,
                    0.9,
                    now - MICROS_PER_DAY,
                )
            )
        yield federation
    finally:
        federation.close()


async def test_explain_under_consensus_names_the_votes_not_the_local_winner(
    fed: Federation,
) -> None:
    """a serves 3.12 by federation_consensus: the comparison against 3.11 gives the vote shares;
    the local chain (3.11 beats 3.12 by trust_anchor) is kept beside it."""
    for _ in range(3):
        await fed.round()
    explanation = fed.ledgers["a"].explain(KEY)
    assert explanation.belief is not None
    assert (explanation.belief.object, explanation.belief.rule) == (
        "3.12",
        Rule.FEDERATION_CONSENSUS,
    )
    [against] = explanation.comparisons
    assert (against.object, against.rule) == ("3.11", Rule.FEDERATION_CONSENSUS)
    assert "72.7% of the counted vote weight" in against.reason, against.reason
    assert "more than 66%" in against.reason
    [local] = explanation.local_comparisons
    assert (local.winner.object, local.object, local.rule) == ("3.11", "3.12", Rule.TRUST_ANCHOR)
    assert explanation.tally is not None and explanation.tally.consensus is not None


async def test_leaving_consensus_is_logged(fed: Federation) -> None:
    """When the peers' votes stop counting (their evidence expired here), a serves its local
    belief again and the decision log says it left federation consensus, and (the decay
    job's entry) that an expiry changed what it serves."""
    for _ in range(3):
        await fed.round()
    a = fed.ledgers["a"]
    assert a.belief(KEY).rule is Rule.FEDERATION_CONSENSUS
    fed.clock.advance(120 * MICROS_PER_DAY)
    a.run_decay()
    belief = a.belief(KEY)
    assert belief.object == "3.11" and belief.rule is not Rule.FEDERATION_CONSENSUS
    left, decayed = (d.decision for d in a.decisions(KEY).items[-2:])
    assert left.outcome is Outcome.SUPERSEDED
    assert left.detail.startswith("left federation consensus"), left.detail
    assert (decayed.outcome, decayed.rule) == (Outcome.DECAYED, Rule.DECAY)


async def test_a_change_of_tally_while_contested_is_logged_once() -> None:
    """a and b split a key evenly (CONTESTED); when c's vote joins a's the key stays
    CONTESTED with the same served version, and the log gains one entry with the new
    tally; idle rounds and the hourly recount add none."""
    fed = Federation(["a", "b", "c"])
    try:
        day_ago = fed.clock.now() - MICROS_PER_DAY

        def say(node: str, value: str, worth: float) -> None:
            fed.ledgers[node].submit(
                Submission(*KEY, value, "agent_observed", f"{node}-src", worth, 0.9, day_ago)
            )

        say("a", "3.11", 0.5)
        say("b", "3.12", 0.5)
        for _ in range(3):
            await fed.round()
        a = fed.ledgers["a"]

        def tallies() -> list[str]:
            return [
                d.decision.detail
                for d in a.decisions(KEY).items
                if d.decision.rule is Rule.FEDERATION_CONSENSUS
            ]

        assert a.belief(KEY).state.value == "CONTESTED"
        assert len(tallies()) == 1 and "50.0% by a" in tallies()[0], tallies()
        say("c", "3.11", 0.2)
        for _ in range(3):
            await fed.round()
        belief = a.belief(KEY)
        assert (belief.object, belief.state.value) == ("3.11", "CONTESTED")
        logged = tallies()
        assert len(logged) == 2, logged
        assert logged[1].startswith("tally changed"), logged[1]
        assert "58.3% by a, c" in logged[1] and "41.6% by b" in logged[1], logged[1]
        last = a.decisions(KEY).items[-1].decision
        assert last.outcome is Outcome.CONTESTED
        for _ in range(2):
            await fed.round()
        fed.clock.advance(3 * 3600 * 1_000_000)
        a.reconsider()
        assert len(tallies()) == 2, tallies()
    finally:
        fed.close()


async def test_as_of_answers_and_history_agree_with_get_under_consensus(fed: Federation) -> None:
    """Under consensus, GetBelief as of now and as known now, Explain as of now and history's
    served row name 3.12 by federation_consensus like GetBelief; as known before the peers'
    evidence arrived, the votes wait and a's own 3.11 is served alone."""
    before_sync = fed.clock.now()
    fed.clock.advance(1_000_000)
    for _ in range(3):
        await fed.round()
    a = fed.ledgers["a"]
    now = fed.clock.now()
    want = ("3.12", "BELIEVED", Rule.FEDERATION_CONSENSUS)
    for view in ({}, {"as_of": now}, {"known_at": now}, {"as_of": now, "known_at": now}):
        b = a.belief(KEY, **view)
        assert (b.object, b.state.value, b.rule) == want, view
    explained = a.explain(KEY, as_of=now).belief
    assert explained is not None and explained.rule is Rule.FEDERATION_CONSENSUS
    [served] = [h for h in a.history(KEY) if h.status == "BELIEVED"]
    assert (served.object, served.rule) == ("3.12", Rule.FEDERATION_CONSENSUS)
    past = a.belief(KEY, known_at=before_sync)
    assert (past.object, past.rule) == ("3.11", Rule.SOLE_VERSION)
