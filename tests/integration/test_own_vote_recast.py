"""A copy of a node's own signed vote that it no longer holds is outnumbered, not left behind
(specification §7: only a higher number replaces a signed vote).

The fault campaign found it (seed 862851, under load): an erasure of a key deleted every vote
on it, but one member relayed a voter's withdrawal, cast before the erasure, to a member that
had applied the erasure already and held new evidence for the key; that member kept it, and
the voter, which holds its own votes and takes no relay's copy of them, never replaced it.
Sweeps never went quiet: two members held the copy, the voter did not."""

from __future__ import annotations

from factnode.core import Key, Submission, ids
from factnode.federation._index import index_of
from factnode.federation.sync import RoundResult
from factnode.testing import Federation

KEY = Key("recast:test", "ana", "lives_in")


async def _exchange(fed: Federation, caller: str, callee: str) -> RoundResult:
    roster = fed.rosters[caller]
    assert roster is not None
    peer = next(p for p in roster.dialable() if p.node_id == callee)
    result = await fed.syncers[caller].round_with(peer)
    assert result.ok, result.error
    return result


def _copies_of_a(fed: Federation) -> dict[str, int | None]:
    """What each member holds of a's signed vote on KEY (its item hash, or None)."""
    item = f"{ids.key_id(KEY)}/a"
    return {n: index_of(ledger).signed_votes.get(item) for n, ledger in fed.ledgers.items()}


async def test_a_withdrawal_relayed_after_the_key_was_erased_is_outnumbered_by_its_voter(
    fed: Federation,
) -> None:
    fed.ledgers["a"].submit(Submission(*KEY, "Porto", "agent_observed", "agent:a"))
    for _ in range(3):
        await fed.round()
    # a withdraws its vote (its statement retracted); only b hears of it.
    fed.ledgers["a"].retract(KEY, "Porto", source="agent:a")
    await _exchange(fed, "b", "a")
    withdrawal = _copies_of_a(fed)["a"]
    assert _copies_of_a(fed)["b"] == withdrawal
    # c erases the key, then learns a new statement for it and its retraction; a applies the
    # erasure, which deletes its own withdrawal, while b has not heard of it yet.
    fed.ledgers["c"].erase(key=KEY, operator="op", reason="asked")
    fed.clock.advance(1_000_000)  # a statement made after the erasure
    fed.ledgers["c"].submit(Submission(*KEY, "Lisbon", "agent_observed", "agent:c"))
    fed.ledgers["c"].retract(KEY, "Lisbon", source="agent:c")
    await _exchange(fed, "a", "c")
    assert _copies_of_a(fed)["a"] is None
    # c pulls the withdrawal from b (c holds evidence for the key again, so it takes it),
    # then pushes the erasure, which deletes b's copy.
    await _exchange(fed, "c", "b")
    assert _copies_of_a(fed)["c"] == withdrawal
    # The copy comes back to a: a casts its vote again, numbered after it.
    await _exchange(fed, "c", "a")
    recast = _copies_of_a(fed)["a"]
    assert recast is not None and recast != withdrawal
    for _ in range(4):
        await fed.round()
    assert set(_copies_of_a(fed).values()) == {recast}
    roots = {index_of(ledger).signed_votes.bucket("") for ledger in fed.ledgers.values()}
    assert len(roots) == 1
