"""Issue 41, finding 1, reproduced over a real non-loopback address: `factnode console`
listens on a veth address in 10.x, and the attacker's requests come from another network
namespace created for the test.

Before: started in front of a node without tokens, the console served that node's operator
rights to anyone; with `--token` of an operator, `GET /key` from the other namespace
returned the value, `Host: 127.0.0.1` passed the host check, and `POST /key/erase` with no
Origin answered 303 and the fact was gone. Needs root and iproute2 (skipped, saying so,
otherwise)."""

from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from _console import OPERATOR, InProcessNode
from _e2e import CLI_TIMEOUT, START_TIMEOUT, factnode_command, isolated_env
from _processes import stop_process

from factnode.client import NotFound

EXIT_USAGE = 2
KEY = ("user:nina", "nina", "lives_in")
VALUE = "7 Hidden Street"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="needs root to create a network namespace (ip netns add)"
    ),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's `ip` command"),
]

# Run inside the other namespace: each request as raw HTTP (no redirect followed), printed
# as JSON. argv: host, port, then a JSON list of [method, path, headers, body].
ATTACKER = """
import http.client, json, sys
host, port, steps = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
out = []
for method, path, headers, body in steps:
    c = http.client.HTTPConnection(host, port, timeout=10)
    c.request(method, path, body=body or None, headers=headers)
    r = c.getresponse()
    out.append({"status": r.status, "location": r.getheader("location") or "",
                "cookie": r.getheader("set-cookie") or "",
                "body": r.read().decode("utf-8", "replace")})
    c.close()
print(json.dumps(out))
"""


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=CLI_TIMEOUT)


@pytest.fixture
def netns() -> Iterator[tuple[str, str, str]]:
    """A network namespace joined to this one by a veth pair: (namespace, this side's
    address, the other side's), in a random 10.x /24; removed afterwards."""
    tag = secrets.token_hex(3)
    name, here, there = f"fn-console-{tag}", f"fnc{tag}a", f"fnc{tag}b"
    subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250) + 1}"
    ours, theirs = f"{subnet}.1", f"{subnet}.2"
    ip("netns", "add", name)
    try:
        ip("link", "add", here, "type", "veth", "peer", "name", there)
        ip("link", "set", there, "netns", name)
        ip("addr", "add", f"{ours}/24", "dev", here)
        ip("link", "set", here, "up")
        ip("netns", "exec", name, "ip", "addr", "add", f"{theirs}/24", "dev", there)
        ip("netns", "exec", name, "ip", "link", "set", there, "up")
        ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield name, ours, theirs
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True, timeout=CLI_TIMEOUT)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=CLI_TIMEOUT)


def announced_port(proc: subprocess.Popen[str]) -> int:
    """The port in the console's first stdout line, waited for at most START_TIMEOUT."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        line = lines.get(timeout=START_TIMEOUT)
    except queue.Empty:
        raise AssertionError("the console announced nothing") from None
    assert line.startswith("factnode console on http://"), line
    return int(line.split()[3].rsplit(":", 1)[1])


def attack(ns: str, host: str, port: int, steps: list[list[object]]) -> list[dict[str, str]]:
    done = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", ATTACKER, host, str(port),
         json.dumps(steps)],
        capture_output=True, text=True, timeout=CLI_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def held(node: InProcessNode) -> bool:
    with node.client() as c:
        try:
            return c.belief(KEY).object == VALUE
        except NotFound:
            return False


def test_a_public_console_in_front_of_a_node_without_tokens_refuses_to_start(
    netns: tuple[str, str, str], tmp_path: Path
) -> None:
    """On a 10.x address, in front of a node without tokens, the console exits 2 naming
    the node's `tokens` setting instead of serving its operator rights to the network."""
    _, ours, _ = netns
    node = InProcessNode(tmp_path / "open", tokens=False)
    try:
        done = subprocess.run(
            factnode_command("console", "--address", node.address, "--listen", f"{ours}:0"),
            capture_output=True, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL,
            env=isolated_env(tmp_path / "home"),
        )  # fmt: skip
    finally:
        node.close()
    assert done.returncode == EXIT_USAGE, done.stdout
    assert "is not loopback" in done.stderr and "`tokens`" in done.stderr
    assert "Traceback" not in done.stderr


def test_from_another_namespace_no_session_reads_or_erases_nothing(
    netns: tuple[str, str, str], tmp_path: Path
) -> None:
    """The console (given an operator's --token, as in the finding) on a 10.x address: from
    the other namespace, GET /key is a redirect to /login with no value in it, Host
    127.0.0.1 is refused, POST /key/erase with no Origin is refused (403), one with a
    matching Origin but no session is sent to /login, and the fact survives; an operator
    signing in from there does see it."""
    ns, ours, _ = netns
    node = InProcessNode(tmp_path / "node")
    with node.client() as c:
        c.submit(KEY, VALUE, "user_stated", source="nina")
    env = {**isolated_env(tmp_path / "home"), "FACTNODE_TOKEN": OPERATOR}
    proc = subprocess.Popen(
        factnode_command("console", "--address", node.address, "--listen", f"{ours}:0"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=env,
    )  # fmt: skip
    try:
        port = announced_port(proc)
        origin = f"http://{ours}:{port}"
        key = dict(zip(("namespace", "subject", "predicate"), KEY, strict=True))
        path = "/key?" + urlencode(key)
        form = urlencode({**key, "scope": "key", "confirm": "/".join(KEY), "reason": "x"})
        posted = {"Content-Type": "application/x-www-form-urlencoded"}
        get, other_host, bare_erase, forged_erase = attack(ns, ours, port, [
            ["GET", path, {}, ""],
            ["GET", path, {"Host": "127.0.0.1"}, ""],
            ["POST", "/key/erase", posted, form],
            ["POST", "/key/erase", {**posted, "Origin": origin}, form],
        ])  # fmt: skip
        assert get["status"] == 303 and get["location"].startswith("/login?")
        assert VALUE not in get["body"]
        assert other_host["status"] == 400 and VALUE not in other_host["body"]
        assert bare_erase["status"] == 403
        assert forged_erase["status"] == 303 and forged_erase["location"].startswith("/login")
        assert held(node)

        login = urlencode({"token": OPERATOR, "next": path})
        [signed] = attack(ns, ours, port, [["POST", "/login", {**posted, "Origin": origin}, login]])
        assert signed["status"] == 303 and "HttpOnly" in signed["cookie"]
        cookie = signed["cookie"].split(";", 1)[0]
        [page] = attack(ns, ours, port, [["GET", path, {"Cookie": cookie}, ""]])
        assert page["status"] == 200 and VALUE in page["body"]
    finally:
        code = stop_process(proc, signal.SIGTERM)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
        node.close()
    assert code == 0
