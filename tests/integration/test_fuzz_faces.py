"""The fuzz and text-rule suites (test_fuzz_api.py, test_text_rule*.py) extended to the faces an
agent uses: MCP over Streamable HTTP (`factnode mcp --http`, a real process, through the SDK's
HTTP client) and the LangGraph store, each against a real node on SQLite and, with
FACTNODE_TEST_POSTGRES_URL set, on PostgreSQL.

Every malformed input gets a clear error naming the field (MCP: a tool error starting
"invalid input", never the SDK's bare "Error executing tool <name>" of a crash, or, for a
lone surrogate, which the SDK's JSON parser refuses, JSON-RPC's parse error; LangGraph: ItemError or
InvalidFact, never OverflowError, RecursionError, TypeError or UnicodeEncodeError) and the
node's counts (evidence, keys, decisions) do not move."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError, PutOp

from factnode.client import Client, InvalidFact
from factnode.config import Settings
from factnode.langgraph import FactnodeStore, ItemError
from factnode.server.app import Node

CALL_TIMEOUT = 10.0  # seconds for one call to the node
START_TIMEOUT = 60.0  # seconds for a node or `factnode mcp --http` to start
FUZZ = settings(
    max_examples=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
EARLY, LATE = "0001-01-01T00:00:00+14:00", "9999-12-31T23:00:00-05:00"
NUL, SURROGATE = "a\x00b", "a\ud800b"
TEXT_RULE = {NUL: "must not contain NUL", SURROGATE: "must not contain a lone surrogate"}


class NodeThread:
    """A tokenless node on loopback, served from an event loop thread of its own."""

    def __init__(self, tmp: Path, database_url: str | None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        settings = Settings(
            listen="127.0.0.1:0", data_dir=tmp, database_url=database_url, grace_seconds=0.0
        )
        self.node: Node = self._call(self._start(settings))
        self.address = f"127.0.0.1:{self.node.port}"
        self.client = Client(self.address, timeout=CALL_TIMEOUT, retries=0)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=START_TIMEOUT)

    async def _start(self, settings: Settings) -> Node:
        node = Node(settings)
        await node.start()
        return node

    def counts(self) -> tuple[int, int, int]:
        """What a refused input must not change: evidence, keys and decisions."""
        c = self.client.status().counts
        return c.get("evidence", 0), c.get("keys", 0), c.get("decisions", 0)

    def close(self) -> None:
        self.client.close()
        self._call(self.node.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=START_TIMEOUT)
        self.loop.close()


class McpHttp:
    """`factnode mcp --http` for a node, on a free loopback port; `url` is what it announces."""

    def __init__(self, address: str, home: Path) -> None:
        env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "factnode.cli", "mcp", "--address", address, "--timeout",
             "5", "--http", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            text=True, env=env,
        )  # fmt: skip
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=START_TIMEOUT)
        if not lines or not lines[0].startswith("factnode mcp on http://"):
            self.close()
            raise AssertionError(f"factnode mcp --http did not start: {lines}")
        self.url = lines[0].split()[3]

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=START_TIMEOUT)
        if self.proc.stdout:
            self.proc.stdout.close()


class Face:
    """One backend's node, the MCP HTTP server in front of it, and a LangGraph store on it."""

    def __init__(self, tmp: Path, database_url: str | None) -> None:
        self.node = NodeThread(tmp / "node", database_url)
        try:
            self.mcp = McpHttp(self.node.address, tmp / "home")
        except BaseException:
            self.node.close()
            raise
        self.store = FactnodeStore(self.node.address, namespace="lg-fuzz", timeout=CALL_TIMEOUT)

    def close(self) -> None:
        self.store.close()
        self.mcp.close()
        self.node.close()

    def call_tool(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """One tool call in an MCP session of its own over raw HTTP: (is_error, text). The
        request is JSON as any client may send it (a lone surrogate as a \\ud800 escape,
        which the SDK's own client cannot encode)."""
        with httpx.Client(timeout=CALL_TIMEOUT) as http:
            init = _rpc(http, self.mcp.url, HEADERS, {"id": 1, "method": "initialize",
                                                    "params": INIT_PARAMS})  # fmt: skip
            session = {
                **HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
                "mcp-protocol-version": _message(init)["result"]["protocolVersion"],
            }  # fmt: skip
            _rpc(http, self.mcp.url, session, {"method": "notifications/initialized"})
            done = _rpc(http, self.mcp.url, session, {
                "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments},
            })  # fmt: skip
            http.delete(self.mcp.url, headers=session)
        answer = _message(done)
        if "error" in answer:  # the request itself was refused (e.g. JSON the SDK cannot read)
            return True, f"protocol error {answer['error']['code']}: {answer['error']['message']}"
        result = answer["result"]
        text = "\n".join(c["text"] for c in result["content"] if c["type"] == "text")
        # The SDK puts this before a tool's own refusal; a crash gets it alone (bare).
        return bool(result.get("isError")), text.removeprefix(f"Error executing tool {tool}: ")


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT_PARAMS = {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "fuzz", "version": "0"},
}  # fmt: skip


def _rpc(
    http: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]
) -> httpx.Response:
    answer = http.post(url, content=json.dumps({"jsonrpc": "2.0", **body}), headers=headers)
    assert answer.status_code in (200, 202, 400), answer.text
    return answer


def _message(answer: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an answer, sent as JSON or as one server-sent event."""
    if answer.headers.get("content-type", "").startswith("application/json"):
        return dict(answer.json())
    data = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
    found = [json.loads(d) for d in data if d]
    assert found, answer.text
    return dict(found[-1])


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def face(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
    module_postgres_url: str | None,
) -> Iterator[Face]:  # fmt: skip
    """A node on each backend, with MCP over HTTP and a LangGraph store in front of it."""
    if request.param == "postgres" and module_postgres_url is None:
        pytest.skip("FACTNODE_TEST_POSTGRES_URL is not set: PostgreSQL faces skipped")
    url = module_postgres_url if request.param == "postgres" else None
    f = Face(tmp_path_factory.mktemp(f"faces-{request.param}"), url)
    yield f
    f.close()


def _fact(**fields: Any) -> dict[str, Any]:
    base = {"namespace": "user:fuzz", "subject": "ana", "predicate": "lives_in",
            "object": "Porto", "anchor": "user_stated", "source": "user:ana"}  # fmt: skip
    return {**base, **fields}


# --- MCP over HTTP ----------------------------------------------------------------------

KEY_FIELDS = ("namespace", "subject", "predicate")
MALFORMED_CALLS = [
    *[("remember_fact", _fact(**{f: bad}), f) for f in (*KEY_FIELDS, "object", "source")
      for bad in (NUL, SURROGATE)],
    *[(tool, {**{k: "x" for k in KEY_FIELDS}, f: NUL}, f) for tool in ("recall", "why", "history")
      for f in KEY_FIELDS],
    ("remember_fact", _fact(anchor=NUL), "anchor"),
    ("remember_fact", _fact(subject="s" * 257), "subject"),
    ("remember_fact", _fact(object="é" * 2049), "object"),
    ("remember_fact", _fact(valid_from=EARLY), "valid_from"),
    ("remember_fact", _fact(valid_from=LATE), "valid_from"),
    ("remember_fact", _fact(valid_from="10000-01-01"), "valid_from"),
    ("remember_fact", _fact(valid_from="yesterday"), "valid_from"),
    ("remember_fact", _fact(worth=1.5), "worth"),
    ("remember_fact", _fact(confidence=-0.1), "confidence"),
    ("remember_fact", _fact(worth="lots"), "worth"),
    ("remember_fact", _fact(namespace=7), "namespace"),
    ("remember_fact", {k: v for k, v in _fact().items() if k != "source"}, "source"),
    ("recall", {**{k: "x" for k in KEY_FIELDS}, "as_of": EARLY}, "as_of"),
    ("recall", {**{k: "x" for k in KEY_FIELDS}, "as_of": LATE}, "as_of"),
    ("recall_about", {"namespace": "user:fuzz", "subject": "ana", "limit": 0}, "limit"),
    ("recall_about", {"namespace": NUL, "subject": "ana"}, "namespace"),
    ("search", {"query": NUL}, "query"),
    ("search", {"query": "?!"}, "query"),
    ("search", {"query": "ana", "namespace_prefix": NUL}, "namespace_prefix"),
    ("search", {"query": "ana", "states": ["GONE"]}, "states"),
    ("search", {"query": "ana", "anchors": ["hearsay"]}, "anchors"),
    ("search", {"query": "ana", "as_of": EARLY}, "as_of"),
    ("search", {"query": "ana", "known_at": LATE}, "known_at"),
    ("search", {"query": "ana", "limit": 101}, "limit"),
    ("forget", {**{k: "x" for k in KEY_FIELDS}, "reason": "r", "object": "o",
                "every_value": True}, "every_value"),
    ("forget", {**{k: "x" for k in KEY_FIELDS}, "reason": NUL, "object": "o"}, "reason"),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "arguments", "field"), MALFORMED_CALLS)
def test_a_malformed_mcp_call_over_http_names_the_field_and_writes_nothing(
    face: Face, tool: str, arguments: dict[str, Any], field: str
) -> None:
    """Each malformed tool call over HTTP is a tool error 'invalid input ...' naming the field
    (the text rule's reason for a NUL or a lone surrogate), and the node's counts stay."""
    before = face.node.counts()
    is_error, text = face.call_tool(tool, arguments)
    assert is_error, text
    if SURROGATE in arguments.values():
        # Not JSON the SDK reads (its parser refuses a lone surrogate escape): no tool runs.
        assert text.startswith("protocol error -32700: Parse error"), text
    else:
        assert text.startswith("invalid input"), text
        assert field in text, text
    if arguments.get(field) == NUL and field != "anchor":  # an anchor is a known name
        assert TEXT_RULE[NUL] in text, text
    assert face.node.counts() == before


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
mcp_arguments = st.dictionaries(
    st.sampled_from([*KEY_FIELDS, "object", "anchor", "source", "worth", "confidence",
                     "valid_from", "as_of", "limit", "reason", "every_value", "unknown",
                     "query", "namespace_prefix", "states", "anchors", "known_at"]),
    json_scalars | st.sampled_from([EARLY, LATE, NUL, SURROGATE, "2025-03-01"]) | st.lists(json_scalars, max_size=2),
)  # fmt: skip
TOOLS = ["remember_fact", "recall", "recall_about", "search", "why", "history", "forget"]


@FUZZ
@given(tool=st.sampled_from(TOOLS), arguments=mcp_arguments)
def test_generated_mcp_calls_over_http_never_crash_a_tool(
    face: Face, tool: str, arguments: dict[str, Any]
) -> None:
    """Whatever the arguments, a tool answers its result or a named refusal, never the SDK's
    bare 'Error executing tool'; an 'invalid input' answer writes nothing."""
    before = face.node.counts()
    is_error, text = face.call_tool(tool, arguments)
    if not is_error:
        return
    assert not text.startswith("Error executing tool"), f"a crash, not a refusal: {text}"
    known = ("invalid input", "not found", "REJECTED", "the node refused", "protocol error -32700")
    assert text.startswith(known), text
    if text.startswith(("invalid input", "protocol error")):
        assert face.node.counts() == before, text


# --- the LangGraph store ----------------------------------------------------------------


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    inner = value
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    return value


MALFORMED_PUTS = [
    (("ok",), NUL, {"v": 1}, "key"),
    (("ok",), SURROGATE, {"v": 1}, "key"),
    ((NUL,), "k", {"v": 1}, "namespace"),
    ((SURROGATE,), "k", {"v": 1}, "namespace"),
    (("ok",), "k", {"v": SURROGATE}, "value.v"),
    (("ok",), "k", {SURROGATE: 1}, "value"),
    (("ok",), "k", {1: "a"}, "value"),
    (("ok",), "k", {"v": math.nan}, "value.v"),
    (("ok",), "k", _nested(100_000), "value.a"),
    (("ok",), "k", {"v": {1, 2}}, "value.v"),
    (("ok",), "k", {"v": 1, "_factnode": {"valid_from": EARLY}}, "value._factnode.valid_from"),
    (("ok",), "k", {"v": 1, "_factnode": {"valid_from": LATE}}, "value._factnode.valid_from"),
    (("ok",), "k", {"v": 1, "_factnode": {"source": NUL}}, "value._factnode.source"),
    (
        ("ok",),
        "k",
        {"v": 1, "_factnode": {"attribution": SURROGATE}},
        "value._factnode.attribution",
    ),
    (("ok",), "k", {"v": 1, "_factnode": {"worth": 2}}, "value._factnode.worth"),
    (("ok",), "k", {"v": "x" * 5000}, "value"),
    (("ok",), "s" * 257, {"v": 1}, "key"),
]


@pytest.mark.parametrize(("namespace", "key", "value", "field"), MALFORMED_PUTS)
def test_a_malformed_langgraph_put_names_the_field_and_writes_nothing(
    face: Face, namespace: tuple[str, ...], key: str, value: dict[Any, Any], field: str
) -> None:
    """Each malformed put, alone or after a good one in a batch, is an ItemError naming the
    field (the text rule's reason for a NUL or a lone surrogate) and writes nothing."""
    before = face.node.counts()
    with pytest.raises((ItemError, InvalidNamespaceError)) as refused:
        face.store.put(namespace, key, value)
    named = getattr(refused.value, "field", "namespace")  # LangGraph's own check names none
    assert named.startswith(field), refused.value
    assert field != "namespace" or "namespace" in str(refused.value).lower(), refused.value
    if NUL in (key, *namespace) or SURROGATE in (key, *namespace):
        reasons = (*TEXT_RULE.values(), "cannot contain NUL")
        assert any(r in str(refused.value) for r in reasons), refused.value
    good = PutOp(("ok",), f"good-{uuid.uuid4().hex[:8]}", {"v": 1})
    with pytest.raises((ItemError, InvalidNamespaceError)):
        face.store.batch([good, PutOp(namespace, key, value)])
    assert face.node.counts() == before


lg_values = st.recursive(
    json_scalars | st.sampled_from([NUL, SURROGATE, math.inf]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3) | st.integers() | st.booleans(), inner, max_size=3)
    ),
    max_leaves=6,
)
lg_provenance = st.dictionaries(
    st.sampled_from(["attribution", "source", "worth", "confidence", "valid_from", "other"]),
    json_scalars | st.sampled_from([EARLY, LATE, "2025-03-01", "user_stated"]),
    max_size=3,
)


@FUZZ
@given(
    namespace=st.lists(st.text(max_size=4), min_size=0, max_size=3).map(tuple),
    key=st.text(max_size=6),
    value=st.dictionaries(st.text(max_size=3), lg_values, max_size=3),
    provenance=st.none() | lg_provenance,
)
def test_generated_langgraph_puts_are_stored_or_refused_by_name(
    face: Face, namespace: tuple[str, ...], key: str, value: dict[str, Any],
    provenance: dict[str, Any] | None,
) -> None:  # fmt: skip
    """Whatever the put, it is stored or refused with ItemError, InvalidFact or LangGraph's
    InvalidNamespaceError (never another exception); a refused put writes nothing."""
    if provenance is not None:
        value = {**value, "_factnode": provenance}
    before = face.node.counts()
    try:
        face.store.put(namespace, key, value)
    except (ItemError, InvalidFact, InvalidNamespaceError) as refused:
        assert str(refused), "a refusal must say why"
        assert face.node.counts() == before, refused
