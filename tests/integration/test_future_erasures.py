"""An erasure dated beyond its receivers' clocks (specification §6), over in-process links with
real certificates: every node keeps it as signed, the bounds its receivers sign gossip with
it, and every node ends with the same evidence whatever order and time things arrived in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key, Outcome, Submission
from factnode.federation._index import index_of
from factnode.testing import FakeClock, Federation

K = Key("skew:a", "ana", "lives_in")
AHEAD = 600_000_000  # ten minutes: twice the allowance
SECOND = 1_000_000


@pytest.fixture
def fed() -> Iterator[Federation]:
    """Three signing nodes; c's clock runs ten minutes ahead of a's and b's."""
    base = FakeClock()
    federation = Federation(["a", "b", "c"], clock=base, clocks={"c": _Ahead(base, AHEAD)})
    try:
        yield federation
    finally:
        federation.close()


class _Ahead(FakeClock):
    """A clock a fixed offset from another, moving with it."""

    def __init__(self, base: FakeClock, offset: int) -> None:
        super().__init__()
        self.base, self.offset = base, offset

    def now(self) -> int:
        return self.base.now() + self.offset


def _say(fed: Federation, node: str, value: str) -> str:
    sub = Submission(K.namespace, K.subject, K.predicate, value, "user_stated", f"{node}-{value}")
    return fed.ledgers[node].submit(sub).evidence_id


def _evidence(fed: Federation, node: str) -> set[str]:
    with fed.ledgers[node].repo.read() as tx:
        return set(tx.all_evidence_ids())


def _tombstone_digest(fed: Federation, node: str) -> tuple[bytes, int]:
    return index_of(fed.ledgers[node]).tombstones.bucket("")


async def _sync(fed: Federation, node: str, peer: str) -> None:
    """One round of `node` with `peer` alone."""
    syncer = fed.syncers[node]
    await syncer.round_with(syncer.states[peer].peer)


async def _settle(fed: Federation, rounds: int = 4) -> None:
    for _ in range(rounds):
        await fed.round()


async def test_receivers_at_different_times_end_with_the_same_evidence(fed: Federation) -> None:
    """c erases the key ten minutes in the future; a applies it at once, then records new
    evidence; b applies it three seconds later. That evidence is a later write on every node
    (a recorded it after it applied the erasure, by a's own clock), so all three hold it, and
    their tombstones (the erasure, kept signed as c made it, and a's and b's bounds) agree."""
    fed.partition(["a", "c"], ["b"])
    fed.ledgers["c"].erase(key=K, operator="dpo", reason="asked")
    await _sync(fed, "a", "c")
    fed.clock.advance(SECOND)
    later = _say(fed, "a", "braga")
    fed.clock.advance(2 * SECOND)
    fed.partition(["b", "c"], ["a"])
    await _sync(fed, "b", "c")
    fed.heal()
    await _settle(fed)
    held = {n: _evidence(fed, n) for n in "abc"}
    assert held["a"] == held["b"] == held["c"] == {later}
    assert _tombstone_digest(fed, "a") == _tombstone_digest(fed, "b") == _tombstone_digest(fed, "c")
    assert _tombstone_digest(fed, "a")[1] == 3  # the erasure and two bounds
    with fed.ledgers["b"].repo.read() as tx:
        [kept] = tx.tombstones_under([""])
        bounds = {(x.node, x.bound_at) for x in tx.bounds_under([""])}
    assert kept.origin_node == "c" and kept.signature  # as c signed it, never re-dated
    assert kept.erased_at == fed.clocks["c"].now() - 3 * SECOND
    start = fed.clock.now() - 3 * SECOND
    assert bounds == {("a", start), ("b", start + 3 * SECOND)}


async def test_evidence_erased_at_once_before_its_origins_bound_arrived_comes_back(
    fed: Federation,
) -> None:
    """b holds evidence a recorded after a applied the erasure, then gets the erasure from c
    without a's bound: b erases it at once (judged by erased_at, the erasure covers it). Once
    a's bound reaches b, that evidence is a later write, and it comes back through sync, so
    every node ends with it."""
    for n, roster in fed.rosters.items():  # each knows the others' certificates
        assert roster is not None
        roster.learn([fed.credentials.nodes[m][0] for m in "abc"], n)  # type: ignore[union-attr]
    fed.partition(["a"], ["b"], ["c"])
    fed.ledgers["c"].erase(key=K, operator="dpo", reason="asked")
    [tomb], _, _ = fed.ledgers["c"].offer({"tombstones": [""]})
    assert not fed.ledgers["a"].receive("c", None, [tomb], [], []).rejected
    fed.clock.advance(SECOND)
    later = _say(fed, "a", "braga")
    _, relayed, _ = fed.ledgers["a"].offer({"evidence": [""]})
    assert not fed.ledgers["b"].receive("a", None, [], relayed, []).rejected
    assert later in _evidence(fed, "b")
    assert not fed.ledgers["b"].receive("c", None, [tomb], [], []).rejected
    assert later not in _evidence(fed, "b")  # erased at once: a's bound is not known here
    fed.heal()
    await _settle(fed)
    assert all(_evidence(fed, n) == {later} for n in "abc")
    assert _tombstone_digest(fed, "a") == _tombstone_digest(fed, "b") == _tombstone_digest(fed, "c")


async def test_evidence_recorded_before_a_node_learned_of_the_erasure_never_returns(
    fed: Federation,
) -> None:
    """Evidence a recorded before the erasure reached it is erased at once on a, and on b,
    cut off from both when it arrived, as soon as the erasure reaches b: covered by a's bound,
    it never comes back through sync, whichever node still held it."""
    early = _say(fed, "a", "porto")
    await _sync(fed, "b", "a")
    assert early in _evidence(fed, "b")
    fed.partition(["a", "c"], ["b"])
    fed.clock.advance(SECOND)
    fed.ledgers["c"].erase(key=K, operator="dpo", reason="asked")
    await _sync(fed, "a", "c")
    assert early not in _evidence(fed, "a")
    fed.heal()
    fed.clock.advance(SECOND)
    await _settle(fed)
    assert all(early not in _evidence(fed, n) for n in "abc")
    assert _tombstone_digest(fed, "a") == _tombstone_digest(fed, "b") == _tombstone_digest(fed, "c")


async def test_the_origin_judges_its_own_later_writes_by_its_own_time(fed: Federation) -> None:
    """The node that made the erasure bounds nothing: set right after erasing, its evidence
    recorded before its own erased_at (its own clock) is covered on every node alike, and its
    evidence recorded after it is a later write everywhere."""
    fed.ledgers["c"].erase(key=K, operator="dpo", reason="asked")
    await _settle(fed, 2)
    clock = fed.clocks["c"]
    assert isinstance(clock, _Ahead)
    clock.offset = 0  # its operator sets its clock right
    fed.clock.advance(SECOND)
    refused = fed.ledgers["c"].submit(
        Submission(K.namespace, K.subject, K.predicate, "faro", "user_stated", "c-faro")
    )
    assert refused.decision.outcome is Outcome.REJECTED
    fed.clock.advance(AHEAD)  # c's clock passes its own erased_at
    after = _say(fed, "c", "lagos")
    await _settle(fed, 2)
    assert all(_evidence(fed, n) == {after} for n in "abc")


async def test_a_bound_altered_by_a_relay_is_refused(fed: Federation) -> None:
    """A bound travels with its signer's signature: moved to an earlier time by a relay, it
    is refused item by item and counted, and the erasure it names keeps its effect."""
    fed.partition(["a", "c"], ["b"])
    fed.ledgers["c"].erase(key=K, operator="dpo", reason="asked")
    await _sync(fed, "a", "c")
    [bound] = fed.ledgers["a"].offer_bounds([""])
    [tomb], _, _ = fed.ledgers["a"].offer({"tombstones": [""]})
    forged = pb.ErasureBound(
        erasure_id=bound.erasure_id,
        node_id="a",
        bound_at=wire.timestamp(bound.bound_at - 3600 * SECOND),
        signature=bound.signature,
    )
    roster = fed.rosters["a"]
    assert roster is not None
    delta = pb.Delta(
        tombstones=[wire.tombstone_pb(tomb)],
        erasure_bounds=[forged],
        certificates=roster.certificates({"a", "c"}),
    )
    reply = fed.endpoints["b"].push_delta("c", delta)
    assert [r.reason for r in reply.rejected] == [
        "erasure bound: its signature does not verify against its signer's certificate"
    ]
    with fed.ledgers["b"].repo.read() as tx:
        assert tx.bounds_under([""]) != []  # b's own, made when it applied the erasure
        assert {x.node for x in tx.bounds_under([""])} == {"b"}
