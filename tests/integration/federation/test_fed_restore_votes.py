"""A voter never contradicts itself by losing its disk (specification §7): a member restored from
an older export, or restarted with an empty store, votes again numbered above every vote it
signed before, every member ends holding one vote per voter and key (its highest signed
number), and the fleet's sync goes quiet within a few sweeps: real `factnode serve` members
over mTLS."""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from _fednet import (
    RPC_TIMEOUT,
    Federation,
    FedNode,
    StartFederation,
    event_time,
    key,
    peer_channel,
    unique_ns,
)

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

QUIET_SWEEPS = 4  # sweeps of SyncNow within which the fleet must go quiet after a restore

Held = dict[tuple[str, tuple[str, str, str]], list[pb.Vote]]


@pytest.fixture
def fed(start_federation: StartFederation) -> Iterator[Federation]:
    """Three members, each peering with the other two: a fleet per test, as a fleet that
    never goes quiet would fail the next test's sweeps too."""
    fleet = start_federation(["v1", "v2", "v3"])
    yield fleet
    assert not fleet.stop(), "a member needed SIGKILL to stop"


def _signed_votes(fed: Federation, node: FedNode) -> Held:
    """Every signed vote `node` holds, as it offers them to a member, by (voter, key)."""
    other = next(n for n in fed if n is not node)
    with peer_channel(other.tls, node) as ch:
        delta = pb_grpc.FederationServiceStub(ch).PullDelta(
            pb.DeltaRequest(buckets=[pb.BucketRef(set=pb.DIGEST_SET_VOTES, prefix="")]),
            timeout=RPC_TIMEOUT,
        )
    assert not delta.unanswered
    out: Held = defaultdict(list)
    for v in delta.votes:
        out[(v.voter, (v.key.namespace, v.key.subject, v.key.predicate))].append(v)
    return out


def _in(ns: str, held: Held) -> Held:
    return {pair: vs for pair, vs in held.items() if pair[1][0] == ns}


def _fresh(node: FedNode, *serve_args: str) -> None:
    """Stops `node`, loses its data directory, and starts it again empty (with `serve_args`)."""
    assert node.stop() == 0
    shutil.rmtree(node.data_dir)
    node.serve_args = list(serve_args)
    node.spawn()
    node.wait_listening()


def _story(fed: Federation, prefix: str) -> tuple[str, list[pb.Key], Path]:
    """v1 and v2 state facts, v1 exports, then v1 votes again on one key (new evidence) and on
    a new one, so the copies the fleet holds of v1's votes are numbered above what the export's
    replay casts. Returns (namespace, keys, export)."""
    v1, v2 = fed["v1"], fed["v2"]
    ns = unique_ns(prefix)
    keys = [key(ns, s, "lives_in") for s in ("ana", "bo", "cy", "di")]
    at = event_time()
    v1.submit(keys[0], "Oslo", source="agent:v1", valid_from=at)
    v1.submit(keys[1], "Bergen", source="agent:v1", valid_from=at)
    v2.submit(keys[2], "Tromso", source="agent:v2", valid_from=at)
    fed.sync_until_quiet()
    path = fed.root / f"{ns.replace(':', '-')}.jsonl"
    path.write_bytes(
        b"".join(c.data for c in v1.admin.Export(pb.ExportRequest(), timeout=RPC_TIMEOUT))
    )
    v1.submit(keys[0], "Oslo", source="user:v1", attribution="user_stated", valid_from=at)
    v1.submit(keys[3], "Lima", source="agent:v1", valid_from=at)
    fed.sync_until_quiet()
    return ns, keys, path


def _assert_one_current_vote_each(fed: Federation, ns: str, before: Held) -> None:
    """Every member holds one vote per (voter, key) in `ns`, the same signed bytes everywhere,
    none an equivocation proof, and v1's numbered above its copy held before it lost its store."""
    held = {node.node_id: _in(ns, _signed_votes(fed, node)) for node in fed}
    for node_id, votes in held.items():
        doubled = {pair: len(vs) for pair, vs in votes.items() if len(vs) != 1}
        assert not doubled, f"{node_id} holds more than one vote on {doubled}"
        assert votes.keys() == held["v1"].keys(), (node_id, votes.keys(), held["v1"].keys())
        for pair, (v,) in votes.items():
            (own,) = held[pair[0]][pair]  # the voter's own
            assert v.SerializeToString(deterministic=True) == own.SerializeToString(
                deterministic=True
            ), f"{node_id} holds {pair} at seq {v.seq}, its voter at seq {own.seq}"
    for pair, (old,) in before.items():
        if pair[0] == "v1":
            (now,) = held["v1"][pair]
            assert now.seq > old.seq, (pair, old.seq, now.seq)


def _assert_believed_by_all(fed: Federation, keys: list[pb.Key]) -> None:
    """Nobody takes v1 for an equivocator: every key is BELIEVED on every member, nothing is
    under review."""
    for node in fed:
        for k in keys:
            served = node.belief(k)
            assert served is not None and served.state == pb.BELIEF_STATE_BELIEVED, (
                node.node_id,
                k.subject,
                served,
            )
        assert not node.contested(keys[0].namespace), node.node_id


def _restart(node: FedNode) -> None:
    node.serve_args = []
    node.spawn()
    node.wait_listening()


def test_a_restored_member_goes_quiet_with_one_vote_per_voter_and_key(
    fed: Federation,
) -> None:
    """v1, restored (`serve --restore`, its peers down) from an export older than some of its
    votes, casts its votes again as it replays the export; its peers, back, pull those first:
    within a few sweeps a whole sweep moves nothing (no bucket differs), every member holds one
    vote per voter and key, the voter's highest signed number (v1's above the copies the fleet
    held of it, none taken for an equivocation), and every key is believed everywhere."""
    ns, keys, backup = _story(fed, "restored-votes")
    before = _in(ns, _signed_votes(fed, fed["v2"]))
    assert "v1" in {p[0] for p in before}

    for peer in (fed["v2"], fed["v3"]):
        assert peer.stop() == 0
    _fresh(fed["v1"], "--restore", str(backup))
    _restart(fed["v2"])  # its first round pulls what v1 replayed before v1 learns its copies
    _restart(fed["v3"])
    fed.sync_until_quiet(sweeps=QUIET_SWEEPS)

    _assert_one_current_vote_each(fed, ns, before)
    _assert_believed_by_all(fed, keys)


def test_a_member_restarted_empty_numbers_its_votes_above_those_it_signed(
    fed: Federation,
) -> None:
    """v1, restarted with an empty store while its peers are down, is told its facts again by
    its clients and votes on them before it meets a peer: its votes are numbered above every
    vote it signed before, so once its peers are back the fleet goes quiet within a few sweeps,
    with one vote per voter and key, the highest signed number, on every member, and nobody
    takes v1 for an equivocator."""
    ns, keys, _ = _story(fed, "emptied-votes")
    before = _in(ns, _signed_votes(fed, fed["v2"]))

    for peer in (fed["v2"], fed["v3"]):
        assert peer.stop() == 0
    _fresh(fed["v1"])
    at = event_time()
    fed["v1"].submit(keys[0], "Oslo", source="agent:v1", valid_from=at)
    fed["v1"].submit(keys[1], "Bergen", source="agent:v1", valid_from=at)
    _restart(fed["v2"])
    _restart(fed["v3"])
    fed.sync_until_quiet(sweeps=QUIET_SWEEPS)

    _assert_one_current_vote_each(fed, ns, before)
    _assert_believed_by_all(fed, keys)
