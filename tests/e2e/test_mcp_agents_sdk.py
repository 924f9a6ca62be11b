"""The OpenAI Agents SDK (`openai-agents`) as a client of `factnode mcp --http`: its
`MCPServerStreamableHttp` lists and calls the tools of a real MCP server talking to a real
served node, with the MCP bearer token in its headers; no LLM is called (where an Agent runs,
a scripted stand-in plays the model)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _e2e import ServerProcess, unique_ns
from agents import (
    Agent,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    Tool,
    Usage,
)
from agents.exceptions import UserError
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.mcp import MCPServerStreamableHttp
from agents.models.interface import ModelTracing
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from test_mcp_http import SESSION_TIMEOUT, TOKEN, mcp_http

TOOLS = {"remember_fact", "recall", "recall_about", "search", "why", "history", "forget"}


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


# --- the MCP page's examples (docs/agents/mcp.md) ---------------------------------------------------------------

EXAMPLE_URL = "http://127.0.0.1:7430/mcp"


def _readme_block(marker: str) -> str:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "agents" / "mcp.md").read_text()
    section = readme[readme.index(f"<!-- {marker} -->") :]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert EXAMPLE_URL in code and f"Bearer {TOKEN}" in code
    return code


def test_readme_agents_sdk_tool_calls_run(
    server: ServerProcess, tmp_path: Path, token_file: Path
) -> None:
    """The MCP page's Agents SDK tool-call example runs as printed against a real
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
        exec(compile(code.replace(EXAMPLE_URL, url), "docs/agents/mcp.md", "exec"), run)
    assert printed == expected and len(expected) == 4


class ScriptedModel(Model):
    """A stand-in for the LLM: it calls `remember_fact`, then `recall_about`, then answers
    with the last tool output it was given; it records the tools it was offered."""

    def __init__(self, ns: str) -> None:
        self.calls = [
            ("remember_fact", {"namespace": ns, "subject": "ana", "predicate": "lives_in",
                               "object": "Porto", "attribution": "user_stated",
                               "source": "user:ana"}),
            ("recall_about", {"namespace": ns, "subject": "ana"}),
        ]  # fmt: skip
        self.offered: list[set[str]] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[TResponseInputItem],
        model_settings: ModelSettings, tools: list[Tool], output_schema: object,
        handoffs: list[Handoff], tracing: ModelTracing, *, previous_response_id: str | None,
        conversation_id: str | None, prompt: object,
    ) -> ModelResponse:  # fmt: skip
        self.offered.append({t.name for t in tools})
        turn = len(self.offered)
        if turn <= len(self.calls):
            name, args = self.calls[turn - 1]
            call = ResponseFunctionToolCall(
                type="function_call", call_id=f"call-{turn}", name=name,
                arguments=json.dumps(args),
            )  # fmt: skip
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        assert isinstance(input, list)
        outputs = [i for i in input if i.get("type") == "function_call_output"]
        answer = ResponseOutputMessage(
            type="message", id="answer", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text=str(outputs[-1]["output"]),
                                        annotations=[])],
        )  # fmt: skip
        return ModelResponse(output=[answer], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the test runs without streaming")


async def test_readme_agents_sdk_agent_runs_the_tools(
    server: ServerProcess, tmp_path: Path, token_file: Path
) -> None:
    """The MCP page's Agent example, run with a scripted model in place of the LLM, offers the
    model factnode's tools and carries out its remember_fact and recall_about calls on the
    node through `factnode mcp --http` and its token."""
    code = _readme_block("agents-sdk-agent-example")
    run_line = "Runner.run(agent, message)"
    assert run_line in code
    code = code.replace(run_line, "Runner.run(agent, message, run_config=RUN_CONFIG)")
    model = ScriptedModel(unique_ns("user:agents-sdk"))
    with mcp_http(server, tmp_path / "home", "--mcp-token-file", str(token_file)) as url:
        run: dict[str, Any] = {
            "__name__": "readme",
            "RUN_CONFIG": RunConfig(model=model, tracing_disabled=True),
        }
        exec(compile(code.replace(EXAMPLE_URL, url), "docs/agents/mcp.md", "exec"), run)
        with anyio.fail_after(SESSION_TIMEOUT):
            answer = await run["chat"]("I'm Ana and I live in Porto now.")
    assert all(offered >= TOOLS for offered in model.offered) and len(model.offered) == 3
    assert "- lives_in: 'Porto' (BELIEVED" in answer, answer
