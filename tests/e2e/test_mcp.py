"""`factnode mcp` through the MCP SDK's own stdio client, against a real served node."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from _e2e import (
    CLI_TIMEOUT,
    RPC_TIMEOUT,
    ServerProcess,
    factnode_command,
    free_port,
    isolated_env,
    start_server,
    unique_ns,
)
from mcp import ClientSession, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolResult,
    ErrorData,
    TextContent,
    TextResourceContents,
)

from factnode.client import AsyncClient
from factnode.core import MICROS_PER_DAY
from factnode.core.decay import lifetime

SESSION_TIMEOUT = 60.0  # seconds for one whole MCP session, start to close


@asynccontextmanager
async def mcp_session(address: str, home: Path, *options: str) -> AsyncIterator[ClientSession]:
    """`factnode mcp --address ADDRESS` as a subprocess, with an initialized SDK session."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "factnode.cli", "mcp", "--address", address, "--timeout", "5", *options],
        env=isolated_env(home),
    )
    with (home / "mcp.stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=RPC_TIMEOUT) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    """Calls one tool; the result must be a tool result (not a protocol error)."""
    result = await session.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult), result
    return result


def text(result: CallToolResult) -> str:
    """The text of a tool result."""
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_tools_resources_and_errors(server: ServerProcess, tmp_path: Path) -> None:
    """Each tool works through the SDK's stdio client; node refusals come back as error text."""
    ns = unique_ns("mcp")
    key = {"namespace": ns, "subject": "ana", "predicate": "city"}
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(server.address, tmp_path) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {
                "remember_fact", "recall", "recall_about", "search", "why", "history", "forget",
            }  # fmt: skip
            properties = tools["remember_fact"].input_schema["properties"]
            assert "user_stated (90)" in properties["anchor"]["description"]
            assert "alias" in properties["attribution"]["description"]

            done = await call(
                session, "remember_fact", **key, object="Porto", anchor="agent_inferred",
                source="chat:1", valid_from="2024-01-01",
            )  # fmt: skip
            assert not done.is_error and text(done).startswith("ACCEPTED"), text(done)
            done = await call(
                session, "remember_fact", **key, object="Lisbon", anchor="user_stated",
                source="user:ana", confidence=0.9, valid_from="2023-06-01T00:00:00Z",
            )  # fmt: skip
            assert not done.is_error and "'Lisbon' (BELIEVED" in text(done), text(done)

            recalled = text(await call(session, "recall", **key))
            assert "'Lisbon' (BELIEVED" in recalled and "user_stated from user:ana" in recalled
            before = await call(session, "recall", **key, as_of="2023-01-01")
            assert before.is_error and "not found: no belief for" in text(before), text(before)

            why = text(await call(session, "why", **key))
            assert "'Porto' lost on trust_anchor: anchor user_stated (90) outranks" in why, why

            history = text(await call(session, "history", **key))
            assert "'Porto'" in history and "'Lisbon'" in history, history
            assert "'Lisbon' (BELIEVED, rule trust_anchor): held " in history, history

            forgot = await call(session, "forget", **key, reason="moved abroad", object="Lisbon")
            assert not forgot.is_error and text(forgot).startswith("RETRACTED"), text(forgot)
            # Only the named value ends: the agent_inferred Porto it had beaten is back.
            assert f"now: {ns}/ana/city: 'Porto' (BELIEVED" in text(forgot), text(forgot)

            speaks = {**key, "predicate": "speaks"}
            for language in ("Portuguese", "English"):
                await call(
                    session,
                    "remember_fact",
                    **speaks,
                    object=language,
                    attribution="user_stated",
                    source="user:ana",
                )
            both = text(await call(session, "recall", **speaks))
            assert "values " in both and "'English'" in both and "'Portuguese'" in both, both
            forgot = await call(session, "forget", **speaks, reason="forgot it", object="English")
            assert not forgot.is_error and "'Portuguese' (BELIEVED" in text(forgot), text(forgot)

            templates = (await session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == [
                "factnode://belief/{namespace}/{subject}/{predicate}"
            ]
            other = {**key, "subject": "bo"}
            await call(
                session, "remember_fact", **other, object="Oslo", attribution="user_stated",
                source="user:bo",
            )  # fmt: skip
            read = await session.read_resource(f"factnode://belief/{ns}/bo/city")
            contents = read.contents[0]
            assert isinstance(contents, TextResourceContents)
            belief = json.loads(contents.text)
            assert (belief["object"], belief["state"]) == ("Oslo", "BELIEVED")
            assert belief["evidence"]["anchor"] == "user_stated"
            with pytest.raises(MCPError, match="not found: no belief for"):
                await session.read_resource(f"factnode://belief/{ns}/nobody/city")


async def test_search_finds_believed_values_by_words_never_superseded_ones(
    server: ServerProcess, tmp_path: Path
) -> None:
    """`search` answers a question in words with the believed value, its key, state, rule,
    anchor and score; a superseded value is never a hit now, and is the hit at an `as_of`
    when it was believed; filters narrow the hits, and bad input is error text naming the
    field."""
    ns = unique_ns("mcp")
    key = {"namespace": ns, "subject": "ana", "predicate": "lives_in"}
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(server.address, tmp_path) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "do not know the exact key" in (tools["search"].description or "")
            assert "Only values believed now" in (tools["search"].description or "")
            for city, day in (("Porto", "2023-01-01"), ("Lisbon", "2024-06-01")):
                done = await call(
                    session, "remember_fact", **key, object=city, anchor="user_stated",
                    source="user:ana", valid_from=day,
                )  # fmt: skip
                assert not done.is_error, text(done)
            await call(
                session, "remember_fact", namespace=ns, subject="team", predicate="database",
                object="PostgreSQL", anchor="agent_observed", source="tool:psql",
            )  # fmt: skip

            found = text(
                await call(session, "search", query="Ana Porto Lisbon", namespace_prefix=ns)
            )
            lines = found.splitlines()
            assert lines[0] == "1 believed value(s) matching 'Ana Porto Lisbon', best first:", found
            assert lines[1].startswith(f"- {ns}/ana/lives_in: 'Lisbon' (BELIEVED by rule "), found
            assert re.search(r"; user_stated, score [0-9.e-]+$", lines[1]), found
            assert "Porto" not in found.replace("'Ana Porto Lisbon'", ""), found
            gone = text(await call(session, "search", query="Porto", namespace_prefix=ns))
            assert gone == "no believed value matches 'Porto'.", gone
            then = text(
                await call(
                    session, "search", query="Porto", namespace_prefix=ns, as_of="2023-06-01"
                )
            )
            assert f"- {ns}/ana/lives_in: 'Porto' (BELIEVED" in then, then

            chosen = text(await call(session, "search", query="which database did we choose?"))
            assert f"- {ns}/team/database: 'PostgreSQL' (BELIEVED" in chosen, chosen
            narrowed = await call(
                session, "search", query="database Lisbon", namespace_prefix=ns,
                anchors=["user_stated"], states=["BELIEVED"], subject="ana", limit=5,
            )  # fmt: skip
            assert "'Lisbon'" in text(narrowed) and "PostgreSQL" not in text(narrowed)

            for bad, words in (
                ({"query": "?!"}, "query: has no words to search for"),
                ({"query": "Porto", "limit": 0}, "limit: must be between 1 and 100"),
                ({"query": "Porto", "as_of": "last year"}, "as_of: 'last year' is not an ISO"),
                ({"query": "Porto", "states": ["GONE"]}, "states: 'GONE' is not a belief state"),
            ):
                refused = await call(session, "search", **bad)
                assert refused.is_error and words in text(refused), (bad, text(refused))


async def test_bad_input_returns_the_nodes_field_errors(
    server: ServerProcess, tmp_path: Path
) -> None:
    """An unknown anchor, a bad worth and a bad date come back as tool errors naming the field."""
    key = {"namespace": unique_ns("mcp"), "subject": "cy", "predicate": "city"}
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(server.address, tmp_path) as session:
            bad = await call(
                session, "remember_fact", **key, object="Rome", attribution="hearsay",
                source="chat",
            )  # fmt: skip
            assert bad.is_error
            assert "anchor: unknown trust anchor 'hearsay'; known: " in text(bad)
            bad = await call(
                session, "remember_fact", **key, object="Rome", attribution="user_stated",
                source="chat", worth=3.0,
            )  # fmt: skip
            assert bad.is_error and "worth: must be in [0, 1], got 3.0" in text(bad), text(bad)
            bad = await call(
                session, "remember_fact", **key, object="Rome", attribution="user_stated",
                source="chat", valid_from="last tuesday",
            )  # fmt: skip
            assert bad.is_error and "valid_from: 'last tuesday' is not an ISO 8601" in text(bad)
            missing = await call(session, "why", **key)
            assert missing.is_error and "not found: " in text(missing), text(missing)
            # The session survived every refusal.
            done = await call(
                session, "remember_fact", **key, object="Rome", attribution="user_stated",
                source="chat",
            )  # fmt: skip
            assert not done.is_error and text(done).startswith("ACCEPTED"), text(done)


async def test_forget_rejections_missing_arguments_and_ended_keys(
    server: ServerProcess, tmp_path: Path
) -> None:
    """forget retracts every value only when told to in `every_value`, never by leaving
    `object` out; a missing argument is one short line naming it; a REJECTED fact is an
    error result naming the rule; `why` on a retracted key says what ended it."""
    ns = unique_ns("mcp")
    key = {"namespace": ns, "subject": "ed", "predicate": "employer"}
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(server.address, tmp_path) as session:
            for company, day in (("Acme", "2024-01-01"), ("Initech", "2024-06-01")):
                done = await call(
                    session,
                    "remember_fact",
                    **key,
                    object=company,
                    attribution="user_stated",
                    source="user:ed",
                    valid_from=day,
                )
                assert not done.is_error, text(done)

            neither = await call(session, "forget", **key, reason="left")
            assert neither.is_error and "give 'object'" in text(neither), text(neither)
            assert "'every_value': true" in text(neither) and "not neither" in text(neither)
            both = await call(
                session, "forget", **key, reason="left", object="Initech", every_value=True
            )
            assert both.is_error and "not both" in text(both), text(both)
            still = text(await call(session, "recall", **key))
            assert "'Initech' (BELIEVED" in still, still  # neither refusal retracted anything

            missing = await call(session, "forget", **key)
            assert missing.is_error, text(missing)
            assert text(missing) == "invalid input to forget: reason: is required", text(missing)
            wrong = await call(
                session, "remember_fact", **key, object="Hooli", attribution="user_stated",
                source="user:ed", worth="a lot",
            )  # fmt: skip
            assert wrong.is_error and "worth: " in text(wrong), text(wrong)
            assert "pydantic" not in text(wrong) and "a lot" not in text(wrong), text(wrong)

            rejected = await call(
                session, "remember_fact", **key, object="Hooli", attribution="user_stated",
                source="user:ed", confidence=0.1,
            )  # fmt: skip
            assert rejected.is_error, text(rejected)
            assert "remember_fact: REJECTED by rule min_confidence: " in text(rejected), text(
                rejected
            )

            forgot = await call(session, "forget", **key, reason="retired", every_value=True)
            assert not forgot.is_error and text(forgot).startswith("RETRACTED"), text(forgot)
            assert f"now nothing is believed for {ns}/ed/employer." in text(forgot), text(forgot)
            history = text(await call(session, "history", **key))
            assert history.count("(RETRACTED, rule retract)") == 2, history  # historical too
            why = await call(session, "why", **key)
            assert why.is_error and "not found: no belief for" in text(why), text(why)
            assert "'Initech' was ended by retraction " in text(why), text(why)
            assert "user_stated from " in text(why), text(why)


async def test_unreachable_node_is_tool_error_text(tmp_path: Path) -> None:
    """With no node at the address, a tool says the node is unreachable; the session goes on."""
    address = f"127.0.0.1:{free_port()}"
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(address, tmp_path) as session:
            result = await call(session, "recall", namespace="n", subject="s", predicate="p")
            assert result.is_error and "unreachable" in text(result), text(result)
            assert len((await session.list_tools()).tools) == 7


async def test_unknown_tool_prompt_and_resource_are_protocol_errors(tmp_path: Path) -> None:
    """A call of an unknown tool is JSON-RPC error -32602 "Unknown tool: NAME", while a
    known tool's own failure stays an isError result; no `prompts` capability is advertised
    and prompts/get and prompts/list are -32601; an unknown resource is -32602 naming it."""
    address = f"127.0.0.1:{free_port()}"
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(address, tmp_path) as session:
            capabilities = (await session.initialize()).capabilities
            assert capabilities.prompts is None, capabilities
            assert capabilities.tools is not None and capabilities.resources is not None

            with pytest.raises(MCPError) as unknown:
                await session.call_tool("remember", {"namespace": "n"})
            assert unknown.value.error == ErrorData(
                code=INVALID_PARAMS, message="Unknown tool: remember"
            )

            failed = await call(session, "recall", namespace="n", subject="s", predicate="p",
                                as_of="last tuesday")  # fmt: skip
            assert failed.is_error, text(failed)
            assert "invalid input: as_of: 'last tuesday' is not an ISO 8601" in text(failed)
            failed = await call(session, "recall", namespace="n", subject="s", predicate="p")
            assert failed.is_error and "unreachable" in text(failed), text(failed)

            prompts = {
                "prompts/get": lambda: session.get_prompt("recall"),
                "prompts/list": session.list_prompts,
            }
            for method, ask in prompts.items():
                with pytest.raises(MCPError) as unserved:
                    await ask()
                assert unserved.value.error == ErrorData(
                    code=METHOD_NOT_FOUND, message="Method not found", data=method
                )

            uri = "factnode://nothing/here"
            with pytest.raises(MCPError) as missing:
                await session.read_resource(uri)
            assert missing.value.error == ErrorData(
                code=INVALID_PARAMS, message=f"Unknown resource: {uri}", data={"uri": uri}
            )
            # The session goes on after each protocol error.
            assert len((await session.list_tools()).tools) == 7


async def test_token_without_the_role_is_permission_denied_text(tmp_path: Path) -> None:
    """A reader's token may recall but not remember; the refusal is tool error text."""
    config = tmp_path / "factnode.toml"
    config.write_text(
        'listen = "127.0.0.1:0"\n[[tokens]]\ntoken = "reader-token-0001"\nroles = ["reader"]\n'
    )
    node = start_server(tmp_path, "--config", str(config), listen=None)
    key = {"namespace": unique_ns("mcp"), "subject": "di", "predicate": "city"}
    try:
        with anyio.fail_after(SESSION_TIMEOUT):
            async with mcp_session(
                node.address, tmp_path, "--token", "reader-token-0001"
            ) as session:
                denied = await call(
                    session,
                    "remember_fact",
                    **key,
                    object="Faro",
                    attribution="user_stated",
                    source="chat",
                )
                assert denied.is_error and "permission denied (PERMISSION_DENIED)" in text(denied)
                missing = await call(session, "recall", **key)
                assert missing.is_error and "not found: " in text(missing), text(missing)
    finally:
        assert node.stop() is not None, node.output()


def test_unreadable_ca_cert_is_a_usage_error(tmp_path: Path) -> None:
    """`factnode mcp --ca-cert MISSING` exits 2 naming the file, without a traceback."""
    missing = tmp_path / "missing-ca.crt"
    done = subprocess.run(
        factnode_command("mcp", "--ca-cert", str(missing)),
        capture_output=True, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL,
        env=isolated_env(tmp_path / "home"),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert str(missing) in done.stderr and "Traceback" not in done.stderr


async def test_remember_and_forget_name_the_decision_the_log_lists(
    server: ServerProcess, tmp_path: Path
) -> None:
    """remember_fact and forget say "(decision N ...)" with N the seq ListDecisions lists for
    that decision."""
    ns = unique_ns("mcp")
    key = {"namespace": ns, "subject": "ana", "predicate": "city"}
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(server.address, tmp_path) as session:
            said = [
                text(
                    await call(
                        session,
                        "remember_fact",
                        **key,
                        object=city,
                        attribution="user_stated",
                        source="user:ana",
                        valid_from=since,
                    )
                )
                for city, since in (("Porto", "2023-01-01"), ("Lisbon", "2024-01-01"))
            ]
            said.append(text(await call(session, "forget", **key, reason="moved", object="Lisbon")))
    async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as client:
        log = {d.seq: d for d in (await client.decisions(namespace=ns)).items}
    named = [re.search(r"\(decision (\d+)[,)]", t) for t in said]
    assert all(named), said
    seqs = [int(m.group(1)) for m in named if m]
    assert seqs == sorted(set(seqs)) and set(seqs) <= set(log), (said, sorted(log))
    assert all(
        t.startswith(f"{log[s].outcome} by rule {log[s].rule}")
        for t, s in zip(said, seqs, strict=True)
    )
    assert log[seqs[-1]].outcome == "RETRACTED"


async def test_remembering_again_extends_a_facts_life(
    server: ServerProcess, tmp_path: Path
) -> None:
    """docs/agents/mcp.md's expiry rules: a fact told with remember_fact's defaults
    (confidence 0.5) and a 30-day anchor is held until 30 x log2(0.5 / 0.4) days after it
    was told; told again without valid_from it is new evidence (CORROBORATED), with the
    same valid_from the same evidence restated (DUPLICATE, "restated:"); a user_stated fact
    is held with no end."""
    ns = unique_ns("mcp")
    guess = {"namespace": ns, "subject": "ana", "predicate": "city"}
    dated = {**guess, "predicate": "born", "valid_from": "1990-05-01"}
    told = {**guess, "predicate": "name"}
    how = {"anchor": "agent_inferred", "source": "chat:1"}
    with anyio.fail_after(SESSION_TIMEOUT):
        async with mcp_session(server.address, tmp_path) as session:
            said = [
                text(await call(session, "remember_fact", **guess, object="Porto", **how)),
                text(await call(session, "remember_fact", **guess, object="Porto", **how)),
                text(await call(session, "remember_fact", **dated, object="1990", **how)),
                text(await call(session, "remember_fact", **dated, object="1990", **how)),
                text(
                    await call(
                        session, "remember_fact", **told, object="Ana", anchor="user_stated",
                        source="user:ana",
                    )
                ),
            ]  # fmt: skip
            key = {k: guess[k] for k in ("namespace", "subject", "predicate")}
            held = text(await call(session, "history", **key))
            name = text(await call(session, "history", **{**key, "predicate": "name"}))
    assert [t.split(" by rule ")[0] for t in said] == [
        "ACCEPTED", "CORROBORATED", "ACCEPTED", "DUPLICATE", "ACCEPTED",
    ]  # fmt: skip
    assert said[3].startswith("DUPLICATE by rule duplicate: restated: ")
    async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as client:
        [version] = await client.history((ns, "ana", "city"))
    last = max(e.recorded_at for e in version.evidence)
    life = timedelta(microseconds=lifetime(500, 400, 30 * MICROS_PER_DAY))
    assert version.intervals[-1].end == last + life
    assert f"until {_iso(last + life)}" in held, held
    assert name.splitlines()[0].endswith(" until now"), name


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
