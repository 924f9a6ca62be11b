"""The console's search page (issue 44, item 5): SearchBeliefs with the signed-in user's
token, over HTTP (Starlette's TestClient) against a real node served in-process."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from _console import OPERATOR, READER, InProcessNode, sign_in
from starlette.testclient import TestClient

from factnode.client import Client
from factnode.config import TokenGrant
from factnode.console import ConsoleSettings, create_app

BASE = "http://127.0.0.1"
TEAM_A_READER = "console-team-a-reader-token"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node with reader and operator tokens, and a reader of `team:a*` namespaces only."""
    team_a = TokenGrant(frozenset({"reader"}), ("team:a*",), "ada")
    n = InProcessNode(tmp_path_factory.mktemp("console-search"), grants={TEAM_A_READER: team_a})
    try:
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def grpc_client(node: InProcessNode) -> Iterator[Client]:
    with node.client() as c:
        yield c


def console(node: InProcessNode, token: str) -> TestClient:
    app = create_app(ConsoleSettings(node.address, timeout=5))
    return TestClient(app, base_url=BASE, follow_redirects=False, headers={"Origin": BASE})


@pytest.fixture(scope="module")
def reader(node: InProcessNode) -> Iterator[TestClient]:
    """The console signed in with the reader token (every namespace)."""
    with console(node, READER) as c:
        sign_in(c, BASE, READER)
        yield c


def ns(prefix: str = "user") -> str:
    return f"{prefix}:{uuid.uuid4().hex[:10]}"


def hits(page: str) -> list[tuple[str, str, str, str, str]]:
    """The hits table's rows: key, value, state, rule, anchor."""
    rows = re.findall(r'<tr class="hit">(.*?)</tr>', page, re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in rows]
    return [
        (re.sub(r"<[^>]+>", "", c[0]).strip(), c[1], re.sub(r"<[^>]+>", "", c[2]), c[3], c[4])
        for c in cells
    ]


def search(client: TestClient, **params: str) -> str:
    answer = client.get("/search?" + urlencode(params))
    assert answer.status_code == 200, answer.text
    return answer.text


def test_search_shows_the_believed_value_with_its_key_never_a_superseded_one(
    reader: TestClient, grpc_client: Client
) -> None:
    """A query finds the believed value (key linking to its page, value, state, rule,
    anchor, score); the value it superseded is never a hit now, and is the hit at an
    as_of when it was believed."""
    space = ns()
    key = (space, "ana", "lives_in")
    for city, year in (("Porto", 2023), ("Lisbon", 2024)):
        grpc_client.submit(
            key, city, "user_stated", source="user:ana", valid_from=datetime(year, 1, 1, tzinfo=UTC)
        )
    page = search(reader, q="where does Ana live, Porto or Lisbon?", namespace=space)
    assert hits(page) == [
        (f"{space} / ana / lives_in", "Lisbon", "BELIEVED", "recency", "user_stated")
    ]
    table = page[page.index('<table class="hits">') :]
    assert "Porto" not in table
    link = "/key?" + urlencode({"namespace": space, "subject": "ana", "predicate": "lives_in"})
    assert f'href="{link.replace("&", "&amp;")}"' in page
    assert re.search(r'<td class="score">[0-9.e+-]+</td>', page)
    assert 'value="where does Ana live, Porto or Lisbon?"' in page  # the form keeps the words

    gone = search(reader, q="Porto", namespace=space)
    assert hits(gone) == [] and "No believed value matches in namespaces starting with" in gone
    then = search(reader, q="Porto", namespace=space, as_of="2023-06-01")
    assert [h[1] for h in hits(then)] == ["Porto"]


def test_search_escapes_what_it_shows_and_pages_by_the_nodes_token(
    reader: TestClient, grpc_client: Client
) -> None:
    """A value holding markup is shown as text; pages follow the node's page token, and every
    hit appears once across them."""
    space = ns()
    value = '<script>alert("coimbra")</script>'
    for subject in ("bo", "cy", "di"):
        grpc_client.submit((space, subject, "lives_in"), value, "user_stated", source="x")
    first = search(reader, q="coimbra", namespace=space, page_size="2")
    assert "<script>alert" not in first and "&lt;script&gt;alert(" in first
    assert len(hits(first)) == 2
    [next_url] = re.findall(r'class="next" href="([^"]+)"', first)
    second = reader.get(next_url.replace("&amp;", "&")).text
    keys = [h[0] for h in hits(first) + hits(second)]
    assert sorted(keys) == [f"{space} / {s} / lives_in" for s in ("bo", "cy", "di")]
    assert 'class="next"' not in second


def test_search_refusals_name_the_field_and_keep_the_form(reader: TestClient) -> None:
    """Input the console or the node refuses is shown in words with each bad field (400),
    never a stack trace, and the form keeps what was typed."""
    cases = (
        ({"q": "?!"}, "query", "has no words to search for"),
        ({"q": "Porto", "as_of": "yesterday"}, "as_of", "is not an ISO 8601 time"),
        ({"q": "Porto", "page_size": "500"}, "page_size", "must be a whole number from 1 to"),
        ({"q": "Porto", "page_size": "150"}, "page_size", "must be at most 100"),
    )
    for params, field, reason in cases:
        answer = reader.get("/search?" + urlencode(params))
        assert answer.status_code == 400, (params, answer.text)
        assert "INVALID_ARGUMENT" in answer.text and f"<code>{field}</code>: " in answer.text
        assert reason in answer.text, answer.text
        assert "Traceback" not in answer.text and 'id="search"' in answer.text
        assert f'value="{params["q"]}"' in answer.text
    empty = reader.get("/search")
    assert empty.status_code == 200 and 'class="hit"' not in empty.text
    assert "No believed value matches" not in empty.text and 'id="error"' not in empty.text


def test_a_reader_of_some_namespaces_finds_hits_only_there(
    node: InProcessNode, grpc_client: Client
) -> None:
    """The console searches with the signed-in user's token: a reader of `team:a*` finds the
    matching value there and never the one in another team's namespace, which an operator
    finds."""
    mine, theirs = ns("team:a"), ns("team:b")
    for space in (mine, theirs):
        grpc_client.submit(
            (space, "db", "choice"), f"Postgres for {space}", "user_stated", source="x"
        )
    with console(node, TEAM_A_READER) as scoped:
        sign_in(scoped, BASE, TEAM_A_READER)
        found = search(scoped, q="which postgres database", namespace="team:")
    assert [h[0] for h in hits(found)] == [f"{mine} / db / choice"]
    assert theirs not in found
    with console(node, OPERATOR) as operator:
        sign_in(operator, BASE, OPERATOR)
        every = search(operator, q="which postgres database", namespace="team:")
    assert {h[0] for h in hits(every)} >= {f"{mine} / db / choice", f"{theirs} / db / choice"}


def test_every_page_offers_the_search_box_once_signed_in(
    node: InProcessNode, reader: TestClient
) -> None:
    """The header holds a search box on the console's pages, not on the sign-in page."""
    assert 'action="/search" role="search"' in reader.get("/decisions").text
    with console(node, READER) as anonymous:
        login = anonymous.get("/login")
    assert login.status_code == 200 and 'action="/search"' not in login.text
