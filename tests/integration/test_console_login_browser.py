"""Signing in to the console in a real browser (Playwright driving Debian's chromium): a key's
page sends the browser to the sign-in page; a reader reads, and an erase posted with a
reader's session is refused by the node in words; sign-out; an operator then erases.
Issue 41, finding 1."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from _console import OPERATOR, READER, ConsoleServer, InProcessNode, chromium_path

from factnode.client import NotFound
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
KEY = ("user:lena", "lena", "lives_in")
VALUE = "Flat 4, 12 Quiet Lane"
SESSION_SECONDS = 3600.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node with reader and operator tokens, holding one personal value."""
    n = InProcessNode(tmp_path_factory.mktemp("login-browser"))
    try:
        with n.client() as c:
            c.submit(KEY, VALUE, "user_stated", source="lena")
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def console(node: InProcessNode) -> Iterator[ConsoleServer]:
    server = ConsoleServer(
        ConsoleSettings(node.address, timeout=10, session_seconds=SESSION_SECONDS)
    )
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[object]:
    """A fresh browser (its own cookie jar); the test fails if the CSP refused anything."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path())
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 900})
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


def sign_in(pg: object, token: str) -> None:
    form = pg.locator("#login")  # type: ignore[attr-defined]
    form.locator("input[name=token]").fill(token)
    form.get_by_role("button", name="Sign in").click()


def value_held(node: InProcessNode) -> bool:
    with node.client() as c:
        try:
            return c.belief(KEY).object == VALUE
        except NotFound:
            return False


def test_sign_in_as_a_reader_is_refused_an_erase_then_an_operator_erases(
    console: ConsoleServer, node: InProcessNode, page: object
) -> None:
    """The key's page asks for a sign-in first (showing nothing of the key); a reader's
    session cookie is HttpOnly, SameSite=Strict and expiring; the reader sees the value but
    no Erase, and an erase form submitted anyway is refused by the node (PERMISSION_DENIED,
    said on the page) and the value stays; after signing out the key asks for a sign-in
    again; an operator's erase then goes through and the value is gone."""
    pg: object = page
    url = f"{console.url}/key?" + urlencode(
        dict(zip(("namespace", "subject", "predicate"), KEY, strict=True))
    )
    pg.goto(url)  # type: ignore[attr-defined]
    assert urlsplit(pg.url).path == "/login"  # type: ignore[attr-defined]
    assert VALUE not in pg.content()  # type: ignore[attr-defined]

    sign_in(pg, READER)
    playwright.expect(pg.locator("#user")).to_contain_text("signed in (reader)")  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#page")).to_contain_text(VALUE)  # type: ignore[attr-defined]
    assert pg.url == url  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#erase")).to_have_count(0)  # type: ignore[attr-defined]
    [cookie] = pg.context.cookies()  # type: ignore[attr-defined]
    assert cookie["name"] == "factnode_console_session"
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert 0 < cookie["expires"] - time.time() <= SESSION_SECONDS + 5
    assert pg.evaluate("document.cookie") == ""  # type: ignore[attr-defined]

    # The form an operator's page would hold, submitted with the reader's session.
    pg.evaluate(  # type: ignore[attr-defined]
        """([ns, subject, predicate]) => {
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
        }""",
        list(KEY),
    )
    pg.locator("#forged button").click()  # type: ignore[attr-defined]
    error = pg.locator("#error")  # type: ignore[attr-defined]
    playwright.expect(error).to_contain_text("PERMISSION_DENIED")
    playwright.expect(error).to_contain_text("need an operator's token")
    playwright.expect(pg.locator("#page")).to_contain_text(VALUE)  # type: ignore[attr-defined]
    assert value_held(node)

    pg.get_by_role("button", name="Sign out").click()  # type: ignore[attr-defined]
    playwright.expect(pg.locator("#why")).to_contain_text("You are signed out")  # type: ignore[attr-defined]
    assert pg.context.cookies() == []  # type: ignore[attr-defined]
    pg.goto(url)  # type: ignore[attr-defined]
    assert urlsplit(pg.url).path == "/login"  # type: ignore[attr-defined]

    sign_in(pg, OPERATOR)
    playwright.expect(pg.locator("#user")).to_contain_text("signed in (operator)")  # type: ignore[attr-defined]
    form = pg.locator("#erase")  # type: ignore[attr-defined]
    form.locator("input[name=confirm]").fill("/".join(KEY))
    form.locator("input[name=reason]").fill("request #41")
    form.get_by_role("button", name="Erase for good").click()
    playwright.expect(pg.locator("#result")).to_contain_text("ERASED")  # type: ignore[attr-defined]
    assert VALUE not in pg.content()  # type: ignore[attr-defined]
    assert not value_held(node)
