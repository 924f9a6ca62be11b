"""factnode.Client and factnode.AsyncClient against a real served node."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from _e2e import ServerProcess

import factnode
from factnode.client import FieldError


def _ns() -> str:
    return f"client-{uuid.uuid4().hex[:8]}"


def test_submit_read_explain_history_decisions(server: ServerProcess) -> None:
    """Submit, then belief, beliefs, history, explain and decisions return plain values."""
    ns = _ns()
    with factnode.Client(server.address) as client:
        done = client.submit((ns, "alice", "city"), "Paris", "user_stated", source="chat")
        assert (done.decision.outcome, done.rejected) == ("ACCEPTED", False)
        belief = client.belief((ns, "alice", "city"))
        assert (belief.object, belief.state) == ("Paris", "BELIEVED")
        assert belief.evidence is not None and belief.evidence.recorded_at.tzinfo is not None
        assert [b.object for b in client.beliefs(ns).items] == ["Paris"]
        assert [v.object for v in client.history((ns, "alice", "city"))] == ["Paris"]
        assert client.explain((ns, "alice", "city")).belief.object == "Paris"
        assert [d.outcome for d in client.decisions(key=(ns, "alice", "city")).items] == [
            "ACCEPTED"
        ]


def test_rejected_submit_is_reported(server: ServerProcess) -> None:
    """A fact below the confidence floor comes back REJECTED, not as an exception."""
    with factnode.Client(server.address) as client:
        done = client.submit((_ns(), "bob", "city"), "Rome", "user_stated", confidence=0.1)
    assert done.rejected


def test_submit_many_reports_progress_and_item_errors(server: ServerProcess) -> None:
    """submit_many calls progress per item and returns each item's decision or error."""
    ns, seen = _ns(), []
    with factnode.Client(server.address) as client:
        items = client.submit_many(
            [
                {
                    "key": (ns, "a", "city"),
                    "object": "Oslo",
                    "anchor": "user_stated",
                    "source": "chat",
                },
                {"key": (ns, "b", "city"), "object": "Bern", "attribution": "no_such_anchor"},
            ],
            progress=seen.append,
        )
    assert seen == [1, 2]
    assert items[0].decision is not None and items[0].decision.outcome == "ACCEPTED"
    assert items[1].decision is None and "anchor" in items[1].error


def test_node_field_violations_become_invalid_fact(server: ServerProcess) -> None:
    """An unknown anchor is refused by the node; InvalidFact carries its field violation."""
    with factnode.Client(server.address) as client, pytest.raises(factnode.InvalidFact) as err:
        client.submit((_ns(), "c", "city"), "Lima", "no_such_anchor")
    assert [e.field for e in err.value.field_errors] == ["anchor"]


def test_client_side_checks_raise_before_sending() -> None:
    """Bad worth and an empty subject are refused by the client with the node's messages."""
    client = factnode.Client("127.0.0.1:1", retries=0)  # nothing listens: proves no call
    with pytest.raises(factnode.InvalidFact) as err:
        client.submit(("ns", "", "city"), "x", "user_stated", worth=2.0)
    assert set(err.value.field_errors) == {
        FieldError("subject", "is required"),
        FieldError("worth", "must be in [0, 1], got 2.0"),
    }
    client.close()


def test_unknown_key_is_not_found(server: ServerProcess) -> None:
    """Reading a key the node never saw raises NotFound."""
    with factnode.Client(server.address) as client, pytest.raises(factnode.NotFound):
        client.belief((_ns(), "nobody", "city"))


def test_status_and_admin_calls(server: ServerProcess) -> None:
    """status, review, decay, sync, retract and erase return plain values."""
    ns = _ns()
    with factnode.Client(server.address) as client:
        status = client.status()
        assert status.node_id and isinstance(status.counts, dict)
        assert client.review(ns).items == ()
        assert client.decay().decayed >= 0
        assert client.sync() == ()
        client.submit((ns, "d", "city"), "Kyiv", "user_stated", source="chat")
        decision, _ = client.retract((ns, "d", "city"), "moved away")
        assert decision.outcome == "RETRACTED"
        # The retraction is evidence of the key too: the erasure takes it with the fact.
        assert client.erase("asked to", key=(ns, "d", "city"), operator="ops").evidence_erased == 2


def test_unreachable_node_is_unavailable_after_retries() -> None:
    """A node that is not there raises Unavailable once the retries are spent."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = factnode.Client(f"127.0.0.1:{port}", retries=2, backoff=0.01, timeout=2)
    with client, pytest.raises(factnode.Unavailable):
        client.status()


def test_async_client_matches_sync(server: ServerProcess) -> None:
    """AsyncClient submits (one and many), reads and watches like Client."""

    async def run() -> None:
        ns = _ns()
        async with factnode.AsyncClient(server.address) as client:
            done = await client.submit((ns, "e", "city"), "Quito", "user_stated", source="chat")
            assert done.decision.outcome == "ACCEPTED"
            assert (await client.belief((ns, "e", "city"))).object == "Quito"
            assert (await client.explain((ns, "e", "city"))).belief.object == "Quito"
            with pytest.raises(factnode.NotFound):
                await client.belief((ns, "nobody", "city"))
            items = await client.submit_many(
                [{"key": (ns, "f", "city"), "object": "Lima", "attribution": "user_stated"}]
            )
            assert items[0].decision is not None and items[0].decision.outcome == "REJECTED"
            assert (await client.status()).node_id
            assert [v.object for v in await client.history((ns, "e", "city"))] == ["Quito"]
            watch = client.watch(namespace=ns)
            first = await asyncio.wait_for(anext(watch), 10)
            assert first.key.subject == "e"
            await watch.aclose()

    asyncio.run(run())


def test_importing_factnode_loads_no_client_until_used() -> None:
    """`import factnode, factnode.core` loads neither the client nor gRPC; factnode.Client does."""
    code = (
        "import sys, factnode, factnode.core\n"
        "assert 'grpc' not in sys.modules and 'factnode.client' not in sys.modules\n"
        "assert factnode.Client.__module__ == 'factnode.client._sync'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_submit_is_retried_on_unavailable_with_the_same_idempotency_key() -> None:
    """A submit refused once with UNAVAILABLE is sent again with the same idempotency key."""
    from concurrent import futures

    from factnode.api.v1 import factnode_pb2 as pb

    keys: list[str] = []

    def submit_fact(request: pb.SubmitFactRequest, context: grpc.ServicerContext) -> Any:
        keys.append(request.idempotency_key)
        if len(keys) == 1:
            context.abort(grpc.StatusCode.UNAVAILABLE, "warming up")
        return pb.SubmitFactResponse(decision=pb.Decision(outcome=pb.OUTCOME_ACCEPTED))

    handler = grpc.method_handlers_generic_handler(
        "factnode.v1.FactService",
        {
            "SubmitFact": grpc.unary_unary_rpc_method_handler(
                submit_fact,
                request_deserializer=pb.SubmitFactRequest.FromString,
                response_serializer=pb.SubmitFactResponse.SerializeToString,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with factnode.Client(f"127.0.0.1:{port}", backoff=0.01, timeout=5) as client:
            done = client.submit(("ns", "s", "p"), "v", "user_stated", source="x")
    finally:
        server.stop(None)
    assert done.decision.outcome == "ACCEPTED"
    assert len(keys) == 2 and keys[0] == keys[1] != ""


def test_review_contested_resolve_retract_and_watch_on_a_real_tie(server: ServerProcess) -> None:
    """A tie between two user_stated facts is listed, shown with both versions, resolved by a
    pin (BELIEVED by operator_resolution), watched, and retracted through the sync client."""
    ns = _ns()
    key = (ns, "ana", "city")
    with factnode.Client(server.address) as client:
        september = datetime(2025, 9, 1, tzinfo=UTC)
        client.submit(key, "Faro", "user_stated", source="ana", valid_from=september)
        client.submit(key, "Braga", "user_stated", source="bob", valid_from=september)
        assert client.belief(key).state == "AMBIGUOUS"
        [queued] = client.review(ns).items
        assert queued.state == "AMBIGUOUS"
        shown = client.contested(key)
        assert {v.object for v in shown.versions} == {"Faro", "Braga"}
        resolved = client.resolve(key, "asked Ana", object="Faro", operator="ops")
        assert resolved.belief is not None and resolved.belief.object == "Faro"
        assert (client.belief(key).state, client.belief(key).rule) == (
            "BELIEVED",
            "operator_resolution",
        )
        assert client.review(ns).items == ()
        watched = client.watch(namespace=ns)
        first = next(watched)
        assert first.key.subject == "ana"
        watched.close()
        client.retract(key, "moved away", object="Faro")
        assert client.belief(key).object == "Braga"  # Faro's validity ended


def test_resolving_a_settled_key_raises_failed_precondition(server: ServerProcess) -> None:
    """ResolveContested on a key the rules decide is FAILED_PRECONDITION (the client's
    FailedPrecondition) naming its state and rule; the belief and the log are unchanged."""
    ns = _ns()
    key = (ns, "ana", "colour")
    with factnode.Client(server.address) as client:
        client.submit(key, "blue", "user_stated", source="ana")
        client.submit(key, "red", "llm_generated", source="gpt")
        logged = client.decisions(key=key).items
        with pytest.raises(factnode.FailedPrecondition, match="BELIEVED by rule") as err:
            client.resolve(key, "checked", object="red", operator="ops")
        assert err.value.code == "FAILED_PRECONDITION" and "not under review" in str(err.value)
        assert client.belief(key).object == "blue"
        assert client.decisions(key=key).items == logged


def test_async_client_review_resolve_retract_erase_and_admin(server: ServerProcess) -> None:
    """The AsyncClient's remaining calls on a real tie: beliefs, decisions, review,
    contested, resolve, retract, erase, decay and sync."""

    async def run() -> None:
        ns = _ns()
        key = (ns, "ana", "city")
        september = datetime(2025, 9, 1, tzinfo=UTC)
        async with factnode.AsyncClient(server.address) as client:
            await client.submit(key, "Faro", "user_stated", source="ana", valid_from=september)
            await client.submit(key, "Braga", "user_stated", source="bob", valid_from=september)
            assert [b.state for b in (await client.beliefs(ns)).items] == ["AMBIGUOUS"]
            [queued] = (await client.review(ns)).items
            assert queued.state == "AMBIGUOUS"
            shown = await client.contested(key)
            assert {v.object for v in shown.versions} == {"Faro", "Braga"}
            resolved = await client.resolve(key, "asked Ana", object="Faro", operator="ops")
            assert resolved.belief.object == "Faro"
            assert (await client.review(ns)).items == ()
            outcomes = [d.outcome for d in (await client.decisions(key=key)).items]
            assert outcomes[-1] == "RESOLVED"
            await client.retract(key, "moved away", object="Faro")
            assert (await client.belief(key)).object == "Braga"
            erased = await client.erase("asked to", key=key, operator="ops")
            assert erased.evidence_erased == 3  # two facts and the retraction
            with pytest.raises(factnode.NotFound):
                await client.belief(key)
            assert (await client.decay()).decayed >= 0
            assert await client.sync() == ()

    asyncio.run(run())
