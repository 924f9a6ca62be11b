"""Revocation by a list the CA signed: a member handed it stops counting the revoked node's
votes at once, refuses its links, lists it as revoked, and passes the list on in its sync
rounds, so every member it reaches does the same; the CA's key never leaves the operator's
machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grpc
import jsonschema
import pytest
from _fednet import (
    BELIEVED,
    CONTESTED,
    RPC_TIMEOUT,
    Federation,
    StartFederation,
    event_time,
    key,
    unique_ns,
)

from factnode.api.v1 import factnode_pb2 as pb
from factnode.certs import issue_node_cert, revoke

DOCS = Path(__file__).resolve().parents[3] / "docs" / "cli-json"


@pytest.fixture(scope="module")
def fed(start_federation: StartFederation) -> Federation:
    """Three members, each peering with the other two."""
    return start_federation(["r1", "r2", "r3"])


def _tally_voters(fed: Federation, node: str, k: pb.Key) -> set[str]:
    belief = fed[node].belief(k)
    assert belief is not None
    return {v for t in belief.tallies for v in t.voters}


def test_a_revoked_member_stops_counting_and_is_refused(fed: Federation) -> None:
    """r2 and r3 say Lisbon, r1 Porto: r1 adopts Lisbon by consensus (2 of 3). Handed a list
    revoking r3, r1 drops r3's vote (1:1, contested), refuses r3's rounds, and lists r3 as
    revoked; a second hand-over of the same list changes nothing."""
    r1 = fed["r1"]
    ns = unique_ns("revoke")
    k = key(ns, "ana", "lives_in")
    at = event_time()
    r1.submit(k, "Porto", source="agent:r1", valid_from=at)
    for node in ("r2", "r3"):
        fed[node].submit(k, "Lisbon", source=f"agent:{node}", valid_from=at)
    fed.sync_until_quiet()

    before = r1.belief(k)
    assert before is not None
    assert (before.object, before.state, before.rule) == (
        "Lisbon",
        BELIEVED,
        "federation_consensus",
    )
    assert _tally_voters(fed, "r1", k) == {"r1", "r2", "r3"}
    members = {m.node_id: m for m in r1.admin.ListMembers(pb.ListMembersRequest()).members}
    assert set(members) == {"r1", "r2", "r3"}
    assert members["r1"].self and not members["r3"].revoked
    assert members["r3"].HasField("certificate_expires")  # seen on its link

    path, number = revoke(fed.root / "certs", ["r3"])
    done = r1.admin.Revoke(pb.RevokeRequest(revocation_list=path.read_bytes()), timeout=RPC_TIMEOUT)
    assert (done.applied, done.number, list(done.revoked)) == (True, number, ["r3"])
    # Gossip: r2, never handed the list, takes it in r1's next round (r1 pushes it).
    assert not r2_members(fed)["r3"].revoked
    assert _tally_voters(fed, "r2", k) == {"r1", "r2", "r3"}

    after = r1.belief(k)
    assert after is not None and after.state == CONTESTED
    assert _tally_voters(fed, "r1", k) == {"r1", "r2"}
    members = {m.node_id: m for m in r1.admin.ListMembers(pb.ListMembersRequest()).members}
    assert members["r3"].revoked and "revoked" in members["r3"].refused
    assert r1.admin.ListMembers(pb.ListMembersRequest()).revocation_list_number == number

    [toward_r1] = fed["r3"].sync("r1").results
    assert not toward_r1.ok and "revoked" in toward_r1.error
    assert [r.node_id for r in r1.sync().results] == ["r2"]  # r1 no longer dials r3
    assert _tally_voters(fed, "r1", k) == {"r1", "r2"}
    assert fed["r2"].admin.ListMembers(pb.ListMembersRequest()).revocation_list_number == number
    assert r2_members(fed)["r3"].revoked
    assert _tally_voters(fed, "r2", k) == {"r1", "r2"}
    [toward_r2] = fed["r3"].sync("r2").results
    assert not toward_r2.ok and "revoked" in toward_r2.error

    again = r1.admin.Revoke(
        pb.RevokeRequest(revocation_list=path.read_bytes()), timeout=RPC_TIMEOUT
    )
    assert (again.applied, again.number) == (False, number)


def r2_members(fed: Federation) -> dict[str, pb.Member]:
    return {m.node_id: m for m in fed["r2"].admin.ListMembers(pb.ListMembersRequest()).members}


def test_a_list_the_ca_did_not_sign_is_invalid(fed: Federation, tmp_path: Path) -> None:
    """A revocation list from another CA, or bytes that are none, are INVALID_ARGUMENT naming
    the field, and the node keeps the list it holds."""
    issue_node_cert(tmp_path, "r2")
    forged, _ = revoke(tmp_path, ["r2"])
    r1 = fed["r1"]
    held = r1.admin.ListMembers(pb.ListMembersRequest()).revocation_list_number
    for data in (forged.read_bytes(), b"not a list", b""):
        with pytest.raises(grpc.RpcError) as refused:
            r1.admin.Revoke(pb.RevokeRequest(revocation_list=data), timeout=RPC_TIMEOUT)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "revocation_list" in (refused.value.details() or "")
    assert r1.admin.ListMembers(pb.ListMembersRequest()).revocation_list_number == held
    members = {m.node_id: m for m in r1.admin.ListMembers(pb.ListMembersRequest()).members}
    assert not members["r2"].revoked


def test_members_and_revoke_on_the_command_line(fed: Federation) -> None:
    """`factnode members` lists the node's members; `factnode revoke FILE` hands it a list."""
    r2 = fed["r2"]
    fed["r3"].sync("r2")  # r2 sees r3's certificate on its link (refused or not)
    path, number = revoke(fed.root / "certs", ["r3"])
    cli = [sys.executable, "-m", "factnode.cli"]
    listed = subprocess.run(
        [*cli, "members", "--address", r2.address],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "r2 (this node)" in listed.stdout and "r1" in listed.stdout
    as_json = subprocess.run(
        [*cli, "members", "--json", "--address", r2.address],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    schema = json.loads((DOCS / "members.schema.json").read_text())
    jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(doc)
    assert doc["members"][0]["node_id"] == "r2" and doc["members"][0]["self"]
    handed = subprocess.run(
        [*cli, "revoke", "--address", r2.address, str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert handed.returncode == 0, handed.stderr
    assert f"number {number} applied" in handed.stdout and "r3" in handed.stdout
    # Gossip the other way: r1's round takes the later list from r2's digest answer.
    [with_r2] = fed["r1"].sync("r2").results
    assert with_r2.ok, with_r2.error
    assert fed["r1"].admin.ListMembers(pb.ListMembersRequest()).revocation_list_number == number
    missing = subprocess.run(
        [*cli, "revoke", "--address", r2.address, str(path) + ".missing"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "cannot read" in missing.stderr
