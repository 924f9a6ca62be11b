"""Bearer tokens and roles on a real node started from a TOML config."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from _e2e import (
    RPC_TIMEOUT,
    START_TIMEOUT,
    Cli,
    ServerProcess,
    factnode_command,
    isolated_env,
    start_server,
    unique_ns,
)
from google.rpc import code_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

READER, WRITER, OPERATOR = "reader-token-0001", "writer-token-0002", "operator-token-3"
EXIT_REFUSED = 4

CONFIG = f"""
listen = "127.0.0.1:0"

[[tokens]]
token = "{READER}"
roles = ["reader"]
name = "ravi"

[[tokens]]
token = "{WRITER}"
roles = ["writer"]
namespaces = ["team:*"]
name = "wanda"

[[tokens]]
token = "{OPERATOR}"
roles = ["operator"]
name = "olga"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A node whose config names a reader, a writer for `team:*` and an operator."""
    workdir = tmp_path_factory.mktemp("auth-node")
    config = workdir / "factnode.toml"
    config.write_text(CONFIG)
    srv = start_server(workdir, "--config", str(config), listen=None)
    try:
        yield srv
    finally:
        srv.stop()


def as_(token: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying `token` (none for None)."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def code_of(call: Callable[..., Any], request: Any, token: str | None) -> grpc.StatusCode:
    """The status code of one unary call made with `token`."""
    try:
        call(request, timeout=RPC_TIMEOUT, metadata=as_(token))
    except grpc.RpcError as err:
        return err.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def fact(ns: str, value: str = "Porto") -> pb.SubmitFactRequest:
    """A valid fact about ana in `ns`."""
    key = pb.Key(namespace=ns, subject="ana", predicate="lives_in")
    return pb.SubmitFactRequest(
        fact=pb.FactInput(key=key, object=value, anchor="user_stated", source="e2e")
    )


def test_no_token_is_unauthenticated(facts: pb_grpc.FactServiceStub) -> None:
    """Without a bearer token every client RPC fails UNAUTHENTICATED, reads included."""
    assert (
        code_of(facts.SubmitFact, fact(unique_ns("team")), None) is grpc.StatusCode.UNAUTHENTICATED
    )
    listing = pb.ListBeliefsRequest(namespace="team:x")
    assert code_of(facts.ListBeliefs, listing, None) is grpc.StatusCode.UNAUTHENTICATED
    assert code_of(facts.ListBeliefs, listing, "not-a-token") is grpc.StatusCode.UNAUTHENTICATED


def test_the_token_is_checked_before_the_request_is_decoded(channel: grpc.Channel) -> None:
    """Bytes that are no request, sent without a token (or with a reader's to a write), are
    refused for the caller, not for the bytes: nothing about them reaches an unknown caller."""
    garbage = b"\xff\xfe not a protobuf message"
    for method in ("/factnode.v1.FactService/SubmitFact", "/factnode.v1.FactService/GetBelief"):
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        assert code_of(call, garbage, None) is grpc.StatusCode.UNAUTHENTICATED
    submit = channel.unary_unary(
        "/factnode.v1.FactService/SubmitFact", request_serializer=None, response_deserializer=None
    )
    assert code_of(submit, garbage, READER) is grpc.StatusCode.PERMISSION_DENIED
    # The control: a caller allowed to write gets the decoding error.
    assert code_of(submit, garbage, WRITER) is grpc.StatusCode.INVALID_ARGUMENT


def test_reader_reads_but_cannot_submit(facts: pb_grpc.FactServiceStub) -> None:
    """A reader token may list beliefs but SubmitFact and SubmitFacts are PERMISSION_DENIED."""
    ns = unique_ns("team")
    assert (
        code_of(facts.ListBeliefs, pb.ListBeliefsRequest(namespace=ns), READER)
        is grpc.StatusCode.OK
    )
    assert code_of(facts.SubmitFact, fact(ns), READER) is grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as caught:
        facts.SubmitFacts(iter([fact(ns)]), timeout=RPC_TIMEOUT, metadata=as_(READER))
    assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED
    key = pb.Key(namespace=ns, subject="ana", predicate="lives_in")
    get = pb.GetBeliefRequest(key=key)
    assert code_of(facts.GetBelief, get, OPERATOR) is grpc.StatusCode.NOT_FOUND


def test_writer_writes_only_inside_its_namespaces(facts: pb_grpc.FactServiceStub) -> None:
    """A `team:*` writer may submit there; elsewhere it is PERMISSION_DENIED and writes nothing."""
    inside, outside = unique_ns("team"), unique_ns("user")
    assert code_of(facts.SubmitFact, fact(inside), WRITER) is grpc.StatusCode.OK
    assert code_of(facts.SubmitFact, fact(outside), WRITER) is grpc.StatusCode.PERMISSION_DENIED
    retract = pb.RetractRequest(key=pb.Key(namespace=outside, subject="ana", predicate="lives_in"))
    assert code_of(facts.Retract, retract, WRITER) is grpc.StatusCode.PERMISSION_DENIED

    mixed = facts.SubmitFacts(
        iter([fact(inside, "Faro"), fact(outside, "Faro")]),
        timeout=RPC_TIMEOUT,
        metadata=as_(WRITER),
    )
    assert [r.WhichOneof("result") for r in mixed.results] == ["decision", "error"]
    assert mixed.results[1].error.code == code_pb2.PERMISSION_DENIED

    logged = facts.ListDecisions(
        pb.ListDecisionsRequest(namespace=outside), timeout=RPC_TIMEOUT, metadata=as_(OPERATOR)
    )
    assert list(logged.decisions) == []


def test_writer_cannot_call_admin_or_review(channel: grpc.Channel) -> None:
    """AdminService and ReviewService need operator: writers and readers get PERMISSION_DENIED."""
    admin = pb_grpc.AdminServiceStub(channel)
    review = pb_grpc.ReviewServiceStub(channel)
    erase = pb.EraseRequest(
        subject=pb.SubjectScope(namespace="team:x", subject="ana"), reason="r", operator="w"
    )
    for token in (WRITER, READER):
        assert (
            code_of(admin.GetStatus, pb.GetStatusRequest(), token)
            is grpc.StatusCode.PERMISSION_DENIED
        )
        assert code_of(admin.Erase, erase, token) is grpc.StatusCode.PERMISSION_DENIED
        listing = pb.ListContestedRequest()
        assert code_of(review.ListContested, listing, token) is grpc.StatusCode.PERMISSION_DENIED


def test_operator_may_administer_and_write_anywhere(
    channel: grpc.Channel, facts: pb_grpc.FactServiceStub
) -> None:
    """An operator token may call AdminService and ReviewService and write in any namespace."""
    admin = pb_grpc.AdminServiceStub(channel)
    review = pb_grpc.ReviewServiceStub(channel)
    ns = unique_ns("user")
    assert code_of(facts.SubmitFact, fact(ns), OPERATOR) is grpc.StatusCode.OK
    assert code_of(admin.GetStatus, pb.GetStatusRequest(), OPERATOR) is grpc.StatusCode.OK
    assert code_of(review.ListContested, pb.ListContestedRequest(), OPERATOR) is grpc.StatusCode.OK
    erased = admin.Erase(
        pb.EraseRequest(
            subject=pb.SubjectScope(namespace=ns, subject="ana"), reason="r", operator="o"
        ),
        timeout=RPC_TIMEOUT,
        metadata=as_(OPERATOR),
    )
    assert erased.evidence_erased == 1


def test_health_and_reflection_need_no_token(channel: grpc.Channel) -> None:
    """Health checks answer SERVING without a token, so probes and grpcurl work."""
    reply = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=""), timeout=RPC_TIMEOUT
    )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_cli_with_tokens(server: ServerProcess, tmp_path: Path) -> None:
    """The CLI authenticates with --token or FACTNODE_TOKEN; a wrong or weak token exits 4."""
    env = isolated_env(tmp_path / "home")
    cli = Cli(server.address, env)
    assert cli.json("status", "--token", OPERATOR)["node_id"] == server.node_id
    ns = unique_ns("team")
    out = cli.json(
        "submit",
        ns,
        "ana",
        "lives_in",
        "Porto",
        "--anchor",
        "user_stated",
        "--source",
        "e2e",
        "--token",
        WRITER,
    )
    assert out["decision"]["outcome"] == "ACCEPTED"
    assert cli.json("get", ns, "ana", "lives_in", "--token", READER)["object"] == "Porto"

    refused = [
        ("status", "--token", "wrong-token"),
        ("status",),
        ("status", "--token", WRITER),
        (
            "submit",
            ns,
            "ana",
            "lives_in",
            "Faro",
            "--anchor",
            "user_stated",
            "--source",
            "e2e",
            "--token",
            READER,
        ),
        (
            "submit",
            unique_ns("user"),
            "ana",
            "lives_in",
            "Faro",
            "--anchor",
            "user_stated",
            "--source",
            "e2e",
            "--token",
            WRITER,
        ),
    ]
    for args in refused:
        r = cli.run(*args, check=EXIT_REFUSED)
        assert "UNAUTHENTICATED" in r.stderr or "PERMISSION_DENIED" in r.stderr, r.describe()
        assert r.stdout == ""

    with_env = Cli(server.address, {**env, "FACTNODE_TOKEN": OPERATOR})
    assert with_env.json("status")["node_id"] == server.node_id


def test_listening_beyond_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    """A config listening on 0.0.0.0 with no tokens is refused at start, naming the tokens."""
    config = tmp_path / "factnode.toml"
    config.write_text('listen = "0.0.0.0:0"\n')
    done = subprocess.run(
        factnode_command("serve", "--config", str(config), "--data-dir", str(tmp_path / "data")),
        capture_output=True,
        text=True,
        env=isolated_env(tmp_path / "home"),
        timeout=START_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0, done
    assert "tokens" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert "listening on" not in done.stdout


def test_a_contradicts_outside_the_writers_namespaces_is_refused(
    facts: pb_grpc.FactServiceStub, admin: pb_grpc.AdminServiceStub
) -> None:
    """A `team:*` writer's fact that contradicts a key in another namespace is PERMISSION_DENIED
    (SubmitFact and SubmitFacts) and writes nothing: both keys keep their belief and history,
    neither namespace's decision log grows, and the node's counts do not move."""
    inside, secret = unique_ns("team"), unique_ns("secret")
    target = pb.Key(namespace=secret, subject="ana", predicate="salary_band")
    known = pb.SubmitFactRequest(
        fact=pb.FactInput(key=target, object="B3", anchor="user_stated", source="hr")
    )
    assert code_of(facts.SubmitFact, known, OPERATOR) is grpc.StatusCode.OK
    own = fact(inside, "Porto")
    assert code_of(facts.SubmitFact, own, WRITER) is grpc.StatusCode.OK  # its own key, allowed

    def written() -> tuple[
        list[pb.Belief],
        list[pb.GetHistoryResponse],
        list[pb.ListDecisionsResponse],
        pb.StatusCounts,
    ]:
        """Everything a write could have touched, read as the operator."""
        read = {"timeout": RPC_TIMEOUT, "metadata": as_(OPERATOR)}
        keys = (own.fact.key, target)
        return (
            [facts.GetBelief(pb.GetBeliefRequest(key=k), **read) for k in keys],
            [facts.GetHistory(pb.GetHistoryRequest(key=k), **read) for k in keys],
            [
                facts.ListDecisions(pb.ListDecisionsRequest(namespace=ns, page_size=100), **read)
                for ns in (inside, secret)
            ],
            admin.GetStatus(pb.GetStatusRequest(), **read).counts,
        )

    before = written()
    assert [len(d.decisions) for d in before[2]] == [1, 1]
    escaping = fact(inside, "Faro")
    escaping.fact.contradicts.CopyFrom(target)
    assert code_of(facts.SubmitFact, escaping, WRITER) is grpc.StatusCode.PERMISSION_DENIED
    streamed = facts.SubmitFacts(iter([escaping]), timeout=RPC_TIMEOUT, metadata=as_(WRITER))
    assert streamed.results[0].error.code == code_pb2.PERMISSION_DENIED
    assert written() == before


def test_a_key_cannot_contradict_itself(facts: pb_grpc.FactServiceStub) -> None:
    """`contradicts` naming the fact's own key is INVALID_ARGUMENT on field contradicts."""
    ns = unique_ns("team")
    own = fact(ns, "Faro")
    own.fact.contradicts.CopyFrom(own.fact.key)
    assert code_of(facts.SubmitFact, own, WRITER) is grpc.StatusCode.INVALID_ARGUMENT
