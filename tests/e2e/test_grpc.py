"""A gRPC client talking to a real node: errors, bulk submit, health, reflection, watch."""

from __future__ import annotations

import grpc
import pytest
from _e2e import RPC_TIMEOUT, ServerProcess, unique_ns
from google.rpc import code_pb2, error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc


def fact(ns: str, subject: str, value: str, **overrides: object) -> pb.SubmitFactRequest:
    """A valid user_stated lives_in fact, with any FactInput field overridden."""
    fields: dict[str, object] = {
        "key": pb.Key(namespace=ns, subject=subject, predicate="lives_in"),
        "object": value,
        "anchor": "user_stated",
        "source": "e2e",
    }
    fields.update(overrides)
    return pb.SubmitFactRequest(fact=pb.FactInput(**fields))  # type: ignore[arg-type]


def bad_request(err: grpc.RpcError) -> dict[str, str]:
    """The google.rpc.BadRequest field violations of a failed call, by field."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, "no rich status on the call"
    out: dict[str, str] = {}
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            out.update({v.field: v.description for v in bad.field_violations})
    return out


def test_invalid_submit_fact_is_invalid_argument_with_field_violations(
    facts: pb_grpc.FactServiceStub,
) -> None:
    """An invalid SubmitFact fails INVALID_ARGUMENT with one BadRequest violation per bad field."""
    ns = unique_ns("user")
    request = fact(ns, "", "", anchor="rumour", worth=1.5, confidence=float("nan"))
    with pytest.raises(grpc.RpcError) as caught:
        facts.SubmitFact(request, timeout=RPC_TIMEOUT)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    violations = bad_request(caught.value)
    for name in ("subject", "object", "anchor", "worth", "confidence"):
        assert any(field.endswith(name) for field in violations), violations
    # Nothing was written: the decision log of the namespace stays empty.
    logged = facts.ListDecisions(pb.ListDecisionsRequest(namespace=ns), timeout=RPC_TIMEOUT)
    assert list(logged.decisions) == []


def test_submit_facts_reports_the_bad_item_by_index_and_decides_the_rest(
    facts: pb_grpc.FactServiceStub,
) -> None:
    """A SubmitFacts stream with one bad item reports its index as an error and decides the rest."""
    ns = unique_ns("user")
    items = [
        fact(ns, "ana", "Porto"),
        fact(ns, "rui", "Faro"),
        fact(ns, "eva", "Braga", worth=7.0),
        fact(ns, "tom", "Evora"),
    ]
    response = facts.SubmitFacts(iter(items), timeout=RPC_TIMEOUT)
    assert (response.decided_count, response.invalid_count) == (3, 1)
    assert [r.index for r in response.results] == [0, 1, 2, 3]
    kinds = [r.WhichOneof("result") for r in response.results]
    assert kinds == ["decision", "decision", "error", "decision"]
    error = response.results[2].error
    assert error.code == code_pb2.INVALID_ARGUMENT
    assert [v.field.rsplit(".", 1)[-1] for v in error.field_violations] == ["worth"], error
    for i in (0, 1, 3):
        assert response.results[i].decision.outcome == pb.OUTCOME_ACCEPTED
    believed = facts.ListBeliefs(pb.ListBeliefsRequest(namespace=ns), timeout=RPC_TIMEOUT)
    assert sorted(b.object for b in believed.beliefs) == ["Evora", "Faro", "Porto"]


def test_health_check_reports_serving(channel: grpc.Channel) -> None:
    """grpc.health.v1 answers SERVING for the node and for FactService."""
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "factnode.v1.FactService"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, service


def test_reflection_lists_the_public_services(channel: grpc.Channel) -> None:
    """Server reflection lists FactService, ReviewService, AdminService and Health (for grpcurl)."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    [reply] = list(stub.ServerReflectionInfo(iter([request]), timeout=RPC_TIMEOUT))
    names = {s.name for s in reply.list_services_response.service}
    assert {
        "factnode.v1.FactService",
        "factnode.v1.ReviewService",
        "factnode.v1.AdminService",
        "grpc.health.v1.Health",
    } <= names, names


def test_watch_beliefs_yields_a_change_after_a_submit(facts: pb_grpc.FactServiceStub) -> None:
    """A live WatchBeliefs stream on a namespace yields the change a later submit makes."""
    ns = unique_ns("user")
    facts.SubmitFact(fact(ns, "ana", "Porto"), timeout=RPC_TIMEOUT)
    stream = facts.WatchBeliefs(pb.WatchBeliefsRequest(namespace=ns), timeout=RPC_TIMEOUT)
    try:
        first = next(stream)  # the stream is live once it has delivered the earlier change
        assert (first.key.subject, first.belief.object) == ("ana", "Porto")
        facts.SubmitFact(fact(ns, "rui", "Faro"), timeout=RPC_TIMEOUT)
        change = next(stream)
        assert change.key == pb.Key(namespace=ns, subject="rui", predicate="lives_in")
        assert change.belief.object == "Faro"
        assert change.resume_token != first.resume_token  # opaque: resuming is the test below
    finally:
        stream.cancel()


def test_watch_beliefs_resumes_after_its_token(facts: pb_grpc.FactServiceStub) -> None:
    """A watch started from a resume token skips the changes up to it."""
    ns = unique_ns("user")
    facts.SubmitFact(fact(ns, "ana", "Porto"), timeout=RPC_TIMEOUT)
    facts.SubmitFact(fact(ns, "rui", "Faro"), timeout=RPC_TIMEOUT)
    stream = facts.WatchBeliefs(pb.WatchBeliefsRequest(namespace=ns), timeout=RPC_TIMEOUT)
    try:
        token = next(stream).resume_token
    finally:
        stream.cancel()
    resumed = facts.WatchBeliefs(
        pb.WatchBeliefsRequest(namespace=ns, resume_token=token), timeout=RPC_TIMEOUT
    )
    try:
        assert next(resumed).key.subject == "rui"
    finally:
        resumed.cancel()


def test_get_belief_of_an_unknown_key_is_not_found(facts: pb_grpc.FactServiceStub) -> None:
    """GetBelief for a key nobody submitted fails NOT_FOUND, not UNKNOWN or INTERNAL."""
    key = pb.Key(namespace=unique_ns("user"), subject="ana", predicate="lives_in")
    with pytest.raises(grpc.RpcError) as caught:
        facts.GetBelief(pb.GetBeliefRequest(key=key), timeout=RPC_TIMEOUT)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND


def test_federation_service_refuses_client_tokens(channel: grpc.Channel) -> None:
    """FederationService is unreachable with client credentials (peer-to-peer only)."""
    stub = pb_grpc.FederationServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetDigest(
            pb.DigestRequest(),
            timeout=RPC_TIMEOUT,
            metadata=(("authorization", "Bearer anything"),),
        )
    assert caught.value.code() in (
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.UNIMPLEMENTED,
    )


def test_a_node_without_tokens_says_it_is_loopback_only(server: ServerProcess) -> None:
    """Started without client tokens, `serve` says it listens on loopback only."""
    assert server.lines[0] == f"factnode {server.node_id} listening on {server.address}"
    said = [line for line in server.lines if "no client tokens configured" in line]
    assert said and "loopback only" in said[0], server.lines


def test_a_node_without_peer_votes_reports_no_tallies(facts: pb_grpc.FactServiceStub) -> None:
    """Belief.tallies stays empty where no peer has voted, as the API documents."""
    key = pb.Key(namespace=unique_ns("solo"), subject="s", predicate="p")
    for value, source in (("a", "one"), ("b", "two")):
        fact = pb.FactInput(key=key, object=value, anchor="user_stated", source=source)
        facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
    belief = facts.GetBelief(pb.GetBeliefRequest(key=key), timeout=RPC_TIMEOUT)
    assert belief.object in ("a", "b") and list(belief.tallies) == []


def test_a_retraction_is_decided_by_the_rules_against_the_belief(
    facts: pb_grpc.FactServiceStub,
) -> None:
    """Retract names its anchor: an llm_generated retraction of a user_stated belief is
    stored but DISBELIEVED by trust_anchor (the detail names the stronger evidence) and the
    belief stands; a user_stated one (the default) ends it; a key without a belief is
    NOT_FOUND."""
    ns = unique_ns("user")
    k = pb.Key(namespace=ns, subject="ana", predicate="lives_in")
    held = facts.SubmitFact(fact(ns, "ana", "Porto"), timeout=RPC_TIMEOUT)
    weak = facts.Retract(
        pb.RetractRequest(key=k, reason="a guess", anchor="llm_generated", source="gpt"),
        timeout=RPC_TIMEOUT,
    )
    assert (weak.decision.outcome, weak.decision.rule) == (pb.OUTCOME_DISBELIEVED, "trust_anchor")
    assert held.evidence_id in weak.decision.detail and weak.decision.evidence_id
    assert weak.belief.object == "Porto"
    strong = facts.Retract(pb.RetractRequest(key=k, reason="moved"), timeout=RPC_TIMEOUT)
    assert (strong.decision.outcome, strong.decision.rule) == (pb.OUTCOME_RETRACTED, "retract")
    assert "moved" in strong.decision.detail
    assert not strong.HasField("belief")
    with pytest.raises(grpc.RpcError) as caught:
        facts.Retract(pb.RetractRequest(key=k), timeout=RPC_TIMEOUT)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    logged = facts.ListDecisions(pb.ListDecisionsRequest(key=k), timeout=RPC_TIMEOUT)
    assert [d.outcome for d in logged.decisions] == [
        pb.OUTCOME_ACCEPTED,
        pb.OUTCOME_DISBELIEVED,
        pb.OUTCOME_RETRACTED,
    ]


def test_an_invalid_retraction_names_each_bad_field_and_writes_nothing(
    facts: pb_grpc.FactServiceStub,
) -> None:
    """An unknown anchor, a worth out of range and a NaN confidence are INVALID_ARGUMENT with
    one violation each; the belief and the decision log stay as they were."""
    ns = unique_ns("user")
    k = pb.Key(namespace=ns, subject="ana", predicate="lives_in")
    facts.SubmitFact(fact(ns, "ana", "Porto"), timeout=RPC_TIMEOUT)
    bad = pb.RetractRequest(key=k, anchor="rumour", worth=1.5, confidence=float("nan"))
    with pytest.raises(grpc.RpcError) as caught:
        facts.Retract(bad, timeout=RPC_TIMEOUT)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert set(bad_request(caught.value)) == {"anchor", "worth", "confidence"}
    assert facts.GetBelief(pb.GetBeliefRequest(key=k), timeout=RPC_TIMEOUT).object == "Porto"
    logged = facts.ListDecisions(pb.ListDecisionsRequest(key=k), timeout=RPC_TIMEOUT)
    assert len(logged.decisions) == 1
