"""Fuzzing a real in-process node through its client and federation ports.

Every RPC gets raw bytes and generated messages. The node must answer each with a status
other than INTERNAL or UNKNOWN, must write nothing for a request it refuses, and must
still serve afterwards. The counts per status code are printed at the end (run with -s).
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
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
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

    def __init__(self, tmp: Path) -> None:
        certs = tmp / "certs"
        ensure_ca(certs)
        node_cert, node_key = issue_node_cert(certs, NODE_ID)
        peer_cert, peer_key = issue_node_cert(certs, PEER_ID)
        self.settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp / "data",
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


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    """One node with a few beliefs, a contested key and an erasure to find."""
    node = RunningNode(tmp_path_factory.mktemp("fuzz"))
    submit = node.client.unary_unary(
        "/factnode.v1.FactService/SubmitFact",
        request_serializer=pb.SubmitFactRequest.SerializeToString,
        response_deserializer=pb.SubmitFactResponse.FromString,
    )
    for subject, obj in (("ana", "Porto"), ("ana", "Lisbon"), ("rui", "Faro")):
        fact = pb.FactInput(
            key=pb.Key(namespace="user:ana", subject=subject, predicate="lives_in"),
            object=obj,
            attribution="user_stated",
            source="fuzz seed",
        )
        submit(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
    yield node
    node.close()


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
    "x" * 300,
    "é" * 200,
    tokens.key_position(HEX_ID, HEX_ID),
    tokens.seq_position(1),
    tokens.seq_position(2**63 - 1),
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


def _fuzz_once(
    running: RunningNode, channel: grpc.Channel, method: MethodDescriptor, payloads: list[bytes]
) -> None:
    before = running.counts()
    code = _call(channel, method, payloads)
    STATUS_COUNTS[code] += 1
    # A live watch ends by its deadline: that is the client giving up, not a refusal.
    if code not in ("OK", "DEADLINE_EXCEEDED"):
        assert running.counts() == before, f"{method.full_name} refused with {code} but wrote"


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
def test_raw_bytes_never_crash_the_node(running: RunningNode, method: MethodDescriptor) -> None:
    """Arbitrary request bytes get a status other than INTERNAL/UNKNOWN and, refused, write nothing."""

    @FUZZ
    @given(st.lists(st.binary(max_size=120), min_size=1, max_size=4))
    def fuzz(payloads: list[bytes]) -> None:
        _fuzz_once(running, _channel_for(running, method), method, payloads)

    fuzz()


@pytest.mark.parametrize("method", ALL_METHODS, ids=_ids(ALL_METHODS))
def test_generated_messages_never_crash_the_node(
    running: RunningNode, method: MethodDescriptor
) -> None:
    """Generated requests get a status other than INTERNAL/UNKNOWN and, refused, write nothing."""

    @FUZZ
    @given(_payloads(method))
    def fuzz(payloads: list[bytes]) -> None:
        _fuzz_once(running, _channel_for(running, method), method, payloads)

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
