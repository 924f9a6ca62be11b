"""The console's key timeline after an operator's resolution: the version served until then
is drawn believed until the resolution, not "never believed"."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from _console import OPERATOR, InProcessNode, sign_in, tie
from starlette.testclient import TestClient

from factnode.console import ConsoleSettings, create_app


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """One node with an operator token."""
    n = InProcessNode(tmp_path_factory.mktemp("console-timeline"))
    try:
        yield n
    finally:
        n.close()


def test_a_version_served_until_a_resolution_is_drawn_believed_until_then(
    node: InProcessNode,
) -> None:
    """Porto and Faro tie; resolving to the tiebreak's loser draws the provisional belief as a
    bar that ends at the resolution, with a title saying so; the llm_generated loser, never
    served, still says "never believed"."""
    space = f"user:{uuid.uuid4().hex[:10]}"
    key = (space, "ana", "lives_in")
    with node.client() as grpc_client:
        tie(grpc_client, space, "ana", ("Porto", "Faro"))
        grpc_client.submit(key, "Lisbon", "llm_generated", source="gpt-x", confidence=0.9)
        provisional = grpc_client.belief(key).object
        chosen = "Faro" if provisional == "Porto" else "Porto"
        before = _key_page(node, space)
        assert "never believed" in before and "until-resolution" not in before
        grpc_client.resolve(key, "asked Ana", object=chosen)
    html = _key_page(node, space)
    assert 'class="interval until-resolution"' in html
    title = "(disbelieved): believed until the operator's resolution at"
    assert f"&#x27;{provisional}&#x27; {title}" in html
    assert "never believed (disbelieved)" in html  # Lisbon: never served
    assert html.count("never believed") == 1


def _key_page(node: InProcessNode, space: str) -> str:
    base = "http://127.0.0.1"
    app = create_app(ConsoleSettings(node.address, timeout=5))
    query = urlencode({"namespace": space, "subject": "ana", "predicate": "lives_in"})
    with TestClient(
        app, base_url=base, follow_redirects=False, headers={"Origin": base}
    ) as console:
        sign_in(console, base, OPERATOR)
        page = console.get(f"/key?{query}")
    assert page.status_code == 200
    return page.text
