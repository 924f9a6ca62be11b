"""Request building, response parsing and channel set-up shared by Client and AsyncClient.

Each RPC is one `Call`: its method path, response type, whether a retry on UNAVAILABLE
is safe, and how to turn the response into plain values. The two clients differ only
in how they send it."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Self, TypeVar, cast

import grpc
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key, recall
from factnode.core.policy import DEFAULT_ANCHORS, Policy
from factnode.core.validation import (
    DEFAULT_UNIT,
    FieldViolation,
    Submission,
    check_key,
    time_problem,
    violations_of,
)

from . import _types as t
from ._errors import FieldError, InvalidFact, Unavailable

R = TypeVar("R")
L = TypeVar("L", bound=Message)


@dataclass(frozen=True, slots=True)
class Call(Generic[R]):
    """One RPC as the clients send it."""

    path: str
    response: type[Message]
    parse: Callable[[Any], R]
    retry_safe: bool


# Every RPC the clients send as a `Call`, in the order defined (`service_config` reads it).
CALLS: list[Call[Any]] = []


def _call(service: str, method: str, response: type[Message], parse: Callable[[Any], R],
             retry_safe: bool = True) -> Call[R]:  # fmt: skip
    call = Call(f"/factnode.v1.{service}/{method}", response, parse, retry_safe)
    CALLS.append(call)
    return call


# gRPC caps a retry policy's attempts at five.
MAX_ATTEMPTS = 5
# Calls one client sends at once; its further calls wait in the client for a place, so one
# client never fills a node's `max_calls_in_flight` (1,000) and queue. Refusals and five
# attempts did not see thousands of one client's calls through (85 of 1,500 LangGraph puts
# refused), nor does HTTP/2's MAX_CONCURRENT_STREAMS (gRPC's Python server refuses streams
# past it, REFUSED_STREAM, before the client has seen its earlier streams close).
DEFAULT_MAX_IN_FLIGHT = 100


def service_config(retries: int, backoff: float) -> str:
    """gRPC's service config for the clients' channels: the calls safe to repeat (reads, and
    submit, which always carries an idempotency key) are retried on UNAVAILABLE and on
    RESOURCE_EXHAUSTED up to `retries` more times (at most 4: gRPC allows five attempts),
    the first after a random wait of up to `backoff` seconds, each limit doubling (gRPC's
    jittered exponential backoff), unless the node named the wait (its retry push-back, sent
    with an overloaded node's RESOURCE_EXHAUSTED; its other RESOURCE_EXHAUSTED answers carry
    a negative one, which tells gRPC not to retry). The call's deadline covers every
    attempt, so `timeout` bounds the whole call."""
    safe = [
        {"service": c.path.split("/")[1], "method": c.path.split("/")[2]}
        for c in CALLS
        if c.retry_safe
    ]
    if retries <= 0:
        return json.dumps({"methodConfig": []})
    attempts = min(retries + 1, MAX_ATTEMPTS)
    policy = {
        "maxAttempts": attempts,
        "initialBackoff": f"{backoff:.3f}s",
        "maxBackoff": f"{backoff * 2 ** (attempts - 1):.3f}s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
    }
    return json.dumps({"methodConfig": [{"name": safe, "retryPolicy": policy}]})


def credentials(
    ca_cert: str | Path | None, client_cert: str | Path | None, client_key: str | Path | None
) -> grpc.ChannelCredentials | None:
    """TLS credentials from PEM files, or None for a plaintext channel."""
    if ca_cert is None and client_cert is None:
        return None

    def read(path: str | Path | None) -> bytes | None:
        return Path(path).read_bytes() if path is not None else None

    return grpc.ssl_channel_credentials(read(ca_cert), read(client_key), read(client_cert))


def metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


class Connection:
    """The options both clients share: where, as whom, over what, how long and how often.

    Subclasses say how their channel (blocking or asyncio) is opened: `_open`."""

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        ca_cert: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.2,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        whole = isinstance(max_in_flight, int) and not isinstance(max_in_flight, bool)
        if not whole or max_in_flight < 1:
            why = f"must be a whole number >= 1, got {max_in_flight!r}"
            _refuse([FieldViolation("max_in_flight", why)])
        self.address = address
        self.max_in_flight = max_in_flight
        options = [
            ("grpc.enable_retries", 1),
            ("grpc.service_config", service_config(retries, backoff)),
        ]
        creds = credentials(ca_cert, client_cert, client_key)
        self._channel = self._open(address, creds, options)
        self._metadata = metadata(token)
        self._timeout = timeout

    def with_token(self, token: str | None) -> Self:
        """This connection sending `token` (None: no token) on the same channel, so one
        channel serves many callers (the console's signed-in users). Closing either closes
        the channel of both."""
        other = copy.copy(self)
        other._metadata = metadata(token)
        return other

    def _open(
        self,
        address: str,
        creds: grpc.ChannelCredentials | None,
        options: list[tuple[str, Any]],
    ) -> Any:
        """The channel to `address`, with TLS when `creds` are given, and `options`."""
        raise NotImplementedError

    def _no_place(self, timeout: float) -> Unavailable:
        """The error of a call whose deadline passed while it waited for a place."""
        return Unavailable(
            f"the call's deadline ({timeout:g} s) passed while it waited in the client for one "
            f"of its max_in_flight={self.max_in_flight} places; nothing was sent",
            "DEADLINE_EXCEEDED",
        )


def _refuse(out: list[FieldViolation]) -> None:
    if out:
        errors = tuple(FieldError(v.field, v.reason) for v in out)
        raise InvalidFact("; ".join(f"{e.field}: {e.reason}" for e in errors), errors)


def ts(at: datetime, field: str) -> Timestamp:
    """A time as a Timestamp; InvalidFact naming `field` when it has no offset or its UTC
    instant is outside the Timestamp range (refused here: protobuf would raise OverflowError)."""
    if at.tzinfo is None:
        _refuse([FieldViolation(field, "has no timezone")])
    problem = time_problem(at)
    if problem:
        _refuse([FieldViolation(field, problem)])
    out = Timestamp()
    out.FromDatetime(at)
    return out


def key_pb(key: Key | tuple[str, str, str], prefix: str = "key.") -> pb.Key:
    """A key as a message, refused before sending when a part is missing or too long."""
    k = Key(*key)
    out: list[FieldViolation] = []
    check_key(out, k, prefix)
    _refuse(out)
    return pb.Key(namespace=k.namespace, subject=k.subject, predicate=k.predicate)


def one_anchor(anchor: str | None, attribution: str | None, *, required: bool) -> str | None:
    """The trust anchor given as `anchor` or by its former name `attribution` (an alias);
    InvalidFact naming `anchor` when both differ, or when neither is given and it is
    required."""
    if anchor is not None and attribution is not None and anchor != attribution:
        _refuse([FieldViolation("anchor", "give anchor or its alias attribution, not both")])
    if anchor is None and attribution is None and required:
        _refuse([FieldViolation("anchor", "is required")])
    return anchor if anchor is not None else attribution


def submit_request(
    key: Key | tuple[str, str, str],
    object: str,
    anchor: str | None = None,
    source: str = "",
    worth: float | None = None,
    confidence: float | None = None,
    valid_from: datetime | None = None,
    corrects: str | None = None,
    contradicts: Key | tuple[str, str, str] | None = None,
    idempotency_key: str | None = None,
    *,
    attribution: str | None = None,
    embeddings: Sequence[EmbeddingLike] = (),
) -> pb.SubmitFactRequest:
    """A SubmitFactRequest, checked with the node's own rules (the node checks the anchor;
    `attribution` is its former name, still accepted); `embeddings` are the caller's
    (space, vector) pairs of the fact, kept for SearchBeliefs."""
    anchor = one_anchor(anchor, attribution, required=True) or ""
    k = Key(*key)
    sub = Submission(
        k.namespace, k.subject, k.predicate, object, anchor, source,
        DEFAULT_UNIT if worth is None else worth,
        DEFAULT_UNIT if confidence is None else confidence,
        None, corrects, Key(*contradicts) if contradicts is not None else None,
        idempotency_key or str(uuid.uuid4()),
    )  # fmt: skip
    # The trust anchors are the node's policy; the client accepts any name and lets the node say.
    policy = Policy(anchors={**DEFAULT_ANCHORS, anchor: 0})
    _refuse([v for v in violations_of(sub, policy) if not v.field.startswith("anchor")])
    fact = pb.FactInput(
        key=pb.Key(namespace=k.namespace, subject=k.subject, predicate=k.predicate),
        object=object, anchor=anchor, source=source,
    )  # fmt: skip
    if worth is not None:
        fact.worth = worth
    if confidence is not None:
        fact.confidence = confidence
    if valid_from is not None:
        fact.valid_from.CopyFrom(ts(valid_from, "valid_from"))
    if corrects is not None:
        fact.corrects = corrects
    if sub.contradicts is not None:
        fact.contradicts.CopyFrom(key_pb(sub.contradicts, "contradicts."))
    assert sub.idempotency_key is not None
    req = pb.SubmitFactRequest(fact=fact, idempotency_key=sub.idempotency_key)
    req.embeddings.extend(embedding_pb(e, f"embeddings[{i}]") for i, e in enumerate(embeddings))
    return req


# A vector from the caller's embedder: (space, values); the space names the embedder.
EmbeddingLike = tuple[str, Sequence[float]]


def embedding_pb(embedding: EmbeddingLike, field: str = "embedding") -> pb.Embedding:
    """A checked Embedding message (InvalidFact naming `<field>.space` or `.values`)."""
    space, values = embedding
    _refuse(recall.embedding_violations(recall.Embedding(space, tuple(values)), field))
    return pb.Embedding(space=space, values=values)


def submit_requests(
    facts: Iterable[dict[str, Any]], all_or_nothing: bool
) -> list[pb.SubmitFactRequest]:
    """submit_many's stream, every item checked before any is sent (InvalidFact with `item`,
    the refused item's index, otherwise); `all_or_nothing` is set on its first item."""
    out = []
    for index, fact in enumerate(facts):
        try:
            out.append(submit_request(**fact))
        except InvalidFact as exc:
            refused = InvalidFact(f"item {index}: {exc}", exc.field_errors)
            refused.item = index
            raise refused from None
    if out and all_or_nothing:
        out[0].all_or_nothing = True
    return out


def time_travel(req: Any, as_of: datetime | None, known_at: datetime | None) -> Any:
    if as_of is not None:
        req.as_of.CopyFrom(ts(as_of, "as_of"))
    if known_at is not None:
        req.known_at.CopyFrom(ts(known_at, "known_at"))
    return req


def _submitted(m: pb.SubmitFactResponse) -> t.Submitted:
    belief = t.Belief.of(m.belief) if m.HasField("belief") else None
    return t.Submitted(t.Decision.of(m.decision), m.evidence_id, m.version_id, belief)


def _items(m: pb.SubmitFactsResponse) -> tuple[t.ItemOutcome, ...]:
    return tuple(
        t.ItemOutcome(
            r.index,
            t.Decision.of(r.decision) if r.HasField("decision") else None,
            r.error.message,
            tuple((v.field, v.description) for v in r.error.field_violations),
        )
        for r in m.results
    )


def _explanation(m: pb.ExplainResponse) -> t.Explanation:
    comparisons = tuple(
        t.Comparison(c.version_id, c.object, c.rule, c.reason, c.evidence_rule)
        for c in m.comparisons
    )
    again = m.believed_again.text if m.HasField("believed_again") else ""
    return t.Explanation(t.Belief.of(m.belief), comparisons, m.review, again)


def _status(m: pb.GetStatusResponse) -> t.Status:
    counts = {f.name: v for f, v in m.counts.ListFields()}
    peers = tuple(
        t.PeerState(p.node_id, p.address, t.when(p.last_sync) if p.HasField("last_sync") else None,
                    p.lag_seconds, p.last_error, p.max_anchor,
                    p.clock_skew_ms if p.HasField("clock_skew_ms") else None)
        for p in m.peers
    )  # fmt: skip
    members = tuple(_member(x) for x in m.members)
    quarantined = tuple(
        (q.evidence_id, Key(q.key.namespace, q.key.subject, q.key.predicate), q.field, q.reason)
        for q in m.quarantined
    )
    return t.Status(m.node_id, m.version, m.listen_address, m.database, counts, peers, members,
                    m.replica, m.lease_holder, quarantined)  # fmt: skip


def _member(x: pb.Member) -> t.Member:
    return t.Member(x.node_id, x.address,
                    t.when(x.last_heard) if x.HasField("last_heard") else None,
                    t.when(x.certificate_expires) if x.HasField("certificate_expires") else None,
                    x.revoked, x.max_anchor, x.self, x.refused, x.incarnation)  # fmt: skip


def _members(m: pb.ListMembersResponse) -> t.Members:
    return t.Members(tuple(_member(x) for x in m.members), m.revocation_list_number)


def _sync(m: pb.SyncNowResponse) -> tuple[t.SyncResult, ...]:
    skip = {"node_id", "address", "ok", "error"}
    return tuple(
        t.SyncResult(r.node_id, r.address, r.ok, r.error,
                     {f.name: v for f, v in r.ListFields() if f.name not in skip})
        for r in m.results
    )  # fmt: skip


def change(m: pb.BeliefChange) -> t.Change:
    return t.Change(
        t.key_of(m.key), t.Belief.of(m.belief), t.Decision.of(m.decision), m.resume_token
    )


SUBMIT = _call("FactService", "SubmitFact", pb.SubmitFactResponse, _submitted)
SUBMIT_MANY = _call("FactService", "SubmitFacts", pb.SubmitFactsResponse, _items, False)
BELIEF = _call("FactService", "GetBelief", pb.Belief, t.Belief.of)
BELIEFS = _call(
    "FactService", "ListBeliefs", pb.ListBeliefsResponse,
    lambda m: t.Page(tuple(t.Belief.of(b) for b in m.beliefs), m.next_page_token),
)  # fmt: skip
SUBJECTS = _call(
    "FactService", "ListSubjects", pb.ListSubjectsResponse,
    lambda m: t.Page(tuple(m.subjects), m.next_page_token),
)  # fmt: skip
SEARCH = _call(
    "FactService", "SearchBeliefs", pb.SearchBeliefsResponse,
    lambda m: t.Page(tuple(t.Hit.of(h) for h in m.hits), m.next_page_token),
)  # fmt: skip
HISTORY = _call(
    "FactService", "GetHistory", pb.GetHistoryResponse,
    lambda m: tuple(t.Version.of(v) for v in m.versions),
)  # fmt: skip
EXPLAIN = _call("FactService", "Explain", pb.ExplainResponse, _explanation)
RETRACT = _call(
    "FactService", "Retract", pb.RetractResponse,
    lambda m: (t.Decision.of(m.decision), t.Belief.of(m.belief)), False,
)  # fmt: skip
DECISIONS = _call(
    "FactService", "ListDecisions", pb.ListDecisionsResponse,
    lambda m: t.Page(tuple(t.Decision.of(d) for d in m.decisions), m.next_page_token),
)  # fmt: skip
WATCH = _call("FactService", "WatchBeliefs", pb.BeliefChange, change, False)
REVIEW = _call(
    "ReviewService", "ListContested", pb.ListContestedResponse,
    lambda m: t.Page(tuple(t.Contested.of(k) for k in m.keys), m.next_page_token),
)  # fmt: skip
CONTESTED = _call("ReviewService", "GetContested", pb.ContestedKey, t.Contested.of)
RESOLVE = _call(
    "ReviewService", "ResolveContested", pb.ResolveContestedResponse,
    lambda m: t.Resolved(t.Decision.of(m.decision), t.Belief.of(m.belief), m.note), False,
)  # fmt: skip
ERASE = _call(
    "AdminService", "Erase", pb.EraseResponse,
    lambda m: t.Erased(
        m.erasure_id, m.evidence_erased, m.keys_affected, t.when(m.erased_at),
        tuple(f"{b.key.namespace}/{b.key.subject}/{b.key.predicate}: {b.text}"
              for b in m.believed_again),
    ),
    False,
)  # fmt: skip
DECAY = _call(
    "AdminService", "RunDecay", pb.RunDecayResponse, lambda m: t.Decayed(m.decayed, m.tombstoned)
)
STATUS = _call("AdminService", "GetStatus", pb.GetStatusResponse, _status)
MEMBERS = _call("AdminService", "ListMembers", pb.ListMembersResponse, _members)
REVOKE = _call(
    "AdminService", "Revoke", pb.RevokeResponse,
    lambda m: t.Revoked(m.applied, m.number, tuple(m.revoked)), False,
)  # fmt: skip
BACKUP = _call(
    "AdminService", "Backup", pb.BackupResponse,
    lambda m: t.BackedUp(m.destination, m.bytes), False,
)  # fmt: skip
EXPORT_PATH = "/factnode.v1.AdminService/Export"
IMPORT_PATH = "/factnode.v1.AdminService/Import"


def restored(m: pb.ImportResponse) -> t.Restored:
    return t.Restored(m.node_id, m.evidence, m.tombstones, m.pins, m.decisions, m.policy_differed)


def import_chunks(data: Iterable[bytes], force_policy: bool) -> Iterator[pb.ImportChunk]:
    """An export's bytes as Import's request stream (`force_policy` on the first chunk)."""
    first = True
    for piece in data:
        yield pb.ImportChunk(data=piece, force_policy=force_policy and first)
        first = False
    if first:
        yield pb.ImportChunk(force_policy=force_policy)


SYNC = _call("AdminService", "SyncNow", pb.SyncNowResponse, _sync, False)


def listing(req: L, page_size: int, page_token: str) -> L:
    if page_size < 0:
        _refuse([FieldViolation("page_size", f"must be >= 0, got {page_size}")])
    req.page_size = page_size  # type: ignore[attr-defined]
    req.page_token = page_token  # type: ignore[attr-defined]
    return req


def retract_request(
    key: Key | tuple[str, str, str], reason: str, object: str | None, at: datetime | None,
    anchor: str | None = None, source: str | None = None, worth: float | None = None,
    confidence: float | None = None, *, attribution: str | None = None,
) -> pb.RetractRequest:  # fmt: skip
    req = pb.RetractRequest(key=key_pb(key), reason=reason)
    if object is not None:
        req.object = object
    if at is not None:
        req.at.CopyFrom(ts(at, "at"))
    # Unset fields take the node's defaults (user_stated, the caller's identity, 0.5, 0.5).
    for name, value in (
        ("anchor", one_anchor(anchor, attribution, required=False)), ("source", source),
        ("worth", worth),
        ("confidence", confidence),
    ):  # fmt: skip
        if value is not None:
            setattr(req, name, value)
    return req


def resolve_request(
    key: Key | tuple[str, str, str], reason: str, version_id: str | None, object: str | None,
    operator: str,
) -> pb.ResolveContestedRequest:  # fmt: skip
    if (version_id is None) == (object is None):
        _refuse([FieldViolation("choice", "give exactly one of version_id or object")])
    req = pb.ResolveContestedRequest(key=key_pb(key), reason=reason, operator=operator)
    if version_id is not None:
        req.version_id = version_id
    else:
        req.object = object or ""
    return req


ERASURES = _call(
    "AdminService", "ListErasures", pb.ListErasuresResponse,
    lambda m: t.Page(tuple(t.ErasureCoverage.of(e) for e in m.erasures), m.next_page_token),
)  # fmt: skip
ERASURE = _call("AdminService", "GetErasure", pb.ErasureCoverage, t.ErasureCoverage.of)


def erase_request(
    reason: str, operator: str, evidence_id: str | None, key: Key | tuple[str, str, str] | None,
    subject: tuple[str, str] | None,
) -> pb.EraseRequest:  # fmt: skip
    if sum(x is not None for x in (evidence_id, key, subject)) != 1:
        _refuse([FieldViolation("scope", "give exactly one of evidence_id, key or subject")])
    if not reason.strip():
        _refuse([FieldViolation("reason", "is required")])
    req = pb.EraseRequest(reason=reason, operator=operator)
    if evidence_id is not None:
        req.evidence_id = evidence_id
    elif key is not None:
        req.key.CopyFrom(key_pb(key))
    elif subject is not None:
        req.subject.CopyFrom(pb.SubjectScope(namespace=subject[0], subject=subject[1]))
    return req


def beliefs_request(
    namespace: str, subject: str | None, page_size: int, page_token: str,
    subject_prefix: str = "",
) -> pb.ListBeliefsRequest:  # fmt: skip
    req = listing(
        pb.ListBeliefsRequest(namespace=namespace, subject_prefix=subject_prefix),
        page_size, page_token,
    )  # fmt: skip
    if subject is not None:
        req.subject = subject
    return req


def search_request(
    query: str, namespace_prefix: str, subject: str | None, predicate: str | None,
    states: Sequence[str], anchors: Sequence[str], as_of: datetime | None,
    known_at: datetime | None, page_size: int, page_token: str,
    embedding: EmbeddingLike | None = None,
) -> pb.SearchBeliefsRequest:  # fmt: skip
    req = listing(
        pb.SearchBeliefsRequest(query=query, namespace_prefix=namespace_prefix),
        page_size, page_token,
    )  # fmt: skip
    if subject is not None:
        req.subject = subject
    if predicate is not None:
        req.predicate = predicate
    known = {n.removeprefix("BELIEF_STATE_") for n in pb.BeliefState.keys()}  # noqa: SIM118
    bad = [s for s in states if s.upper() not in known - {"UNSPECIFIED"}]
    if bad:
        _refuse([FieldViolation("states", f"{bad[0]!r} is not a belief state")])
    req.states.extend(
        cast(pb.BeliefState, pb.BeliefState.Value(f"BELIEF_STATE_{s.upper()}")) for s in states
    )
    req.anchors.extend(anchors)
    if embedding is not None:
        req.embedding.CopyFrom(embedding_pb(embedding))
    searched: pb.SearchBeliefsRequest = time_travel(req, as_of, known_at)
    return searched


# recall's default bound: a subject's beliefs fit a model's context, not a bulk export.
RECALL_LIMIT = 100
MAX_PAGE = 1000  # the node's largest page (factnode.ledger.MAX_PAGE_SIZE)


def recall_page(limit: int, have: int) -> int:
    """The page size for recall's next page, once `limit` is checked (at least 1)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        _refuse([FieldViolation("limit", f"must be a whole number >= 1, got {limit!r}")])
    return min(limit - have, MAX_PAGE)


def history_request(key: Key | tuple[str, str, str], known_at: datetime | None) -> Any:
    req = pb.GetHistoryRequest(key=key_pb(key))
    if known_at is not None:
        req.known_at.CopyFrom(ts(known_at, "known_at"))
    return req


def decisions_request(
    key: Key | tuple[str, str, str] | None, namespace: str, page_size: int, page_token: str
) -> pb.ListDecisionsRequest:
    req = pb.ListDecisionsRequest(namespace=namespace)
    if key is not None:
        req.key.CopyFrom(key_pb(key))
    return listing(req, page_size, page_token)


def watch_request(namespace: str | None, resume_token: str) -> pb.WatchBeliefsRequest:
    req = pb.WatchBeliefsRequest(resume_token=resume_token)
    if namespace is not None:
        req.namespace = namespace
    return req


def decay_request(now: datetime | None) -> pb.RunDecayRequest:
    req = pb.RunDecayRequest()
    if now is not None:
        req.now.CopyFrom(ts(now, "now"))
    return req
