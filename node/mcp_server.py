"""`factnode mcp`: the Model Context Protocol over stdio (or Streamable HTTP with `--http`),
so an LLM agent can use a node.

Tools `remember_fact`, `recall`, `recall_about`, `search`, `why`, `history` and `forget`, and the
resource template
`factnode://belief/{namespace}/{subject}/{predicate}`. Everything goes through
`factnode.AsyncClient`; whatever the node refuses (a bad field, an unknown key, a missing
role, an unreachable node) comes back to the model as tool error text naming the field and
the reason, and the session goes on. Needs the `mcp` extra (`pip install 'factnode[mcp]'`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, InputRequiredResult
from pydantic import Field, ValidationError

import factnode
from factnode.client import (
    AsyncClient,
    Belief,
    ClientError,
    Evidence,
    Hit,
    InvalidFact,
    NotFound,
    PermissionDenied,
    Unavailable,
    Version,
)
from factnode.config import ConfigError, check_face, check_token, is_loopback
from factnode.core.policy import DEFAULT_ANCHORS
from factnode.core.validation import quoted, time_problem

R = TypeVar("R")

_ANCHORS = ", ".join(
    f"{name} ({value})"
    for name, value in sorted(DEFAULT_ANCHORS.items(), key=lambda kv: (-kv[1], kv[0]))
)

INSTRUCTIONS = (
    "A factnode keeps beliefs about keys (namespace, subject, predicate) from evidence with "
    "provenance, and decides between conflicting evidence by fixed rules: trust anchor first, "
    "then the later event time, then worth, then confidence. Use remember_fact to record what "
    "you learn, recall to read what is believed, why to see which rule decided it, history for "
    "every value a key has had, and forget when a value stopped being true."
    " recall_about lists what is believed about a subject when you do not know its keys;"
    " search finds believed values by words when you know neither subject nor key."
)

Namespace = Annotated[
    str, Field(description="Whose or which memory, e.g. 'user:42' or 'project:acme'.")
]
Subject = Annotated[str, Field(description="What the fact is about, e.g. 'alice'.")]
Predicate = Annotated[str, Field(description="Which property, e.g. 'city', 'employer', 'speaks'.")]


def field_text(err: ClientError, address: str) -> str:
    """The node's refusal in words for the model: each bad field and why, or the status."""
    if isinstance(err, InvalidFact) and err.field_errors:
        reasons = "; ".join(f"{e.field}: {e.reason}" for e in err.field_errors)
        return f"invalid input: {reasons}"
    if isinstance(err, InvalidFact):
        return f"invalid input: {err}"
    if isinstance(err, NotFound):
        return f"not found: {err}"
    if isinstance(err, PermissionDenied):
        return f"permission denied ({err.code}): {err}"
    if isinstance(err, Unavailable):
        return f"the factnode at {address} is unreachable ({err.code}): {err}"
    return f"the node refused the call ({err.code}): {err}"


def arguments_text(tool: str, err: ValidationError) -> str:
    """Arguments that do not fit a tool's schema, in words for the model: each argument
    named, without pydantic's links or the rejected values (those are the caller's data)."""
    reasons = []
    for e in err.errors(include_url=False, include_input=False):
        name = ".".join(str(part) for part in e["loc"]) or "arguments"
        if e["type"] == "missing":
            reasons.append(f"{name}: is required")
        else:
            reasons.append(f"{name}: {e['msg'][:1].lower()}{e['msg'][1:]}")
    return f"invalid input to {tool}: " + "; ".join(reasons)


# Methods the SDK serves on every server, prompts or none: this one has no prompts, so it
# serves neither method (a call of one is JSON-RPC -32601) and advertises no `prompts`
# capability (the SDK derives capabilities from the methods served). The SDK has no public
# way to drop a method, hence its private handler table; tests/e2e/test_mcp.py fails if an
# SDK release moves it.
_UNSERVED = ("prompts/list", "prompts/get")


class _Server(MCPServer[Any]):
    """The SDK's server as the MCP specification has it where the SDK differs: a call of an
    unknown tool is a JSON-RPC error (-32602 naming the tool), not a tool result; no
    `prompts` capability without prompts; and arguments that do not fit a tool's schema are
    one short line per argument (the SDK's text is pydantic's, with documentation links)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        for method in _UNSERVED:
            del self._lowlevel_server._request_handlers[method]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        # The SDK answers an unknown tool with an isError result; the specification's tools
        # page lists it among the protocol errors, with this code and message.
        if name not in {tool.name for tool in await self.list_tools()}:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(arguments_text(name, exc.__cause__)) from exc.__cause__
            raise


def parse_time(text: str | None, field: str) -> datetime | None:
    """ISO 8601 (a date, or a date and time); UTC where no offset is given."""
    if text is None or not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(
            f"invalid input: {field}: {text!r} is not an ISO 8601 date or time "
            "(e.g. 2025-03-01 or 2025-03-01T12:00:00Z)"
        ) from None
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    problem = time_problem(value)
    if problem:
        raise ToolError(f"invalid input: {field}: {quoted(text.strip())} {problem}")
    return value


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _provenance(e: Evidence) -> str:
    source = e.source or "no source"
    origin = f", first recorded on {e.origin_node}" if e.origin_node else ""
    return (
        f"{e.anchor} from {source}, valid from {_iso(e.valid_from)}, recorded "
        f"{_iso(e.recorded_at)}, worth {e.worth:g}, confidence {e.confidence:g}{origin} "
        f"(evidence {e.evidence_id})"
    )


# `anchor` by its former name, still accepted from agents configured with it.
_Alias = Annotated[
    str | None, Field(description="Former name of 'anchor', accepted as an alias; give one.")
]


def belief_text(b: Belief) -> str:
    """A belief in one paragraph: the value, its state, the deciding rule and its evidence."""
    k = b.key
    if b.values and len(b.values) > 1:
        value = "values " + ", ".join(repr(v) for v in b.values)
    elif b.object:
        value = repr(b.object)
    else:
        value = "no value"
    text = f"{k.namespace}/{k.subject}/{k.predicate}: {value} ({b.state}"
    text += f", decided by rule {b.rule})" if b.rule else ")"
    if b.evidence is not None:
        text += f"\nevidence: {_provenance(b.evidence)}"
    return text


def belief_json(b: Belief) -> dict[str, Any]:
    """A belief as plain JSON values for the resource."""
    e = b.evidence
    return {
        "key": {
            "namespace": b.key.namespace,
            "subject": b.key.subject,
            "predicate": b.key.predicate,
        },
        "object": b.object,
        "values": list(b.values),
        "state": b.state,
        "rule": b.rule,
        "version_id": b.version_id,
        "evidence": None
        if e is None
        else {
            "evidence_id": e.evidence_id,
            "anchor": e.anchor,
            "source": e.source,
            "worth": e.worth,
            "confidence": e.confidence,
            "valid_from": _iso(e.valid_from),
            "recorded_at": _iso(e.recorded_at),
            "origin_node": e.origin_node,
        },
    }


def version_text(v: Version) -> str:
    """One version of a key: its value, status and rule (for the served version the rule
    it is served by, as recall says), when it held, and the evidence for it."""
    spans = ", ".join(
        f"{_iso(i.start)} until {_iso(i.end) if i.end else 'now'}" for i in v.intervals
    )
    rule = f", rule {v.rule}" if v.rule else ""
    lines = [f"{v.object!r} ({v.status}{rule}){': held ' + spans if spans else ''}"]
    lines += [f"  - {_provenance(e)}" for e in v.evidence]
    return "\n".join(lines)


def recall_line(b: Belief) -> str:
    """One belief of a subject, for recall_about: predicate, value, state, rule and anchor."""
    value = ", ".join(repr(v) for v in sorted(b.values)) if len(b.values) > 1 else repr(b.object)
    line = f"- {b.key.predicate}: {value} ({b.state}" + (f" by rule {b.rule})" if b.rule else ")")
    e = b.evidence
    if e is not None:
        line += (
            f"; {e.anchor} from {e.source or 'no source'}, valid from {_iso(e.valid_from)}, "
            f"confidence {e.confidence:g}"
        )
    return line


def add_recall_about(server: MCPServer[Any], client: AsyncClient) -> None:
    """The tool that lists a subject's beliefs, for a model that does not know the keys."""

    @server.tool(
        description=(
            "Everything the node currently believes about a subject in a namespace: each "
            "predicate with its value, state, deciding rule and trust anchor (e.g. 'what do we "
            "know about Ana?'). Use it before recall when you do not know which predicates exist."
        )
    )
    async def recall_about(
        namespace: Namespace,
        subject: Subject,
        limit: Annotated[
            int, Field(description="At most this many beliefs (1 to 1000; default 50).")
        ] = 50,
    ) -> str:
        if not 1 <= limit <= 1000:
            raise ToolError(f"invalid input: limit: must be between 1 and 1000, got {limit}")
        try:
            found = await client.recall(namespace, subject, limit=limit + 1)
        except ClientError as err:
            raise ToolError(field_text(err, client.address)) from None
        if not found:
            return f"nothing is believed about {subject!r} in {namespace}."
        shown = found[:limit]
        lines = [f"{namespace}/{subject}: {len(shown)} belief(s)"]
        lines += [recall_line(b) for b in shown]
        if len(found) > limit:
            lines.append(f"(more beliefs not shown: raise limit above {limit})")
        return "\n".join(lines)


def hit_line(h: Hit) -> str:
    """One search hit: its key, the value that matched, the key's state and deciding rule,
    the trust anchor behind the value and the rank score."""
    b, k = h.belief, h.belief.key
    line = f"- {k.namespace}/{k.subject}/{k.predicate}: {h.object!r} ({b.state}"
    line += f" by rule {b.rule})" if b.rule else ")"
    return line + f"; {h.anchor or 'no anchor'}, score {h.score:.3g}"


SEARCH_LIMIT = 100  # the node's largest search page (factnode.core.recall.MAX_LIMIT)


def add_search(server: MCPServer[Any], client: AsyncClient) -> None:
    """The tool that finds beliefs by words (SearchBeliefs), for a model that knows no key."""

    @server.tool(
        description=(
            "Find what the node believes by asking in words, when you do not know the exact "
            "key (e.g. 'where does Ana live?', 'which database did we choose?'). Searches the "
            "keys, values and sources of the namespaces you may read, best match first. Only "
            "values believed now are returned (or at 'as_of'): a superseded, retracted, "
            "disbelieved, expired or erased value never is. Each hit gives its key, value, "
            "state, deciding rule, trust anchor and score; use recall or why on a key for "
            "its evidence."
        )
    )
    async def search(
        query: Annotated[str, Field(description="What to look for, in words.")],
        namespace_prefix: Annotated[
            str, Field(description="Only namespaces starting with this, e.g. 'user:42'.")
        ] = "",
        subject: Annotated[str | None, Field(description="Only this subject.")] = None,
        predicate: Annotated[str | None, Field(description="Only this predicate.")] = None,
        states: Annotated[
            tuple[str, ...],
            Field(description="Only these states: BELIEVED, AMBIGUOUS, CONTESTED (default all)."),
        ] = (),
        anchors: Annotated[
            tuple[str, ...],
            Field(description="Only values resting on these trust anchors (default all)."),
        ] = (),
        as_of: Annotated[
            str | None, Field(description="Event time to answer for, ISO 8601; default: now.")
        ] = None,
        known_at: Annotated[
            str | None,
            Field(description="Answer as the node knew it at this time, ISO 8601; default: now."),
        ] = None,
        limit: Annotated[
            int, Field(description=f"At most this many hits (1 to {SEARCH_LIMIT}; default 10).")
        ] = 10,
    ) -> str:
        if not 1 <= limit <= SEARCH_LIMIT:
            raise ToolError(
                f"invalid input: limit: must be between 1 and {SEARCH_LIMIT}, got {limit}"
            )
        at, known = parse_time(as_of, "as_of"), parse_time(known_at, "known_at")
        try:
            page = await client.search(
                query, namespace_prefix=namespace_prefix, subject=subject, predicate=predicate,
                states=states, anchors=anchors, as_of=at, known_at=known, page_size=limit,
            )  # fmt: skip
        except ClientError as err:
            raise ToolError(field_text(err, client.address)) from None
        if not page.items:
            return f"no believed value matches {query!r}."
        lines = [f"{len(page.items)} believed value(s) matching {query!r}, best first:"]
        lines += [hit_line(h) for h in page.items]
        if page.next_page_token:
            more = f"raise limit above {limit}" if limit < SEARCH_LIMIT else "narrow the query"
            lines.append(f"(more hits not shown: {more})")
        return "\n".join(lines)


def build_server(client: AsyncClient) -> MCPServer[Any]:
    """An MCP server whose tools and resources call the node through `client`."""
    server: MCPServer[Any] = _Server(
        name="factnode", version=factnode.__version__, instructions=INSTRUCTIONS
    )

    async def call(coro: Awaitable[R]) -> R:
        try:
            return await coro
        except ClientError as err:
            raise ToolError(field_text(err, client.address)) from None

    @server.tool(
        description=(
            "Record a fact the node should weigh: 'subject's predicate is object', with where it "
            "came from. The node decides whether it becomes the belief and says which rule "
            "decided. A fact without a source is REJECTED (no_provenance)."
        )
    )
    async def remember_fact(
        namespace: Namespace,
        subject: Subject,
        predicate: Predicate,
        object: Annotated[str, Field(description="The value, e.g. 'Lisbon'.")],
        source: Annotated[
            str,
            Field(
                description=(
                    "Who or what said it: a speaker ('user:alice'), a tool, a document or a "
                    "URL. Required for the fact to count."
                )
            ),
        ],
        anchor: Annotated[
            str | None,
            Field(
                description=(
                    "The trust anchor: how this fact is known. A higher anchor beats a lower "
                    "one whatever the dates. Default anchors, most trusted first: "
                    f"{_ANCHORS}. Use user_stated for what the user told you, agent_observed "
                    "for what you saw a tool return, agent_inferred for your own deduction, "
                    "llm_generated for model guesses. The node refuses unknown names and "
                    "lists the ones it knows. Required (or its former name, 'attribution')."
                )
            ),
        ] = None,
        worth: Annotated[
            float | None,
            Field(description="How much this fact matters, in [0, 1] (default 0.5)."),
        ] = None,
        confidence: Annotated[
            float | None,
            Field(
                description="How sure the source is, in [0, 1] (default 0.5; by default the node rejects below 0.4)."
            ),
        ] = None,
        valid_from: Annotated[
            str | None,
            Field(
                description=(
                    "When it became true in the world (event time), ISO 8601, e.g. "
                    "'2025-03-01' or '2025-03-01T12:00:00Z' (UTC when no offset). Default: now. "
                    "Between equal anchors the later event time wins, not the later report: "
                    "'Ana moved to Porto in 2023' told today loses to 'Ana moved to Lisbon in "
                    "2024' told last week."
                )
            ),
        ] = None,
        attribution: _Alias = None,
    ) -> str:
        at = parse_time(valid_from, "valid_from")
        done = await call(
            client.submit(
                (namespace, subject, predicate),
                object,
                anchor,
                attribution=attribution,
                source=source,
                worth=worth,
                confidence=confidence,
                valid_from=at,
            )
        )
        d = done.decision
        text = f"{d.outcome} by rule {d.rule}" + (f": {d.detail}" if d.detail else "")
        ids = [f"decision {d.seq}"] + ([f"evidence {done.evidence_id}"] if done.evidence_id else [])
        text += f" ({', '.join(ids)})"
        if d.outcome == "REJECTED":
            # Not a belief candidate: the model must see that the fact did not count.
            raise ToolError(f"{text}; the fact was not recorded as a belief candidate")
        if done.belief is not None:
            text += f"\nnow believed: {belief_text(done.belief)}"
        return text

    @server.tool(
        description=(
            "What the node believes for a key, with the evidence behind it. 'as_of' asks what "
            "was true at an event time (e.g. 'where did Ana live last March?')."
        )
    )
    async def recall(
        namespace: Namespace,
        subject: Subject,
        predicate: Predicate,
        as_of: Annotated[
            str | None, Field(description="Event time to answer for, ISO 8601; default: now.")
        ] = None,
    ) -> str:
        at = parse_time(as_of, "as_of")
        return belief_text(await call(client.belief((namespace, subject, predicate), as_of=at)))

    @server.tool(
        description=(
            "Why the node believes what it does for a key: the believed value and, for every "
            "other value, the rule that made it lose (trust_anchor, recency, worth, confidence "
            "or tiebreak) and the reason in words."
        )
    )
    async def why(namespace: Namespace, subject: Subject, predicate: Predicate) -> str:
        explained = await call(client.explain((namespace, subject, predicate)))
        lines = [f"believed: {belief_text(explained.belief)}"]
        if not explained.comparisons:
            lines.append("no other value competes for this key.")
        for c in explained.comparisons:
            lines.append(f"{c.object!r} lost on {c.rule}: {c.reason}")
        lines += [line for line in (explained.review, explained.believed_again) if line]
        return "\n".join(lines)

    @server.tool(
        description=(
            "Every value a key has had: its status (BELIEVED, SUPERSEDED, RETRACTED, ...), when "
            "it held, and the evidence for it."
        )
    )
    async def history(namespace: Namespace, subject: Subject, predicate: Predicate) -> str:
        versions = await call(client.history((namespace, subject, predicate)))
        if not versions:
            return f"{namespace}/{subject}/{predicate} has no history."
        return "\n".join(version_text(v) for v in versions)

    @server.tool(
        description=(
            "Record that a key's value stopped being true (e.g. 'Ana left Acme'). The retraction "
            "is evidence with a trust anchor: it ends the belief only if it outranks it under the "
            "same rules as facts (an llm_generated retraction cannot end a user_stated fact). "
            "The evidence stays in the audit trail. Name the value that stopped being true "
            "in 'object'; to retract every value the key has ever had (current, historical "
            "and disbelieved alike) set 'every_value' to true instead. Retracting the believed "
            "value can make a value it had outranked believed again (e.g. 'Milan' once 'Rome', "
            "which outranked it by trust_anchor, is retracted); the reply says so, and so does "
            "'why' afterwards. An operator's erasure can do the same."
        )
    )
    async def forget(
        namespace: Namespace,
        subject: Subject,
        predicate: Predicate,
        reason: Annotated[str, Field(description="Why it stopped being true, kept in the log.")],
        object: Annotated[
            str | None,
            Field(description="The value that stopped being true, e.g. 'Acme'."),
        ] = None,
        every_value: Annotated[
            bool,
            Field(
                description=(
                    "True to retract every value of the key, not one: only when that is "
                    "what was said (e.g. 'forget where Ana works'). Leave unset with 'object'."
                )
            ),
        ] = False,
        anchor: Annotated[
            str | None,
            Field(description="Trust anchor of the retraction; default user_stated."),
        ] = None,
        source: Annotated[
            str | None,
            Field(description="Who or what says it stopped being true; default: this client."),
        ] = None,
        attribution: _Alias = None,
    ) -> str:
        if (object is None) == (not every_value):
            raise ToolError(
                "invalid input to forget: give 'object' (the value that stopped being true) "
                "or 'every_value': true (every value the key has had), not "
                + ("both" if every_value else "neither")
            )
        decision, belief = await call(
            client.retract(
                (namespace, subject, predicate),
                reason,
                object=object,
                anchor=anchor,
                attribution=attribution,
                source=source,
            )
        )
        text = f"{decision.outcome} by rule {decision.rule}"
        text += f": {decision.detail}" if decision.detail else ""
        text += f" (decision {decision.seq})"
        if not (belief.version_id or belief.values):  # nothing left for the key
            return f"{text}\nnow nothing is believed for {namespace}/{subject}/{predicate}."
        text += f"\nnow: {belief_text(belief)}"
        if decision.outcome == "RETRACTED" and decision.evidence_id:
            explained = await call(client.explain((namespace, subject, predicate)))
            # The story names the retractions that ended the rival: this one, or an older one.
            if decision.evidence_id in explained.believed_again:
                text += f"\n{explained.believed_again}"
        return text

    @server.resource(
        "factnode://belief/{namespace}/{subject}/{predicate}",
        name="belief",
        description="The node's current belief for one key, with its evidence, as JSON.",
        mime_type="application/json",
    )
    async def belief(namespace: str, subject: str, predicate: str) -> str:
        try:
            found = await client.belief((namespace, subject, predicate))
        except NotFound as err:
            raise ResourceNotFoundError(field_text(err, client.address)) from None
        except ClientError as err:
            raise ResourceError(field_text(err, client.address)) from None
        return json.dumps(belief_json(found))

    add_recall_about(server, client)
    add_search(server, client)
    return server


async def serve(address: str, *, token: str | None, ca_cert: str | None, timeout: float) -> None:
    """Serves MCP on stdin/stdout until the agent closes the session."""
    client = AsyncClient(address, token=token, ca_cert=ca_cert, timeout=timeout)
    try:
        await build_server(client).run_stdio_async()
    finally:
        await client.close()


def main(address: str, *, token: str | None, ca_cert: str | None, timeout: float) -> int:
    """`factnode mcp`: runs the server; an unreadable --ca-cert is a usage error (exit 2)."""
    try:
        asyncio.run(serve(address, token=token, ca_cert=ca_cert, timeout=timeout))
    except OSError as exc:
        print(f"factnode mcp: {exc}", file=sys.stderr)
        return 2
    return 0


# --- Streamable HTTP (`factnode mcp --http`) ---------------------------------------------

MCP_PATH = "/mcp"  # the MCP SDK's default Streamable HTTP endpoint
DEFAULT_HTTP_LISTEN = "127.0.0.1:7430"


# A JSON-RPC error (id null: the request is not read), so that MCP clients, which read a
# JSON-RPC error out of a non-2xx answer, show this text rather than a bare status.
UNAUTHORIZED_BODY = (
    b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32001, '
    b'"message": "unauthorized: send Authorization: Bearer <MCP token>"}}'
)


class BearerTokens:
    """ASGI wrapper: an HTTP request without `Authorization: Bearer <one of tokens>` gets 401.

    The SDK's own auth is an OAuth resource server (an issuer URL, protected-resource
    metadata, a token verifier); fixed tokens need only this constant-time comparison."""

    def __init__(self, app: Any, tokens: frozenset[str]) -> None:
        self.app = app
        self.tokens = tuple(t.encode() for t in tokens)

    def allows(self, header: bytes) -> bool:
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return False
        # Every token is compared, so the time taken does not say which one nearly matched.
        matched = [hmac.compare_digest(token.strip(), t) for t in self.tokens]
        return any(matched)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.tokens:
            header = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not self.allows(header):
                body = UNAUTHORIZED_BODY
                await send({
                    "type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b'Bearer realm="factnode-mcp"'),
                                (b"content-length", str(len(body)).encode())],
                })  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


_WILDCARDS = ("0.0.0.0", "::", "")
# A configured name as a Host header gives it: a DNS name, an IPv4 address or a bracketed IPv6
# address, with or without a port (no scheme, path, spaces or user part).
_ALLOWED_HOST = re.compile(
    r"(?P<name>[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?"
)
_ORIGIN = re.compile(r"https?://([A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")


def host_names(host: str, port: int, extra_hosts: Iterable[str]) -> list[str]:
    """The Host header values MCP over HTTP answers (DNS-rebinding protection): the address
    it listens on, `localhost` on a loopback address, and the configured names (HOST or
    HOST:PORT; without a port, the listening one). A wildcard listen (0.0.0.0, ::) names no
    address of its own: only the configured names.

    A page that rebinds its own name to a loopback address still sends its own name as Host
    (and Origin), so it is refused."""
    names = []
    if host not in _WILDCARDS:
        names.append(f"[{host}]" if ":" in host else host)
        if is_loopback(f"{host}:{port}") and host != "localhost":
            names.append("localhost")
    hosts: list[str] = []
    for given in extra_hosts:
        m = _ALLOWED_HOST.fullmatch(given)
        if m and m["port"]:
            hosts.append(given)
        else:
            names.append(given)
    for name in names:
        hosts += [f"{name}:{port}", *([name] if port == 80 else [])]
    return list(dict.fromkeys(hosts))


def check_names(extra_hosts: Iterable[str], extra_origins: Iterable[str]) -> None:
    """Refuses a configured host name or origin that no request could carry, naming it."""
    for given in extra_hosts:
        if not _ALLOWED_HOST.fullmatch(given):
            raise ConfigError(
                "--allowed-host", f"{quoted(given)} is not a host name or address (HOST[:PORT])"
            )
    for origin in extra_origins:
        if not _ORIGIN.fullmatch(origin):
            raise ConfigError(
                "--allowed-origin",
                f"{quoted(origin)} is not an origin (scheme://host[:port], e.g. "
                "https://agents.example.com)",
            )


def transport_security(
    host: str, port: int, extra_hosts: Iterable[str] = (), extra_origins: Iterable[str] = ()
) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding check for this listen address (the SDK turns it on by itself
    only for 127.0.0.1, localhost and ::1, while the node counts all of 127.0.0.0/8 as
    loopback). Off only on a wildcard listen with no configured names: tokens guard that."""
    hosts = host_names(host, port, extra_hosts)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=bool(hosts),
        allowed_hosts=hosts,
        allowed_origins=[*(f"http://{h}" for h in hosts), *extra_origins],
    )


def http_app(
    client: AsyncClient, host: str, tokens: frozenset[str],
    security: TransportSecuritySettings | None = None,
) -> Any:  # fmt: skip
    """The MCP server over the SDK's Streamable HTTP transport at MCP_PATH, behind tokens,
    refusing a Host or Origin header that `security` does not allow (DNS rebinding)."""
    app = build_server(client).streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=security
    )
    return BearerTokens(app, tokens)


def read_tokens(path: str | None, env: str | None) -> frozenset[str]:
    """MCP tokens from a file (one per line; blank lines and # comments skipped) and from
    a comma-separated list (FACTNODE_MCP_TOKENS); each follows the node's token rule
    (config.check_token), and a token given twice is refused (ConfigError naming where)."""
    given: list[tuple[str, str]] = []
    if path:
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                given.append((f"--mcp-token-file line {n}", line.strip()))
    items = [t.strip() for t in (env or "").split(",")]
    given += [(f"FACTNODE_MCP_TOKENS item {i}", t) for i, t in enumerate(items, 1) if t]
    out: set[str] = set()
    for where, token in given:
        check_token(where, token)
        if token in out:
            raise ConfigError(where, "is the same as an earlier token")
        out.add(token)
    return frozenset(out)


async def serve_http(
    address: str, *, token: str | None, ca_cert: str | None, timeout: float, host: str,
    port: int, tokens: frozenset[str], announce: Callable[[str], None],
    allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
) -> None:  # fmt: skip
    """Serves MCP over Streamable HTTP on host:port (0: a free port) until SIGINT/SIGTERM."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening before the announcement: a client that connects as soon as it reads the URL
    # is queued, not refused (uvicorn starts accepting a moment later).
    sock.listen(2048)
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    client = AsyncClient(address, token=token, ca_cert=ca_cert, timeout=timeout)
    try:
        security = transport_security(host, sock.getsockname()[1], allowed_hosts, allowed_origins)
        app = http_app(client, host, tokens, security)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        server = uvicorn.Server(config)
        auth = "bearer tokens required" if tokens else "no MCP tokens: loopback only"
        announce(
            f"factnode mcp on http://{shown}:{sock.getsockname()[1]}{MCP_PATH} "
            f"({auth}) for the node at {address}"
        )
        await server.serve(sockets=[sock])
    finally:
        await client.close()
        sock.close()


def _exit_ok(signum: int, frame: object) -> None:
    raise SystemExit(0)


def main_http(
    address: str, *, token: str | None, ca_cert: str | None, timeout: float, listen: str,
    token_file: str | None, tokens_env: str | None, allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> int:  # fmt: skip
    """`factnode mcp --http`: usage errors (a bad --listen, unreadable files, a token that
    breaks the node's token rule, a non-loopback listen without MCP tokens, a bad
    --allowed-host or --allowed-origin, a port in use) exit 2 naming the option."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        print(f"factnode mcp: --listen must be HOST:PORT, got {listen!r}", file=sys.stderr)
        return 2
    try:
        tokens = read_tokens(token_file, tokens_env)
        if token_file and not tokens:
            raise ConfigError("--mcp-token-file", f"{token_file!r} holds no token")
        check_face(
            "--listen", listen, bool(tokens),
            "no MCP tokens are given; give the tokens MCP clients must send "
            "(--mcp-token-file or FACTNODE_MCP_TOKENS)",
        )  # fmt: skip
        check_names(allowed_hosts, allowed_origins)
    except OSError as exc:
        print(f"factnode mcp: --mcp-token-file: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"factnode mcp: {exc.setting}: {exc.reason}", file=sys.stderr)
        return 2
    serving = serve_http(
        address, token=token, ca_cert=ca_cert, timeout=timeout, host=host, port=int(port),
        tokens=tokens, announce=lambda line: print(line, flush=True),
        allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
    )  # fmt: skip
    # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler that
    # was in place before it: this one makes that a clean exit 0, as for Ctrl-C.
    signal.signal(signal.SIGTERM, _exit_ok)
    try:
        asyncio.run(serving)
    except OSError as exc:
        print(f"factnode mcp: cannot listen on {listen}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
