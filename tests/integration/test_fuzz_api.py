"""Fuzzing a real in-process node through its client and federation ports.

Every RPC gets raw bytes and generated messages. The node must answer each with a status
other than INTERNAL or UNKNOWN, must write nothing for a request it refuses, and must
still serve afterwards. With FACTNODE_TEST_POSTGRES_URL set, every case goes to a SQLite
node and to a PostgreSQL node fed the same requests, and both must answer it with the same
status code (`same_outcome`). The counts per status code are printed at the end (run with -s).
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, text

from factnode import tokens
from factnode.api.v1 import factnode_pb2 as pb
from factnode.certs import ensure_ca, issue_node_cert
from factnode.config import Peer, Settings
from factnode.server.app import Node

NODE_ID = "fuzz-node"
PEER_ID = "fuzz-peer"
RPC_TIMEOUT = 5.0
WATCH_TIMEOUT = 0.3  # a live watch waits for changes; its deadline ends it
EXAMPLES = 40  # per RPC and kind (bytes, messages): about 1,500 calls in all
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# RESOURCE_EXHAUSTED here would be a status too large for the client's trailers (16 KiB):
# every request sent is far below the node's message limit.
REFUSED_NEVER = {
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}

CLIENT_METHODS = [
    m
    for name in ("FactService", "ReviewService", "AdminService")
    for m in pb.DESCRIPTOR.services_by_name[name].methods
]
FEDERATION_METHODS = list(pb.DESCRIPTOR.services_by_name["FederationService"].methods)

STATUS_COUNTS: collections.Counter[str] = collections.Counter()


class RunningNode:
    """A Node served on its own event loop thread, with sync channels to both ports."""

    def __init__(self, tmp: Path, database_url: str | None = None) -> None:
        certs = tmp / "certs"
        ensure_ca(certs)
        node_cert, node_key = issue_node_cert(certs, NODE_ID)
        peer_cert, peer_key = issue_node_cert(certs, PEER_ID)
        self.settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp / "data",
            database_url=database_url,
            node_id=NODE_ID,
            peers=(Peer(address="127.0.0.1:1", node_id=PEER_ID),),
            federation_listen="127.0.0.1:0",
            federation_cert=node_cert,
            federation_key=node_key,
            federation_ca=certs / "ca.crt",
            sync_interval_seconds=3600.0,
            grace_seconds=0.0,
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.node: Node = self._call(self._start())
        self.client = grpc.insecure_channel(f"127.0.0.1:{self.node.port}")
        creds = grpc.ssl_channel_credentials(
            root_certificates=(certs / "ca.crt").read_bytes(),
            private_key=peer_key.read_bytes(),
            certificate_chain=peer_cert.read_bytes(),
        )
        self.federation = grpc.secure_channel(
            f"127.0.0.1:{self.node.federation_port}",
            creds,
            options=[("grpc.ssl_target_name_override", NODE_ID)],
        )

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    async def _start(self) -> Node:
        node = Node(self.settings)
        await node.start()
        return node

    def counts(self) -> dict[str, int]:
        """Rows per table: what a refused request must leave unchanged."""
        engine = self.node.repo.engine
        with engine.connect() as conn:
            return {
                t: int(conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one())
                for t in inspect(engine).get_table_names()
            }

    def close(self) -> None:
        self.client.close()
        self.federation.close()
        self._call(self.node.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the node's event loop did not stop"
        self.loop.close()


def _seeded(node: RunningNode) -> RunningNode:
    """`node` with a few beliefs and a contested key to find."""
    submit = node.client.unary_unary(
        "/factnode.v1.FactService/SubmitFact",
        request_serializer=pb.SubmitFactRequest.SerializeToString,
        response_deserializer=pb.SubmitFactResponse.FromString,
    )
    for subject, obj in (("ana", "Porto"), ("ana", "Lisbon"), ("rui", "Faro")):
        fact = pb.FactInput(
            key=pb.Key(namespace="user:ana", subject=subject, predicate="lives_in"),
            object=obj,
            anchor="user_stated",
            source="fuzz seed",
        )
        submit(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
    return node


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, module_postgres_url: str | None
) -> Iterator[list[RunningNode]]:
    """The same seeded node on SQLite and, where PostgreSQL is set, on PostgreSQL."""
    out = [_seeded(RunningNode(tmp_path_factory.mktemp("fuzz")))]
    try:
        if module_postgres_url is not None:
            pg = RunningNode(tmp_path_factory.mktemp("fuzz-pg"), module_postgres_url)
            out.append(_seeded(pg))
        yield out
    finally:
        for node in out:
            node.close()


@pytest.fixture(scope="module")
def running(nodes: list[RunningNode]) -> RunningNode:
    """The SQLite node (the one other modules' tests share)."""
    return nodes[0]


# -- generated messages -----------------------------------------------------------

HEX_ID = "0123456789abcdef" * 2
INTERESTING_TEXT = [
    "",
    " ",
    "user:ana",
    "ana",
    "rui",
    "lives_in",
    "Porto",
    "user_stated",
    "llm_generated",
    NODE_ID,
    PEER_ID,
    HEX_ID,
    "F" * 32,
    "not-an-id",
    "\x00",
    "a\x00b",
    "user:ana\x00",
    "x" * 300,
    "é" * 200,
    tokens.key_position(HEX_ID, HEX_ID),
    tokens.seq_position(1),
    tokens.seq_position(2**63 - 1),
    tokens.seq_position(2**31),
    tokens.seq_position(1, tokens.CHANGES),
    "MTpjaGFuZ2VzOjk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5",  # 1:changes:<25 digits>
    "MTpkZWNpc2lvbnM6LTE",  # 1:decisions:-1
    "٣٣",
    "9" * 5000,
]


def _text() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(INTERESTING_TEXT), st.text(max_size=40))


def _scalar(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = fd.type
    if t == FieldDescriptor.TYPE_STRING:
        return _text()
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=40)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_ENUM):
        return st.one_of(st.integers(-3, 12), st.integers(-(2**31), 2**31 - 1))
    if t == FieldDescriptor.TYPE_UINT32:
        return st.one_of(st.integers(0, 1100), st.integers(0, 2**32 - 1))
    if t == FieldDescriptor.TYPE_INT64:
        return st.integers(-(2**63), 2**63 - 1)
    if t == FieldDescriptor.TYPE_UINT64:
        return st.integers(0, 2**64 - 1)
    raise AssertionError(f"no strategy for field type {t} ({fd.full_name})")


def _timestamp() -> st.SearchStrategy[dict[str, int]]:
    return st.fixed_dictionaries(
        {
            "seconds": st.one_of(
                st.integers(-62_135_596_800, 253_402_300_799), st.integers(-(2**63), 2**63 - 1)
            ),
            "nanos": st.one_of(st.integers(0, 999_999_999), st.integers(-(2**31), 2**31 - 1)),
        }
    )


def messages(cls: type[Message], depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of `cls` with any subset of fields set to valid, boundary or hostile values."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for fd in cls.DESCRIPTOR.fields:
        if fd.message_type is not None:
            sub = message_factory.GetMessageClass(fd.message_type)
            if fd.message_type.full_name == "google.protobuf.Timestamp":
                value: st.SearchStrategy[Any] = _timestamp().map(lambda d, c=sub: c(**d))
            elif depth >= 3:
                value = st.just(sub())
            else:
                value = st.deferred(lambda s=sub, d=depth: messages(s, d + 1))
        else:
            value = _scalar(fd)
        fields[fd.name] = st.lists(value, max_size=3) if fd.is_repeated else value

    def build(values: dict[str, Any]) -> Message:
        msg = cls()
        for name, value in values.items():
            fd = cls.DESCRIPTOR.fields_by_name[name]
            target = getattr(msg, name)
            if fd.is_repeated and fd.message_type is not None:
                for item in value:
                    target.add().CopyFrom(item)
            elif fd.is_repeated:
                target.extend(value)
            elif fd.message_type is not None:
                target.CopyFrom(value)
            else:
                setattr(msg, name, value)
        return msg

    return st.fixed_dictionaries({}, optional=fields).map(build)


# -- calling and checking ---------------------------------------------------------


def _call(channel: grpc.Channel, method: MethodDescriptor, payloads: Sequence[bytes]) -> str:
    """Sends raw request bytes to `method`; returns the status code's name."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    try:
        if method.client_streaming:
            channel.stream_unary(path)(iter(payloads), timeout=RPC_TIMEOUT)
        elif method.server_streaming:
            stream = channel.unary_stream(path)(payloads[0], timeout=WATCH_TIMEOUT)
            for _ in stream:
                pass
        else:
            channel.unary_unary(path)(payloads[0], timeout=RPC_TIMEOUT)
    except grpc.RpcError as err:
        code: grpc.StatusCode = err.code()
        assert code not in REFUSED_NEVER, f"{path}: {code.name} {err.details()}"
        return code.name
    return grpc.StatusCode.OK.name


def same_outcome(method: MethodDescriptor, codes: Sequence[str]) -> bool:
    """Whether the backends' status codes for one case agree. The documented differences:
    a live watch ends by its deadline (DEADLINE_EXCEEDED) or, if the deadline passes while
    the server is answering, OK; both mean the watch was accepted. Backup (below)."""
    if method.server_streaming:
        codes = ["OK" if c == "DEADLINE_EXCEEDED" else c for c in codes]
    if method.full_name == "factnode.v1.AdminService.Backup" and len(codes) > 1:
        # Backup copies a SQLite file: a well-formed request is copied (OK, or INVALID_ARGUMENT
        # when the name is taken) on SQLite and FAILED_PRECONDITION on PostgreSQL; a
        # malformed name is INVALID_ARGUMENT on both.
        sqlite, postgres = codes[0], codes[1]
        return sqlite == postgres == "INVALID_ARGUMENT" or (
            sqlite in ("OK", "INVALID_ARGUMENT") and postgres == "FAILED_PRECONDITION"
        )
    return len(set(codes)) == 1


def _fuzz_once(
    nodes: Sequence[RunningNode], method: MethodDescriptor, payloads: list[bytes]
) -> None:
    codes = []
    for node in nodes:
        before = node.counts()
        code = _call(_channel_for(node, method), method, payloads)
        STATUS_COUNTS[code] += 1
        codes.append(code)
        # A live watch ends by its deadline: that is the client giving up, not a refusal.
        if code not in ("OK", "DEADLINE_EXCEEDED"):
            assert node.counts() == before, f"{method.full_name} refused with {code} but wrote"
    assert same_outcome(method, codes), (
        f"{method.full_name}: SQLite {codes[0]}, PostgreSQL {codes[1]}"
    )


def _request_class(method: MethodDescriptor) -> type[Message]:
    return message_factory.GetMessageClass(method.input_type)


def _payloads(method: MethodDescriptor) -> st.SearchStrategy[list[bytes]]:
    one = messages(_request_class(method)).map(lambda m: m.SerializeToString())
    if method.client_streaming:
        return st.lists(st.one_of(one, st.binary(max_size=60)), max_size=5)
    return one.map(lambda b: [b])


def _ids(methods: Sequence[MethodDescriptor]) -> list[str]:
    return [m.name for m in methods]


def _channel_for(running: RunningNode, method: MethodDescriptor) -> grpc.Channel:
    return running.federation if method in FEDERATION_METHODS else running.client


ALL_METHODS = [*CLIENT_METHODS, *FEDERATION_METHODS]


@pytest.mark.parametrize("method", ALL_METHODS, ids=_ids(ALL_METHODS))
def test_raw_bytes_never_crash_the_node(nodes: list[RunningNode], method: MethodDescriptor) -> None:
    """Arbitrary request bytes get a status other than INTERNAL/UNKNOWN, the same on every
    backend, and, refused, write nothing."""

    @FUZZ
    @given(st.lists(st.binary(max_size=120), min_size=1, max_size=4))
    def fuzz(payloads: list[bytes]) -> None:
        _fuzz_once(nodes, method, payloads)

    fuzz()


@pytest.mark.parametrize("method", ALL_METHODS, ids=_ids(ALL_METHODS))
def test_generated_messages_never_crash_the_node(
    nodes: list[RunningNode], method: MethodDescriptor
) -> None:
    """Generated requests get a status other than INTERNAL/UNKNOWN, the same on every
    backend, and, refused, write nothing."""

    @FUZZ
    @given(_payloads(method))
    def fuzz(payloads: list[bytes]) -> None:
        _fuzz_once(nodes, method, payloads)

    fuzz()


def test_node_still_serves_after_the_fuzzing(running: RunningNode) -> None:
    """After every hostile request the node still answers reads on both ports; prints the counts."""
    get_status: Callable[..., pb.GetStatusResponse] = running.client.unary_unary(
        "/factnode.v1.AdminService/GetStatus",
        request_serializer=pb.GetStatusRequest.SerializeToString,
        response_deserializer=pb.GetStatusResponse.FromString,
    )
    assert get_status(pb.GetStatusRequest(), timeout=RPC_TIMEOUT).node_id == NODE_ID
    get_digest: Callable[..., pb.Digest] = running.federation.unary_unary(
        "/factnode.v1.FederationService/GetDigest",
        request_serializer=pb.DigestRequest.SerializeToString,
        response_deserializer=pb.Digest.FromString,
    )
    assert get_digest(pb.DigestRequest(), timeout=RPC_TIMEOUT).buckets
    total = sum(STATUS_COUNTS.values())
    summary = ", ".join(f"{code} {n}" for code, n in STATUS_COUNTS.most_common())
    print(f"\nfuzz: {total} calls; by status: {summary}")


# -- the text rule: a NUL in any stored string field ---------------------------------

NUL = "a\x00b"
_KEY = {"namespace": "user:ana", "subject": "ana", "predicate": "lives_in"}
_FACT = {"key": _KEY, "object": "Porto", "anchor": "user_stated", "source": "nul test"}
# Each RPC's valid request, and its stored (or queried) string fields: the request path set
# to a NUL, and the field the violation names.
_KEY_FIELDS = [(f"key.{p}", f"key.{p}") for p in _KEY]
NUL_CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    (
        "FactService/SubmitFact",
        {
            "fact": {**_FACT, "corrects": HEX_ID, "contradicts": {**_KEY, "subject": "rui"}},
            "idempotency_key": "nul-test",
        },
        [
            *[(f"fact.key.{p}", p) for p in _KEY],
            *[(f"fact.{f}", f) for f in ("object", "anchor", "source", "corrects")],
            *[(f"fact.contradicts.{p}", f"contradicts.{p}") for p in _KEY],
            ("idempotency_key", "idempotency_key"),
        ],
    ),
    ("FactService/GetBelief", {"key": _KEY}, _KEY_FIELDS),
    ("FactService/GetHistory", {"key": _KEY}, _KEY_FIELDS),
    ("FactService/Explain", {"key": _KEY}, _KEY_FIELDS),
    (
        "FactService/ListBeliefs",
        {"namespace": "user:ana", "subject": "ana"},
        [("namespace", "namespace"), ("subject", "subject")],
    ),
    (
        "FactService/Retract",
        {
            "key": _KEY,
            "object": "Porto",
            "reason": "moved",
            "anchor": "user_stated",
            "source": "nul test",
        },
        [*_KEY_FIELDS, *[(f, f) for f in ("object", "reason", "anchor", "source")]],
    ),
    (
        "FactService/ListDecisions",
        {"key": _KEY, "namespace": "user:ana"},
        [*_KEY_FIELDS, ("namespace", "namespace")],
    ),
    ("FactService/WatchBeliefs", {"namespace": "user:ana"}, [("namespace", "namespace")]),
    ("ReviewService/ListContested", {"namespace": "user:ana"}, [("namespace", "namespace")]),
    ("ReviewService/GetContested", {"key": _KEY}, _KEY_FIELDS),
    (
        "ReviewService/ResolveContested",
        {"key": _KEY, "object": "Porto", "reason": "checked", "operator": "ops"},
        [*_KEY_FIELDS, *[(f, f) for f in ("object", "reason", "operator")]],
    ),
    (
        "ReviewService/ResolveContested",
        {"key": _KEY, "version_id": HEX_ID, "reason": "checked", "operator": "ops"},
        [("version_id", "version_id")],
    ),
    (
        "AdminService/Erase",
        {"evidence_id": HEX_ID, "reason": "gdpr", "operator": "ops"},
        [("evidence_id", "evidence_id"), ("reason", "reason"), ("operator", "operator")],
    ),
    ("AdminService/Erase", {"key": _KEY, "reason": "gdpr"}, _KEY_FIELDS),
    (
        "AdminService/Erase",
        {"subject": {"namespace": "user:ana", "subject": "ana"}, "reason": "gdpr"},
        [("subject.namespace", "subject.namespace"), ("subject.subject", "subject.subject")],
    ),
    ("AdminService/SyncNow", {"peer_node_id": PEER_ID}, [("peer_node_id", "peer_node_id")]),
]


def _with(base: dict[str, Any], path: str, value: str) -> dict[str, Any]:
    """`base` with the field at the dotted `path` set to `value`."""
    head, _, rest = path.partition(".")
    out = dict(base)
    out[head] = _with(base[head], rest, value) if rest else value
    return out


def _nul_requests() -> list[tuple[str, bytes, str]]:
    out = []
    for rpc, base, fields in NUL_CASES:
        service, name = rpc.split("/")
        method = pb.DESCRIPTOR.services_by_name[service].methods_by_name[name]
        cls = _request_class(method)
        for path, field in fields:
            msg = cls()
            json_format.ParseDict(_with(base, path, NUL), msg)
            out.append((rpc, msg.SerializeToString(), field))
    return out


def _violated_fields(err: grpc.RpcError) -> list[str]:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, "no rich status"
    out = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.extend(v.field for v in bad.field_violations)
    return out


@pytest.mark.parametrize(
    ("rpc", "request_", "field"),
    [
        ("FactService/ListDecisions", {"page_token": tokens.seq_position(2**31)}, "page_token"),
        (
            "FactService/WatchBeliefs",
            {"resume_token": tokens.seq_position(2**31, tokens.CHANGES)},
            "resume_token",
        ),
    ],
)
def test_a_position_beyond_postgresqls_integer_seq_is_invalid_on_every_backend(
    nodes: list[RunningNode], rpc: str, request_: dict[str, str], field: str
) -> None:
    """A decision-log or change position past 2**31 - 1 (PostgreSQL's INTEGER seq) is
    INVALID_ARGUMENT on its token on both backends (it was INTERNAL on PostgreSQL alone)."""
    service, name = rpc.split("/")
    method = pb.DESCRIPTOR.services_by_name[service].methods_by_name[name]
    msg = _request_class(method)()
    json_format.ParseDict(request_, msg)
    for node in nodes:
        with pytest.raises(grpc.RpcError) as err:
            call = node.client.unary_stream if method.server_streaming else node.client.unary_unary
            reply = call(f"/factnode.v1.{rpc}")(msg.SerializeToString(), timeout=RPC_TIMEOUT)
            if method.server_streaming:
                for _ in reply:  # type: ignore[union-attr]
                    pass
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert _violated_fields(err.value) == [field]


@pytest.mark.parametrize(
    ("rpc", "payload", "field"),
    _nul_requests(),
    ids=[f"{rpc}:{field}" for rpc, _, field in _nul_requests()],
)
def test_a_nul_in_a_stored_string_field_is_invalid_argument_on_every_backend(
    nodes: list[RunningNode], rpc: str, payload: bytes, field: str
) -> None:
    """A NUL in any string field that is stored or queried gets INVALID_ARGUMENT naming that
    field, on SQLite and PostgreSQL alike, and writes nothing."""
    service, name = rpc.split("/")
    method = pb.DESCRIPTOR.services_by_name[service].methods_by_name[name]
    path = f"/factnode.v1.{rpc}"
    for node in nodes:
        before = node.counts()
        with pytest.raises(grpc.RpcError) as err:
            if method.server_streaming:
                for _ in node.client.unary_stream(path)(payload, timeout=RPC_TIMEOUT):
                    pass
            else:
                node.client.unary_unary(path)(payload, timeout=RPC_TIMEOUT)
        where = node.settings.db_url.split(":")[0]
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT, (where, err.value.details())
        assert field in _violated_fields(err.value), (where, _violated_fields(err.value))
        assert node.counts() == before, f"{where}: refused but wrote"


def test_a_nul_item_in_a_submitfacts_stream_is_refused_alone_on_every_backend(
    nodes: list[RunningNode],
) -> None:
    """In a SubmitFacts stream, an item with a NUL in a stored field is refused as invalid,
    naming the field, and the items around it are decided, on every backend."""
    good = pb.SubmitFactRequest()
    json_format.ParseDict({"fact": {**_FACT, "key": {**_KEY, "subject": "stream"}}}, good)
    bad = pb.SubmitFactRequest()
    json_format.ParseDict({"fact": {**_FACT, "source": NUL}}, bad)
    for node in nodes:
        call = node.client.stream_unary(
            "/factnode.v1.FactService/SubmitFacts",
            response_deserializer=pb.SubmitFactsResponse.FromString,
        )
        reply = call(iter([good.SerializeToString(), bad.SerializeToString()]), timeout=RPC_TIMEOUT)
        assert (reply.decided_count, reply.invalid_count) == (1, 1)
        assert [v.field for v in reply.results[1].error.field_violations] == ["source"]


def test_a_nul_in_pushed_evidence_or_tombstone_is_refused_alone_on_every_backend(
    nodes: list[RunningNode],
) -> None:
    """A peer's evidence or tombstone with a NUL in a stored field is refused item by item
    (the delta itself is answered OK) on SQLite and PostgreSQL alike."""
    evidence = pb.RelayedEvidence(
        evidence_id=HEX_ID,
        key=pb.Key(**_KEY),
        object=NUL,
        anchor="user_stated",
        source="peer",
        worth_milli=500,
        confidence_milli=500,
        origin_node=PEER_ID,
    )
    tombstone = pb.ErasureTombstone(
        erasure_id=HEX_ID,
        scope=pb.ERASURE_SCOPE_EVIDENCE,
        scope_hash=HEX_ID,
        evidence_ids=[HEX_ID],
        operator="ops",
        reason=NUL,
        origin_node=PEER_ID,
    )
    for node in nodes:
        before = node.counts()
        push = node.federation.unary_unary(
            "/factnode.v1.FederationService/PushDelta",
            request_serializer=pb.Delta.SerializeToString,
            response_deserializer=pb.PushDeltaResponse.FromString,
        )
        reply = push(pb.Delta(evidence=[evidence], tombstones=[tombstone]), timeout=RPC_TIMEOUT)
        reasons = sorted(r.reason for r in reply.rejected)
        assert reply.accepted == 0
        assert len(reasons) == 2 and all("NUL" in r for r in reasons), reasons
        assert node.counts() == before
