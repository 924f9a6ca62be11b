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


# --- the README's examples ---------------------------------------------------------------

README_URL = "http://127.0.0.1:7430/mcp"


def _readme_block(marker: str) -> str:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index(f"<!-- {marker} -->") :]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert README_URL in code and f"Bearer {TOKEN}" in code
    return code


def test_readme_agents_sdk_tool_calls_run(
    server: ServerProcess, tmp_path: Path, token_file: Path
) -> None:
    """The README's Agents SDK tool-call example runs as printed against a real
    `factnode mcp --http` with its token, and prints what its comments say."""
    code = _readme_block("agents-sdk-tools-example")
    printed: list[str] = []
    lines = code.splitlines()
    # Each print's expected output is its line's comment, or the next line's where it is long.
    expected = [
        (line if "# " in line else lines[i + 1]).split("# ", 1)[1]
        for i, line in enumerate(lines)
        if "print(" in line
    ]
    with mcp_http(server, tmp_path / "home", "--mcp-token-file", str(token_file)) as url:
        run = {"__name__": "readme", "print": lambda *a: printed.append(" ".join(map(str, a)))}
        exec(compile(code.replace(README_URL, url), "README.md", "exec"), run)
    assert printed == expected and len(expected) == 3


async def test_readme_agents_sdk_agent_sees_the_tools(
    server: ServerProcess, tmp_path: Path, token_file: Path
) -> None:
    """The README's Agent example, up to the model's run, connects with its token and gives
    the agent factnode's tools (the run itself needs a model and is not made)."""
    code = _readme_block("agents-sdk-agent-example")
    run_line = "        result = await Runner.run(agent, message)  # the model: OPENAI_API_KEY\n"
    assert run_line in code
    code = code.replace(
        run_line, "        return await agent.get_mcp_tools(RunContextWrapper(context=None))\n"
    ).replace("        return str(result.final_output)\n", "")
    with mcp_http(server, tmp_path / "home", "--mcp-token-file", str(token_file)) as url:
        run: dict[str, object] = {"__name__": "readme", "RunContextWrapper": RunContextWrapper}
        exec(compile(code.replace(README_URL, url), "README.md", "exec"), run)
        with anyio.fail_after(SESSION_TIMEOUT):
            tools = await run["chat"]("unused")  # type: ignore[operator]
    assert {t.name for t in tools} >= TOOLS
