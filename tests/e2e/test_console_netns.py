"""Issue 41, finding 1, reproduced over a real non-loopback address: `factnode console`
listens on a veth address in 10.x, and the attacker's requests come from another network
namespace created for the test.

Before: started in front of a node without tokens, the console served that node's operator
rights to anyone; with `--token` of an operator, `GET /key` from the other namespace
returned the value, `Host: 127.0.0.1` passed the host check, and `POST /key/erase` with no
Origin answered 303 and the fact was gone.

And in a real browser: Chromium, started inside the other namespace, uses the console at
its 10.x address. A key's page asks for a sign-in and shows nothing of the key; a reader
sees the value but no Erase, with an HttpOnly, SameSite=Strict session cookie, and an erase
form posted with the reader's session is refused; an operator, in a new browser, erases.

Needs root and iproute2 (and, for the browser, chromium and Playwright): skipped, saying
so, otherwise."""

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
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from _console import OPERATOR, READER, InProcessNode, chromium_path
from _e2e import CLI_TIMEOUT, START_TIMEOUT, factnode_command, isolated_env
from _processes import stop_process

from factnode.client import NotFound

EXIT_USAGE = 2
KEY = ("user:nina", "nina", "lives_in")
VALUE = "7 Hidden Street"
SESSION_HOURS = 1
UI_TIMEOUT_MS = 15_000  # each wait of the browser in the other namespace
BROWSER_TIMEOUT = 50.0  # seconds for one run of the BROWSER script, Chromium's start included
# The browser test's bound: the node and console starting, two BROWSER runs, the stop.
BROWSER_TEST_TIMEOUT = 180

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


# Run inside the other namespace: Chromium (Playwright) signing in to the console as one
# user. stdin: a JSON object {chromium, url (a key's page), token, role ("reader" or
# "operator"), key, screenshot, ms}; stdout: what the browser saw, as JSON, for the test to
# judge. The script only waits (each wait bounded by `ms`) for the page that should follow.
BROWSER = """
import json, os, socket, sys
from urllib.parse import urlsplit
from playwright.sync_api import expect, sync_playwright

a = json.load(sys.stdin)
parts = urlsplit(a["url"])
with socket.create_connection((parts.hostname, parts.port), timeout=10) as s:
    out = {"netns": os.readlink("/proc/self/ns/net"), "local_address": s.getsockname()[0]}
expect.set_options(timeout=a["ms"])
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=a["chromium"], timeout=a["ms"])
    try:
        out["browser"] = browser.version
        pg = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
        pg.set_default_timeout(a["ms"])
        refused = []
        pg.on("console", lambda m: refused.append(m.text)
              if "Content Security Policy" in m.text else None)
        text = lambda: pg.locator("body").inner_text()
        pg.goto(a["url"])
        out["first"] = {"path": urlsplit(pg.url).path, "text": text()}
        form = pg.locator("#login")
        form.locator("input[name=token]").fill(a["token"])
        form.get_by_role("button", name="Sign in").click()
        expect(pg.locator("#user")).to_contain_text("signed in (" + a["role"] + ")")
        out["signed_in"] = {"url": pg.url, "user": pg.locator("#user").inner_text(),
                            "page": pg.locator("#page").inner_text(),
                            "erase_forms": pg.locator("#erase").count(),
                            "cookies": pg.context.cookies(),
                            "document_cookie": pg.evaluate("document.cookie")}
        if a["role"] == "reader":
            pg.screenshot(path=a["screenshot"], full_page=True)
            # The form an operator's page would hold, posted with the reader's session.
            pg.evaluate('''([ns, subject, predicate]) => {
                const form = document.createElement("form");
                form.method = "post"; form.action = "/key/erase"; form.id = "forged";
                const fields = {namespace: ns, subject, predicate, scope: "key",
                                confirm: `${ns}/${subject}/${predicate}`, reason: "request #41"};
                for (const [name, value] of Object.entries(fields)) {
                    const input = document.createElement("input");
                    input.type = "hidden"; input.name = name; input.value = value;
                    form.appendChild(input);
                }
                const button = document.createElement("button");
                button.type = "submit"; button.textContent = "Erase for good";
                form.appendChild(button);
                document.querySelector("main").appendChild(form);
            }''', a["key"])
            pg.locator("#forged button").click()
            expect(pg.locator("#error")).to_be_visible()
            out["forged"] = {"error": pg.locator("#error").inner_text(),
                             "page": pg.locator("#page").inner_text()}
            pg.get_by_role("button", name="Sign out").click()
            expect(pg.locator("#why")).to_be_visible()
            out["signed_out"] = {"why": pg.locator("#why").inner_text(),
                                 "cookies": pg.context.cookies()}
            pg.goto(a["url"])
            out["again"] = {"path": urlsplit(pg.url).path, "text": text()}
        else:
            erase = pg.locator("#erase")
            erase.locator("input[name=confirm]").fill("/".join(a["key"]))
            erase.locator("input[name=reason]").fill("request #41")
            erase.get_by_role("button", name="Erase for good").click()
            expect(pg.locator("#result")).to_be_visible()
            out["erased"] = {"result": pg.locator("#result").inner_text(), "text": text()}
        out["csp_refused"] = refused
    finally:
        browser.close()
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


def browse(ns: str, tmp_path: Path, **args: object) -> dict[str, Any]:
    """One run of BROWSER in namespace `ns`, killed (its whole process group, Chromium
    included) if it outlasts BROWSER_TIMEOUT."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-c", BROWSER],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=isolated_env(tmp_path / "browser-home"), start_new_session=True,
    )  # fmt: skip
    request = json.dumps({"chromium": chromium_path(), "ms": UI_TIMEOUT_MS, **args})
    try:
        out, err = proc.communicate(request, timeout=BROWSER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=CLI_TIMEOUT)
        raise AssertionError(f"the browser took over {BROWSER_TIMEOUT}s: {err}") from None
    assert proc.returncode == 0, err
    return dict(json.loads(out))


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


@pytest.mark.browser
@pytest.mark.timeout(BROWSER_TEST_TIMEOUT)
@pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
@pytest.mark.skipif(find_spec("playwright") is None, reason="playwright is not installed")
def test_chromium_in_another_namespace_signs_in_as_reader_then_operator(
    netns: tuple[str, str, str], tmp_path: Path
) -> None:
    """Chromium runs inside the other namespace (its traffic comes from the 10.x peer
    address) and opens a key's page at the console's 10.x address: it is sent to /login
    with nothing of the key shown. A reader signs in: the value is shown, no Erase form; the
    session cookie is HttpOnly, SameSite=Strict, hidden from scripts and expiring with
    --session-hours; an erase form posted with that session is refused by the node
    (PERMISSION_DENIED, said on the page) and the value stays, though the console itself
    holds an operator's --token; after signing out the key asks for a sign-in again. An
    operator, in a new browser, erases through the key's page, and the value is gone."""
    ns, ours, theirs = netns
    node = InProcessNode(tmp_path / "node")
    with node.client() as c:
        c.submit(KEY, VALUE, "user_stated", source="nina")
    env = {**isolated_env(tmp_path / "home"), "FACTNODE_TOKEN": OPERATOR}
    proc = subprocess.Popen(
        factnode_command("console", "--address", node.address, "--listen", f"{ours}:0",
                         "--session-hours", str(SESSION_HOURS)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=env,
    )  # fmt: skip
    try:
        port = announced_port(proc)
        key = dict(zip(("namespace", "subject", "predicate"), KEY, strict=True))
        url = f"http://{ours}:{port}/key?" + urlencode(key)
        shot = tmp_path / "reader.png"

        reader = browse(
            ns, tmp_path, url=url, token=READER, role="reader", key=list(KEY),
            screenshot=str(shot),
        )  # fmt: skip
        assert reader["netns"] != os.readlink("/proc/self/ns/net")
        assert reader["local_address"] == theirs
        assert reader["first"]["path"] == "/login"
        assert VALUE not in reader["first"]["text"]
        signed = reader["signed_in"]
        assert signed["url"] == url and "signed in (reader)" in signed["user"]
        assert VALUE in signed["page"] and signed["erase_forms"] == 0
        [cookie] = signed["cookies"]
        assert cookie["name"] == "factnode_console_session" and cookie["domain"] == ours
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert 0 < cookie["expires"] - time.time() <= SESSION_HOURS * 3600 + 5
        assert signed["document_cookie"] == ""
        assert shot.stat().st_size > 0
        assert "PERMISSION_DENIED" in reader["forged"]["error"]
        assert "need an operator's token" in reader["forged"]["error"]
        assert VALUE in reader["forged"]["page"]
        assert "You are signed out" in reader["signed_out"]["why"]
        assert reader["signed_out"]["cookies"] == []
        assert reader["again"]["path"] == "/login"
        assert VALUE not in reader["again"]["text"]
        assert reader["csp_refused"] == []
        assert held(node)

        operator = browse(
            ns, tmp_path, url=url, token=OPERATOR, role="operator", key=list(KEY), screenshot=""
        )
        assert operator["first"]["path"] == "/login"
        assert VALUE not in operator["first"]["text"]
        signed = operator["signed_in"]
        assert signed["url"] == url and "signed in (operator)" in signed["user"]
        assert VALUE in signed["page"] and signed["erase_forms"] == 1
        assert "ERASED" in operator["erased"]["result"]
        assert VALUE not in operator["erased"]["text"]
        assert operator["csp_refused"] == []
        assert not held(node)
    finally:
        code = stop_process(proc, signal.SIGTERM)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
        node.close()
    assert code == 0
