"""Erasure receipts across a fleet of real processes (specification §6, "Erasure receipts";
§7): six `factnode serve` processes on loopback, over mTLS with certificates made by
`factnode certs`, each configured with one seed address. An erasure made on one member is
confirmed by a signed receipt of every member, and every member shows it complete; a member
that is down when the erasure is made is shown as waited for and confirms once it is back;
a revoked member is no longer waited for and is shown as revoked; `factnode erase --wait`
exits 0 once every current member has confirmed, 10 naming the member still missing.

Bound. Each node runs its own rounds every `INTERVAL` seconds with `fanout` 3 (the default).
In a push-pull round a node meets 3 of the 5 others, so an item one node holds reaches all
six within about ceil(log4 6) + 1 = 3 rounds; a receipt is signed by each member when the
tombstone reaches it and must then spread back to every member, so full coverage on every
member is predicted within about twice that, 6 rounds (3 s). Each phase may take
`BOUND_ROUNDS` rounds of the interval: ten times the prediction, because six Python
processes share two cores with other work (a round takes longer than its interval there),
and the same room `test_fleet_processes.py` gives its phases in proportion. The measured
times are printed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

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
    unique_ns,
)

from factnode.api.v1 import factnode_pb2 as pb
from factnode.client import Client

FLEET = [f"m{i}" for i in range(1, 7)]
INTERVAL = 0.5  # seconds between a node's own rounds
PREDICTED_ROUNDS = 6  # tombstone out to all (about 3 rounds), then every receipt back (3)
BOUND_ROUNDS = 10 * PREDICTED_ROUNDS  # 30 s at INTERVAL: room for a loaded shared machine
POLL = 0.25
START_SECONDS = 120.0  # six Python processes starting at once on a shared two-core machine


def _cli(home: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "factnode.cli", *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=isolated_env(home),
    )  # fmt: skip


def _within(what: str, done: Callable[[], bool], rounds: int = BOUND_ROUNDS) -> float:
    """Polls `done` until true; the seconds it took, or AssertionError past the bound."""
    start = time.monotonic()
    while time.monotonic() - start < rounds * INTERVAL:
        if done():
            return time.monotonic() - start
        time.sleep(POLL)
    raise AssertionError(f"{what}: not within {rounds} rounds of {INTERVAL}s")


def _coverage(node: FedNode, erasure_id: str) -> pb.ErasureCoverage:
    return node.admin.GetErasure(pb.GetErasureRequest(erasure_id=erasure_id), timeout=RPC_TIMEOUT)


def _held(node: FedNode, erasure_id: str) -> pb.ErasureCoverage | None:
    """The node's coverage of the erasure, or None while it does not hold the erasure."""
    listed = node.admin.ListErasures(pb.ListErasuresRequest(page_size=100), timeout=RPC_TIMEOUT)
    return next((e for e in listed.erasures if e.erasure_id == erasure_id), None)


def _receipts(c: pb.ErasureCoverage | None) -> set[str]:
    return set() if c is None else {r.node_id for r in c.receipts}


def _members(node: FedNode) -> dict[str, pb.Member]:
    reply = node.admin.ListMembers(pb.ListMembersRequest(), timeout=RPC_TIMEOUT)
    return {m.node_id: m for m in reply.members}


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[str, FedNode]]:
    """Six nodes with certificates from `factnode certs`, each seeded with the one before it
    (m1 with m6); none started. Every started node is stopped at teardown."""
    certs = tmp_path / "certs"
    made = _cli(tmp_path / "home", "certs", "--out", str(certs), *FLEET)
    assert made.returncode == 0, made.stderr
    out = {
        n: FedNode(
            n,
            tmp_path / n,
            TlsIdentity(certs / f"{n}.crt", certs / f"{n}.key", certs / "ca.crt"),
            sync_interval=INTERVAL,
        )
        for n in FLEET
    }
    for i, n in enumerate(FLEET):
        out[n].seeds = [out[FLEET[i - 1]]]
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


def _restart(node: FedNode) -> None:
    """Starts a stopped node again on its own federation port and data, as an operator would."""
    node.spawn()
    node.wait_listening(START_SECONDS)


def _erase(home: Path, node: FedNode, k: pb.Key, *extra: str) -> subprocess.CompletedProcess[str]:
    """`factnode erase --key` on `node`, with `extra` options (`--json` for a document)."""
    return _cli(
        home, "erase", "--address", node.address, "--reason", "data-subject request",
        "--operator", "dpo", "--key", k.namespace, k.subject, k.predicate, *extra,
    )  # fmt: skip


@pytest.mark.timeout(600)
def test_every_member_confirms_an_erasure_the_down_one_later_the_revoked_one_never(
    nodes: dict[str, FedNode], tmp_path: Path
) -> None:
    """An erasure on m1 is confirmed by six receipts on every member (`erase --wait` exits
    0); with m4 stopped, the next one waits for m4 (`erase --wait` exits 10 naming it) until
    m4 is back and confirms; with m5 stopped and then revoked, m5 is shown as revoked and not
    waited for, and `erase --wait` exits 0 without it."""
    home = tmp_path / "home"
    fleet = [nodes[n] for n in FLEET]
    _start(fleet)
    learned = _within(
        "every member listed by every node",
        lambda: all(
            {n for n, m in _members(node).items() if m.incarnation} >= set(FLEET) for node in fleet
        ),
        rounds=240,
    )
    ns = unique_ns("receipts")
    at = event_time()

    def spread(k: pb.Key, among: list[FedNode]) -> None:
        nodes["m2"].submit(k, "Lisbon", source="agent:m2", valid_from=at)
        _within("the fact held by every running node", lambda: all(n.belief(k) for n in among))

    # -- everyone confirms ------------------------------------------------------------------
    k1 = key(ns, "ana", "lives_in")
    spread(k1, fleet)
    started = time.monotonic()
    waited = _erase(
        home, nodes["m1"], k1, "--wait", "--timeout", str(BOUND_ROUNDS * INTERVAL), "--json"
    )
    assert waited.returncode == 0, waited.stdout + waited.stderr
    doc = json.loads(waited.stdout)
    first = doc["erasure_id"]
    assert doc["coverage"]["complete"] and doc["coverage"]["waiting"] == []
    assert doc["coverage"]["summary"] == "confirmed by 6 of 6 members"
    confirmed_on_m1 = time.monotonic() - started
    everywhere = _within(
        "six receipts on every member",
        lambda: all(_receipts(_held(n, first)) == set(FLEET) for n in fleet),
    )
    everywhere += confirmed_on_m1
    for node in fleet:
        with Client(node.address, timeout=RPC_TIMEOUT) as client:
            c = client.erasure(first)
        assert c.complete and c.waiting == () and c.revoked == (), node.node_id
        assert sorted(r.node_id for r in c.receipts) == FLEET
        assert all(r.removed == 1 for r in c.receipts), c.receipts  # each held m2's fact
        assert c.origin_node == "m1" and c.summary == "confirmed by 6 of 6 members"
        shown = _cli(home, "erasures", "show", first, "--address", node.address)
        assert shown.returncode == 0, shown.stderr
        assert "confirmed by 6 of 6 members" in shown.stdout
        rows = _member_rows(shown.stdout)
        assert {n: row[1] for n, row in rows.items()} == {n: "confirmed" for n in FLEET}
    print(f"\n$ factnode erasures show {first}  (on m6)\n{shown.stdout}")

    # -- a member down when the erasure is made waits, then confirms ------------------------
    m4 = nodes["m4"]
    assert m4.stop() is not None
    running = [n for n in fleet if n is not m4]
    k2 = key(ns, "ana", "works_at")
    spread(k2, running)
    timed_out = _erase(home, nodes["m1"], k2, "--wait", "--timeout", "3", "--json")
    assert timed_out.returncode == 10, timed_out.stdout + timed_out.stderr
    doc = json.loads(timed_out.stdout)
    second = doc["erasure_id"]
    assert not doc["coverage"]["complete"] and "m4" in doc["coverage"]["waiting"]
    assert "m4" in doc["coverage"]["summary"]
    as_text = _erase(home, nodes["m1"], key(ns, "ana", "unheard"), "--wait", "--timeout", "1")
    assert as_text.returncode == 10 and "waiting: " in as_text.stdout and "m4" in as_text.stdout
    waiting = _within(
        "every running member waits for m4 alone",
        lambda: all(
            (c := _held(n, second)) is not None
            and list(c.waiting) == ["m4"]
            and _receipts(c) == {n.node_id for n in running}
            for n in running
        ),
    )
    assert _coverage(nodes["m3"], second).summary == "confirmed by 5 of 6 members; waiting: m4"
    listed = _cli(home, "erasures", "--address", nodes["m6"].address)
    assert listed.returncode == 0, listed.stderr
    [line] = [ln for ln in listed.stdout.splitlines() if ln.startswith(second)]
    assert "waiting" in line and "confirmed by 5 of 6 members; waiting: m4" in line
    shown = _cli(home, "erasures", "show", second, "--address", nodes["m6"].address)
    assert shown.returncode == 0, shown.stderr
    assert _member_rows(shown.stdout)["m4"][1:3] == ["waiting:", "no"]
    print(f"$ factnode erasures show {second}  (on m6, m4 down)\n{shown.stdout}")

    back = time.monotonic()
    _restart(m4)
    caught_up = _within(
        "m4 back: six receipts on every member",
        lambda: all(
            (c := _held(n, second)) is not None and c.complete and _receipts(c) == set(FLEET)
            for n in fleet
        ),
    )
    restarted = time.monotonic() - back - caught_up
    m4_receipt = next(r for r in _coverage(m4, second).receipts if r.node_id == "m4")
    assert m4_receipt.removed == 0  # the fact never reached m4: it held none, and says so

    # -- a revoked member is not waited for -------------------------------------------------
    m5 = nodes["m5"]
    assert m5.stop() is not None
    running = [n for n in fleet if n is not m5]
    k3 = key(ns, "ana", "email")
    spread(k3, running)
    made = _erase(home, nodes["m1"], k3, "--json")
    assert made.returncode == 0, made.stderr
    third = json.loads(made.stdout)["erasure_id"]
    _within(
        "every running member waits for m5",
        lambda: all(
            (c := _held(n, third)) is not None and list(c.waiting) == ["m5"] for n in running
        ),
    )
    crl = tmp_path / "certs" / "revoked.crl"
    signed = _cli(home, "certs", "revoke", "--out", str(tmp_path / "certs"), "m5")
    assert signed.returncode == 0 and crl.exists(), signed.stderr
    handed = _cli(home, "revoke", "--address", nodes["m2"].address, str(crl))
    assert handed.returncode == 0 and "m5" in handed.stdout, handed.stderr
    revoked = _within(
        "m5 revoked and not waited for on every running member",
        lambda: all(
            (c := _coverage(n, third)).complete and list(c.revoked) == ["m5"] for n in running
        ),
    )
    for node in running:
        c = _coverage(node, third)
        assert c.summary == "confirmed by 5 of 5 members; revoked: m5", node.node_id
        assert _receipts(c) == {n.node_id for n in running}
        # m5's receipt of the first erasure is kept and shown, not counted.
        c = _coverage(node, first)
        assert c.complete and list(c.revoked) == ["m5"] and _receipts(c) == set(FLEET)
        assert c.summary == "confirmed by 5 of 5 members; revoked: m5"
    shown = _cli(home, "erasures", "show", third, "--address", nodes["m6"].address)
    assert shown.returncode == 0, shown.stderr
    assert _member_rows(shown.stdout)["m5"][1:3] == ["revoked:", "not"]
    print(f"$ factnode erasures show {third}  (on m6, m5 down and revoked)\n{shown.stdout}")
    shown = _cli(home, "erasures", "show", first, "--address", nodes["m6"].address)
    assert _member_rows(shown.stdout)["m5"][1:3] == ["revoked", "since"]

    k4 = key(ns, "ana", "phone")
    spread(k4, running)
    started = time.monotonic()
    waited = _erase(
        home, nodes["m3"], k4, "--wait", "--timeout", str(BOUND_ROUNDS * INTERVAL), "--json"
    )
    assert waited.returncode == 0, waited.stdout + waited.stderr
    doc = json.loads(waited.stdout)
    assert doc["coverage"]["summary"] == "confirmed by 5 of 5 members; revoked: m5"
    without_m5 = time.monotonic() - started
    print(
        f"fleet of 6 (interval {INTERVAL}s, fanout 3, bound {BOUND_ROUNDS} rounds): members "
        f"listed in {learned:.1f}s; erasure confirmed on m1 in {confirmed_on_m1:.1f}s, six "
        f"receipts on every member in {everywhere:.1f}s; five waiting for m4 in {waiting:.1f}s, "
        f"m4 restarted in {restarted:.1f}s and six receipts everywhere {caught_up:.1f}s later; "
        f"m5 revoked and not waited for in {revoked:.1f}s; erase --wait without m5 "
        f"{without_m5:.1f}s"
    )


def _member_rows(shown: str) -> dict[str, list[str]]:
    """`factnode erasures show`'s table, by member: each row's words."""
    rows = {}
    for line in shown.splitlines()[2:]:
        words = line.split()
        if words and words[0] in FLEET:
            rows[words[0]] = words
    return rows
