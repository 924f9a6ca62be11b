"""A configured peer that lies: its votes are checked, never believed; its tombstones cannot
block a key; stale or future-dated items change nothing (specification §6, §7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import MICROS_PER_DAY, BeliefState, Key, Outcome, Submission, ids
from factnode.core.decay import freshness_ppm
from factnode.core.policy import Policy
from factnode.testing import Federation

KEY = Key("team:infra", "build", "python_version")
HOUR = 3_600_000_000


@pytest.fixture
def fed() -> Iterator[Federation]:
    """An honest node `a` and a peer `h` it is configured to trust as a peer, no more; unsigned
    votes, as a node without a certificate sends them (the checks of their content are the
    same for signed votes; tests/integration/federation/test_signed_votes.py pins the
    signatures)."""
    federation = Federation(["a", "h"], signed=False)
    try:
        yield federation
    finally:
        federation.close()


def _submit(
    fed: Federation, node: str, value: str, anchor: str, worth: float = 0.5, days_ago: int = 1
) -> str:
    sub = Submission(
        KEY.namespace,
        KEY.subject,
        KEY.predicate,
        value,
        anchor,
        f"{node}-src",
        worth,
        0.9,
        fed.clock.now() - days_ago * MICROS_PER_DAY,
    )
    return fed.ledgers[node].submit(sub).evidence_id


def _forged_vote(
    fed: Federation, value: str, evidence_id: str, *, anchor: int, worth: int, cast_at: int
) -> pb.Vote:
    return pb.Vote(
        key=wire.key_pb(KEY),
        version_id=ids.version_id(KEY, value),
        evidence_id=evidence_id,
        anchor=anchor,
        worth_milli=worth,
        fresh_since=wire.timestamp(fed.clock.now()),
        cast_at=wire.timestamp(cast_at),
    )


def _weight_of(fed: Federation, node: str, value: str) -> int:
    tally = fed.ledgers[node].tally_of(KEY)
    assert tally is not None
    wanted = ids.version_id(KEY, value)
    return next((v.weight for v in tally.versions if v.version_id == wanted), 0)


async def test_an_inflated_vote_counts_at_its_evidences_honest_weight(fed: Federation) -> None:
    """A vote claiming anchor 100 and worth 1000 on llm_generated evidence of worth 0.1 weighs
    30 x 100 x freshness: the receiver's agent_observed belief stands."""
    _submit(fed, "a", "3.12", "agent_observed")
    theirs = _submit(fed, "h", "3.13", "llm_generated", worth=0.1)
    await fed.round()
    reply = fed.endpoints["a"].push_delta(
        "h",
        pb.Delta(
            votes=[
                _forged_vote(
                    fed, "3.13", theirs, anchor=100, worth=1000, cast_at=fed.clock.now() + 1
                )
            ]
        ),
    )
    assert list(reply.rejected) == []  # kept, but weighed from the evidence
    fresh = freshness_ppm(1 * 24, 30 * 24)  # the evidence is a day old at the hour
    assert _weight_of(fed, "a", "3.13") == 30 * 100 * fresh
    belief = fed.ledgers["a"].belief(KEY)
    assert (belief.object, belief.state) == ("3.12", BeliefState.BELIEVED)


async def test_a_future_dated_tombstone_blocks_nothing_later(fed: Federation) -> None:
    """A tombstone dated 9999-12-31 counts as made at the receiver's clock: later first-party
    writes are decided normally."""
    far = 253_402_214_400_000_000  # 9999-12-31T00:00:00Z
    tomb = pb.ErasureTombstone(
        erasure_id="a" * 32,
        scope=pb.ERASURE_SCOPE_KEY,
        scope_hash=ids.key_id(KEY),
        erased_at=wire.timestamp(far),
        operator="mallory",
        reason="block it",
    )
    reply = fed.endpoints["a"].push_delta("h", pb.Delta(tombstones=[tomb]))
    assert list(reply.rejected) == []
    fed.clock.advance(1)
    submitted = fed.ledgers["a"].submit(
        Submission(KEY.namespace, KEY.subject, KEY.predicate, "3.12", "user_stated", "ana")
    )
    assert submitted.decision.outcome is Outcome.ACCEPTED


async def test_a_tombstone_within_the_skew_allowance_is_applied(fed: Federation) -> None:
    """A peer's clock a minute ahead is tolerated: its erasure applies."""
    _submit(fed, "a", "3.12", "agent_observed")
    tomb = pb.ErasureTombstone(
        erasure_id="b" * 32,
        scope=pb.ERASURE_SCOPE_KEY,
        scope_hash=ids.key_id(KEY),
        erased_at=wire.timestamp(fed.clock.now() + 60_000_000),
        operator="op",
        reason="request",
    )
    reply = fed.endpoints["a"].push_delta("h", pb.Delta(tombstones=[tomb]))
    assert list(reply.rejected) == []
    assert fed.ledgers["a"].counts().evidence == 0


async def test_an_older_vote_arriving_later_never_replaces_a_newer_one(fed: Federation) -> None:
    """Latest cast_at wins, whatever the arrival order, within a delta and across deltas."""
    _submit(fed, "a", "3.12", "agent_observed")
    old_id = _submit(fed, "h", "3.11", "agent_observed")
    new_id = _submit(fed, "h", "3.13", "agent_observed", days_ago=0)
    await fed.round()
    now = fed.clock.now()
    newer = _forged_vote(fed, "3.13", new_id, anchor=60, worth=500, cast_at=now + 10)
    older = _forged_vote(fed, "3.11", old_id, anchor=60, worth=500, cast_at=now + 5)
    fed.endpoints["a"].push_delta("h", pb.Delta(votes=[newer, older]))  # last in the delta
    assert _weight_of(fed, "a", "3.11") == 0 and _weight_of(fed, "a", "3.13") > 0
    fed.endpoints["a"].push_delta("h", pb.Delta(votes=[older]))  # a later delta
    assert _weight_of(fed, "a", "3.11") == 0 and _weight_of(fed, "a", "3.13") > 0


async def test_a_vote_cast_in_the_future_is_refused(fed: Federation) -> None:
    """A vote dated beyond the receiver's clock plus the allowance is refused."""
    _submit(fed, "a", "3.12", "agent_observed")
    theirs = _submit(fed, "h", "3.13", "agent_observed")
    await fed.round()
    future = fed.clock.now() + 3600 * 1_000_000
    vote = _forged_vote(fed, "3.13", theirs, anchor=60, worth=500, cast_at=future)
    reply = fed.endpoints["a"].push_delta("h", pb.Delta(votes=[vote]))
    assert [r.reason for r in reply.rejected] == ["cast_at lies in this node's future"]


async def test_a_vote_on_evidence_not_held_waits_for_it(fed: Federation) -> None:
    """A vote naming evidence the receiver lacks does not count until that evidence arrives."""
    _submit(fed, "a", "3.12", "agent_observed")
    theirs = _submit(fed, "h", "3.13", "agent_observed")
    vote = _forged_vote(fed, "3.13", theirs, anchor=60, worth=500, cast_at=fed.clock.now() + 1)
    reply = fed.endpoints["a"].push_delta("h", pb.Delta(votes=[vote]))
    assert list(reply.rejected) == []
    assert _weight_of(fed, "a", "3.13") == 0
    offered = fed.endpoints["h"].pull_delta(
        "a", pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_EVIDENCE, prefix="")])
    )
    fed.endpoints["a"].push_delta("h", pb.Delta(evidence=offered.evidence))
    assert _weight_of(fed, "a", "3.13") > 0


async def test_a_peer_cannot_fill_the_store_with_votes_waiting_for_evidence() -> None:
    """Beyond max_waiting_votes_per_peer, a peer's further votes on evidence not held here are
    refused item by item, naming the limit; votes on held evidence still count."""
    fed = Federation(["a", "h"], policy=Policy(max_waiting_votes_per_peer=2), signed=False)
    try:
        keys = [Key(KEY.namespace, f"s{i}", "python") for i in range(3)]
        waiting = [
            pb.Vote(
                key=wire.key_pb(keys[i]),
                version_id=ids.version_id(keys[i], "3.13"),
                evidence_id=f"{i:032x}",
                anchor=60,
                worth_milli=500,
                fresh_since=wire.timestamp(fed.clock.now()),
                cast_at=wire.timestamp(fed.clock.now()),
            )
            for i in range(3)
        ]
        reply = fed.endpoints["a"].push_delta("h", pb.Delta(votes=waiting))
        assert [r.id for r in reply.rejected] == [ids.key_id(keys[2])]
        assert "at most 2" in reply.rejected[0].reason
        # Still full on the next delta.
        again = fed.endpoints["a"].push_delta("h", pb.Delta(votes=waiting[2:]))
        assert [r.id for r in again.rejected] == [ids.key_id(keys[2])]
        # A vote on evidence a holds is unaffected by the limit.
        _submit(fed, "a", "3.12", "agent_observed")
        _submit(fed, "h", "3.13", "agent_observed")
        await fed.round()
        assert _weight_of(fed, "a", "3.13") > 0
    finally:
        fed.close()


async def test_a_vote_on_decayed_evidence_does_not_count(fed: Federation) -> None:
    """Once the evidence a vote rests on has expired on the receiver, the vote weighs
    nothing; the evidence stays held, and history shows it DECAYED."""
    _submit(fed, "a", "3.12", "user_stated")
    theirs = _submit(fed, "h", "3.13", "llm_generated")
    await fed.round()
    assert _weight_of(fed, "a", "3.13") > 0
    fed.clock.advance(400 * MICROS_PER_DAY)
    fed.ledgers["a"].run_decay()
    fed.ledgers["a"].reconsider()
    assert _weight_of(fed, "a", "3.13") == 0
    [decayed] = [v for v in fed.ledgers["a"].history(KEY) if v.object == "3.13"]
    assert decayed.status == "DECAYED" and decayed.evidence_ids == (theirs,)


async def test_a_duplicated_and_reordered_delta_changes_nothing_more(fed: Federation) -> None:
    """Replaying a peer's delta twice, in reverse order, leaves beliefs, tallies and the
    decision log as once: evidence already held is not decided (nor logged) again."""
    _submit(fed, "a", "3.12", "agent_observed")
    _submit(fed, "h", "3.13", "agent_observed")
    evidence = (
        fed.endpoints["h"]
        .pull_delta(
            "a", pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_EVIDENCE, prefix="")])
        )
        .evidence
    )
    _, _, own_votes = fed.ledgers["h"].offer({"votes": [""]})
    offered = pb.Delta(evidence=evidence, votes=[wire.vote_pb(v) for v in own_votes])
    assert len(offered.votes) == 1
    fed.endpoints["a"].push_delta("h", offered)
    a = fed.ledgers["a"]
    once = (a.belief(KEY), a.tally_of(KEY), a.counts(), a.decisions(KEY))
    reordered = pb.Delta(
        evidence=list(reversed(offered.evidence)) * 2, votes=list(reversed(offered.votes)) * 2
    )
    fed.endpoints["a"].push_delta("h", reordered)
    reply = fed.endpoints["a"].push_delta("h", reordered)
    assert list(reply.rejected) == [] and reply.accepted == len(reordered.evidence) + 1
    assert (a.belief(KEY), a.tally_of(KEY), a.counts(), a.decisions(KEY)) == once
