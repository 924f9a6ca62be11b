"""The text rule and batch isolation on both backends: one bad item is refused alone, the
honest items beside it are decided and stored, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import Settings
from factnode.core import Evidence, Key, Policy, Submission, ids
from factnode.core.recall import Embedding
from factnode.ledger import Ledger, Submitted
from factnode.metrics import Metrics
from factnode.server._group_commit import GroupCommit
from factnode.server.app import Node
from factnode.store import RefusedData, SqlRepository
from factnode.testing import FakeClock, Federation

WAIT = 30.0
NUL = "a\x00b"
NS = "user:ana"


def _fact(subject: str, obj: str = "Porto", **fields: str) -> pb.SubmitFactRequest:
    return pb.SubmitFactRequest(
        fact=pb.FactInput(
            key=pb.Key(namespace=NS, subject=subject, predicate="lives_in"),
            object=obj,
            anchor=fields.get("anchor", "user_stated"),
            source=fields.get("source", "ana"),
        )
    )


def _fields(err: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    out = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.extend(v.field for v in bad.field_violations)
    return out


async def _node(url: str, tmp_path: Path) -> Node:
    node = Node(
        Settings(
            listen="127.0.0.1:0", data_dir=tmp_path / "data", database_url=url, grace_seconds=0
        )
    )
    await node.start()
    return node


def _evidence(ledger: Ledger, subject: str, obj: str = "Porto") -> Evidence:
    return ledger.evidence_of(Submission(NS, subject, "lives_in", obj, "user_stated", "ana"))


def _bypassing_the_rule(e: Evidence, obj: str) -> Evidence:
    """`e` with another object and the id it would get: as a node before the rule stored it."""
    return replace(
        e,
        object=obj,
        version_id=ids.version_id(e.key, obj),
        evidence_id=ids.evidence_id(
            e.key,
            obj,
            e.attribution,
            e.source,
            e.valid_from,
            e.worth_milli,
            e.confidence_milli,
            None,
            None,
        ),
    )


async def test_one_nul_call_among_forty_concurrent_submit_facts_is_refused_alone(
    repository_url: str, tmp_path: Path
) -> None:
    """Of 40 concurrent SubmitFact calls, the one with a NUL in its object gets INVALID_ARGUMENT
    naming `object`; the 39 others are OK and stored, on either backend."""
    node = await _node(repository_url, tmp_path)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{node.port}") as channel:
            facts = pb_grpc.FactServiceStub(channel)
            requests = [_fact(f"s{i}", NUL if i == 20 else "Porto") for i in range(40)]
            outcomes = await asyncio.gather(
                *(facts.SubmitFact(r, timeout=WAIT) for r in requests), return_exceptions=True
            )
        counts = await asyncio.to_thread(node.ledger.counts)
    finally:
        await node.stop(0)
    bad = outcomes.pop(20)
    assert isinstance(bad, grpc.aio.AioRpcError)
    assert bad.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _fields(bad) == ["object"]
    assert all(isinstance(o, pb.SubmitFactResponse) for o in outcomes)
    assert counts.evidence == 39


async def test_a_300_item_stream_with_a_nul_item_at_100_writes_the_other_299(
    repository_url: str, tmp_path: Path
) -> None:
    """A SubmitFacts stream of 300 items whose item 100 has a NUL source: item 100 alone is
    refused (naming `source`), the 299 others are decided, reported and stored."""
    node = await _node(repository_url, tmp_path)

    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        for i in range(300):
            yield _fact(f"s{i}", source=NUL if i == 100 else "ana")

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{node.port}") as channel:
            reply = await pb_grpc.FactServiceStub(channel).SubmitFacts(items(), timeout=WAIT)
        counts = await asyncio.to_thread(node.ledger.counts)
    finally:
        await node.stop(0)
    assert (reply.decided_count, reply.invalid_count) == (299, 1)
    refused = [r for r in reply.results if r.WhichOneof("result") == "error"]
    assert [r.index for r in refused] == [100]
    assert refused[0].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert [v.field for v in refused[0].error.field_violations] == ["source"]
    assert counts.evidence == 299


async def test_a_1024_emoji_anchor_is_invalid_argument_with_small_trailers(
    repository_url: str, tmp_path: Path
) -> None:
    """An anchor of 1,024 emoji gets INVALID_ARGUMENT naming `anchor` (not
    RESOURCE_EXHAUSTED): the error quotes a bounded prefix, so the trailers stay small."""
    node = await _node(repository_url, tmp_path)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{node.port}") as channel:
            facts = pb_grpc.FactServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await facts.SubmitFact(_fact("ana", anchor="😀" * 1024), timeout=WAIT)
            trailers = err.value.trailing_metadata()
    finally:
        await node.stop(0)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _fields(err.value) == ["anchor"]
    size = sum(len(k) + len(v) for k, v in trailers or ())
    assert size < 4096, size


async def test_corrects_that_is_not_an_evidence_id_is_invalid_argument(
    repository_url: str, tmp_path: Path
) -> None:
    """A submission whose `corrects` is not an evidence id gets INVALID_ARGUMENT naming
    `corrects` and writes nothing (peers refuse such evidence, so it must not be stored)."""
    node = await _node(repository_url, tmp_path)
    request = _fact("ana")
    request.fact.corrects = "not-an-evidence-id"
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{node.port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await pb_grpc.FactServiceStub(channel).SubmitFact(request, timeout=WAIT)
        counts = await asyncio.to_thread(node.ledger.counts)
    finally:
        await node.stop(0)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _fields(err.value) == ["corrects"]
    assert counts.evidence == 0


class Refusing:
    """Calls the ledger's real ingest, but refuses (as the database would) every batch that
    holds the poisoned evidence (by id or subject); records each batch's size."""

    def __init__(self, ledger: Ledger, poisoned: str) -> None:
        self.real = ledger.ingest
        self.poisoned = poisoned
        self.batches: list[int] = []

    def __call__(
        self,
        items: Sequence[tuple[Evidence, str | None]],
        vectors: Mapping[str, Sequence[Embedding]] | None = None,
    ) -> list[Submitted]:
        self.batches.append(len(items))
        if any(self.poisoned in (e.evidence_id, e.key.subject) for e, _ in items):
            raise RefusedData("the database refused a value (DataError)")
        return self.real(items, vectors)


async def test_a_stream_item_whose_data_is_refused_fails_alone(
    repository_url: str, tmp_path: Path
) -> None:
    """When the database refuses item 100 of a 300-item SubmitFacts stream, that item alone
    gets an INVALID_ARGUMENT item error; the 299 others are decided, reported and stored."""
    node = await _node(repository_url, tmp_path)
    refusing = Refusing(node.ledger, "s100")
    node.ledger.ingest = refusing  # type: ignore[method-assign]

    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        for i in range(300):
            yield _fact(f"s{i}")

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{node.port}") as channel:
            reply = await pb_grpc.FactServiceStub(channel).SubmitFacts(items(), timeout=WAIT)
        counts = await asyncio.to_thread(node.ledger.counts)
    finally:
        await node.stop(0)
    assert (reply.decided_count, reply.invalid_count) == (299, 1)
    [refused] = [r for r in reply.results if r.WhichOneof("result") == "error"]
    assert (refused.index, refused.error.code) == (100, grpc.StatusCode.INVALID_ARGUMENT.value[0])
    assert "SQL" not in refused.error.message and "DataError" not in refused.error.message
    assert max(refusing.batches) == 256  # the refused item was isolated from a full batch
    assert counts.evidence == 299


async def test_group_commit_on_postgresql_fails_only_the_submission_with_a_nul(
    postgres_url: str,
) -> None:
    """Below the text rule: of 40 concurrent group-committed submissions, the one whose NUL
    PostgreSQL refuses gets RefusedData; the 39 others in its batches are committed."""
    repo = SqlRepository(postgres_url)
    ledger = Ledger(repo, Policy(), "node-test", FakeClock())
    evidence = [_evidence(ledger, f"s{i}") for i in range(40)]
    evidence[20] = _bypassing_the_rule(evidence[20], NUL)
    writer = GroupCommit(ledger.ingest_each)
    writer.start()
    try:
        outcomes = await asyncio.gather(
            *(writer.submit(e, None) for e in evidence), return_exceptions=True
        )
        stored = ledger.counts().evidence
    finally:
        await writer.stop()
        repo.close()
    assert isinstance(outcomes.pop(20), RefusedData)
    assert all(isinstance(o, Submitted) for o in outcomes)
    assert stored == 39


async def test_group_commit_fails_only_the_submission_whose_data_is_refused(
    ledger: Ledger,
) -> None:
    """When the database refuses one submission of a group-committed batch, that caller alone
    gets the error: the others in its batch are committed and answered, on either backend."""
    evidence = [_evidence(ledger, f"s{i}") for i in range(40)]
    refusing = Refusing(ledger, evidence[20].evidence_id)
    ledger.ingest = refusing  # type: ignore[method-assign]
    writer = GroupCommit(ledger.ingest_each)
    writer.start()
    try:
        outcomes = await asyncio.gather(
            *(writer.submit(e, None) for e in evidence), return_exceptions=True
        )
    finally:
        await writer.stop()
    assert isinstance(outcomes.pop(20), RefusedData)
    assert all(isinstance(o, Submitted) for o in outcomes)
    assert max(refusing.batches) > 1  # the refused item was isolated from a real batch
    assert ledger.counts().evidence == 39


def test_a_nul_the_database_refuses_fails_only_its_item(postgres_url: str, tmp_path: Path) -> None:
    """Below the text rule: evidence with a NUL handed straight to the write path gets
    PostgreSQL's refusal as its own answer; the 299 others of its 300-item batch are stored."""
    repo = SqlRepository(postgres_url)
    try:
        ledger = Ledger(repo, Policy(), "node-test", FakeClock())
        evidence = [_evidence(ledger, f"s{i}") for i in range(300)]
        evidence[100] = _bypassing_the_rule(evidence[100], NUL)
        answers = ledger.ingest_each([(e, None) for e in evidence])
        assert isinstance(answers.pop(100), RefusedData)
        assert all(isinstance(a, Submitted) for a in answers)
        assert ledger.counts().evidence == 299
    finally:
        repo.close()


def test_a_refused_item_of_a_peer_delta_is_refused_alone(ledger: Ledger) -> None:
    """When the database refuses one relayed item, the delta's other items are taken and the
    refused one is reported (with no SQL text) and counted by kind; the round goes on."""
    peer = Federation(["peer"])
    try:
        sent = [_evidence(peer.ledgers["peer"], f"s{i}") for i in range(10)]
        for e in sent:
            peer.ledgers["peer"].ingest([(e, None)])
        poisoned = sent[3].evidence_id
        real = ledger.peer_input._receive

        def refusing(*args: object, **kwargs: object) -> object:
            if any(e.evidence_id == poisoned for e in args[3]):  # type: ignore[attr-defined]
                raise RefusedData("the database refused a value (DataError)")
            return real(*args, **kwargs)  # type: ignore[arg-type]

        ledger.peer_input._receive = refusing  # type: ignore[assignment,method-assign]
        metrics = Metrics()
        ledger.on_refused(metrics.peer_refused)
        received = ledger.receive("peer", None, [], sent, [])
    finally:
        peer.close()
    assert received.accepted == 9
    assert received.rejected == [(poisoned, "this node's database refused its data")]
    assert received.refused == {"evidence": 1}
    assert (
        metrics.registry.get_sample_value("factnode_peer_items_refused_total", {"kind": "evidence"})
        == 1
    )
    assert ledger.counts().evidence == 9


async def test_a_sqlite_node_holding_a_nul_fact_keeps_syncing_with_a_postgresql_peer(
    postgres_url: str, tmp_path: Path
) -> None:
    """A SQLite node whose store holds a NUL fact (as one from before the text rule would) syncs
    with a PostgreSQL peer: no round fails, the bad item is refused and counted on the peer,
    the peer's last_error stays empty, and every honest fact written later arrives."""
    old = SqlRepository(f"sqlite:///{tmp_path}/old.db")
    fed = Federation(["old", "pg"], repositories={"old": old, "pg": SqlRepository(postgres_url)})
    metrics = Metrics()
    fed.ledgers["pg"].on_refused(metrics.peer_refused)
    try:
        first = _evidence(fed.ledgers["old"], "ana")
        bad = _bypassing_the_rule(first, NUL)
        fed.ledgers["old"].ingest([(bad, None)])
        results = [r for n in ("old", "pg") for r in await fed.syncers[n].sync_round(force=True)]
        for i in range(30):
            fed.clock.advance(1_000_000)
            fed.ledgers["old"].submit(
                Submission(NS, f"s{i}", "lives_in", "Porto", "user_stated", "ana")
            )
        for _ in range(3):
            for n in ("old", "pg"):
                results.extend(await fed.syncers[n].sync_round(force=True))
        arrived = [fed.ledgers["pg"].served(Key(NS, f"s{i}", "lives_in"))[0] for i in range(30)]
        states = [s for n in ("old", "pg") for s in fed.syncers[n].states.values()]
    finally:
        fed.close()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert all(s.last_error == "" for s in states)
    assert all(b is not None and b.object == "Porto" for b in arrived)
    assert any(bad.evidence_id == i and "NUL" in why for r in results for i, why in r.rejected)
    refused = metrics.registry.get_sample_value(
        "factnode_peer_items_refused_total", {"kind": "evidence"}
    )
    assert refused is not None and refused >= 1
