"""Each hostile request the API report found, pinned: the status, the field, nothing written."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from sqlalchemy import text
from test_fuzz_api import RPC_TIMEOUT, RunningNode

from factnode import tokens
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import InvalidInput
from factnode.server._requests import violations

NS = "user:ana"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    node = RunningNode(tmp_path_factory.mktemp("hardening"))
    yield node
    node.close()


def _fact(subject: str, obj: str) -> pb.SubmitFactRequest:
    key = pb.Key(namespace=NS, subject=subject, predicate="lives_in")
    return pb.SubmitFactRequest(
        fact=pb.FactInput(key=key, object=obj, anchor="user_stated", source="test")
    )


def _status(err: grpc.RpcError) -> status_pb2.Status:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    return status


def _fields(err: grpc.RpcError) -> list[str]:
    out = []
    for detail in _status(err).details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.extend(v.field for v in bad.field_violations)
    return out


def test_undecodable_request_is_invalid_argument_naming_the_method(running: RunningNode) -> None:
    """A request with invalid UTF-8 in a string field is INVALID_ARGUMENT naming the method."""
    call = running.client.unary_unary("/factnode.v1.FactService/GetBelief")
    with pytest.raises(grpc.RpcError) as err:
        call(b"\x0a\x04\x0a\x02\xff\xfe", timeout=RPC_TIMEOUT)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "FactService.GetBelief request does not decode" in (err.value.details() or "")
    assert "bad UTF-8" in (err.value.details() or "")


def test_stream_broken_by_an_undecodable_item_commits_nothing_and_says_so(
    running: RunningNode,
) -> None:
    """A stream broken by an undecodable item writes none of it (a stream is read whole before
    it commits), and the status's counts say nothing was decided."""
    call = running.client.stream_unary("/factnode.v1.FactService/SubmitFacts")
    before = running.counts()
    items = [_fact(f"s{i}", "Porto").SerializeToString() for i in range(300)]
    items.append(b"\xff\xff\xff")
    items.append(_fact("after", "Porto").SerializeToString())
    with pytest.raises(grpc.RpcError) as err:
        call(iter(items), timeout=30)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    status = _status(err.value)
    reports = [d for d in status.details if d.Is(pb.SubmitFactsResponse.DESCRIPTOR)]
    assert len(reports) == 1
    report = pb.SubmitFactsResponse()
    reports[0].Unpack(report)
    assert (report.decided_count, report.invalid_count, len(report.results)) == (0, 0, 0)
    assert _fields(err.value) == ["request item 300"]
    after = running.counts()
    assert after["evidence"] == before["evidence"]


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (pb.ListBeliefsRequest(namespace=""), ["namespace"]),
        (pb.ListBeliefsRequest(namespace="n" * 300), ["namespace"]),
        (pb.ListBeliefsRequest(namespace=NS, page_token="not a token"), ["page_token"]),
        (
            pb.ListDecisionsRequest(page_token=tokens.seq_position(1, tokens.CHANGES)),
            ["page_token"],
        ),
        (pb.WatchBeliefsRequest(resume_token="9" * 25), ["resume_token"]),
        (pb.EraseRequest(evidence_id="", reason="gdpr"), ["evidence_id"]),
        (pb.EraseRequest(evidence_id="not-an-id", reason="gdpr"), ["evidence_id"]),
        (pb.EraseRequest(evidence_id="\x00", reason="gdpr"), ["evidence_id"]),
        (pb.EraseRequest(evidence_id="a" * 2000, reason="gdpr"), ["evidence_id"]),
        (pb.EraseRequest(evidence_id="0" * 32, reason=""), ["reason"]),
        (
            pb.EraseRequest(subject=pb.SubjectScope(namespace=NS, subject="s" * 300), reason="r"),
            ["subject.subject"],
        ),
        (pb.EraseRequest(reason="r"), ["scope"]),
        (
            pb.ResolveContestedRequest(reason="r"),
            ["key.namespace", "key.subject", "key.predicate", "choice"],
        ),
        (pb.RunDecayRequest(now={"seconds": 0, "nanos": 2_000_000_000}), ["now"]),
        (
            pb.Delta(votes=[pb.Vote(cast_at={"seconds": 1, "nanos": 2_000_000_000})]),
            ["votes[0].cast_at"],
        ),
    ],
)
def test_documented_rules_name_the_field(request_: object, fields: list[str]) -> None:
    """Each request breaking a rule the proto documents is refused naming that field."""
    assert [v.field for v in violations(request_)] == fields  # type: ignore[arg-type]


def test_refused_erase_writes_no_tombstone(running: RunningNode) -> None:
    """An Erase with a malformed evidence id is INVALID_ARGUMENT and leaves the store unchanged."""
    call = running.client.unary_unary(
        "/factnode.v1.AdminService/Erase",
        request_serializer=pb.EraseRequest.SerializeToString,
        response_deserializer=pb.EraseResponse.FromString,
    )
    before = running.counts()
    with pytest.raises(grpc.RpcError) as err:
        call(pb.EraseRequest(evidence_id="not-an-id", reason="gdpr"), timeout=RPC_TIMEOUT)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _fields(err.value) == ["evidence_id"]
    assert running.counts() == before


def test_empty_operator_is_the_callers_identity(running: RunningNode) -> None:
    """An Erase without an operator is recorded under the caller's identity, as the proto says."""
    submit = running.client.unary_unary(
        "/factnode.v1.FactService/SubmitFact",
        request_serializer=pb.SubmitFactRequest.SerializeToString,
        response_deserializer=pb.SubmitFactResponse.FromString,
    )
    done = submit(_fact("operator-test", "Faro"), timeout=RPC_TIMEOUT)
    erase = running.client.unary_unary(
        "/factnode.v1.AdminService/Erase",
        request_serializer=pb.EraseRequest.SerializeToString,
        response_deserializer=pb.EraseResponse.FromString,
    )
    report = erase(
        pb.EraseRequest(evidence_id=done.evidence_id, reason="gdpr"), timeout=RPC_TIMEOUT
    )
    assert report.evidence_erased == 1
    with running.node.repo.engine.connect() as conn:
        operators = {r[0] for r in conn.execute(text("SELECT operator FROM erasure"))}
    assert operators == {"local"}


@pytest.mark.parametrize(
    "token",
    [
        "1:keys:x",
        tokens.key_position("0" * 32, "0" * 32) + "A",
        tokens.key_position("0" * 32, "0" * 32).lower(),
        tokens.seq_position(2**63),
        tokens.seq_position(tokens.MAX_SEQ + 1),  # beyond PostgreSQL's INTEGER seq
        tokens.seq_position(1, tokens.CHANGES),
        "MTpkZWNpc2lvbnM6MDE",  # 1:decisions:01, not canonical
        "٣" * 4,
        "9" * 5000,
    ],
)
def test_tampered_decision_token_is_invalid_input(token: str) -> None:
    """A decision-log token that is not exactly one this node issues is InvalidInput on its field."""
    with pytest.raises(InvalidInput) as err:
        tokens.decode_seq_position(token)
    assert [v.field for v in err.value.violations] == ["page_token"]


def test_tokens_round_trip() -> None:
    """Every position a token encodes decodes back to itself."""
    assert tokens.decode_seq_position(tokens.seq_position(tokens.MAX_SEQ)) == tokens.MAX_SEQ
    since = (tokens.MAX_SINCE, "a" * 32, "b" * 32)
    assert tokens.decode_queue_position(tokens.queue_position(*since)) == since
    key = ("a" * 32, "")
    assert tokens.decode_key_position(tokens.key_position(*key)) == key
