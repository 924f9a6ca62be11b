"""What an erasure does to the votes resting on what it erased, on every node alike, held
evidence or not (specification §6, §7)."""

from __future__ import annotations

import pytest

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key, Submission
from factnode.core.consensus import Vote
from factnode.testing import Federation

KEY = Key("user:ana", "ana", "lives_in")


def _votes_on(fed: Federation, node: str, key: Key = KEY) -> list[Vote]:
    with fed.ledgers[node].repo.read() as tx:
        return tx.votes([key])[key]


def _waiting_vote_on_c(fed: Federation) -> Vote:
    """b's signed vote on KEY, held by c without the evidence it rests on (c took it from
    a relay, a, before the evidence came): a waiting vote."""
    fed.ledgers["b"].submit(Submission(*KEY, "Lisbon", "agent_observed", "agent:b", 0.5, 0.9))
    vote = next(v for v in fed.ledgers["b"].offer({"votes": [""]})[2] if v.voter == "b")
    assert fed.credentials is not None
    delta = pb.Delta(votes=[wire.vote_pb(vote)], certificates=[fed.credentials.nodes["b"][0]])
    reply = fed.endpoints["c"].push_delta("a", delta)
    assert not reply.rejected
    assert [v.voter for v in _votes_on(fed, "c")] == ["b"]
    with fed.ledgers["c"].repo.read() as tx:
        assert not tx.evidence([vote.evidence_id])
    return vote


async def _settled(fed: Federation) -> None:
    """Rounds until a forced round of every node finds nothing differing (at most 6)."""
    for _ in range(6):
        await fed.round()
        differing = [
            r.differing_buckets
            for s in fed.syncers.values()
            for r in await s.sync_round(force=True)
        ]
        if not any(differing):
            return
    raise AssertionError(f"digests still differ after 6 rounds: {differing}")


@pytest.mark.parametrize("scope", ["key", "subject"])
async def test_a_waiting_vote_on_an_erased_key_goes_on_a_node_that_never_held_the_evidence(
    fed: Federation, scope: str
) -> None:
    """A key or subject erasure drops every vote on a key in its scope, also where the
    evidence a vote rests on never arrived: the vote's evidence is erased everywhere and can
    never come, so a node that kept the vote waiting would hold it for ever and its digests
    never agree (the fault campaign's seed 2)."""
    _waiting_vote_on_c(fed)
    fed.clock.advance(1_000_000)
    # a holds nothing of the key: its tombstone names no evidence, only the scope's hash.
    if scope == "key":
        fed.ledgers["a"].erase(key=KEY, operator="op", reason="privacy")
    else:
        fed.ledgers["a"].erase(subject=(KEY.namespace, KEY.subject), operator="op", reason="gdpr")
    await _settled(fed)
    assert {n: _votes_on(fed, n) for n in "abc"} == {"a": [], "b": [], "c": []}
    with fed.ledgers["b"].repo.read() as tx:
        assert not tx.key_states([KEY])[KEY].evidence


async def test_a_vote_on_evidence_recorded_after_a_key_erasure_is_kept_everywhere(
    fed: Federation,
) -> None:
    """Evidence recorded after a key erasure is accepted normally, and the votes resting on
    it (every node's, once it holds it) reach every node, the erasure's node included."""
    fed.ledgers["a"].erase(key=KEY, operator="op", reason="privacy")
    await _settled(fed)
    fed.clock.advance(1_000_000)
    fed.ledgers["b"].submit(Submission(*KEY, "Porto", "agent_observed", "agent:b", 0.5, 0.9))
    await _settled(fed)
    held = {n: {(v.voter, v.seq, v.version_id) for v in _votes_on(fed, n)} for n in "abc"}
    assert held["a"] == held["b"] == held["c"]
    assert {voter for voter, _, _ in held["a"]} == {"a", "b", "c"}
