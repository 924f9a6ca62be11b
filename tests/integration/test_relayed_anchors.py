"""A peer's cap lowers its claims as a whole and never reorders them (specification §5 rule 1),
through two in-process nodes that sync: the walkthrough's case, a relayed `user_stated`
against a newer relayed `llm_generated`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode.core import MICROS_PER_DAY, Key, Outcome, Rule, Submission, ids
from factnode.testing import Federation

HOME = Key("user:ana", "ana", "lives_in")
ROUNDS = 3


@pytest.fixture
def fed() -> Iterator[Federation]:
    """alpha holds Ana's own word (Porto, long ago) and a scraper's newer guess (Lisbon), as
    in `factnode demo`; beta holds neither yet."""
    federation = Federation(["alpha", "beta"])
    try:
        now = federation.clock.now()
        for value, anchor, source, days_ago in (
            ("Porto", "user_stated", "ana", 200),
            ("Lisbon", "llm_generated", "scraper", 10),
        ):
            federation.ledgers["alpha"].submit(
                Submission(
                    HOME.namespace,
                    HOME.subject,
                    HOME.predicate,
                    value,
                    anchor,
                    source,
                    0.5,
                    0.9,
                    now - days_ago * MICROS_PER_DAY,
                )
            )
        yield federation
    finally:
        federation.close()


async def test_a_relayed_user_stated_beats_a_newer_relayed_llm_generated_on_the_peer(
    fed: Federation,
) -> None:
    """On beta both of alpha's claims count as federation_received (20); the stated anchors
    decide the tie, so beta's own arbitration, its vote and what it serves are Porto, never
    the LLM's newer guess, and its explanation says why."""
    for _ in range(ROUNDS):
        await fed.round()
    beta = fed.ledgers["beta"]
    porto, lisbon = (ids.version_id(HOME, v) for v in ("Porto", "Lisbon"))
    with beta.repo.read() as tx:
        state = tx.key_states([HOME])[HOME]
    held = [e for e in state.evidence if e.version_id in (porto, lisbon)]
    assert {(e.attribution, e.anchor_cap, e.origin_node) for e in held} == {
        ("user_stated", "federation_received", "alpha"),
        ("llm_generated", "federation_received", "alpha"),
    }

    explanation = beta.explain(HOME)
    assert explanation.belief is not None and explanation.belief.object == "Porto"
    [local] = explanation.local_comparisons
    assert (local.winner.object, local.object, local.rule) == ("Porto", "Lisbon", Rule.TRUST_ANCHOR)
    assert local.reason == (
        "both count as federation_received (20) here; "
        "user_stated (90) outranks llm_generated (30) as stated"
    )
    # beta votes Porto on alpha's evidence: one observation, counted once; nobody votes Lisbon.
    tally = beta.tally_of(HOME)
    assert tally is not None and tally.consensus == porto
    assert [(v.version_id, v.voters) for v in tally.versions] == [(porto, ("alpha", "beta"))]
    assert beta.belief(HOME).object == "Porto"
    # Whichever arrived second was decided by trust_anchor, never by recency.
    rules = [
        (d.decision.outcome, d.decision.rule)
        for d in beta.decisions(HOME).items
        if d.decision.outcome in (Outcome.SUPERSEDED, Outcome.DISBELIEVED, Outcome.HISTORICAL)
    ]
    assert rules in (
        [(Outcome.SUPERSEDED, Rule.TRUST_ANCHOR)],
        [(Outcome.DISBELIEVED, Rule.TRUST_ANCHOR)],
    ), rules
    # alpha's first-party view is the same belief, now settled by both votes.
    assert fed.ledgers["alpha"].belief(HOME).object == "Porto"
