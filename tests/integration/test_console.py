"""The web console against a real node served in-process: every page and action over HTTP
(Starlette's TestClient), errors in words, roles from the node's tokens, live updates."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from _console import (
    OPERATOR,
    READER,
    ConsoleServer,
    InProcessNode,
    screenshot_dir,
    sign_in,
    tie,
)
from starlette.testclient import TestClient

from factnode.client import Client
from factnode.console import ConsoleSettings, create_app
from factnode.core import Policy

BASE = "http://127.0.0.1"
LIVE_TIMEOUT = 15.0  # seconds for a new decision to reach an open event stream


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """One node with a reader and an operator token, shared by the module (unique namespaces)."""
    n = InProcessNode(tmp_path_factory.mktemp("console-node"))
    try:
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def grpc_client(node: InProcessNode) -> Iterator[Client]:
    """An operator's gRPC client to arrange facts."""
    with node.client() as c:
        yield c


@contextmanager
def _console(address: str, token: str | None) -> Iterator[TestClient]:
    """The console signed in with `token` (when the node answers); its POSTs carry this
    console's Origin, as a browser's do."""
    app = create_app(ConsoleSettings(address, timeout=5))
    with TestClient(app, base_url=BASE, follow_redirects=False, headers={"Origin": BASE}) as c:
        if token is not None:
            sign_in(c, BASE, token)
        yield c


@pytest.fixture(scope="module")
def operator(node: InProcessNode) -> Iterator[TestClient]:
    """The console with the operator token."""
    with _console(node.address, OPERATOR) as c:
        yield c


@pytest.fixture(scope="module")
def reader(node: InProcessNode) -> Iterator[TestClient]:
    """The console with the reader token."""
    with _console(node.address, READER) as c:
        yield c


def ns() -> str:
    return f"user:{uuid.uuid4().hex[:10]}"


def key_url(namespace: str, subject: str = "ana", **extra: str) -> str:
    q = {"namespace": namespace, "subject": subject, "predicate": "lives_in", **extra}
    return "/key?" + urlencode(q)


def form(namespace: str, subject: str = "ana", **fields: str) -> dict[str, str]:
    return {"namespace": namespace, "subject": subject, "predicate": "lives_in", **fields}


def no_trace(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text


def version_ids(page: str) -> list[str]:
    return re.findall(r'name="version_id" value="([0-9a-f]{32})"', page)


def test_queue_lists_ambiguous_keys_filters_and_pages(
    operator: TestClient, grpc_client: Client
) -> None:
    """The queue shows each queued key with its versions; namespace and reason filter it, and
    page tokens lead from one page to the next."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    tie(grpc_client, space, "rui", ("Braga", "Evora"))
    page = operator.get("/queue", params={"namespace": space})
    assert page.status_code == 200
    for text in ("ana", "rui", "AMBIGUOUS", '"Porto"', '"Braga"'):
        assert text in page.text
    assert "other" not in page.text
    contested_only = operator.get("/queue", params={"namespace": space, "state": "CONTESTED"})
    assert "The review queue is empty for these filters" in contested_only.text
    first = operator.get("/queue", params={"namespace": space, "page_size": "1"})
    assert first.text.count('class="queued"') == 1
    [next_url] = re.findall(r'class="next" href="([^"]+)"', first.text)
    second = operator.get(next_url.replace("&amp;", "&"))
    assert second.text.count('class="queued"') == 1
    shown = [re.search(r'"(Porto|Braga)"', p.text) for p in (first, second)]
    assert {m.group(1) for m in shown if m} == {"Porto", "Braga"}


def test_queue_refuses_bad_filters_in_words(operator: TestClient) -> None:
    """A bad reason, page size or page token is a 400 page naming the field, no trace."""
    for params, field in (
        ({"state": "ANGRY"}, "state"),
        ({"page_size": "0"}, "page_size"),
        ({"page_token": "not-a-token"}, "page_token"),
    ):
        page = operator.get("/queue", params=params)
        assert page.status_code == 400, params
        assert "INVALID_ARGUMENT" in page.text and f"<code>{field}</code>" in page.text
        no_trace(page.text)


def test_key_page_shows_versions_evidence_rules_and_pictures(
    operator: TestClient, grpc_client: Client
) -> None:
    """A key's page shows each version with its evidence and provenance, the rule chain, the
    history as an SVG timeline, and an operator's actions."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    grpc_client.submit((space, "ana", "lives_in"), "Lisbon", "llm_generated", source="gpt-x",
                       confidence=0.9)  # fmt: skip
    page = operator.get(key_url(space))
    assert page.status_code == 200
    html = page.text
    for text in ("witness-0", "witness-1", "gpt-x", "llm_generated", "user_stated"):
        assert text in html
    assert "by <code>trust_anchor</code>" in html and "by <code>tiebreak</code>" in html
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="timeline"' in html
    assert "never believed (disbelieved)" in html  # Lisbon lost on the anchor
    assert 'id="resolve"' in html and 'id="retract"' in html and 'id="erase"' in html
    assert len(version_ids(html)) == 3


def test_reader_sees_pages_but_no_actions(
    reader: TestClient, operator: TestClient, grpc_client: Client
) -> None:
    """A reader token reads keys and the log, gets the queue and status refused in words, and
    is offered no action; its POSTs are refused by the node, not by hiding alone."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    page = reader.get(key_url(space))
    assert page.status_code == 200 and '"Porto"' in page.text
    for action in ('id="resolve"', 'id="retract"', 'id="erase"', "/key/resolve", "/key/erase"):
        assert action not in page.text
    for path in ("/queue", "/node"):
        refused = reader.get(path)
        assert refused.status_code == 403
        assert "PERMISSION_DENIED" in refused.text and "operator" in refused.text
        no_trace(refused.text)
    assert reader.get("/decisions", params={"namespace": space}).status_code == 200
    [version] = version_ids(operator.get(key_url(space)).text)[:1]
    post = reader.post("/key/resolve", data=form(space, version_id=version, reason="mine"))
    assert post.status_code == 403 and "PERMISSION_DENIED" in post.text
    assert space in operator.get("/queue", params={"namespace": space}).text


def test_resolve_with_a_reason_shows_the_decision_and_leaves_the_queue(
    operator: TestClient, grpc_client: Client
) -> None:
    """A plain form POST resolves, redirects to the key page showing RESOLVED by
    operator_resolution, and the key is no longer queued."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    page = operator.get(key_url(space)).text
    faro = re.search(r'value="([0-9a-f]{32})" required> "Faro"', page)
    assert faro is not None
    done = operator.post(
        "/key/resolve", data=form(space, version_id=faro.group(1), reason="asked ana")
    )
    assert done.status_code == 303
    shown = operator.get(done.headers["location"])
    assert "RESOLVED" in shown.text and "operator_resolution" in shown.text
    assert "now believes &#39;Faro&#39;" in shown.text
    assert "pinned by olga: asked ana" in shown.text  # the token's name, in the key's log
    assert "The review queue is empty" in operator.get("/queue", params={"namespace": space}).text
    assert grpc_client.belief((space, "ana", "lives_in")).object == "Faro"


def test_resolve_without_a_reason_is_refused_and_changes_nothing(
    operator: TestClient, grpc_client: Client
) -> None:
    """No reason: the node's INVALID_ARGUMENT naming `reason` is shown; the key stays queued."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    [version, *_] = version_ids(operator.get(key_url(space)).text)
    refused = operator.post("/key/resolve", data=form(space, version_id=version, reason=""))
    assert refused.status_code == 400
    assert "INVALID_ARGUMENT" in refused.text and "<code>reason</code>" in refused.text
    no_trace(refused.text)
    assert 'class="queued"' in operator.get("/queue", params={"namespace": space}).text
    no_choice = operator.post("/key/resolve", data=form(space, reason="why"))
    assert no_choice.status_code == 400 and "<code>version_id</code>" in no_choice.text


def test_htmx_actions_answer_with_the_refreshed_page(
    operator: TestClient, grpc_client: Client
) -> None:
    """With htmx the action's answer is the refreshed key page (200) carrying the decision, or
    the node's refusal in words."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    [version, *_] = version_ids(operator.get(key_url(space)).text)
    htmx = {"HX-Request": "true"}
    refused = operator.post("/key/resolve", data=form(space, version_id=version), headers=htmx)
    assert refused.status_code == 200 and 'id="error"' in refused.text
    done = operator.post(
        "/key/resolve", data=form(space, version_id=version, reason="checked"), headers=htmx
    )
    assert done.status_code == 200
    assert 'id="result"' in done.text and "RESOLVED" in done.text


def test_retract_shows_the_resulting_decision(operator: TestClient, grpc_client: Client) -> None:
    """Retracting ends the belief; the page says RETRACTED, what is believed now, and which
    retraction (anchor and source: the operator's token name) ended the version."""
    space = ns()
    grpc_client.submit((space, "ana", "lives_in"), "Porto", "user_stated", source="ana")
    done = operator.post("/key/retract", data=form(space, reason="she left"))
    assert done.status_code == 303
    shown = operator.get(done.headers["location"]).text
    assert "RETRACTED" in shown and "no value is believed now" in shown
    assert re.search(r"Ended by a retraction\s+by user_stated \(olga\)", shown)


def test_erase_needs_the_typed_key_then_the_value_is_gone_from_every_page(
    operator: TestClient, grpc_client: Client
) -> None:
    """A wrong confirmation erases nothing; the right one erases, and no page shows the value."""
    space = ns()
    secret = f"Secret-{uuid.uuid4().hex[:6]}"
    tie(grpc_client, space, "ana", (secret, "Faro"))
    refused = operator.post(
        "/key/erase", data=form(space, scope="key", confirm="ana", reason="request #42")
    )
    assert refused.status_code == 400 and "<code>confirm</code>" in refused.text
    assert "nothing was erased" in refused.text
    assert secret in operator.get(key_url(space)).text
    confirm = f"{space}/ana/lives_in"
    done = operator.post(
        "/key/erase", data=form(space, scope="key", confirm=confirm, reason="request #42")
    )
    assert done.status_code == 303
    shown = operator.get(done.headers["location"])
    assert shown.status_code == 200
    assert "ERASED" in shown.text and "tombstone" in shown.text
    assert "holds nothing for this key" in shown.text
    assert operator.get(key_url(space)).status_code == 404
    for path, params in (
        ("/queue", {"namespace": space}),
        ("/decisions", {"namespace": space}),
        ("/decisions", {}),
        ("/key", {"namespace": space, "subject": "ana", "predicate": "lives_in"}),
    ):
        assert secret not in operator.get(path, params=params).text, path


def test_cross_origin_posts_and_foreign_hosts_are_refused(
    operator: TestClient, grpc_client: Client
) -> None:
    """A POST whose Origin is another site, or that carries neither Origin nor Referer, or a
    request for another Host name, is refused and changes nothing."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    [version, *_] = version_ids(operator.get(key_url(space)).text)
    data = form(space, version_id=version, reason="forged")
    forged = operator.post("/key/resolve", data=data, headers={"Origin": "http://evil.example"})
    assert forged.status_code == 403 and "another site" in forged.text
    del operator.headers["origin"]  # the fixture's browser-like Origin, for these two
    try:
        via_referer = operator.post(
            "/key/resolve", data=data, headers={"Referer": "http://evil.example/page"}
        )
        assert via_referer.status_code == 403
        assert operator.post("/key/resolve", data=data).status_code == 403  # neither header
    finally:
        operator.headers["origin"] = BASE
    assert operator.get("/queue", headers={"Host": "evil.example"}).status_code == 400
    assert 'class="queued"' in operator.get("/queue", params={"namespace": space}).text
    same = operator.post("/key/resolve", data=data, headers={"Origin": BASE})
    assert same.status_code == 303


def test_decision_log_filters_by_key_outcome_rule_and_time(
    operator: TestClient, grpc_client: Client
) -> None:
    """The log narrows by key, outcome, rule and time; a bad time is refused naming it."""
    space = ns()
    k = (space, "ana", "lives_in")
    grpc_client.submit(k, "Porto", "user_stated", source="ana")
    grpc_client.submit(k, "Lisbon", "llm_generated", source="gpt")
    grpc_client.submit((space, "rui", "lives_in"), "Braga", "user_stated", source="rui")
    everything = operator.get("/decisions", params={"namespace": space}).text
    assert everything.count('class="decision"') == 3
    by_key = operator.get(
        "/decisions", params={"namespace": space, "subject": "ana", "predicate": "lives_in"}
    ).text
    assert by_key.count('class="decision"') == 2 and "Braga" not in by_key
    by_outcome = operator.get("/decisions", params={"namespace": space, "outcome": "DISBELIEVED"})
    assert by_outcome.text.count('class="decision"') == 1
    by_rule = operator.get("/decisions", params={"namespace": space, "rule": "first_version"})
    assert by_rule.text.count('class="decision"') == 2
    later = operator.get("/decisions", params={"namespace": space, "since": "2999-01-01"})
    assert later.text.count('class="decision"') == 0 and "No decision matches" in later.text
    bad = operator.get("/decisions", params={"since": "last week"})
    assert bad.status_code == 400 and "<code>since</code>" in bad.text
    no_trace(bad.text)


def test_node_page_shows_identity_counts_and_peers(operator: TestClient) -> None:
    """The node page shows its id, its counts and that it has no peers."""
    page = operator.get("/node")
    assert page.status_code == 200
    assert 'id="node-id">console-node<' in page.text
    for count in ("evidence", "keys", "decisions", "contested", "ambiguous", "rejected"):
        assert f"<th>{count}</th>" in page.text
    assert "No peers configured" in page.text


def test_an_unreachable_node_is_a_page_saying_so(tmp_path: Path) -> None:
    """With nothing listening at the address, every page says the node cannot be reached."""
    with _console("127.0.0.1:1", None) as console:  # no node to sign in to
        for path in ("/queue", key_url("user:x"), "/decisions", "/node"):
            page = console.get(path)
            assert page.status_code == 503, path
            assert "cannot be reached" in page.text and "UNAVAILABLE" in page.text
            no_trace(page.text)


def test_decision_log_streams_new_decisions_live(node: InProcessNode, grpc_client: Client) -> None:
    """The log page's event stream (woken by WatchBeliefs) sends each new decision as a row."""
    space = ns()
    grpc_client.submit((space, "ana", "lives_in"), "Porto", "user_stated", source="ana")
    console = ConsoleServer(ConsoleSettings(node.address, token=OPERATOR, timeout=5))
    try:
        browser = httpx.Client(timeout=10)
        sign_in(browser, console.url, READER)
        page = browser.get(f"{console.url}/decisions", params={"namespace": space})
        [live] = re.findall(r'sse-connect="([^"]+)"', page.text)
        url = console.url + live.replace("&amp;", "&")
        seen = ""
        with browser.stream("GET", url, timeout=LIVE_TIMEOUT) as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": connected"
            grpc_client.submit((space, "ana", "lives_in"), "Faro", "user_stated", source="bo",
                               confidence=0.9)  # fmt: skip
            deadline = time.monotonic() + LIVE_TIMEOUT
            while "</tr>" not in seen and time.monotonic() < deadline:
                seen += next(lines) + "\n"
        assert "event: decision" in seen and "SUPERSEDED" in seen
        assert "ACCEPTED" not in seen  # only what is new since the page was drawn
        assert "<td>&#39;Faro&#39; (replacing &#39;Porto&#39;)</td>" in seen  # values, not ids
        browser.close()
    finally:
        console.close()


def test_the_nodes_own_threshold_is_shown_and_sent_with_the_queue(
    tmp_path: Path,
) -> None:
    """A node whose policy sets consensus_threshold = 3/4 sends it with each queued key (whose
    reason names the tied values), and the console states 75% where the default says 66%."""
    node = InProcessNode(tmp_path, Policy(consensus_threshold=Fraction(3, 4)))
    try:
        namespace = ns()
        with node.client() as c:
            tie(c, namespace, "ana", ("Porto", "Faro"))
            queued = c.contested((namespace, "ana", "lives_in"))
            assert queued.threshold == Fraction(3, 4)
            assert queued.detail == "no rule discriminates between 'Faro', 'Porto'"
            assert c.review(namespace).items[0].threshold == Fraction(3, 4)
        with _console(node.address, OPERATOR) as console:
            page = console.get("/queue?" + urlencode({"namespace": namespace}))
            assert page.status_code == 200
            assert "75%" in page.text and "66%" not in page.text
    finally:
        node.close()


def _form_of(page: str, action: str) -> str:
    """The HTML of one action's form on a key page."""
    match = re.search(rf'<form method="post" action="/key/{action}".*?</form>', page, re.S)
    assert match, f"no {action} form"
    return match.group(0)


@pytest.mark.parametrize("htmx", [False, True], ids=["plain-post", "htmx"])
def test_a_refused_action_shows_its_error_in_its_form_and_keeps_what_was_typed(
    operator: TestClient, grpc_client: Client, htmx: bool
) -> None:
    """A blank reason: the node's refusal is shown inside the Resolve form (not at the top of
    the page), the chosen version stays checked and the other forms stay empty."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    [_, version] = version_ids(operator.get(key_url(space)).text)[:2]
    headers = {"HX-Request": "true"} if htmx else {}
    refused = operator.post(
        "/key/resolve", data=form(space, version_id=version, reason="   "), headers=headers
    )
    page = refused.text
    resolve = _form_of(page, "resolve")
    assert 'id="error"' in resolve and "<code>reason</code>" in resolve
    assert page.count('id="error"') == 1
    assert re.search(rf'value="{version}" required checked', resolve), resolve
    assert 'id="error"' not in page.split('<form method="post" action="/key/resolve"')[0]
    # An erase refusal keeps the typed confirmation and reason, in the erase form.
    refused = operator.post(
        "/key/erase", data=form(space, scope="subject", confirm="nope", reason="request #7"),
        headers=headers,
    )  # fmt: skip
    erase = _form_of(refused.text, "erase")
    assert 'id="error"' in erase and "<code>confirm</code>" in erase
    assert 'value="nope"' in erase and 'value="request #7"' in erase
    assert re.search(r'value="subject" checked', erase)
    assert 'value="request #7"' not in _form_of(refused.text, "resolve")


def test_the_key_pages_decisions_name_the_whole_key(
    operator: TestClient, grpc_client: Client
) -> None:
    """Each row of the key page's decision table names namespace, subject and predicate."""
    space = ns()
    grpc_client.submit((space, "ana", "lives_in"), "Porto", "user_stated", source="ana")
    page = operator.get(key_url(space)).text
    table = page.split("<h2>Decisions for this key</h2>")[1]
    assert f"<td>{space} / ana / lives_in</td>" in table


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/queue", {}),
        ("/key", {"namespace": "user:none", "subject": "x", "predicate": "y"}),
        ("/decisions", {}),
        ("/node", {}),
        ("/static/console.css", {}),
        ("/static/htmx.min.js", {}),
        ("/favicon.ico", {}),
        ("/nowhere", {}),
        ("/", {}),
    ],
)
def test_every_response_carries_the_security_headers(
    operator: TestClient, path: str, params: dict[str, str]
) -> None:
    """Pages, static files, the icon, a 404 and a redirect all send the CSP (no inline
    script or style, no framing), X-Frame-Options DENY and X-Content-Type-Options nosniff."""
    r = operator.get(path, params=params)
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"


def test_a_refused_host_and_an_event_stream_carry_the_security_headers_too(
    operator: TestClient,
) -> None:
    """Even the 400 for a foreign Host, and a refused event-stream request, get the headers."""
    foreign = operator.get("/queue", headers={"Host": "evil.example"})
    assert foreign.status_code == 400 and foreign.headers["x-frame-options"] == "DENY"
    bad_stream = operator.get("/decisions/live", params={"after": "x"})
    assert bad_stream.status_code == 400
    assert bad_stream.headers["x-content-type-options"] == "nosniff"


def test_the_pages_use_no_inline_script_or_style(operator: TestClient, grpc_client: Client) -> None:
    """What the CSP forbids is not in the pages: no inline <script>, <style>, style= or on*=
    handlers, and htmx's own inline indicator style is turned off."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    for path in ("/queue", key_url(space), "/decisions", "/node"):
        page = operator.get(path).text
        assert not re.search(r"<script(?![^>]*\ssrc=)", page), path
        assert "<style" not in page and " style=" not in page, path
        assert not re.search(r"\son[a-z]+=", page), path
        assert '"includeIndicatorStyles": false' in page


def test_favicon_is_a_small_svg(operator: TestClient) -> None:
    """/favicon.ico answers 200 with an SVG icon (it was a 404), and pages link to it."""
    icon = operator.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg") and len(icon.content) < 2048
    assert 'rel="icon" href="/static/favicon.svg"' in operator.get("/queue").text


def test_screenshots_go_to_an_ignored_folder_unless_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without FACTNODE_UPDATE_SCREENSHOTS=1 screenshots go to build/screenshots (ignored),
    never over the committed docs/screenshots."""
    monkeypatch.delenv("FACTNODE_UPDATE_SCREENSHOTS", raising=False)
    assert screenshot_dir().parts[-2:] == ("build", "screenshots")
    monkeypatch.setenv("FACTNODE_UPDATE_SCREENSHOTS", "1")
    assert screenshot_dir().parts[-2:] == ("docs", "screenshots")


def test_an_actions_result_is_shown_where_the_user_looks_with_its_decision_number(
    operator: TestClient, grpc_client: Client
) -> None:
    """After an action the result banner is at the top of the key page and the answer scrolls
    to it (htmx: HX-Reswap `show:#result:top`; a plain POST: a redirect to `#result`); it names
    the decision's seq, the one the node's log lists for it."""
    space = ns()
    tie(grpc_client, space, "ana", ("Porto", "Faro"))
    [version, *_] = version_ids(operator.get(key_url(space)).text)
    done = operator.post(
        "/key/resolve",
        data=form(space, version_id=version, reason="checked"),
        headers={"HX-Request": "true"},
    )
    assert done.status_code == 200
    assert done.headers["HX-Reswap"] == "outerHTML show:#result:top"
    page = done.text
    assert page.index('id="result"') < page.index("<h2>History</h2>")
    [logged] = [
        d
        for d in grpc_client.decisions(key=(space, "ana", "lives_in")).items
        if d.outcome == "RESOLVED"
    ]
    assert f"(decision {logged.seq})" in page.split('id="result"')[1].split("</div>")[0]
    retracted = operator.post("/key/retract", data=form(space, reason="she left"))
    assert retracted.status_code == 303 and retracted.headers["location"].endswith("#result")


def test_the_decision_logs_show_values_not_version_ids(
    operator: TestClient, grpc_client: Client
) -> None:
    """The detail column of the log page and of the key page names the value each decision
    is about (and the one it replaced), never a bare version id of a version the key holds."""
    space = ns()
    k = (space, "ana", "lives_in")
    grpc_client.submit(k, "Porto", "user_stated", source="ana", confidence=0.9)
    grpc_client.submit(k, "Lisbon", "llm_generated", source="gpt", confidence=0.9)
    grpc_client.submit(k, "Faro", "user_stated", source="ana", confidence=0.9)
    held = {v.version_id for v in grpc_client.history(k)}
    for page in (
        operator.get("/decisions", params={"namespace": space}).text,
        operator.get(key_url(space)).text,
    ):
        details = re.findall(r'<tr class="decision".*?</tr>', page, re.DOTALL)
        cells = [re.findall(r"<td>(.*?)</td>", row, re.DOTALL)[-1] for row in details]
        assert cells == [
            "&#39;Porto&#39;",
            "&#39;Lisbon&#39;",
            "&#39;Faro&#39; (replacing &#39;Porto&#39;)",
        ], cells
        assert not any(vid in page.split("<h2>Decisions for this key</h2>")[-1] for vid in held)
