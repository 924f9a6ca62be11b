"""A peer with a valid certificate cannot make this node build an answer without bound, fill its
store with abstentions, erase what this node does not accept erasures of, or hide a clock
skew behind ok rounds (issue 22, items 6, 7 and 10)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.config import Peer, Settings
from factnode.core import MICROS_PER_DAY, InvalidInput, Key, Outcome, Policy, Rule, Submission, ids
from factnode.core.consensus import Vote
from factnode.core.peer_checks import ErasureGrant
from factnode.federation import sync
from factnode.federation._index import index_of
from factnode.federation.sync import (
    EVIDENCE,
    MAX_DIGEST_BUCKETS,
    MAX_HAVE_IDS,
    MAX_REQUEST_REFS,
    FederationEndpoint,
)
from factnode.federation.transport import FederationServicer, PeerLimits
from factnode.ledger import Committed, Ledger
from factnode.server._errors import ResourceExhausted
from factnode.server.app import Node
from factnode.store import SqlRepository
from factnode.testing import FakeClock, Federation

KEY = Key("team:infra", "build", "python_version")
USER_KEY = Key("user:ana", "ana", "city")
HOUR = 3_600_000_000


@pytest.fixture
def fed() -> Iterator[Federation]:
    """An honest node `a` and a configured peer `h`, sending unsigned items (the checks here
    are those of their content and of the erasure grants; signatures are pinned in
    tests/integration/test_signed_relay.py and tests/integration/federation)."""
    federation = Federation(["a", "h"], signed=False)
    try:
        yield federation
    finally:
        federation.close()


def _submit(fed: Federation, node: str, key: Key, value: str) -> str:
    sub = Submission(
        key.namespace,
        key.subject,
        key.predicate,
        value,
        "agent_observed",
        f"{node}-src",
        0.5,
        0.9,
        fed.clock.now() - MICROS_PER_DAY,
    )
    return fed.ledgers[node].submit(sub).evidence_id


def _fill(fed: Federation, node: str, n: int) -> set[str]:
    """`n` facts on `n` keys of `node`: their evidence ids spread over the buckets."""
    return {_submit(fed, node, Key("team:infra", f"s{i}", "p"), f"v{i}") for i in range(n)}


def _key_tombstone(
    key: Key, origin: str, erased_at: int, erasure_id: str = "e" * 32
) -> pb.ErasureTombstone:
    return pb.ErasureTombstone(
        erasure_id=erasure_id,
        scope=pb.ERASURE_SCOPE_KEY,
        scope_hash=ids.key_id(key),
        erased_at=wire.timestamp(erased_at),
        operator="mallory",
        reason="because I can",
        origin_node=origin,
    )


def _refused_count(fed: Federation, node: str) -> list[int]:
    counted: list[int] = []

    def count(fx: Committed) -> None:
        if fx.erasures_refused:
            counted.append(fx.erasures_refused)

    fed.ledgers[node].on_commit(count)
    return counted


def _held(fed: Federation, node: str) -> int:
    return fed.ledgers[node].counts().evidence


# -- item 6: bounded answers --------------------------------------------------------


def test_a_digest_request_naming_too_many_buckets_is_refused_naming_the_field(
    fed: Federation,
) -> None:
    """A GetDigest naming more buckets than any round sends is refused before anything is
    built, with a violation naming `buckets`."""
    refs = [pb.BucketRef(set=EVIDENCE, prefix="")] * (MAX_REQUEST_REFS + 1)
    with pytest.raises(InvalidInput) as refused:
        fed.endpoints["a"].get_digest("h", pb.DigestRequest(buckets=refs, depth=2))
    assert [v.field for v in refused.value.violations] == ["buckets"]


def test_a_pull_naming_too_many_held_ids_is_refused_naming_the_field(fed: Federation) -> None:
    """A PullDelta listing more held ids than any round sends is refused, naming `have_ids`."""
    request = pb.DeltaRequest(
        buckets=[pb.BucketRef(set=EVIDENCE, prefix="")],
        have_ids=[f"{i:032x}" for i in range(MAX_HAVE_IDS + 1)],
    )
    with pytest.raises(InvalidInput) as refused:
        fed.endpoints["a"].pull_delta("h", request)
    assert [v.field for v in refused.value.violations] == ["have_ids"]


def test_a_deep_digest_request_gets_at_most_the_bucket_limit_and_the_rest_named(
    fed: Federation,
) -> None:
    """Root buckets asked many times over at depth 2 get one answer of at most the bucket
    limit; the buckets it leaves out are named in `unanswered`, in order."""
    _fill(fed, "a", 300)
    refs = [pb.BucketRef(set=EVIDENCE, prefix="")] * MAX_REQUEST_REFS
    reply = fed.endpoints["a"].get_digest("h", pb.DigestRequest(buckets=refs, depth=2))
    per_ref = len(index_of(fed.ledgers["a"]).evidence.children("", 2))
    answered = MAX_DIGEST_BUCKETS // per_ref
    assert len(reply.buckets) == answered * per_ref <= MAX_DIGEST_BUCKETS
    assert len(reply.unanswered) == MAX_REQUEST_REFS - answered


def test_a_pull_of_the_root_bucket_comes_in_bounded_pieces_that_add_up_to_everything(
    fed: Federation,
) -> None:
    """With answers limited to 40 items and 6,000 bytes, pulling the whole evidence set gets
    answers within both limits, each naming what it left out; following them gets every
    piece of evidence exactly once."""
    expected = _fill(fed, "a", 300)
    endpoint = FederationEndpoint(
        fed.ledgers["a"], [Peer("inproc:h", "h")], max_delta_items=40, max_delta_bytes=6000
    )
    pending = [pb.BucketRef(set=EVIDENCE, prefix="")]
    got: list[str] = []
    answers = 0
    while pending:
        reply = endpoint.pull_delta("h", pb.DeltaRequest(buckets=pending))
        answers += 1
        assert len(reply.evidence) <= 40
        assert reply.ByteSize() <= 6000 + 100 * len(reply.unanswered)
        got.extend(e.evidence_id for e in reply.evidence)
        assert len(reply.unanswered) < len(pending) or reply.evidence
        pending = list(reply.unanswered)
    assert sorted(got) == sorted(expected)
    assert answers > 1


async def test_sync_with_small_answer_limits_still_moves_everything_both_ways() -> None:
    """Two nodes whose answers hold at most 16 items and 32 digest buckets still converge:
    each side ends with all evidence and equal digests."""
    fed = Federation(["a", "b"])
    try:
        for n in ("a", "b"):
            small = FederationEndpoint(
                fed.ledgers[n],
                [Peer(f"inproc:{p}", p) for p in ("a", "b") if p != n],
                max_delta_items=16,
                max_digest_buckets=32,
                roster=fed.rosters[n],
            )
            fed.endpoints[n] = small
            for (_caller, target), link in fed.links.items():
                if target == n:
                    link.endpoint = small
        _fill(fed, "a", 150)
        for i in range(60):
            _submit(fed, "b", Key("team:other", f"t{i}", "p"), f"w{i}")
        await fed.round()
        await fed.round()
        assert _held(fed, "a") == _held(fed, "b") == 210
        digests = [index_of(fed.ledgers[n]).evidence.bucket("") for n in ("a", "b")]
        assert digests[0] == digests[1]
    finally:
        fed.close()


def test_abstentions_on_keys_held_nowhere_share_the_waiting_vote_bound() -> None:
    """Abstentions on keys this node holds no evidence for count against the same per-peer
    bound as votes on evidence not held: beyond it they are refused, naming the limit; an
    abstention on a key held here is taken whatever the bound."""
    fed = Federation(["a", "h"], policy=Policy(max_waiting_votes_per_peer=2), signed=False)
    try:
        now = wire.timestamp(fed.clock.now())
        unknown = [Key("team:x", f"u{i}", "p") for i in range(3)]
        abstentions = [pb.Vote(key=wire.key_pb(k), fresh_since=now, cast_at=now) for k in unknown]
        reply = fed.endpoints["a"].push_delta("h", pb.Delta(votes=abstentions))
        assert [r.id for r in reply.rejected] == [ids.key_id(unknown[2])]
        assert "at most 2" in reply.rejected[0].reason
        waiting = pb.Vote(
            key=wire.key_pb(KEY),
            version_id=ids.version_id(KEY, "3.13"),
            evidence_id="f" * 32,
            anchor=60,
            worth_milli=500,
            fresh_since=now,
            cast_at=now,
        )
        reply = fed.endpoints["a"].push_delta("h", pb.Delta(votes=[waiting]))
        assert [r.id for r in reply.rejected] == [ids.key_id(KEY)]
        _submit(fed, "a", USER_KEY, "Porto")
        held = pb.Vote(key=wire.key_pb(USER_KEY), fresh_since=now, cast_at=now)
        assert list(fed.endpoints["a"].push_delta("h", pb.Delta(votes=[held])).rejected) == []
    finally:
        fed.close()


# -- item 7: whose erasures apply, and the log -------------------------------------


def test_a_peer_erasure_is_logged_naming_its_origin_operator_and_reason(
    fed: Federation,
) -> None:
    """A peer's key tombstone applied here leaves a decision (outcome ERASED, rule
    peer_erasure) naming the node it was made on, its operator, its reason and the relaying
    peer, and carrying no key text."""
    _submit(fed, "a", USER_KEY, "Porto")
    tomb = _key_tombstone(USER_KEY, "c", fed.clock.now())
    assert list(fed.endpoints["a"].push_delta("h", pb.Delta(tombstones=[tomb])).rejected) == []
    assert _held(fed, "a") == 0
    logged = [
        d.decision
        for d in fed.ledgers["a"].decisions(namespace="user:ana").items
        if d.decision.rule is Rule.PEER_ERASURE
    ]
    assert len(logged) == 1
    [d] = logged
    assert d.outcome is Outcome.ERASED
    assert d.key == Key("user:ana", f"erasure:{'e' * 32}", "key")
    for part in ("made on c", "'mallory'", "'because I can'", "delivered by h"):
        assert part in d.detail
    assert "Porto" not in d.detail and "city" not in d.detail


def test_an_erasure_from_a_member_not_accepted_is_refused_counted_and_not_applied(
    fed: Federation,
) -> None:
    """With erasures accepted only from node b, a tombstone made on h, or one naming b as its
    origin but relayed by h, is refused item by item, counted, and erases nothing."""
    fed.ledgers["a"].erasure_grants = (ErasureGrant("b"),)
    counted = _refused_count(fed, "a")
    _submit(fed, "a", KEY, "3.12")
    for i, origin in enumerate(("h", "b")):
        tomb = _key_tombstone(KEY, origin, fed.clock.now(), erasure_id=f"{i:032x}")
        reply = fed.endpoints["a"].push_delta("h", pb.Delta(tombstones=[tomb]))
        assert [r.id for r in reply.rejected] == [f"{i:032x}"]
        assert "accepts no erasures from h" in reply.rejected[0].reason
    assert counted == [1, 1]
    assert _held(fed, "a") == 1
    assert fed.ledgers["a"].counts().erasures == 0


def test_erasures_apply_only_in_the_namespaces_accepted(fed: Federation) -> None:
    """With erasures accepted for user:* only, a key tombstone on team:infra is refused, one on
    user:ana applied, and one covering nothing held here refused (its namespace cannot be
    checked), to be offered again once this node holds what it covers."""
    fed.ledgers["a"].erasure_grants = (ErasureGrant("*", ("user:*",)),)
    _submit(fed, "a", KEY, "3.12")
    _submit(fed, "a", USER_KEY, "Porto")
    now = fed.clock.now()
    team = _key_tombstone(KEY, "h", now, erasure_id="1" * 32)
    user = _key_tombstone(USER_KEY, "h", now, erasure_id="2" * 32)
    other = _key_tombstone(Key("user:bob", "bob", "city"), "h", now, erasure_id="3" * 32)
    reply = fed.endpoints["a"].push_delta("h", pb.Delta(tombstones=[team, user, other]))
    assert [r.id for r in reply.rejected] == ["1" * 32, "3" * 32]
    assert "namespace" in reply.rejected[0].reason
    assert "covers nothing" in reply.rejected[1].reason
    with fed.ledgers["a"].repo.read() as tx:
        assert [t.erasure_id for t in tx.tombstones_under([""])] == ["2" * 32]
    assert _held(fed, "a") == 1


def test_a_tombstone_naming_this_node_as_its_origin_is_refused(fed: Federation) -> None:
    """A peer cannot pass off an erasure as this node's own: one naming this node as where it
    was made, which this node does not hold, is refused and erases nothing."""
    _submit(fed, "a", KEY, "3.12")
    reply = fed.endpoints["a"].push_delta(
        "h", pb.Delta(tombstones=[_key_tombstone(KEY, "a", fed.clock.now())])
    )
    assert len(reply.rejected) == 1 and "this node" in reply.rejected[0].reason
    assert _held(fed, "a") == 1


# -- item 10: clock skew -------------------------------------------------------------


def test_a_tombstone_from_a_peer_whose_clock_runs_ahead_erases_what_is_held_now(
    fed: Federation,
) -> None:
    """A tombstone dated two hours in the receiver's future still erases the evidence it
    covers now; it is kept as sent, and the receiver records its bound (its clock), so its
    evidence recorded after that is decided normally instead of being blocked for two hours."""
    _submit(fed, "a", KEY, "3.12")
    tomb = _key_tombstone(KEY, "h", fed.clock.now() + 2 * HOUR)
    assert list(fed.endpoints["a"].push_delta("h", pb.Delta(tombstones=[tomb])).rejected) == []
    assert _held(fed, "a") == 0
    with fed.ledgers["a"].repo.read() as tx:
        [held] = tx.tombstones_under([""])
        [bound] = tx.bounds_under([""])
    assert held == wire.tombstone(tomb)
    assert (bound.erasure_id, bound.node, bound.bound_at) == (tomb.erasure_id, "a", fed.clock.now())
    fed.clock.advance(1)
    later = fed.ledgers["a"].submit(
        Submission(KEY.namespace, KEY.subject, KEY.predicate, "3.13", "user_stated", "ana")
    )
    assert later.decision.outcome is Outcome.ACCEPTED


async def test_a_round_with_a_skewed_peer_is_that_peers_error_naming_the_skew() -> None:
    """Each round measures the peer's clock: a peer two hours ahead or two days behind fails
    its round with an error naming the skew (the exchange itself still runs, so its erasure
    applies), a peer a minute off syncs ok with the skew recorded."""
    base = FakeClock()
    clocks = {
        "fast": FakeClock(base.now() + 2 * HOUR),
        "slow": FakeClock(base.now() - 2 * MICROS_PER_DAY),
        "near": FakeClock(base.now() - 60_000_000),
    }
    fed = Federation(["a", "fast", "slow", "near"], clock=base, clocks=clocks)
    try:
        _submit(fed, "a", KEY, "3.12")
        await fed.round()
        fed.ledgers["fast"].erase(key=KEY, operator="dpo", reason="request 7")
        results = {r.node_id: r for r in await fed.syncers["a"].sync_round(force=True)}
        assert (results["fast"].ok, results["slow"].ok, results["near"].ok) == (
            False,
            False,
            True,
        )
        assert results["fast"].clock_skew == 2 * HOUR
        assert results["fast"].error.startswith("clock skew: the peer's clock runs 2h00m00s ahead")
        assert "2d00h00m behind" in results["slow"].error
        assert results["near"].clock_skew == -60_000_000 and results["near"].error == ""
        states = fed.syncers["a"].states
        assert states["fast"].clock_skew == 2 * HOUR
        assert states["fast"].last_error == results["fast"].error
        assert states["near"].last_error == ""
        # The fast peer's erasure, made in a's future, erased the value on a all the same.
        assert results["fast"].tombstones_received == 1
        assert _held(fed, "a") == 0
    finally:
        fed.close()


def test_a_node_takes_its_erasure_grants_from_settings_and_counts_refusals(
    tmp_path: Path,
) -> None:
    """A node built from settings applies their accept_erasures_from, and each tombstone it
    refuses by them adds one to federation_erasures_refused_total."""
    grants = (ErasureGrant("b"),)
    node = Node(
        Settings(
            listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            node_id="n1",
            accept_erasures_from=grants,
        )
    )
    try:
        assert node.ledger.erasure_grants == grants
        tomb = wire.tombstone(_key_tombstone(KEY, "h", node.ledger.clock.now()))
        received = node.ledger.receive("h", None, [tomb], [], [])
        assert [i for i, _ in received.rejected] == [tomb.erasure_id]
        sample = node.metrics.registry.get_sample_value("federation_erasures_refused_total")
        assert sample == 1
    finally:
        node.repo.close()


def test_the_waiting_bound_and_the_change_head_on_each_store(repository: SqlRepository) -> None:
    """On SQLite and PostgreSQL alike: abstentions on keys held nowhere and votes on evidence
    not held share one bound, an abstention on a held key is outside it, and the head of the
    belief-change log moves with each change."""
    ledger = Ledger(repository, Policy(max_waiting_votes_per_peer=2), "a", FakeClock())
    now = ledger.clock.now()
    assert ledger.last_change() == 0
    sub = Submission(
        USER_KEY.namespace, USER_KEY.subject, USER_KEY.predicate, "Porto", "user_stated", "ana"
    )
    ledger.submit(sub)
    head = ledger.last_change()
    assert head > 0
    votes = [
        Vote("h", Key("team:x", "u0", "p"), None, "", 0, 0, now, now),
        Vote("h", KEY, ids.version_id(KEY, "3.13"), "f" * 32, 60, 500, now, now),
        Vote("h", Key("team:x", "u1", "p"), None, "", 0, 0, now, now),
        Vote("h", USER_KEY, None, "", 0, 0, now, now),
    ]
    received = ledger.receive("h", None, [], [], votes)
    assert [i for i, _ in received.rejected] == [ids.key_id(Key("team:x", "u1", "p"))]
    with repository.read() as tx:
        assert tx.waiting_votes("h") == 2
        assert tx.keys_held([KEY, USER_KEY]) == {USER_KEY}
    ledger.submit(Submission("team:x", "u2", "p", "v", "user_stated", "ana"))
    assert ledger.last_change() > head


async def test_a_first_sync_larger_than_the_held_ids_limit_completes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pull lists as held only ids under the buckets it asks for, never everything taken so
    far in the round: an empty node takes 800 pieces of evidence, in answers of 16, under a
    held-ids limit of 600."""
    monkeypatch.setattr(sync, "MAX_HAVE_IDS", 600)
    fed = Federation(["a", "b"])
    try:
        small = FederationEndpoint(
            fed.ledgers["a"], [Peer("inproc:b", "b")], max_delta_items=16, roster=fed.rosters["a"]
        )
        fed.endpoints["a"] = fed.links[("b", "a")].endpoint = small
        _fill(fed, "a", 800)
        [result] = await fed.syncers["b"].sync_round()
        assert (result.ok, result.error) == (True, "")
        assert _held(fed, "b") == 800
    finally:
        fed.close()


def test_a_peer_over_its_call_limits_is_refused_until_it_slows_down() -> None:
    """Per peer: a call beyond the concurrent limit, or beyond the rate's burst, is refused
    (RESOURCE_EXHAUSTED) naming the limit; the bucket refills at the rate, and one peer's
    calls never use another's allowance."""
    now = [0.0]
    limits = PeerLimits(concurrent=2, per_second=10.0, burst=3, clock=lambda: now[0])

    def one_call(peer: str) -> None:
        with limits.call(peer):
            pass

    with limits.call("h"), limits.call("h"):
        with pytest.raises(ResourceExhausted, match="at most 2"):
            one_call("h")
        one_call("b")  # another peer's allowance
    one_call("h")  # the third of its burst of 3
    with pytest.raises(ResourceExhausted, match="10 federation calls per second"):
        one_call("h")
    now[0] += 0.1  # one call's worth refilled
    one_call("h")
    with pytest.raises(ResourceExhausted):
        one_call("h")


class _Aborted(Exception):
    def __init__(self, status: grpc.Status) -> None:
        self.status = status


class _PeerContext:
    """A servicer context as a peer's verified mTLS connection presents it."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_common_name": [self.node_id.encode()]}

    async def abort_with_status(self, status: grpc.Status) -> None:
        raise _Aborted(status)


async def test_the_federation_service_refuses_a_peer_over_its_rate(fed: Federation) -> None:
    """FederationService counts each peer's calls: with a burst of one, a peer's second
    GetDigest is RESOURCE_EXHAUSTED, while another peer's first is answered."""
    servicer = FederationServicer(
        FederationEndpoint(fed.ledgers["a"], [Peer("x:1", "h"), Peer("x:2", "b")]),
        limits=PeerLimits(per_second=0.001, burst=1),
    )
    await servicer.GetDigest(pb.DigestRequest(), _PeerContext("h"))
    with pytest.raises(_Aborted) as refused:
        await servicer.GetDigest(pb.DigestRequest(), _PeerContext("h"))
    assert refused.value.status.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    await servicer.GetDigest(pb.DigestRequest(), _PeerContext("b"))
