"""The OpenAI Agents SDK (`openai-agents`) as a client of `factnode mcp --http`: its
`MCPServerStreamableHttp` lists and calls the tools of a real MCP server talking to a real
served node, with the MCP bearer token in its headers; no model is called."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from _e2e import ServerProcess, unique_ns
from agents import Agent, RunContextWrapper
from agents.exceptions import UserError
from agents.mcp import MCPServerStreamableHttp
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from test_mcp_http import SESSION_TIMEOUT, TOKEN, mcp_http

TOOLS = {"remember_fact", "recall", "recall_about", "why", "history", "forget"}


def _text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def _server(url: str, headers: dict[str, str]) -> MCPServerStreamableHttp:
    return MCPServerStreamableHttp(
        params={"url": url, "headers": headers, "timeout": 30}, name="factnode",
        client_session_timeout_seconds=30,
    )  # fmt: skip


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    """An MCP token file granting `TOKEN`."""
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN}\n")
    return path


async def test_agents_sdk_lists_and_calls_the_tools(
    server: ServerProcess, tmp_path: Path, token_file: Path
) -> None:
    """With a valid bearer token, the SDK's MCPServerStreamableHttp lists factnode's tools,
    remembers a fact and recalls it by subject; an Agent given the server sees the tools."""
    ns = unique_ns("user:agents-sdk")
    with mcp_http(server, tmp_path / "home", "--mcp-token-file", str(token_file)) as url:
        factnode = _server(url, {"Authorization": f"Bearer {TOKEN}"})
        with anyio.fail_after(SESSION_TIMEOUT):
            await factnode.connect()
            try:
                assert {t.name for t in await factnode.list_tools()} >= TOOLS
                done = await factnode.call_tool(
                    "remember_fact",
                    {"namespace": ns, "subject": "ana", "predicate": "lives_in",
                     "object": "Porto", "attribution": "user_stated", "source": "user:ana"},
                )  # fmt: skip
                assert not done.is_error and _text(done).startswith("ACCEPTED"), _text(done)
                about = await factnode.call_tool(
                    "recall_about", {"namespace": ns, "subject": "ana"}
                )
                assert not about.is_error, _text(about)
                assert "- lives_in: 'Porto' (BELIEVED" in _text(about), _text(about)

                agent = Agent(name="assistant", mcp_servers=[factnode])
                tools = await agent.get_mcp_tools(RunContextWrapper(context=None))
                assert {t.name for t in tools} >= TOOLS
            finally:
                await factnode.cleanup()


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}],
    ids=["no-token", "wrong-token", "no-scheme"],
)
async def test_agents_sdk_without_a_valid_token_is_refused(
    server: ServerProcess, tmp_path: Path, token_file: Path, headers: dict[str, str]
) -> None:
    """Without a token, with a wrong one or without the Bearer scheme, the SDK's connect()
    raises the server's refusal (an MCPError saying unauthorized), and the server object is
    left unconnected."""
    with mcp_http(server, tmp_path / "home", "--mcp-token-file", str(token_file)) as url:
        factnode = _server(url, headers)
        with anyio.fail_after(SESSION_TIMEOUT):
            with pytest.raises(ExceptionGroup) as refused:
                await factnode.connect()
            # MCP v2's client reads the 401's JSON-RPC error into an MCPError; the SDK lets
            # it out of connect() inside the transport's task groups.
            assert refused.group_contains(MCPError, match=r"^unauthorized: send Authorization"), (
                refused.value
            )
            with pytest.raises(UserError, match="Server not initialized"):
                await factnode.list_tools()
            await factnode.cleanup()
