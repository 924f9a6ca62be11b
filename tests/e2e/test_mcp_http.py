"""`factnode mcp --http`: the same tools over the MCP SDK's Streamable HTTP transport, through
the SDK's own HTTP client, against a real served node; bearer tokens on the MCP side, and
no non-loopback listen without them."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from _e2e import CLI_TIMEOUT, START_TIMEOUT, ServerProcess, factnode_command, isolated_env
from _processes import stop_process
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, METHOD_NOT_FOUND, ErrorData, TextContent
from test_console_cli import first_line

from factnode.client import Client
from factnode.mcp_server import BearerTokens

SESSION_TIMEOUT = 60.0  # seconds for one whole MCP session
TOKEN = "mcp-agent-token-0123"


@contextmanager
def mcp_http(
    server: ServerProcess, home: Path, *options: str, host: str = "127.0.0.1"
) -> Iterator[str]:
    """`factnode mcp --http` on a free port of `host`; yields the URL it announces."""
    proc = subprocess.Popen(
        factnode_command("mcp", "--address", server.address, "--http", "--listen",
                         f"{host}:0", *options),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=isolated_env(home),
    )  # fmt: skip
    try:
        line = first_line(proc, START_TIMEOUT)
        assert line.startswith(f"factnode mcp on http://{host}:"), line
        assert line.endswith(f"for the node at {server.address}"), line
        yield line.split()[3]
    finally:
        code = stop_process(proc, signal.SIGTERM)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    assert code == 0


def _text(result: object) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))  # type: ignore[attr-defined]


async def test_tools_over_http_with_a_token(server: ServerProcess, tmp_path: Path) -> None:
    """With MCP tokens, a client sending one lists and calls the tools over HTTP at /mcp;
    requests without it, or with another, get 401 and change nothing."""
    (tmp_path / "tokens").write_text(f"# agents\n{TOKEN}\n\nsecond-token-0123456789\n")
    with mcp_http(server, tmp_path / "home", "--mcp-token-file", str(tmp_path / "tokens")) as url:
        assert url.endswith("/mcp"), url
        ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            refused = httpx.post(url, json=ping, headers=headers, timeout=CLI_TIMEOUT)
            assert refused.status_code == 401, (headers, refused.text)
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.json()["error"]["message"].startswith("unauthorized:"), refused.text

        key = {"namespace": "user:http", "subject": "ana", "predicate": "lives_in"}
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        with anyio.fail_after(SESSION_TIMEOUT):
            async with http, McpClient(streamable_http_client(url, http_client=http)) as session:
                tools = {t.name for t in (await session.list_tools()).tools}
                assert {"remember_fact", "recall", "recall_about", "forget"} <= tools
                done = await session.call_tool(
                    "remember_fact",
                    {**key, "object": "Porto", "attribution": "user_stated", "source": "user:ana"},
                )
                assert not done.is_error and _text(done).startswith("ACCEPTED"), _text(done)
                about = await session.call_tool(
                    "recall_about", {"namespace": "user:http", "subject": "ana"}
                )
                assert "- lives_in: 'Porto' (BELIEVED" in _text(about), _text(about)


async def test_loopback_without_tokens_serves_anyone_local(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Without MCP tokens a loopback listen serves local clients, and says so."""
    with mcp_http(server, tmp_path / "home") as url, anyio.fail_after(SESSION_TIMEOUT):
        async with McpClient(url) as session:
            result = await session.call_tool(
                "recall_about", {"namespace": "user:nobody", "subject": "ana"}
            )
            assert _text(result) == "nothing is believed about 'ana' in user:nobody."


async def test_unknown_tool_and_prompts_are_protocol_errors_over_http(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Over HTTP as over stdio: a call of an unknown tool is JSON-RPC error -32602 "Unknown
    tool: NAME", a known tool's refusal stays an isError result, and with no `prompts`
    capability advertised prompts/get is -32601."""
    with mcp_http(server, tmp_path / "home") as url, anyio.fail_after(SESSION_TIMEOUT):
        async with McpClient(url) as session:
            assert session.server_capabilities.prompts is None, session.server_capabilities
            with pytest.raises(MCPError) as unknown:
                await session.call_tool("recall_everything", {"namespace": "user:http"})
            assert unknown.value.error == ErrorData(
                code=INVALID_PARAMS, message="Unknown tool: recall_everything"
            )
            refused = await session.call_tool(
                "recall", {"namespace": "user:nobody", "subject": "ana", "predicate": "city"}
            )
            assert refused.is_error, _text(refused)
            assert _text(refused) == (
                "Error executing tool recall: not found: no belief for user:nobody/ana/city"
            )
            with pytest.raises(MCPError) as unserved:
                await session.get_prompt("recall")
            assert unserved.value.error == ErrorData(
                code=METHOD_NOT_FOUND, message="Method not found", data="prompts/get"
            )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ("--listen", "0.0.0.0:0"),
            "--listen: 0.0.0.0:0 is reachable from other machines but no MCP tokens are given",
        ),
        (
            ("--listen", "127.0.0.1:0", "--allowed-host", "evil.example/x"),
            "--allowed-host: 'evil.example/x' is not a host name or address",
        ),
        (
            ("--listen", "127.0.0.1:0", "--allowed-origin", "evil.example"),
            "--allowed-origin: 'evil.example' is not an origin",
        ),
        (("--listen", "7430"), "--listen must be HOST:PORT"),
        (("--mcp-token-file", "/nonexistent/tokens"), "--mcp-token-file:"),
    ],
)
def test_usage_errors_exit_2_naming_the_option(
    options: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    """A non-loopback listen without MCP tokens, a bad --listen or an unreadable token file
    exits 2 with a message naming the option, before serving anything."""
    done = subprocess.run(
        factnode_command("mcp", "--address", "127.0.0.1:1", "--http", *options),
        capture_output=True, text=True, timeout=CLI_TIMEOUT, env=isolated_env(tmp_path),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert message in done.stderr, done.stderr


def test_bearer_check_is_per_token_and_scheme() -> None:
    """The scheme is case-insensitive; the token must equal one configured token exactly."""
    gate = BearerTokens(app=None, tokens=frozenset({"alpha", "beta"}))
    assert gate.allows(b"Bearer alpha") and gate.allows(b"bearer beta")
    assert not gate.allows(b"Bearer alph") and not gate.allows(b"Bearer alphaa")
    assert not gate.allows(b"Basic alpha") and not gate.allows(b"Bearer ") and not gate.allows(b"")


INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "rebinding-probe", "version": "0"}},
}  # fmt: skip
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def _post_as(url: str, host_header: str, origin: str | None) -> httpx.Response:
    """An initialize request to `url` carrying another Host (and Origin) than the URL's."""
    headers = {**MCP_HEADERS, "Host": host_header, **({"Origin": origin} if origin else {})}
    return httpx.post(url, json=INIT, headers=headers, timeout=CLI_TIMEOUT)


def _believed(server: ServerProcess, namespace: str) -> list[object]:
    with Client(server.address, timeout=CLI_TIMEOUT) as client:
        return list(client.beliefs(namespace).items)


@pytest.mark.parametrize("host", ["127.0.0.2", "127.0.0.1"])
async def test_a_rebound_name_is_refused_on_every_loopback_address(
    server: ServerProcess, tmp_path: Path, host: str
) -> None:
    """Tokenless MCP on 127.0.0.2 (not only 127.0.0.1) refuses `Host: evil.example` with a
    matching Origin (DNS rebinding) before any session, and writes nothing; the request
    naming the address it listens on is served and writes."""
    namespace = f"user:rebind-{host.replace('.', '-')}"
    with mcp_http(server, tmp_path / "home", host=host) as url:
        port = url.split(":")[2].split("/")[0]
        for host_header, origin in [
            (f"evil.example:{port}", f"http://evil.example:{port}"),
            (f"evil.example:{port}", None),
            (f"{host}:{port}", f"http://evil.example:{port}"),
        ]:
            refused = _post_as(url, host_header, origin)
            assert refused.status_code in (421, 403), (host_header, origin, refused.text)
            assert "mcp-session-id" not in refused.headers
        assert _believed(server, namespace) == []

        args = {"namespace": namespace, "subject": "ana", "predicate": "lives_in",
                "object": "Porto", "attribution": "user_stated", "source": "user:ana"}  # fmt: skip
        with anyio.fail_after(SESSION_TIMEOUT):
            async with McpClient(url) as session:
                done = await session.call_tool("remember_fact", args)
                assert not done.is_error and _text(done).startswith("ACCEPTED"), _text(done)
        assert len(_believed(server, namespace)) == 1
        same_origin = _post_as(url, f"localhost:{port}", f"http://localhost:{port}")
        assert same_origin.status_code == 200, same_origin.text


def test_configured_names_and_origins_are_accepted(server: ServerProcess, tmp_path: Path) -> None:
    """--allowed-host and --allowed-origin add a name and a browser origin; others stay refused."""
    options = ("--allowed-host", "mcp.internal", "--allowed-origin", "https://agents.example")
    with mcp_http(server, tmp_path / "home", *options, host="127.0.0.2") as url:
        port = url.split(":")[2].split("/")[0]
        assert _post_as(url, f"mcp.internal:{port}", None).status_code == 200
        assert _post_as(url, f"127.0.0.2:{port}", "https://agents.example").status_code == 200
        assert _post_as(url, f"mcp.internal:{port}", "https://evil.example").status_code == 403
        assert _post_as(url, f"other.internal:{port}", None).status_code == 421


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("a\n", "--mcp-token-file line 1: is 1 characters long; give at least 16"),
        (
            f"{TOKEN}\n# again\n{TOKEN}\n",
            "--mcp-token-file line 3: is the same as an earlier token",
        ),
        ("with space 0123456789\n", "--mcp-token-file line 1: may hold only visible ASCII"),
    ],
)
def test_mcp_tokens_follow_the_node_token_rule(tmp_path: Path, lines: str, message: str) -> None:
    """An MCP token shorter than 16 characters, repeated or not one word exits 2 naming the
    file's line, as the node's own [[tokens]] are refused."""
    (tmp_path / "tokens").write_text(lines)
    done = subprocess.run(
        factnode_command("mcp", "--address", "127.0.0.1:1", "--http", "--listen", "127.0.0.1:0",
                         "--mcp-token-file", str(tmp_path / "tokens")),
        capture_output=True, text=True, timeout=CLI_TIMEOUT, env=isolated_env(tmp_path),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert message in done.stderr, done.stderr
    assert TOKEN not in done.stderr  # the reason never quotes a secret
