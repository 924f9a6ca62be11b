"""The console's search box in a real browser (Playwright driving Debian's chromium): typed
in the header of any page, it shows the believed value, and its key leads to the key's page.
Issue 44, item 5."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from _console import READER, ConsoleServer, InProcessNode, chromium_path, screenshot_dir

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

UI_TIMEOUT_MS = 15_000
KEY = ("user:ana", "ana", "lives_in")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node where Ana moved from Porto to Lisbon, and the team chose a database."""
    n = InProcessNode(tmp_path_factory.mktemp("search-browser"))
    try:
        with n.client() as c:
            for city, year in (("Porto", 2023), ("Lisbon", 2024)):
                at = datetime(year, 3, 1, tzinfo=UTC)
                c.submit(KEY, city, "user_stated", source="user:ana", valid_from=at)
            c.submit(
                ("project:acme", "team", "database"), "PostgreSQL 16", "agent_observed",
                source="tool:psql",
            )  # fmt: skip
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def console(node: InProcessNode) -> Iterator[ConsoleServer]:
    server = ConsoleServer(ConsoleSettings(node.address, timeout=10))
    try:
        yield server
    finally:
        server.close()


def test_a_query_typed_in_the_header_shows_the_believed_value(
    console: ConsoleServer, page_in_chromium: object
) -> None:
    """Signed in as a reader, a question typed in the header's search box shows the value
    believed now (never the one it superseded) with its state, rule and anchor; its key
    opens the key's page. A screenshot of the hits is saved."""
    pg: object = page_in_chromium
    pg.goto(f"{console.url}/decisions")  # type: ignore[attr-defined]
    form = pg.locator("#login")  # type: ignore[attr-defined]
    form.locator("input[name=token]").fill(READER)
    form.get_by_role("button", name="Sign in").click()
    box = pg.locator("header form.search-box")  # type: ignore[attr-defined]
    box.locator("input[name=q]").fill("Where does Ana live?")
    box.get_by_role("button", name="Search").click()
    hit = pg.locator("tr.hit")  # type: ignore[attr-defined]
    playwright.expect(hit).to_have_count(1)
    for shown in ("user:ana / ana / lives_in", "Lisbon", "BELIEVED", "recency", "user_stated"):
        playwright.expect(hit).to_contain_text(shown)
    playwright.expect(pg.locator("table.hits")).not_to_contain_text("Porto")  # type: ignore[attr-defined]
    assert urlsplit(pg.url).path == "/search"  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#search input[name=q]")).to_have_value("Where does Ana live?")  # type: ignore[attr-defined]
    pg.screenshot(path=str(screenshot_dir() / "search.png"), full_page=True)  # type: ignore[attr-defined]

    hit.locator("a.key-link").click()
    assert urlsplit(pg.url).path == "/key"  # type: ignore[attr-defined]
    playwright.expect(pg.locator("h1")).to_contain_text("user:ana / ana / lives_in")  # type: ignore[attr-defined]


@pytest.fixture
def page_in_chromium() -> Iterator[object]:
    """A fresh browser page; the test fails if the CSP refused anything."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path())
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 700})
            pg = context.new_page()
            pg.set_default_timeout(UI_TIMEOUT_MS)
            refused: list[str] = []
            pg.on(
                "console",
                lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None,
            )
            yield pg
            assert refused == [], refused
        finally:
            browser.close()
