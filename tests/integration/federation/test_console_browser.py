"""The web console in a real browser (Playwright driving Debian's chromium) on a real
three-node federation: a contested key is listed, opened, resolved and leaves the queue; an
erase asks for typed confirmation and the value then disappears; a reader gets no buttons.

Saves screenshots of the queue and of a key page under docs/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from _console import OPERATOR, READER, ConsoleServer, InProcessNode, chromium_path, tie
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

SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
UI_TIMEOUT_MS = 15_000  # per browser action or wait


@pytest.fixture(scope="module")
def fed(start_federation: StartFederation) -> Federation:
    """alpha, beta and gamma, each peering with the other two."""
    return start_federation(["alpha", "beta", "gamma"])


@pytest.fixture(scope="module")
def contested(fed: Federation) -> tuple[str, str]:
    """Two keys split 62.5% / 37.5% (no >66% supermajority), synced until quiet: CONTESTED
    on every node. Returns their namespace and the second key's rare value."""
    ns = unique_ns("team")
    at = event_time()
    for subject, minority in (("oncall", "Ravi"), ("backup", "Zyxwort")):
        k = key(ns, subject, "lead")
        fed["alpha"].submit(k, minority, source="calendar", valid_from=at)
        fed["beta"].submit(k, "Mei", source="pager", valid_from=at)
        fed["gamma"].submit(k, "Mei", source="chat", attribution="agent_inferred", valid_from=at)
    fed.sync_until_quiet()
    for subject in ("oncall", "backup"):
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
    context = browser.new_context(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    pg = context.new_page()
    pg.set_default_timeout(UI_TIMEOUT_MS)
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture(scope="module")
def console(fed: Federation) -> Iterator[ConsoleServer]:
    """The console on alpha (a node without tokens: a loopback caller is an operator)."""
    server = ConsoleServer(ConsoleSettings(fed["alpha"].address, timeout=10))
    try:
        yield server
    finally:
        server.close()


def key_url(base: str, ns: str, subject: str) -> str:
    return f"{base}/key?" + urlencode({"namespace": ns, "subject": subject, "predicate": "lead"})


def test_a_contested_key_is_listed_opened_resolved_and_leaves_the_queue(
    console: ConsoleServer, contested: tuple[str, str], page: object, fed: Federation
) -> None:
    """The queue lists the federation's contested key; its page shows the tally bars with the
    66% line and the history picture; resolving with a reason shows RESOLVED and the key
    leaves the queue."""
    ns, _ = contested
    pg: object = page
    pg.goto(f"{console.url}/queue?namespace={ns}")  # type: ignore[attr-defined]
    row = pg.locator("tr.queued", has_text="oncall")  # type: ignore[attr-defined]
    playwright.expect(row).to_contain_text("CONTESTED")
    playwright.expect(row).to_contain_text("62.5%")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SCREENSHOTS / "queue.png"), full_page=True)  # type: ignore[attr-defined]

    row.locator("a.key-link").click()
    tally = pg.locator("#tally svg")  # type: ignore[attr-defined]
    playwright.expect(tally).to_be_visible()
    playwright.expect(tally.locator("line.threshold")).to_have_attribute("x1", "490")
    playwright.expect(tally.locator("g.bar")).to_have_count(2)
    playwright.expect(pg.locator("#timeline svg")).to_be_visible()  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#timeline svg rect.interval").first).to_be_visible()  # type: ignore[attr-defined]
    pg.screenshot(path=str(SCREENSHOTS / "key.png"), full_page=True)  # type: ignore[attr-defined]

    form = pg.locator("#resolve")  # type: ignore[attr-defined]
    form.get_by_label('"Mei"').check()
    form.locator("input[name=reason]").fill("asked the team")
    form.locator("button").click()
    result = pg.locator("#result")  # type: ignore[attr-defined]
    playwright.expect(result).to_contain_text("RESOLVED")
    playwright.expect(result).to_contain_text("operator_resolution")
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
        server = ConsoleServer(ConsoleSettings(token_node.address, token=token, timeout=10))
        try:
            pg.goto(server.url + url)  # type: ignore[attr-defined]
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
