"""SearchBeliefs over gRPC, against a node served in-process: a reader token sees the hits of
its own namespaces only, bad requests are INVALID_ARGUMENT with a BadRequest violation per
bad field, and the sync and async clients page through a search."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from _console import OPERATOR, READER, InProcessNode
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.client import AsyncClient, Client, Hit, InvalidFact
from factnode.config import TokenGrant

USER_READER = "user-only-reader-token"
USER_WRITER = "user-only-writer-token"
RPC_TIMEOUT = 10.0
WORD = f"kelp{uuid.uuid4().hex[:8]}"  # this module's word: no other test's facts have it


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node with a reader and a writer token limited to user:* besides the usual ones."""
    n = InProcessNode(
        tmp_path_factory.mktemp("search-node"),
        grants={
            USER_READER: TokenGrant(frozenset({"reader"}), ("user:*",), "ursula"),
            USER_WRITER: TokenGrant(frozenset({"writer"}), ("user:*",), "uwe"),
        },
    )
    with n.client() as c:
        c.submit(("user:ana", "ana", "lives_in"), f"{WORD} harbour", "user_stated", source="x")
        c.submit(("user:bob", "bob", "lives_in"), f"{WORD} hills", "user_stated", source="x")
        c.submit(("team:infra", "db", "choice"), f"{WORD} postgres", "user_stated", source="x")
        c.submit(("team:infra", "db", "owner"), f"{WORD} ops", "api_response", source="x")
        c.submit(("teamless", "x", "y"), f"{WORD} loose", "user_stated", source="x")
    yield n
    n.close()


def walk(client: Client, query: str, **kwargs: object) -> list[Hit]:
    out: list[Hit] = []
    token = ""
    while True:
        page = client.search(query, page_token=token, **kwargs)
        out += page.items
        token = page.next_page_token
        if not token:
            return out


def test_a_reader_limited_to_user_namespaces_never_sees_team_hits(node: InProcessNode) -> None:
    with Client(node.address, token=OPERATOR) as c:
        everything = {h.belief.key.namespace for h in walk(c, WORD, page_size=2)}
    assert everything == {"user:ana", "user:bob", "team:infra", "teamless"}  # the control
    with Client(node.address, token=READER) as c:  # a reader of "*" sees them all too
        assert {h.belief.key.namespace for h in walk(c, WORD)} == everything
    for token in (USER_READER, USER_WRITER):
        with Client(node.address, token=token) as c:
            seen = walk(c, WORD, page_size=1)
            assert sorted(h.belief.key.namespace for h in seen) == ["user:ana", "user:bob"]
            assert walk(c, WORD, namespace_prefix="team:") == []
            assert walk(c, "postgres ops") == []
            assert walk(c, "infra") == []


def test_hits_carry_the_belief_rule_anchor_and_score(node: InProcessNode) -> None:
    with Client(node.address, token=READER) as c:
        [hit] = c.search(f"{WORD} postgres", namespace_prefix="team:", predicate="choice").items
        belief = c.belief(("team:infra", "db", "choice"))
    assert hit.object == f"{WORD} postgres" and hit.anchor == "user_stated" and hit.score > 0
    assert (hit.belief.object, hit.belief.state, hit.belief.rule) == (
        belief.object,
        belief.state,
        belief.rule,
    )
    assert hit.version_id == belief.version_id
    with Client(node.address, token=READER) as c:
        owners = c.search(WORD, anchors=["api_response"]).items
        assert [h.object for h in owners] == [f"{WORD} ops"]
        assert c.search(WORD, states=["ambiguous"]).items == ()
        assert len(c.search(WORD, states=["BELIEVED"], page_size=100).items) == 5


# -- bad requests ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def facts(node: InProcessNode) -> Iterator[pb_grpc.FactServiceStub]:
    """A raw stub, so requests the clients would refuse reach the node."""
    channel = grpc.insecure_channel(node.address)
    yield pb_grpc.FactServiceStub(channel)
    channel.close()


def violations(facts: pb_grpc.FactServiceStub, request: pb.SearchBeliefsRequest) -> list[str]:
    """The fields a refused SearchBeliefs names (INVALID_ARGUMENT, google.rpc.BadRequest)."""
    with pytest.raises(grpc.RpcError) as caught:
        facts.SearchBeliefs(
            request, timeout=RPC_TIMEOUT, metadata=(("authorization", f"Bearer {READER}"),)
        )
    err = caught.value
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, err
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, "no rich status on the call"
    out: list[str] = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            out += [v.field for v in bad.field_violations]
    return out


def test_the_control_request_is_answered(facts: pb_grpc.FactServiceStub) -> None:
    reply = facts.SearchBeliefs(
        pb.SearchBeliefsRequest(query=WORD, anchors=["user_stated"], states=[1], page_size=1),
        timeout=RPC_TIMEOUT,
        metadata=(("authorization", f"Bearer {READER}"),),
    )
    assert len(reply.hits) == 1 and reply.next_page_token


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (pb.SearchBeliefsRequest(query=""), ["query"]),
        (pb.SearchBeliefsRequest(query="?! --"), ["query"]),
        (pb.SearchBeliefsRequest(query="x" * 1025), ["query"]),
        (pb.SearchBeliefsRequest(query="porto", anchors=["gossip"]), ["anchors"]),
        (pb.SearchBeliefsRequest(query="porto", states=[99]), ["states"]),
        (pb.SearchBeliefsRequest(query="porto", states=[0]), ["states"]),
        (pb.SearchBeliefsRequest(query="porto", page_size=101), ["page_size"]),
        (pb.SearchBeliefsRequest(query="porto", page_size=-1), ["page_size"]),
        (pb.SearchBeliefsRequest(query="porto", subject=""), ["subject"]),
        (pb.SearchBeliefsRequest(query="porto", predicate=" "), ["predicate"]),
        (pb.SearchBeliefsRequest(query="porto", page_token="bm90LWEtdG9rZW4"), ["page_token"]),
        (pb.SearchBeliefsRequest(query="porto", page_token="!!"), ["page_token"]),
        (
            pb.SearchBeliefsRequest(query="", anchors=["gossip"], states=[42], page_size=-5),
            ["query", "states", "anchors", "page_size"],
        ),
    ],
    ids=[
        "empty-query",
        "no-words",
        "long-query",
        "unknown-anchor",
        "state-99",
        "state-unspecified",
        "page-size-101",
        "page-size-negative",
        "empty-subject",
        "blank-predicate",
        "not-a-token",
        "not-base64",
        "all-at-once",
    ],
)
def test_bad_requests_are_invalid_argument_naming_each_field(
    facts: pb_grpc.FactServiceStub, request_: pb.SearchBeliefsRequest, fields: list[str]
) -> None:
    assert sorted(violations(facts, request_)) == sorted(fields)


def test_a_page_token_of_another_search_is_refused_naming_page_token(
    facts: pb_grpc.FactServiceStub, node: InProcessNode
) -> None:
    with Client(node.address, token=READER) as c:
        token = c.search(WORD, page_size=1).next_page_token
        assert c.search(WORD, page_size=1, page_token=token).items  # the control
        with pytest.raises(InvalidFact) as caught:
            c.search(f"{WORD} harbour", page_size=1, page_token=token)
        assert [e.field for e in caught.value.field_errors] == ["page_token"]
    other = pb.SearchBeliefsRequest(query=WORD, page_size=2, page_token=token)
    assert violations(facts, other) == ["page_token"]
    # A ListBeliefs token is not a search token.
    keys_token = facts.ListBeliefs(
        pb.ListBeliefsRequest(namespace="team:infra", page_size=1),
        timeout=RPC_TIMEOUT,
        metadata=(("authorization", f"Bearer {READER}"),),
    ).next_page_token
    assert keys_token
    foreign = pb.SearchBeliefsRequest(query=WORD, page_token=keys_token)
    assert violations(facts, foreign) == ["page_token"]


def test_the_client_refuses_a_bad_state_before_sending(node: InProcessNode) -> None:
    with Client(node.address, token=READER) as c:
        for state in ("UNSPECIFIED", "decayed", ""):
            with pytest.raises(InvalidFact) as caught:
                c.search(WORD, states=[state])
            assert [e.field for e in caught.value.field_errors] == ["states"]
        with pytest.raises(InvalidFact) as caught:
            c.search("")
        assert [e.field for e in caught.value.field_errors] == ["query"]


# -- the async client -------------------------------------------------------------------


async def test_the_async_client_searches_and_pages(node: InProcessNode) -> None:
    async with AsyncClient(node.address, token=USER_READER) as client:
        first = await client.search(WORD, page_size=1)
        assert len(first.items) == 1 and first.next_page_token
        second = await client.search(WORD, page_size=1, page_token=first.next_page_token)
        assert len(second.items) == 1 and not second.next_page_token
        seen = {h.belief.key.namespace for h in (*first.items, *second.items)}
        assert seen == {"user:ana", "user:bob"}
        assert (await client.search(WORD, namespace_prefix="team:")).items == ()
        with pytest.raises(InvalidFact) as caught:
            await client.search(WORD, anchors=["gossip"])
        assert [e.field for e in caught.value.field_errors] == ["anchors"]


async def test_the_async_client_searches_the_past(node: InProcessNode) -> None:
    """as_of before anything was true finds nothing; a moved value is found as of before."""
    ns = f"user:{uuid.uuid4().hex[:8]}"
    then = datetime.now(UTC) - timedelta(days=30)
    with node.client() as c:
        c.submit((ns, "cleo", "lives_in"), f"{WORD} lagoon", "user_stated", source="x",
                 valid_from=then)  # fmt: skip
        c.submit((ns, "cleo", "lives_in"), f"{WORD} summit", "user_stated", source="x",
                 valid_from=then + timedelta(days=20))  # fmt: skip
    async with AsyncClient(node.address, token=READER) as client:
        now = await client.search(WORD, namespace_prefix=ns)
        assert [h.object for h in now.items] == [f"{WORD} summit"]
        past = await client.search(WORD, namespace_prefix=ns, as_of=then + timedelta(days=1))
        assert [h.object for h in past.items] == [f"{WORD} lagoon"]
        before = await client.search(WORD, namespace_prefix=ns, as_of=then - timedelta(days=1))
        assert before.items == ()
