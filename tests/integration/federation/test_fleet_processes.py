"""A fleet of real processes (specification §7, §9 "a fleet converges"): eight `factnode serve`
processes on loopback, each configured with one seed address and certificates made by
`factnode certs`, learn every member from the records that gossip and reach identical
tallies; a ninth joins with its certificate and one seed and is listed, and its vote
counted, by every node; revoked with `factnode certs revoke` + `factnode revoke` on one
member, within the bound no node counts its vote, dials it, or accepts a link from it.

Each node runs its own rounds every `INTERVAL` seconds with `fanout` 3 (the default); the
bounds are in rounds of that interval, with room for a loaded machine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from _fednet import (
    RPC_TIMEOUT,
    FedNode,
    StartError,
    TlsIdentity,
    event_time,
    free_port,
    isolated_env,
    key,
    peer_channel,
    refused,
    unique_ns,
)
from starlette.testclient import TestClient

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.console import ConsoleSettings, create_app

FLEET = [f"f{i}" for i in range(1, 9)]
JOINER = "f9"
INTERVAL = 0.5  # seconds between a node's own rounds
BOUND_ROUNDS = 120  # rounds each phase may take: 60 s at INTERVAL on a loaded machine
POLL = 0.25
START_SECONDS = 120.0  # nine Python processes starting at once on a shared two-core machine


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "factnode.cli", *args],
        capture_output=True, text=True, timeout=60, check=False, env=isolated_env(home),
    )  # fmt: skip


def _within(what: str, done: Callable[[], bool]) -> float:
    """Polls `done` until true; the seconds it took, or AssertionError past the bound."""
    start = time.monotonic()
    while time.monotonic() - start < BOUND_ROUNDS * INTERVAL:
        if done():
            return time.monotonic() - start
        time.sleep(POLL)
    raise AssertionError(f"{what}: not within {BOUND_ROUNDS} rounds of {INTERVAL}s")


def _members(node: FedNode) -> dict[str, pb.Member]:
    reply = node.admin.ListMembers(pb.ListMembersRequest(), timeout=RPC_TIMEOUT)
    return {m.node_id: m for m in reply.members}


def _voters(node: FedNode, k: pb.Key) -> set[str]:
    belief = node.belief(k)
    return set() if belief is None else {v for t in belief.tallies for v in t.voters}


def _tally(node: FedNode, k: pb.Key) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    belief = node.belief(k)
    assert belief is not None
    return tuple(sorted((t.object, t.weight, tuple(sorted(t.voters))) for t in belief.tallies))


def _operators_see_the_fleet(node: FedNode, tmp_path: Path, revoked: bool) -> None:
    """`factnode members`, `factnode status --json` and the console's node page all list the
    nine members (the joiner revoked or not), though the node was configured with one seed."""
    listed = _cli(tmp_path / "home", "members", "--address", node.address)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[2:] if line.strip()}
    assert set(FLEET) | {JOINER} <= set(rows)
    assert ("revoked" in rows[JOINER]) is revoked
    status = _cli(tmp_path / "home", "status", "--json", "--address", node.address)
    assert status.returncode == 0, status.stderr
    members = {m["node_id"]: m for m in json.loads(status.stdout)["members"]}
    assert set(members) == set(FLEET) | {JOINER}
    assert bool(members[JOINER].get("revoked")) is revoked
    app = create_app(ConsoleSettings(node.address, timeout=RPC_TIMEOUT))
    with TestClient(app, base_url="http://127.0.0.1") as console:
        page = console.get("/node")
    assert page.status_code == 200
    member_rows = re.findall(r'<tr class="member">(.*?)</tr>', page.text, re.S)
    assert len(member_rows) == len(FLEET) + 1
    [joiner_row] = [r for r in member_rows if f"<td>{JOINER}<" in r]
    assert (">revoked<" in joiner_row) is revoked


def _digest_call(channel: grpc.Channel) -> Callable[[], object]:
    stub = pb_grpc.FederationServiceStub(channel)
    return lambda: stub.GetDigest(pb.DigestRequest(), timeout=RPC_TIMEOUT)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[str, FedNode]]:
    """Nine nodes with certificates from `factnode certs`, each seeded with the one before
    it (f1 with f8); none started. Every started node is stopped at teardown."""
    certs = tmp_path / "certs"
    made = _cli(tmp_path / "home", "certs", "--out", str(certs), *FLEET, JOINER)
    assert made.returncode == 0, made.stderr
    out = {
        n: FedNode(
            n,
            tmp_path / n,
            TlsIdentity(certs / f"{n}.crt", certs / f"{n}.key", certs / "ca.crt"),
            sync_interval=INTERVAL,
        )
        for n in [*FLEET, JOINER]
    }
    for i, n in enumerate(FLEET):
        out[n].seeds = [out[FLEET[i - 1]]]
    out[JOINER].seeds = [out["f1"]]
    yield out
    killed = [n.node_id for n in out.values() if n.proc is not None and n.stop() is None]
    assert not killed, f"nodes needed SIGKILL to stop: {killed}"


def _start(nodes: list[FedNode]) -> None:
    """Starts the nodes at once on fresh federation ports, again if a port was taken."""
    for attempt in range(3):
        for node in nodes:
            node.federation_port = free_port()
        for node in nodes:
            node.write_config()
            node.spawn()
        try:
            for node in nodes:
                node.wait_listening(START_SECONDS)
            return
        except StartError:
            for node in nodes:
                node.kill()
            if attempt == 2:
                raise


@pytest.mark.timeout(420)
def test_a_fleet_of_one_seed_each_converges_takes_a_joiner_and_drops_it_when_revoked(
    nodes: dict[str, FedNode], tmp_path: Path
) -> None:
    """Eight processes, one seed each: every node lists every member and holds identical
    tallies (eight voters); a ninth with one seed is listed and counted everywhere; revoked
    on one member, everywhere it is marked revoked, its vote stops counting, its links are
    refused and nobody dials it."""
    fleet = [nodes[n] for n in FLEET]
    _start(fleet)
    k = key(unique_ns("fleet"), "ana", "lives_in")
    at = event_time()
    for node in fleet:
        city = "Lisbon" if node.node_id in FLEET[:6] else "Porto"
        node.submit(k, city, source=f"agent:{node.node_id}", valid_from=at)

    def all_listed(among: list[FedNode], expected: set[str]) -> bool:
        return all(
            {n for n, m in _members(node).items() if m.incarnation} >= expected for node in among
        )

    learned = _within("every member listed by every node", lambda: all_listed(fleet, set(FLEET)))
    for node in fleet:  # the seed each was configured with is one of seven it now dials
        members = _members(node)
        assert members[node.node_id].self
        assert all(
            members[n].address == nodes[n].federation_address for n in FLEET if n != node.node_id
        )
    tallied = _within(
        "identical tallies with eight voters",
        lambda: (
            all(_voters(node, k) == set(FLEET) for node in fleet)
            and len({_tally(node, k) for node in fleet}) == 1
        ),
    )
    assert {(node.belief(k) or pb.Belief()).object for node in fleet} == {"Lisbon"}

    joiner = nodes[JOINER]
    _start([joiner])
    joiner.submit(k, "Lisbon", source="agent:f9", valid_from=at)
    everyone = [*fleet, joiner]
    joined = _within(
        "the joiner listed and counted by every node",
        lambda: (
            all_listed(everyone, {*FLEET, JOINER})
            and all(_voters(node, k) == {*FLEET, JOINER} for node in everyone)
        ),
    )

    _operators_see_the_fleet(nodes["f5"], tmp_path, revoked=False)

    crl = tmp_path / "certs" / "revoked.crl"
    signed = _cli(tmp_path / "home", "certs", "revoke", "--out", str(tmp_path / "certs"), JOINER)
    assert signed.returncode == 0 and crl.exists(), signed.stderr
    handed = _cli(tmp_path / "home", "revoke", "--address", nodes["f4"].address, str(crl))
    assert handed.returncode == 0 and JOINER in handed.stdout, handed.stderr
    dropped = _within(
        "the joiner revoked and uncounted on every node",
        lambda: all(
            _members(node)[JOINER].revoked and JOINER not in _voters(node, k) for node in fleet
        ),
    )
    for node in fleet:
        with peer_channel(joiner.tls, node) as ch:
            assert refused(_digest_call(ch)) == grpc.StatusCode.PERMISSION_DENIED

    def last_dials() -> dict[str, tuple[int, str]]:
        out = {}
        for node in fleet:
            status = node.admin.GetStatus(pb.GetStatusRequest(), timeout=RPC_TIMEOUT)
            for p in status.peers:
                if p.node_id == JOINER:
                    out[node.node_id] = (p.last_sync.ToNanoseconds(), p.last_error)
        return out

    _operators_see_the_fleet(nodes["f5"], tmp_path, revoked=True)
    before = last_dials()
    time.sleep(10 * INTERVAL)  # ten rounds of every node: none may reach the joiner
    assert last_dials() == before
    print(
        f"fleet of 8 (interval {INTERVAL}s, fanout 3): members listed in {learned:.1f}s, "
        f"identical tallies {tallied:.1f}s later, joiner listed and counted in {joined:.1f}s, "
        f"revocation everywhere in {dropped:.1f}s"
    )
