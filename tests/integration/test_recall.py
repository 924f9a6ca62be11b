"""recall: a subject's current beliefs in a namespace, for an agent that does not know the
keys: the clients' `recall` and the MCP tool `recall_about`, against a node served
in-process (the MCP server in-process too, through the SDK's own client)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anyio
import pytest
from _console import READER, InProcessNode
from mcp import Client as McpClient
from mcp.types import CallToolResult, TextContent

from factnode.client import AsyncClient, Client, InvalidFact
from factnode.mcp_server import build_server

SESSION_TIMEOUT = 30.0  # seconds for one in-process MCP session


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node served in-process on a loopback port chosen by the kernel."""
    n = InProcessNode(tmp_path_factory.mktemp("recall-node"))
    yield n
    n.close()


@pytest.fixture
def ns(node: InProcessNode) -> str:
    """A namespace where Ana has three beliefs (one of them two values) and Bo one."""
    ns = f"user:{uuid.uuid4().hex[:8]}"
    with node.client() as c:
        c.submit((ns, "ana", "lives_in"), "Porto", "agent_inferred", source="chat:1")
        c.submit((ns, "ana", "lives_in"), "Lisbon", "user_stated", source="user:ana")
        c.submit((ns, "ana", "employer"), "Acme", "api_response", source="hr-api")
        for language in ("Portuguese", "English"):
            c.submit((ns, "ana", "speaks"), language, "user_stated", source="user:ana")
        c.submit((ns, "bo", "lives_in"), "Oslo", "user_stated", source="user:bo")
    return ns


def test_client_recall_lists_a_subjects_beliefs(node: InProcessNode, ns: str) -> None:
    """recall answers every current belief about one subject, each with its evidence's anchor,
    and nothing about another subject."""
    with Client(node.address, token=READER) as client:
        found = client.recall(ns, "ana")
    by_predicate: dict[str, set[str]] = {}
    assert len(found) == 3  # a multi-valued key is one belief holding its values
    for b in found:
        assert b.key.subject == "ana" and b.evidence is not None
        by_predicate[b.key.predicate] = set(b.values) or {b.object}
    assert by_predicate == {
        "lives_in": {"Lisbon"}, "employer": {"Acme"}, "speaks": {"Portuguese", "English"},
    }  # fmt: skip
    anchors = {(b.key.predicate, b.object): b.evidence.attribution for b in found if b.evidence}
    assert anchors[("lives_in", "Lisbon")] == "user_stated"
    assert anchors[("employer", "Acme")] == "api_response"


async def test_async_recall_follows_pages_up_to_its_limit(node: InProcessNode) -> None:
    """recall reads page after page until it has `limit` beliefs or the subject has no more."""
    ns = f"user:{uuid.uuid4().hex[:8]}"
    with node.client() as c:
        for i in range(7):
            c.submit((ns, "ana", f"p{i}"), str(i), "user_stated", source="user:ana")
    async with AsyncClient(node.address, token=READER) as client:
        assert len(await client.recall(ns, "ana")) == 7
        assert len(await client.recall(ns, "ana", limit=5)) == 5
        assert await client.recall(ns, "nobody") == ()


def test_recall_refuses_a_bad_limit_before_sending() -> None:
    """A limit below 1 is refused by name on the client; nothing is sent."""
    client = Client("127.0.0.1:1", retries=0)  # nothing listens: proves no call
    with pytest.raises(InvalidFact) as err:
        client.recall("user:ana", "ana", limit=0)
    assert [e.field for e in err.value.field_errors] == ["limit"]
    client.close()


def _text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_mcp_recall_about(node: InProcessNode, ns: str) -> None:
    """recall_about lists each believed predicate of a subject with its value, state, rule
    and anchor; an unknown subject says nothing is believed; a bad limit is error text."""
    async with AsyncClient(node.address, token=READER) as client:
        with anyio.fail_after(SESSION_TIMEOUT):
            async with McpClient(build_server(client)) as session:
                tools = {t.name for t in (await session.list_tools()).tools}
                assert "recall_about" in tools
                result = await session.call_tool(
                    "recall_about", {"namespace": ns, "subject": "ana"}
                )
                text = _text(result)
                assert not result.is_error, text
                assert text.splitlines()[0] == f"{ns}/ana: 3 belief(s)"
                assert "- lives_in: 'Lisbon' (BELIEVED by rule " in text
                assert "user_stated from user:ana" in text
                assert "- employer: 'Acme' (BELIEVED" in text and "api_response from hr-api" in text
                assert "- speaks: 'English', 'Portuguese' (BELIEVED by rule multi_valued)" in text
                assert "'Porto'" not in text and "Oslo" not in text

                short = _text(
                    await session.call_tool(
                        "recall_about", {"namespace": ns, "subject": "ana", "limit": 2}
                    )
                )
                assert len([x for x in short.splitlines() if x.startswith("- ")]) == 2
                assert "more beliefs not shown: raise limit above 2" in short

                none = await session.call_tool("recall_about", {"namespace": ns, "subject": "cy"})
                assert not none.is_error
                assert _text(none) == f"nothing is believed about 'cy' in {ns}."

                bad = await session.call_tool(
                    "recall_about", {"namespace": ns, "subject": "ana", "limit": 0}
                )
                assert bad.is_error and "limit: must be between 1 and 1000" in _text(bad)


async def test_mcp_recall_about_reports_the_nodes_refusal(node: InProcessNode) -> None:
    """A token the node does not know comes back as tool error text, and the session goes on."""
    async with AsyncClient(node.address, token="not-a-token", retries=0) as client:
        with anyio.fail_after(SESSION_TIMEOUT):
            async with McpClient(build_server(client)) as session:
                args = {"namespace": "user:x", "subject": "ana"}
                result = await session.call_tool("recall_about", args)
                assert result.is_error and "permission denied" in _text(result)
                assert (await session.list_tools()).tools
