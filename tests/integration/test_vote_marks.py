"""Signed votes move by item, not by key (specification §7): the signed-vote digest buckets
every voter's vote on a key together, so without more a round that finds one vote on a key
changed would move all N members' votes on it, both ways, and verify each: the cost that made
a 100-member fleet's rounds take minutes. A pull carries marks of the votes the caller holds
under the differing buckets; the peer leaves out those it holds alike and names the ones it
wants, and the caller pushes only those. A peer that predates marks gets everything, as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key, Submission, ids
from factnode.core.consensus import Vote
from factnode.federation._index import index_of
from factnode.federation.sync import RoundResult
from factnode.store import SqlRepository
from factnode.testing import Fleet

IDS = [f"m{i}" for i in range(8)]
RING = {n: [Fleet.address(IDS[i - 1])] for i, n in enumerate(IDS)}
ROUNDS = 12


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    f = Fleet(IDS, RING, fanout=3, seed=11)
    yield f
    f.close()


def _fact(value: str, attribution: str, source: str) -> Submission:
    return Submission("marks:test", "ana", "lives_in", value, attribution, source)


def _votes_alike(fleet: Fleet) -> bool:
    roots = {index_of(ledger).signed_votes.bucket("") for ledger in fleet.ledgers.values()}
    return len(roots) == 1 and next(iter(roots))[1] == len(IDS)


async def _every_member_votes_on_one_key(fleet: Fleet) -> None:
    """m0's fact reaches every member, and every member's vote on it reaches every member."""
    fleet.ledgers["m0"].submit(_fact("Porto", "agent_observed", "agent:m0"))
    for _ in range(ROUNDS):
        await fleet.round(concurrent=False)
        if fleet.knows_everyone() and _votes_alike(fleet):
            return
    raise AssertionError(f"votes not alike after {ROUNDS} rounds")


async def _exchange(fleet: Fleet, caller: str, callee: str) -> RoundResult:
    syncer = fleet.syncers[caller]
    peer = next(p for p in fleet.rosters[caller].dialable() if p.node_id == callee)
    return await syncer.round_with(peer)


async def test_one_changed_vote_among_eight_on_a_key_moves_alone(fleet: Fleet) -> None:
    """m3 changes its vote on a key that all eight members vote on: its round with m4 sends
    m3's vote and nothing else of the key's eight, and gets back at most m4's copy of m3's
    old vote (m4 cannot tell which of the two is newer from the marks)."""
    await _every_member_votes_on_one_key(fleet)
    fleet.ledgers["m3"].submit(_fact("Lisbon", "user_stated", "user:ana"))
    result = await _exchange(fleet, "m3", "m4")
    assert result.ok, result.error
    assert result.votes_sent == 1
    assert result.votes_received <= 1
    m3, m4 = (index_of(fleet.ledgers[n]).signed_votes for n in ("m3", "m4"))
    assert m4.get(next(i for i in m3.ids_under([""]) if i.endswith("/m3"))) is not None
    # m4 took the new evidence and so changed its own vote: one more exchange evens them.
    again = await _exchange(fleet, "m3", "m4")
    assert again.ok and again.votes_received <= 1 and again.votes_sent <= 1
    assert m3.bucket("") == m4.bucket("")


async def test_a_vote_recast_on_what_the_pull_brought_goes_back_in_the_same_exchange(
    fleet: Fleet,
) -> None:
    """m4 learns a stronger fact and changes its vote; m3's round with m4 pulls both, which
    changes m3's vote after m3 marked it: m3 pushes its new vote in the same exchange (m4
    never asked for it), so one exchange leaves the two holding the same votes."""
    await _every_member_votes_on_one_key(fleet)
    fleet.ledgers["m4"].submit(_fact("Lisbon", "user_stated", "user:ana"))
    result = await _exchange(fleet, "m3", "m4")
    assert result.ok, result.error
    assert result.votes_received == 1 and result.votes_sent == 1
    m3, m4 = (index_of(fleet.ledgers[n]).signed_votes for n in ("m3", "m4"))
    assert m3.bucket("") == m4.bucket("")


class _Predating:
    """m4's endpoint as a node that predates vote marks answers: it reads no mark, names
    no wanted vote and sends every vote under the buckets asked for."""

    def __init__(self, endpoint: object) -> None:
        self._endpoint = endpoint

    def get_digest(self, caller: str, request: pb.DigestRequest) -> pb.Digest:
        return self._endpoint.get_digest(caller, request)  # type: ignore[attr-defined, no-any-return]

    def pull_delta(self, caller: str, request: pb.DeltaRequest) -> pb.Delta:
        plain = pb.DeltaRequest(
            buckets=request.buckets, have_ids=[i for i in request.have_ids if "#" not in i]
        )
        reply: pb.Delta = self._endpoint.pull_delta(caller, plain)  # type: ignore[attr-defined]
        reply.ClearField("wanted_votes")
        reply.ClearField("votes_marked")
        return reply

    def push_delta(self, caller: str, delta: pb.Delta) -> pb.PushDeltaResponse:
        return self._endpoint.push_delta(caller, delta)  # type: ignore[attr-defined, no-any-return]


async def test_a_peer_that_predates_marks_gets_every_vote_and_they_still_agree(
    fleet: Fleet,
) -> None:
    """Against a peer that ignores marks the caller pushes all its votes under the differing
    bucket, as before marks, and the two still end holding the same votes."""
    await _every_member_votes_on_one_key(fleet)
    link = fleet._link("m3", "m4")
    link.endpoint = _Predating(link.endpoint)  # type: ignore[assignment]
    fleet.ledgers["m3"].submit(_fact("Lisbon", "user_stated", "user:ana"))
    result = await _exchange(fleet, "m3", "m4")
    assert result.ok, result.error
    assert result.votes_sent == len(IDS)
    assert result.votes_received == len(IDS)
    await _exchange(fleet, "m3", "m4")
    m3, m4 = (index_of(fleet.ledgers[n]).signed_votes for n in ("m3", "m4"))
    assert m3.bucket("") == m4.bucket("")


async def test_a_pull_answer_names_the_wanted_votes_and_leaves_out_the_alike(
    fleet: Fleet,
) -> None:
    """At the endpoint: marks of every vote alike but one (a mark with another hash) and one
    the answerer lacks bring back that one vote only, and `wanted_votes` names exactly those
    two items."""
    await _every_member_votes_on_one_key(fleet)
    votes = index_of(fleet.ledgers["m4"]).signed_votes
    items = votes.ids_under([""])
    changed, lacking = items[0], items[0].rsplit("/", 1)[0] + "/m99"
    marks = [f"{i}#{votes.get(i):032x}" for i in items[1:]]
    marks += [f"{changed}#{0:032x}", f"{lacking}#{1:032x}"]
    prefix = items[0][:4]
    reply = fleet.endpoints["m4"].pull_delta(
        "m3",
        pb.DeltaRequest(
            buckets=[pb.BucketRef(set=pb.DIGEST_SET_VOTES, prefix=prefix)], have_ids=marks
        ),
    )
    assert reply.votes_marked
    assert sorted(reply.wanted_votes) == sorted([changed, lacking])
    assert [f"{v.key.namespace}" for v in reply.votes] == ["marks:test"]
    assert reply.votes[0].voter == changed.rsplit("/", 1)[1]


def test_the_store_reads_votes_by_item_on_each_backend(repository: SqlRepository) -> None:
    """`votes_of` returns exactly the votes held for the (key id, voter) pairs asked for,
    across more pairs than one statement binds, and nothing for pairs it does not hold."""
    keys = [Key("marks:test", f"s{i}", "lives_in") for i in range(300)]
    voters = ("a", "b", "c")
    with repository.write() as tx:
        tx.put_votes([Vote(v, k, None, "", 0, 0, 1, 1, seq=1) for k in keys for v in voters])
    asked = {(ids.key_id(k), v) for k in keys for v in ("a", "c")}
    asked |= {(ids.key_id(keys[0]), "nobody"), ("0" * 64, "a")}
    with repository.read() as tx:
        got = tx.votes_of(asked)
    assert sorted((ids.key_id(v.key), v.voter) for v in got) == sorted(
        (ids.key_id(k), v) for k in keys for v in ("a", "c")
    )


async def test_a_marked_answer_reads_from_the_store_only_the_votes_it_can_send(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m3 marks one vote of the 240 m4 holds and asks for all of them, 20 to an answer: each
    answer reads only the votes it sends, not every vote m3 lacks (which it would read
    again at each of m3's re-asks, quadratic in what m3 lacks)."""
    for i in range(30):
        fleet.ledgers["m0"].submit(
            Submission("marks:test", f"p{i}", "lives_in", "Porto", "agent_observed", "agent:m0")
        )
    for _ in range(ROUNDS):
        await fleet.round()
        if _votes_alike_everywhere(fleet, 30 * len(IDS)):
            break
    else:
        raise AssertionError("votes not alike")
    endpoint, ledger = fleet.endpoints["m4"], fleet.ledgers["m4"]
    endpoint.max_delta_items = 20
    read: list[int] = []
    offer_votes = ledger.offer_votes

    def counted(items: list[tuple[str, str]]) -> list[Vote]:
        read.append(len(items))
        return offer_votes(items)

    monkeypatch.setattr(ledger, "offer_votes", counted)
    votes = index_of(ledger).signed_votes
    first = votes.ids_under([""])[0]
    have = [f"{first}#{votes.get(first):032x}"]
    buckets = [pb.BucketRef(set=pb.DIGEST_SET_VOTES, prefix="")]
    sent = answers = 0
    while buckets:
        reply = endpoint.pull_delta("m3", pb.DeltaRequest(buckets=buckets, have_ids=have))
        answers += 1
        assert len(reply.votes) <= 20
        sent += len(reply.votes)
        buckets = list(reply.unanswered)
        assert answers < 100
    assert sent == 30 * len(IDS) - 1
    assert sum(read) == sent
    assert answers >= sent // 20


def _votes_alike_everywhere(fleet: Fleet, count: int) -> bool:
    roots = {index_of(ledger).signed_votes.bucket("") for ledger in fleet.ledgers.values()}
    return len(roots) == 1 and next(iter(roots))[1] == count
