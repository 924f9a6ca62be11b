"""The console's erasures pages in a real browser (Playwright driving Debian's chromium): the
header's link leads to the list, and an erasure's page shows each member's receipt or why
it is missing. Issue 45, item 2."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from _console import OPERATOR, ConsoleServer, InProcessNode, chromium_path, screenshot_dir

from factnode.console import ConsoleSettings
from factnode.core import MICROS_PER_SECOND
from factnode.core.members import MemberRecord
from factnode.core.receipts import Receipt
from factnode.store import StoredMember, Writes

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
    """A node that erased Ana's city, in a federation of five: n2 and n3 confirmed, n4 has
    not yet, n5 is revoked."""
    n = InProcessNode(tmp_path_factory.mktemp("erasures-browser"))
    try:
        with n.client() as c:
            c.submit(KEY, "Porto", "user_stated", source="user:ana")
            erased = c.erase("GDPR art. 17 request #4512", key=KEY)
        now = n.node.ledger.clock.now()
        members = [
            StoredMember(MemberRecord(m, f"{m}.example:7421", b"pem", 1, b"\x01"), m == "n5")
            for m in ("n2", "n3", "n4", "n5")
        ]
        receipts = [
            Receipt(erased.erasure_id, m, now + i * MICROS_PER_SECOND, 0, b"\x02")
            for i, m in enumerate(("n2", "n3"), 1)
        ]
        with n.node.repo.write() as tx:
            tx.apply(Writes(members=members, receipts=receipts))
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


def test_the_node_page_leads_to_erasures_and_each_shows_its_members(
    console: ConsoleServer, page_in_chromium: object
) -> None:
    """Signed in as an operator, the node page's "Erasures" link (the header has no room
    for one more at 1200 px) lists the erasure waiting for n4; its page shows n2 and n3
    confirmed, n4 waiting and n5 revoked. Screenshots of both pages are saved."""
    pg: object = page_in_chromium
    pg.goto(f"{console.url}/node")  # type: ignore[attr-defined]
    form = pg.locator("#login")  # type: ignore[attr-defined]
    form.locator("input[name=token]").fill(OPERATOR)
    form.get_by_role("button", name="Sign in").click()
    pg.locator("main").get_by_role("link", name="Erasures").click()  # type: ignore[attr-defined]
    assert urlsplit(pg.url).path == "/erasures"  # type: ignore[attr-defined]
    row = pg.locator("tr.erasure")  # type: ignore[attr-defined]
    playwright.expect(row).to_have_count(1)
    playwright.expect(row).to_contain_text("confirmed by 3 of 4 members; waiting: n4; revoked: n5")
    pg.screenshot(path=str(screenshot_dir() / "erasures.png"), full_page=True)  # type: ignore[attr-defined]

    row.locator("a.erasure-link").click()
    assert urlsplit(pg.url).path.startswith("/erasures/")  # type: ignore[attr-defined]
    members = pg.locator("table.receipts tr.member")  # type: ignore[attr-defined]
    playwright.expect(members).to_have_count(5)
    for node_id, state in (("n2", "confirmed"), ("n3", "confirmed"), ("n4", "waiting"),
                           ("n5", "revoked")):  # fmt: skip
        playwright.expect(pg.locator(f'tr[data-node="{node_id}"]')).to_contain_text(state)  # type: ignore[attr-defined]
    playwright.expect(pg.locator('tr[data-node="n4"]')).to_contain_text("never heard from")  # type: ignore[attr-defined]
    pg.screenshot(path=str(screenshot_dir() / "erasure.png"), full_page=True)  # type: ignore[attr-defined]


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
