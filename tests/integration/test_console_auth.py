"""The console's sign-in against a real node served in-process (Starlette's TestClient): every
page and action acts with the signed-in user's own token, never the console's; a session
cookie that is HttpOnly, SameSite=Strict and expiring; sign-out; the Host check; and a POST
without Origin or Referer refused. Issue 41, finding 1."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from _console import OPERATOR, READER, InProcessNode, sign_in
from starlette.testclient import TestClient

from factnode.client import Client, NotFound
from factnode.console import ConsoleSettings, create_app
from factnode.console._auth import Sessions, User, host_names, local_path, same_origin

PUBLIC = "http://10.9.8.7"  # a console listening beyond loopback (no socket: TestClient)
LOCAL = "http://127.0.0.1"
PAGES = ("/queue", "/decisions", "/node")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node with a reader and an operator token."""
    n = InProcessNode(tmp_path_factory.mktemp("console-auth"))
    try:
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def open_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node without tokens (loopback only; every caller is its operator)."""
    n = InProcessNode(tmp_path_factory.mktemp("console-open"), tokens=False)
    try:
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def grpc_client(node: InProcessNode) -> Iterator[Client]:
    with node.client() as c:
        yield c


def console(address: str, base: str, **settings: object) -> TestClient:
    """The console as served at `base` (its --listen host is base's), with `settings`."""
    host = urlsplit(base).hostname or ""
    config = {"listen": f"{host}:7480", "allowed_hosts": (host,), **settings}
    app = create_app(ConsoleSettings(address, timeout=5, **config))  # type: ignore[arg-type]
    return TestClient(app, base_url=base, follow_redirects=False)


def fact(grpc_client: Client) -> tuple[str, str]:
    """A fresh key holding a value no other test uses: its page's URL and the value."""
    space, value = f"user:{uuid.uuid4().hex[:10]}", f"secret-{uuid.uuid4().hex[:8]}"
    grpc_client.submit((space, "ana", "lives_in"), value, "user_stated", source="ana")
    return key_url(space), value


def key_url(space: str) -> str:
    return "/key?" + urlencode({"namespace": space, "subject": "ana", "predicate": "lives_in"})


def erase_form(url: str) -> dict[str, str]:
    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    phrase = f"{q['namespace']}/{q['subject']}/{q['predicate']}"
    return {**q, "scope": "key", "confirm": phrase, "reason": "request #41"}


def still_there(grpc_client: Client, url: str, value: str) -> bool:
    q = parse_qs(urlsplit(url).query)
    try:
        belief = grpc_client.belief((q["namespace"][0], "ana", "lives_in"))
    except NotFound:
        return False
    return belief.object == value


def test_without_a_session_a_public_console_sends_every_page_to_sign_in(
    node: InProcessNode, grpc_client: Client
) -> None:
    """Beyond loopback, a browser without a session gets a redirect to /login (coming back
    afterwards) from every page and action, and no value in any body; a stream gets 401."""
    url, value = fact(grpc_client)
    with console(node.address, PUBLIC) as c:
        for path in (url, *PAGES):
            r = c.get(path)
            assert r.status_code == 303, path
            location = urlsplit(r.headers["location"])
            assert location.path == "/login" and parse_qs(location.query)["next"] == [path]
            assert value not in r.text
        posted = c.post("/key/erase", data=erase_form(url), headers={"Origin": PUBLIC})
        assert posted.status_code == 303 and posted.headers["location"].startswith("/login")
        assert c.get("/decisions/live", params={"after": "0"}).status_code == 401
        page = c.get("/login")
        assert page.status_code == 200 and 'name="token"' in page.text
    assert still_there(grpc_client, url, value)


def test_the_consoles_own_token_never_acts_for_a_browser(
    node: InProcessNode, grpc_client: Client
) -> None:
    """Even on loopback, a console given an operator's token (--token) shows a browser
    without a session nothing of a node that has tokens, and erases nothing for it: it asks
    for a sign-in."""
    url, value = fact(grpc_client)
    with console(node.address, LOCAL, token=OPERATOR) as c:
        r = c.get(url)
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        assert value not in r.text
        posted = c.post("/key/erase", data=erase_form(url), headers={"Origin": LOCAL})
        assert posted.status_code == 303 and posted.headers["location"].startswith("/login")
    assert still_there(grpc_client, url, value)


def test_sign_in_sets_a_strict_http_only_expiring_cookie_and_acts_with_that_token(
    node: InProcessNode, grpc_client: Client
) -> None:
    """An operator's token, checked by the node, becomes a session cookie (HttpOnly,
    SameSite=Strict, Max-Age of the session, path /, not Secure over plain HTTP); the
    pages then show the key, the operator's actions and who is signed in."""
    url, value = fact(grpc_client)
    with console(node.address, PUBLIC, session_seconds=3600.0) as c:
        answer = c.post("/login", data={"token": OPERATOR, "next": url}, headers={"Origin": PUBLIC})
        assert answer.status_code == 303 and answer.headers["location"] == url
        cookie = answer.headers["set-cookie"]
        attributes = {a.strip().lower() for a in cookie.split(";")}
        assert {"httponly", "samesite=strict", "max-age=3600", "path=/"} <= attributes
        assert "secure" not in attributes and OPERATOR not in cookie
        page = c.get(url)
        assert page.status_code == 200 and value in page.text
        assert 'id="erase"' in page.text and "signed in (operator)" in page.text
        assert page.headers["cache-control"] == "no-store"
        for path in PAGES:
            assert c.get(path).status_code == 200, path


def test_a_reader_is_refused_resolve_and_erase_by_the_node_and_told_so(
    node: InProcessNode, grpc_client: Client
) -> None:
    """A reader signs in and reads; an erase or retract posted anyway (no buttons are shown)
    is refused by the node with PERMISSION_DENIED, said at the top of the page (403), and the
    fact survives."""
    url, value = fact(grpc_client)
    with console(node.address, PUBLIC) as c:
        sign_in(c, PUBLIC, READER, url)
        page = c.get(url)
        assert page.status_code == 200 and value in page.text
        assert 'id="erase"' not in page.text and "signed in (reader)" in page.text
        for action in ("erase", "retract"):
            refused = c.post(f"/key/{action}", data=erase_form(url), headers={"Origin": PUBLIC})
            assert refused.status_code == 403, action
            assert "PERMISSION_DENIED" in refused.text and 'role="alert"' in refused.text
            assert "need an operator&#39;s token" in refused.text
        assert c.get("/queue").status_code == 403  # the queue is the node's operators'
    assert still_there(grpc_client, url, value)


def test_an_operator_erases_with_their_own_session(
    node: InProcessNode, grpc_client: Client
) -> None:
    """Signed in as an operator, the typed erase goes through and the value is gone."""
    url, value = fact(grpc_client)
    with console(node.address, PUBLIC) as c:
        sign_in(c, PUBLIC, OPERATOR, url)
        done = c.post("/key/erase", data=erase_form(url), headers={"Origin": PUBLIC})
        assert done.status_code == 303
        shown = c.get(done.headers["location"])
        assert "ERASED" in shown.text and value not in shown.text
    assert not still_there(grpc_client, url, value)


def test_a_post_without_origin_or_referer_is_refused_even_signed_in(
    node: InProcessNode, grpc_client: Client
) -> None:
    """With a valid session, an erase carrying neither Origin nor Referer (or Origin null,
    or another site's) is refused with 403 and erases nothing; so are a sign-in and a
    sign-out posted that way."""
    url, value = fact(grpc_client)
    with console(node.address, PUBLIC) as c:
        sign_in(c, PUBLIC, OPERATOR, url)
        for headers in ({}, {"Origin": "null"}, {"Origin": "http://evil.example"},
                        {"Referer": "http://evil.example/x"}):  # fmt: skip
            refused = c.post("/key/erase", data=erase_form(url), headers=headers)
            assert refused.status_code == 403 and "refused" in refused.text, headers
        assert c.post("/login", data={"token": OPERATOR}).status_code == 403
        assert c.post("/logout").status_code == 403
        assert c.get(url).status_code == 200  # still signed in: the sign-out was refused
        by_referer = c.post("/key/erase", data=erase_form(url), headers={"Referer": url})
        assert by_referer.status_code == 403  # a relative Referer names no origin
    assert still_there(grpc_client, url, value)


def test_unknown_and_malformed_tokens_get_no_session(node: InProcessNode) -> None:
    """A token the node does not know is refused in words (401) and sets no cookie; an
    empty one or one with spaces is refused naming the field before any call."""
    with console(node.address, PUBLIC) as c:
        for token, status, words in (
            ("not-a-token-of-this-node", 401, "the node does not know this token"),
            ("", 400, "is required"),
            ("two words here, long enough", 400, "visible ASCII"),
        ):
            r = c.post("/login", data={"token": token}, headers={"Origin": PUBLIC})
            assert r.status_code == status and words in r.text, token
            assert "<code>token</code>" in r.text or status == 401
            assert "set-cookie" not in r.headers
        assert c.get("/queue").status_code == 303


def test_sign_out_ends_the_session_on_the_console_too(node: InProcessNode) -> None:
    """After signing out the cookie is cleared, and the old session id, replayed, no longer
    works."""
    with console(node.address, PUBLIC) as c:
        sign_in(c, PUBLIC, OPERATOR)
        sid = c.cookies.get("factnode_console_session")
        assert sid and c.get("/node").status_code == 200
        out = c.post("/logout", headers={"Origin": PUBLIC})
        assert out.status_code == 303 and out.headers["location"] == "/login?why=signed-out"
        assert 'factnode_console_session=""' in out.headers["set-cookie"]
        c.cookies.set("factnode_console_session", sid)
        assert c.get("/node").status_code == 303


def test_a_session_expires(node: InProcessNode) -> None:
    """A session past its lifetime is gone: the next page asks for a sign-in."""
    now = [1000.0]
    with console(node.address, PUBLIC) as c:
        app_console = c.app.state.console  # type: ignore[attr-defined]
        app_console.sessions = Sessions(60.0, clock=lambda: now[0])
        sign_in(c, PUBLIC, OPERATOR)
        now[0] += 59.0
        assert c.get("/node").status_code == 200
        now[0] += 1.0
        r = c.get("/node")
        assert r.status_code == 303 and r.headers["location"].startswith("/login")


def test_a_token_the_node_stops_knowing_ends_its_session(tmp_path: Path) -> None:
    """When the node drops a signed-in token from its tokens, the next page ends the session
    and asks for a sign-in, saying why."""
    n = InProcessNode(tmp_path)
    try:
        with console(n.address, PUBLIC) as c:
            sign_in(c, PUBLIC, READER)
            assert c.get("/decisions").status_code == 200
            del n.settings.tokens[READER]  # type: ignore[attr-defined]
            r = c.get("/decisions")
            assert r.status_code == 303 and "why=expired" in r.headers["location"]
            assert c.get("/decisions").status_code == 303  # the session is gone
    finally:
        n.close()


def test_the_host_check_accepts_only_configured_names(node: InProcessNode) -> None:
    """A public console refuses Host 127.0.0.1 and localhost (which passed before); a loopback
    one answers to its own address and to what is configured, not to other loopback names."""
    with console(node.address, PUBLIC) as c:
        for host in ("127.0.0.1", "localhost", "[::1]", "evil.example"):
            assert c.get("/login", headers={"Host": host}).status_code == 400, host
        assert c.get("/login").status_code == 200
    hosts = host_names("127.0.0.1", [])
    with console(node.address, LOCAL, allowed_hosts=hosts) as c:
        assert c.get("/login").status_code == 200
        assert c.get("/login", headers={"Host": "localhost"}).status_code == 400
    hosts = host_names("127.0.0.1", ["localhost"])
    with console(node.address, LOCAL, allowed_hosts=hosts) as c:
        assert c.get("/login", headers={"Host": "localhost:7480"}).status_code == 200


def test_a_public_console_in_front_of_a_node_without_tokens_signs_no_one_in(
    open_node: InProcessNode,
) -> None:
    """A node without tokens takes any token as its operator's, so beyond loopback no
    sign-in is given (403, naming the node's tokens setting) and pages ask for one."""
    with console(open_node.address, PUBLIC) as c:
        r = c.post("/login", data={"token": "anything-at-all-1234"}, headers={"Origin": PUBLIC})
        assert r.status_code == 403 and "no tokens configured" in r.text
        assert "<code>tokens</code>" in r.text or "`tokens`" in r.text
        assert "set-cookie" not in r.headers
        assert c.get("/node").status_code == 303


def test_a_loopback_console_in_front_of_a_node_without_tokens_needs_no_sign_in(
    open_node: InProcessNode,
) -> None:
    """On loopback, in front of a node without tokens, pages and actions work without a
    sign-in (the node has no credentials to ask for), and the header says so."""
    with console(open_node.address, LOCAL) as c:
        page = c.get("/node")
        assert page.status_code == 200 and "console-node" in page.text
        assert "local, no sign-in" in page.text
        r = c.post("/login", data={"token": "anything-at-all-1234", "next": "/node"},
                   headers={"Origin": LOCAL})  # fmt: skip
        assert r.status_code == 303 and r.headers["location"] == "/node"
        assert "set-cookie" not in r.headers


def test_after_sign_in_only_a_path_of_this_console_is_followed() -> None:
    """`next` leads to a path here, never to another site."""
    for target, expected in (
        ("/key?namespace=a", "/key?namespace=a"),
        ("//evil.example/x", "/queue"),
        ("https://evil.example/", "/queue"),
        ("/\\evil.example", "/queue"),
        ("queue", "/queue"),
        ("", "/queue"),
    ):
        assert local_path(target) == expected, target


def test_same_origin_needs_a_header_naming_this_console() -> None:
    """Origin (else Referer) must name the Host the request was sent to; neither is refused."""
    host = {"host": "10.9.8.7:7480"}
    assert same_origin({**host, "origin": "http://10.9.8.7:7480"})
    assert same_origin({**host, "referer": "https://10.9.8.7:7480/key?x=1"})
    assert not same_origin(host)
    assert not same_origin({**host, "origin": "null"})
    assert not same_origin({**host, "origin": "http://10.9.8.7:7481"})
    assert not same_origin({**host, "origin": "ftp://10.9.8.7:7480"})


def test_host_names_are_the_listen_host_and_the_configured_ones() -> None:
    """No name is implied beyond the --listen host; a wildcard listen implies none."""
    assert host_names("10.0.0.1", []) == ("10.0.0.1",)
    assert host_names("0.0.0.0", []) == ()
    assert host_names("::", ["console.example"]) == ("console.example",)
    assert host_names("::1", []) == ("[::1]",)
    assert host_names("10.0.0.1", ["a.example", " ", "10.0.0.1"]) == ("10.0.0.1", "a.example")


def test_sessions_expire_drop_on_close_and_never_reuse_an_id(
    node: InProcessNode,
) -> None:
    """A session lives exactly its lifetime, ends at close, and each sign-in gets a new id."""
    now = [0.0]
    sessions = Sessions(10.0, clock=lambda: now[0])
    user = User(node=None, token="t" * 16)  # type: ignore[arg-type]
    a, b = sessions.open(user), sessions.open(user)
    assert a != b and len(a) >= 40
    assert sessions.user(a) is user and sessions.user(None) is None
    sessions.close(b)
    assert sessions.user(b) is None
    now[0] = 9.99
    assert sessions.user(a) is user
    now[0] = 10.0
    assert sessions.user(a) is None
