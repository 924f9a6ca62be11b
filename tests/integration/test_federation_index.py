"""The digests a node shows its peers follow its store through commits that put a vote and
remove it again (found by the fault campaign, tests/faults: sync rounds that never went
quiet while every store held the same data)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import MICROS_PER_DAY, Key, Submission
from factnode.federation._index import index_of, vote_hash
from factnode.testing import Federation

KEY = Key("camp:a", "s1", "lives_in")


@pytest.fixture
def fed() -> Iterator[Federation]:
    """Two in-process nodes, a and b, that know each other."""
    federation = Federation(["a", "b"])
    try:
        yield federation
    finally:
        federation.close()


def _submit(fed: Federation, node: str, value: str, anchor: str) -> str:
    sub = Submission(
        KEY.namespace,
        KEY.subject,
        KEY.predicate,
        value,
        anchor,
        f"{node}-{value}",
        0.5,
        0.9,
        fed.clock.now() - MICROS_PER_DAY,
    )
    return fed.ledgers[node].submit(sub).evidence_id


async def test_a_delta_erasing_a_vote_it_recast_leaves_the_digest_equal_to_the_store(
    fed: Federation,
) -> None:
    """A delta carrying an erasure by id (b's vote moves to its other version) and then an
    erasure of the key (the vote goes) leaves b's vote digest as its store: no vote, and
    the next rounds with a are quiet."""
    first = _submit(fed, "b", "porto", "user_stated")
    _submit(fed, "b", "braga", "agent_observed")
    index = index_of(fed.ledgers["b"])
    fed.ledgers["a"].erase(evidence_id=first, operator="op", reason="campaign")
    fed.ledgers["a"].erase(key=KEY, operator="op", reason="campaign")
    offered = fed.endpoints["a"].pull_delta(
        "b", pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_TOMBSTONES, prefix="")])
    )
    by_id_first = sorted(offered.tombstones, key=lambda t: t.scope != pb.ERASURE_SCOPE_EVIDENCE)
    assert [t.scope for t in by_id_first] == [pb.ERASURE_SCOPE_EVIDENCE, pb.ERASURE_SCOPE_KEY]
    reply = fed.endpoints["b"].push_delta("a", pb.Delta(tombstones=by_id_first))
    assert not reply.rejected

    with fed.ledgers["b"].repo.read() as tx:
        stored = {(v.voter, v.key): vote_hash(v) for v in tx.all_votes()}
    assert stored == {}
    assert len(index.votes("b")) == 0, "the digest still counts a vote the store dropped"
    await fed.syncers["b"].sync_round(force=True)
    again = await fed.syncers["b"].sync_round(force=True)
    assert [(r.ok, r.differing_buckets) for r in again] == [(True, 0)]
