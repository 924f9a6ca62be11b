"""The web console in a real browser (Playwright driving Debian's chromium) on a real
three-node federation: a contested key is listed, opened, resolved and leaves the queue; an
erase asks for typed confirmation and the value then disappears; a reader gets no buttons.

Saves screenshots of the queue and of a key page under build/screenshots/ (ignored by git),
or under docs/screenshots/ with FACTNODE_UPDATE_SCREENSHOTS=1 (see tests/_console.py)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from _console import (
    OPERATOR,
    READER,
    ConsoleServer,
    InProcessNode,
    chromium_path,
    screenshot_dir,
    tie,
)
from _fednet import CONTESTED, Federation, StartFederation, event_time, key, unique_ns

from factnode.console import ConsoleSettings

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        chromium_path() is None,
        reason="chromium is not installed (apt-get install chromium): browser tests skipped",
    ),
]

UI_TIMEOUT_MS = 15_000  # per browser action or wait


@pytest.fixture(scope="module")
def fed(start_federation: StartFederation) -> Federation:
    """alpha, beta and gamma, each peering with the other two."""
    return start_federation(["alpha", "beta", "gamma"])


@pytest.fixture(scope="module")
def contested(fed: Federation) -> tuple[str, str]:
    """Three keys split 62.5% / 37.5% (no >66% supermajority), synced until quiet: CONTESTED
    on every node. Returns their namespace and the second key's rare value."""
    ns = unique_ns("team")
    at = event_time()
    for subject, minority in (("oncall", "Ravi"), ("backup", "Zyxwort"), ("standby", "Ravi")):
        k = key(ns, subject, "lead")
        fed["alpha"].submit(k, minority, source="calendar", valid_from=at)
        fed["beta"].submit(k, "Mei", source="pager", valid_from=at)
        fed["gamma"].submit(k, "Mei", source="chat", attribution="agent_inferred", valid_from=at)
    fed.sync_until_quiet()
    for subject in ("oncall", "backup", "standby"):
        belief = fed["alpha"].belief(key(ns, subject, "lead"))
        assert belief is not None and belief.state == CONTESTED
    return ns, "Zyxwort"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless chromium from the system (no browser download)."""
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path())
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """A fresh page; the test fails if the console's CSP refused anything the page used."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    pg = context.new_page()
    pg.set_default_timeout(UI_TIMEOUT_MS)
    refused: list[str] = []
    pg.on(
        "console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None
    )
    try:
        yield pg
    finally:
        context.close()
    assert refused == [], refused


@pytest.fixture(scope="module")
def console(fed: Federation) -> Iterator[ConsoleServer]:
    """The console on alpha (a node without tokens: a loopback caller is an operator)."""
    server = ConsoleServer(ConsoleSettings(fed["alpha"].address, timeout=10))
    try:
        yield server
    finally:
        server.close()


def sign_in_here(pg: object, token: str) -> None:
    """On the sign-in page a console sent the browser to, signs in with `token` and waits
    for the page it came from."""
    form = pg.locator("#login")  # type: ignore[attr-defined]
    form.locator("input[name=token]").fill(token)
    form.get_by_role("button", name="Sign in").click()
    playwright.expect(pg.locator("#user")).to_contain_text("signed in")  # type: ignore[attr-defined]


def key_url(base: str, ns: str, subject: str) -> str:
    return f"{base}/key?" + urlencode({"namespace": ns, "subject": subject, "predicate": "lead"})


def test_a_contested_key_is_listed_opened_resolved_and_leaves_the_queue(
    console: ConsoleServer, contested: tuple[str, str], page: object, fed: Federation
) -> None:
    """The queue lists the federation's contested key; its page shows the tally bars with the
    66% line and the history picture; resolving with a reason shows RESOLVED (with the
    decision's seq) in view, and the key leaves the queue."""
    ns, _ = contested
    pg: object = page
    pg.goto(f"{console.url}/queue?namespace={ns}")  # type: ignore[attr-defined]
    row = pg.locator("tr.queued", has_text="oncall")  # type: ignore[attr-defined]
    playwright.expect(row).to_contain_text("CONTESTED")
    playwright.expect(row).to_contain_text("62.5%")
    pg.screenshot(path=str(screenshot_dir() / "queue.png"), full_page=True)  # type: ignore[attr-defined]

    row.locator("a.key-link").click()
    tally = pg.locator("#tally svg")  # type: ignore[attr-defined]
    playwright.expect(tally).to_be_visible()
    playwright.expect(tally.locator("line.threshold")).to_have_attribute("x1", "490")
    playwright.expect(tally.locator("g.bar")).to_have_count(2)
    playwright.expect(pg.locator("#timeline svg")).to_be_visible()  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#timeline svg rect.interval").first).to_be_visible()  # type: ignore[attr-defined]
    pg.screenshot(path=str(screenshot_dir() / "key.png"), full_page=True)  # type: ignore[attr-defined]

    form = pg.locator("#resolve")  # type: ignore[attr-defined]
    form.get_by_label('"Mei"').check()
    form.locator("input[name=reason]").fill("asked the team")
    form.locator("button").click()
    result = pg.locator("#result")  # type: ignore[attr-defined]
    playwright.expect(result).to_contain_text("RESOLVED")
    playwright.expect(result).to_contain_text("operator_resolution")
    # Where the user looks after clicking: the page scrolled from the form to the result.
    playwright.expect(result).to_be_in_viewport()
    playwright.expect(result).to_contain_text("(decision ")
    playwright.expect(pg.locator(".belief")).to_contain_text("BELIEVED")  # type: ignore[attr-defined]

    pg.goto(f"{console.url}/queue?namespace={ns}")  # type: ignore[attr-defined]
    playwright.expect(pg.locator("tr.queued", has_text="backup")).to_have_count(1)  # type: ignore[attr-defined]
    playwright.expect(pg.locator("tr.queued", has_text="oncall")).to_have_count(0)  # type: ignore[attr-defined]
    served = fed["alpha"].belief(key(ns, "oncall", "lead"))
    assert served is not None and served.object == "Mei"


def test_erase_asks_for_the_typed_key_then_the_value_is_gone_from_every_page(
    console: ConsoleServer, contested: tuple[str, str], page: object
) -> None:
    """A wrong confirmation erases nothing; the typed key erases it, and neither the queue, the
    key page nor the decision log shows the value afterwards."""
    ns, value = contested
    pg: object = page
    pg.goto(key_url(console.url, ns, "backup"))  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#page")).to_contain_text(value)  # type: ignore[attr-defined]
    form = pg.locator("#erase")  # type: ignore[attr-defined]
    form.locator("input[name=confirm]").fill("backup")
    form.locator("input[name=reason]").fill("request #42")
    form.locator("button").click()
    playwright.expect(pg.locator("#error")).to_contain_text("confirm")  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#page")).to_contain_text(value)  # type: ignore[attr-defined]

    form = pg.locator("#erase")  # type: ignore[attr-defined]
    form.locator("input[name=confirm]").fill(f"{ns}/backup/lead")
    form.locator("input[name=reason]").fill("request #42")
    form.locator("button").click()
    playwright.expect(pg.locator("#result")).to_contain_text("ERASED")  # type: ignore[attr-defined]
    for url in (
        key_url(console.url, ns, "backup"),
        f"{console.url}/queue?namespace={ns}",
        f"{console.url}/queue",
        f"{console.url}/decisions?namespace={ns}",
        f"{console.url}/decisions",
    ):
        pg.goto(url)  # type: ignore[attr-defined]
        assert value not in pg.content(), url  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def token_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node with reader and operator tokens, holding an ambiguous key."""
    n = InProcessNode(tmp_path_factory.mktemp("browser-tokens"))
    try:
        with n.client() as c:
            tie(c, "user:ana", "ana", ("Porto", "Faro"))
        yield n
    finally:
        n.close()


def test_a_reader_token_sees_the_key_but_no_resolve_button(
    token_node: InProcessNode, page: object
) -> None:
    """With a reader token the key page shows the versions and no action; with an operator
    token the same page offers Resolve."""
    pg: object = page
    url = "/key?" + urlencode({"namespace": "user:ana", "subject": "ana", "predicate": "lives_in"})
    for token, buttons in ((READER, 0), (OPERATOR, 1)):
        server = ConsoleServer(ConsoleSettings(token_node.address, timeout=10))
        try:
            pg.goto(server.url + url)  # type: ignore[attr-defined]
            sign_in_here(pg, token)
            playwright.expect(pg.locator("#page")).to_contain_text("Porto")  # type: ignore[attr-defined]
            resolve = pg.get_by_role("button", name="Resolve")  # type: ignore[attr-defined]
            playwright.expect(resolve).to_have_count(buttons)
            playwright.expect(pg.locator("#erase")).to_have_count(buttons)  # type: ignore[attr-defined]
        finally:
            server.close()


def test_the_decision_log_grows_live_in_the_browser(
    token_node: InProcessNode, page: object
) -> None:
    """With the log page open, a decision the node records appears as a new row by itself
    (through the htmx SSE extension, no reload)."""
    pg: object = page
    server = ConsoleServer(ConsoleSettings(token_node.address, token=READER, timeout=10))
    try:
        pg.goto(f"{server.url}/decisions?namespace=user:ana")  # type: ignore[attr-defined]
        sign_in_here(pg, READER)
        rows = pg.locator("tr.decision")  # type: ignore[attr-defined]
        before = rows.count()
        assert before == 2
        playwright.expect(pg.locator("#live-status")).to_be_visible()  # type: ignore[attr-defined]
        with token_node.client() as c:
            c.submit(("user:ana", "ana", "lives_in"), "Braga", "llm_generated", source="gpt")
        # A DISBELIEVED decision changes no belief, so it arrives by the stream's periodic read.
        playwright.expect(rows).to_have_count(before + 1, timeout=UI_TIMEOUT_MS)
        playwright.expect(rows.last).to_contain_text("DISBELIEVED")
        pg.goto("about:blank")  # type: ignore[attr-defined]
    finally:
        server.close()


def _boxes_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"]
    )  # fmt: skip


def test_the_share_labels_do_not_overlap_the_threshold_line(
    console: ConsoleServer, contested: tuple[str, str], page: object
) -> None:
    """As chromium draws it, the "62.5%" label's box does not touch the 66% line's box."""
    ns, _ = contested
    pg: object = page
    pg.goto(key_url(console.url, ns, "standby"))  # type: ignore[attr-defined]
    tally = pg.locator("#tally svg")  # type: ignore[attr-defined]
    line = tally.locator("line.threshold").bounding_box()
    labels = tally.locator("text.share")
    playwright.expect(labels).to_have_count(2)
    texts = [labels.nth(i).text_content() for i in range(2)]
    assert any(t.startswith("62.5%") for t in texts), texts
    for i in range(2):
        box = labels.nth(i).bounding_box()
        assert not _boxes_overlap(box, line), (texts[i], box, line)


def test_a_refused_resolution_shows_its_error_beside_the_form_keeping_the_choice(
    console: ConsoleServer, contested: tuple[str, str], page: object
) -> None:
    """A blank reason (spaces pass the browser's `required`): the refusal appears inside the
    Resolve form, in view where the operator is, and the chosen version stays checked; the
    reason then given resolves the key."""
    ns, _ = contested
    pg: object = page
    pg.goto(key_url(console.url, ns, "standby"))  # type: ignore[attr-defined]
    form = pg.locator("#resolve")  # type: ignore[attr-defined]
    form.scroll_into_view_if_needed()
    form.get_by_label('"Mei"').check()
    form.locator("input[name=reason]").fill("   ")
    form.locator("button").click()
    error = pg.locator("#resolve #error")  # type: ignore[attr-defined]
    playwright.expect(error).to_contain_text("reason")
    playwright.expect(error).to_be_in_viewport()
    playwright.expect(pg.locator("#error")).to_have_count(1)  # type: ignore[attr-defined]
    form = pg.locator("#resolve")  # type: ignore[attr-defined]
    playwright.expect(form.get_by_label('"Mei"')).to_be_checked()
    pg.screenshot(path=str(screenshot_dir() / "refused.png"), full_page=False)  # type: ignore[attr-defined]


def test_a_resolution_says_it_settles_only_this_node_and_shows_the_other_voters(
    console: ConsoleServer, contested: tuple[str, str], page: object, fed: Federation
) -> None:
    """On a federation the key page lists what each voter's vote is for (alpha, this node:
    'Ravi'; beta and gamma: 'Mei') and says a resolution settles this node only; after
    resolving, the result says so too, and beta still serves its own CONTESTED belief."""
    ns, _ = contested
    pg: object = page
    pg.goto(key_url(console.url, ns, "standby"))  # type: ignore[attr-defined]
    voters = pg.locator("table.voters")  # type: ignore[attr-defined]
    playwright.expect(voters.locator("tr.voter")).to_have_count(3)
    playwright.expect(voters.locator("tr.voter.here")).to_contain_text("alpha")
    playwright.expect(voters.locator("tr.voter.here")).to_contain_text('"Ravi"')
    for peer in ("beta", "gamma"):
        playwright.expect(voters.locator(f'tr[data-voter="{peer}"]')).to_contain_text('"Mei"')
    scope = pg.locator("#federation-scope")  # type: ignore[attr-defined]
    playwright.expect(scope).to_contain_text("settles this node (alpha) only")
    form = pg.locator("#resolve")  # type: ignore[attr-defined]
    playwright.expect(form).to_contain_text("Settles this node only")
    form.get_by_label('"Mei"').check()
    form.locator("input[name=reason]").fill("asked the team")
    form.locator("button").click()
    playwright.expect(pg.locator("#result")).to_contain_text("RESOLVED")  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#result-scope")).to_contain_text("on this node only")  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#federation-scope")).to_contain_text("serves its pin")  # type: ignore[attr-defined]
    beta = fed["beta"].belief(key(ns, "standby", "lead"))
    assert beta is not None and beta.state == CONTESTED


def test_the_favicon_is_served(console: ConsoleServer, page: object) -> None:
    """The browser's default /favicon.ico request gets the SVG icon, not a 404."""
    pg: object = page
    icon = pg.request.get(f"{console.url}/favicon.ico")  # type: ignore[attr-defined]
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
