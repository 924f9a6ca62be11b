"""A restore never brings erased data back for good, and forgets no revocation (issue 41,
specification §6): real `factnode serve` members over mTLS. A member restored from an export
older than its own erasure takes its own signed tombstone back from any peer that holds it
and erases again; a revocation it held at export still holds after the import; and
`factnode serve --restore FILE` restores a federated member while its peers run, serving no
data until its first round has completed."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from _fednet import (
    RPC_TIMEOUT,
    Federation,
    FedNode,
    StartFederation,
    certificate_der,
    event_time,
    key,
    peer_channel,
    signed_evidence,
    unique_ns,
)

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.certs import revoke
from factnode.core import Key, ids

WAIT = 30.0  # seconds for a restored node's first round to complete
QUIET_SWEEPS = 4  # sweeps of SyncNow within which the fleet goes quiet, restored members too


@pytest.fixture(scope="module")
def fed(start_federation: StartFederation) -> Federation:
    """Three members, each peering with the other two."""
    return start_federation(["r1", "r2", "r3"])


def _export(node: FedNode, path: Path) -> Path:
    data = b"".join(c.data for c in node.admin.Export(pb.ExportRequest(), timeout=RPC_TIMEOUT))
    path.write_bytes(data)
    return path


def _import(node: FedNode, path: Path) -> pb.ImportResponse:
    return node.admin.Import(  # type: ignore[no-any-return]
        iter([pb.ImportChunk(data=path.read_bytes())]), timeout=RPC_TIMEOUT
    )


def _fresh(node: FedNode, *serve_args: str) -> None:
    """Stops `node`, loses its data directory, and starts it again empty (with `serve_args`)."""
    if node.running:
        assert node.stop() == 0
    shutil.rmtree(node.data_dir)
    node.serve_args = list(serve_args)
    node.spawn()
    node.wait_listening()


def _restart(node: FedNode) -> None:
    node.serve_args = []
    node.spawn()
    node.wait_listening()


def _erase_subject(node: FedNode, ns: str, subject: str) -> pb.EraseResponse:
    return node.admin.Erase(  # type: ignore[no-any-return]
        pb.EraseRequest(
            subject=pb.SubjectScope(namespace=ns, subject=subject),
            reason="subject request",
            operator="dpo",
        ),
        timeout=RPC_TIMEOUT,
    )


def _status(call: Callable[[], object]) -> tuple[grpc.StatusCode | None, object]:
    try:
        return None, call()
    except grpc.RpcError as exc:
        return exc.code(), exc.details()


def _spread(fed: Federation) -> None:
    """SyncNow on every running member until a whole sweep moves nothing (at most
    `QUIET_SWEEPS`): what one holds reaches the others, a restored member's votes included
    (numbered above those it signed before, test_fed_restore_votes.py)."""
    fed.sync_until_quiet(down=[n.node_id for n in fed if not n.running], sweeps=QUIET_SWEEPS)


def _story(fed: Federation, prefix: str) -> tuple[str, pb.Key, pb.Key]:
    """r1 states where ana and bo live, every member holds it; r1's export is taken; then r1
    erases ana and every member applies the tombstone. Returns (namespace, ana, bo)."""
    r1 = fed["r1"]
    ns = unique_ns(prefix)
    ana, bo = key(ns, "ana", "lives_in"), key(ns, "bo", "lives_in")
    at = event_time()
    r1.submit(ana, "Oslo", source="agent:r1", valid_from=at)
    r1.submit(bo, "Bergen", source="agent:r1", valid_from=at)
    _spread(fed)
    for node in fed.running():
        assert node.belief(ana) is not None and node.belief(bo) is not None, node.node_id
    return ns, ana, bo


def test_a_restored_member_erases_again_what_its_own_tombstone_covers(
    fed: Federation, tmp_path: Path
) -> None:
    """r1 exports, then erases subject ana; the tombstone reaches r2 and r3. r1 is restored
    from the export (its peers down while it imports, the flow that works without `serve
    --restore`): once its peers are back, its first round takes its own tombstone back from
    them (checked against its own key), erases ana again and logs it; bo stays, and later
    rounds bring no tombstone (it is not sent back every round)."""
    r1, r2, r3 = fed["r1"], fed["r2"], fed["r3"]
    ns, ana, bo = _story(fed, "restore-own")
    backup = _export(r1, tmp_path / "r1.jsonl")
    assert _erase_subject(r1, ns, "ana").evidence_erased == 1
    _spread(fed)
    assert r2.belief(ana) is None and r3.belief(ana) is None

    for peer in (r2, r3):
        assert peer.stop() == 0
    _fresh(r1)
    assert _import(r1, backup).evidence == 2
    _restart(r2)
    _restart(r3)
    first = r1.sync()
    # (r2 and r3's own first rounds, at their start, may have pushed it to r1 already.)
    assert [r.ok for r in first.results] == [True, True], first

    assert r1.belief(ana) is None and r1.history(ana) is None
    served = r1.belief(bo)
    assert served is not None and served.object == "Bergen"
    decisions = r1.facts.ListDecisions(
        pb.ListDecisionsRequest(namespace=ns, page_size=100), timeout=RPC_TIMEOUT
    ).decisions
    again = [d for d in decisions if d.rule == "peer_erasure"]
    assert len(again) == 1 and "own erasure" in again[0].detail, [d.detail for d in decisions]
    assert "erased 1 piece(s)" in again[0].detail
    assert "came back from" in r1.output()
    # Held now: no later round brings it again, from either peer.
    _spread(fed)
    assert sum(r.tombstones_received for r in r1.sync().results) == 0


def test_serve_restore_restores_a_federated_member_while_its_peers_run(
    fed: Federation, tmp_path: Path
) -> None:
    """`factnode serve --restore FILE` on an empty data directory, with r2 and r3 running:
    the import runs before r1's first round, r1 answers FactService with FAILED_PRECONDITION
    (never the erased value) until that round has completed, then serves bo and not ana,
    which the round erased again; a restart with the same command line serves the restored
    store as it is, and `factnode import` of it then exits 8 (not empty)."""
    r1 = fed["r1"]
    for node in fed:
        if not node.running:
            _restart(node)
    ns, ana, bo = _story(fed, "serve-restore")
    backup = _export(r1, tmp_path / "r1.jsonl")
    assert _erase_subject(r1, ns, "ana").evidence_erased == 1
    _spread(fed)

    _fresh(r1, "--restore", str(backup))
    seen: list[object] = []
    deadline = time.monotonic() + WAIT
    while True:
        code, got = _status(lambda: r1.facts.GetBelief(pb.GetBeliefRequest(key=ana), timeout=5))
        seen.append(code)
        assert code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND), got
        if code is grpc.StatusCode.FAILED_PRECONDITION:
            assert "first sync round" in str(got)
        else:
            break
        assert time.monotonic() < deadline, "r1 never completed its first round"
        time.sleep(0.1)
    served = r1.belief(bo)
    assert served is not None and served.object == "Bergen"
    assert "restored" in r1.output()

    assert r1.stop() == 0
    r1.serve_args = ["--restore", str(backup)]
    r1.spawn()
    r1.wait_listening()
    assert r1.belief(ana) is None and r1.belief(bo) is not None
    code, got = _status(lambda: _import(r1, backup))
    assert code is grpc.StatusCode.FAILED_PRECONDITION and "not empty" in str(got)


def test_a_restored_member_without_peers_holds_its_data_back(
    fed: Federation, tmp_path: Path
) -> None:
    """Restored with every peer down, r1 answers GetBelief with FAILED_PRECONDITION naming
    the first sync round (AdminService still answers); once a peer is back, one `SyncNow`
    ends the hold. With --serve-before-sync (the operator's choice) it serves at once."""
    r1, r2, r3 = fed["r1"], fed["r2"], fed["r3"]
    for node in fed:
        if not node.running:
            _restart(node)
    _, ana, bo = _story(fed, "held")
    backup = _export(r1, tmp_path / "r1.jsonl")
    for peer in (r2, r3):
        assert peer.stop() == 0

    _fresh(r1, "--restore", str(backup))
    code, got = _status(lambda: r1.belief(bo))
    assert code is grpc.StatusCode.FAILED_PRECONDITION and "first sync round" in str(got)
    status = r1.admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT)
    assert status.node_id == "r1"
    _restart(r2)
    assert any(r.ok for r in r1.sync("r2").results)
    served = r1.belief(bo)
    assert served is not None and served.object == "Bergen"

    assert r2.stop() == 0
    _fresh(r1, "--restore", str(backup), "--serve-before-sync")
    served = r1.belief(ana)
    assert served is not None and served.object == "Oslo"
    _restart(r2)
    _restart(r3)


def test_a_revocation_survives_export_and_import(fed: Federation, tmp_path: Path) -> None:
    """r1, handed a list revoking r3, exports; restored from that export into an empty
    store (no member running to hand the list back), it lists r3 as revoked with the list's
    number, and evidence r3 signs after that, relayed by r2, is refused. (Run last: r3 stays
    revoked.)"""
    r1, r2, r3 = fed["r1"], fed["r2"], fed["r3"]
    _spread(fed)  # r1 holds r3's member record
    path, number = revoke(fed.root / "certs", ["r3"])
    done = r1.admin.Revoke(pb.RevokeRequest(revocation_list=path.read_bytes()), timeout=RPC_TIMEOUT)
    assert done.applied and list(done.revoked) == ["r3"]
    backup = _export(r1, tmp_path / "r1.jsonl")

    for peer in (r2, r3):
        assert peer.stop() == 0
    _fresh(r1)
    _import(r1, backup)
    members = r1.admin.ListMembers(pb.ListMembersRequest(), timeout=RPC_TIMEOUT)
    assert members.revocation_list_number == number
    assert {m.node_id: m.revoked for m in members.members} == {
        "r1": False,
        "r2": False,
        "r3": True,
    }

    k = key(unique_ns("revoked"), "ana", "lives_in")
    at = event_time().ToMicroseconds()
    eid = ids.evidence_id(
        Key(k.namespace, k.subject, k.predicate), "Lima", "agent_observed", "agent:r3",
        at, 500, 900, None, None,
    )  # fmt: skip
    late = pb.RelayedEvidence(
        evidence_id=eid,
        key=k,
        object="Lima",
        anchor="agent_observed",
        source="agent:r3",
        worth_milli=500,
        confidence_milli=900,
        valid_from=event_time(),
        recorded_at=event_time(),
        origin_node="r3",
    )
    delta = pb.Delta(
        evidence=[signed_evidence(r3.tls, late)], certificates=[certificate_der(r3.tls)]
    )
    with peer_channel(r2.tls, r1) as ch:
        reply = pb_grpc.FederationServiceStub(ch).PushDelta(delta, timeout=RPC_TIMEOUT)
    assert reply.accepted == 0 and len(reply.rejected) == 1
    assert "not a member" in reply.rejected[0].reason, reply.rejected[0].reason
    _restart(r2)
    r1.sync("r2")
    assert r1.belief(k) is None
