"""Group commit: one writer decides queued submissions in arrival order, commits them together
and acknowledges each only after its commit, exactly as one call at a time would decide."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import grpc
import pytest
from grpc_status import rpc_status

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.config import Settings
from factnode.core import Evidence, Key, Outcome, Policy, Submission
from factnode.core.recall import Embedding
from factnode.ledger import Ledger, NotFound, Submitted
from factnode.server._group_commit import GroupCommit, WriterClosed
from factnode.server.app import Node
from factnode.store import SqlRepository
from factnode.testing import FakeClock

WAIT = 10.0  # seconds: the bound on every wait for the writer's thread


class Gate:
    """Wraps `Ledger.ingest`: records each batch, and can hold a batch inside the thread."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.batches: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_batch: int | None = None  # this batch (0: the first) raises

    def hold(self) -> None:
        self.entered.clear()
        self.release.clear()

    def __call__(
        self,
        items: Sequence[tuple[Evidence, str | None]],
        vectors: Mapping[str, Sequence[Embedding]] | None = None,
    ) -> list[Submitted]:
        self.batches.append([e.key.subject for e, _ in items])
        self.entered.set()
        if not self.release.wait(WAIT):
            raise TimeoutError("the test never released the batch")
        if len(self.batches) - 1 == self.fail_batch:
            raise RuntimeError("lost the database")
        return self.ledger.ingest(items, vectors)


def new_ledger(path: Path) -> Ledger:
    return Ledger(SqlRepository(f"sqlite:///{path}"), Policy(), "node-test", FakeClock())


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    lg = new_ledger(tmp_path / "node.db")
    yield lg
    lg.repo.close()


def evidence(ledger: Ledger, subject: str, value: str = "Porto", source: str = "ana") -> Evidence:
    return ledger.evidence_of(
        Submission("user:ana", subject, "lives_in", value, "user_stated", source)
    )


async def entered(gate: Gate) -> None:
    if not await asyncio.to_thread(gate.entered.wait, WAIT):
        pytest.fail(f"the writer did not reach ingest within {WAIT}s")


async def queued_behind_held_batch(
    gate: Gate, writer: GroupCommit, items: Sequence[tuple[Evidence, str | None]]
) -> tuple[asyncio.Task[Submitted], list[asyncio.Task[Submitted]]]:
    """A first submission held inside ingest, and `items` queued (in order) behind it."""
    gate.hold()
    first = asyncio.create_task(writer.submit(evidence(gate.ledger, "first"), None))
    await entered(gate)
    rest = []
    for e, k in items:
        rest.append(asyncio.create_task(writer.submit(e, k)))
        await asyncio.sleep(0)  # each task queues its submission before the next starts
    return first, rest


async def test_queued_submissions_commit_together_in_arrival_order(ledger: Ledger) -> None:
    """Submissions queued while a commit runs go to ingest as one batch, in arrival order."""
    gate = Gate(ledger)
    writer = GroupCommit(gate)
    writer.start()
    try:
        subjects = [f"s{i:02d}" for i in range(20)]
        first, rest = await queued_behind_held_batch(
            gate, writer, [(evidence(ledger, s), None) for s in subjects]
        )
        gate.release.set()
        await first
        done = await asyncio.gather(*rest)
    finally:
        await writer.stop()
    assert gate.batches == [["first"], subjects]
    assert [d.decision.key.subject for d in done] == subjects
    assert all(d.decision.outcome is Outcome.ACCEPTED for d in done)


async def test_a_batch_is_bounded(ledger: Ledger) -> None:
    """No batch holds more than max_batch submissions; the rest follow in order."""
    gate = Gate(ledger)
    writer = GroupCommit(gate, max_batch=3)
    writer.start()
    try:
        subjects = [f"s{i}" for i in range(7)]
        first, rest = await queued_behind_held_batch(
            gate, writer, [(evidence(ledger, s), None) for s in subjects]
        )
        gate.release.set()
        await asyncio.gather(first, *rest)
    finally:
        await writer.stop()
    assert gate.batches == [["first"], subjects[:3], subjects[3:6], subjects[6:]]


async def test_acknowledged_only_after_the_commit(ledger: Ledger, tmp_path: Path) -> None:
    """A submission is not answered while its batch is in ingest, and is stored once it is."""
    gate = Gate(ledger)
    writer = GroupCommit(gate)
    writer.start()
    try:
        gate.hold()
        task = asyncio.create_task(writer.submit(evidence(ledger, "ana"), None))
        await entered(gate)
        await asyncio.sleep(0)
        assert not task.done()
        gate.release.set()
        done = await task
    finally:
        await writer.stop()
    assert done.decision.outcome is Outcome.ACCEPTED
    other = new_ledger(tmp_path / "node.db")  # another connection: the row is committed
    try:
        belief = other.belief(done.decision.key)
    finally:
        other.repo.close()
    assert belief.object == "Porto"


async def test_a_failed_batch_fails_every_caller_in_it_and_not_the_next(ledger: Ledger) -> None:
    """When ingest raises, every submission of that batch gets the error, nothing of it is
    stored, and the next batch commits."""
    gate = Gate(ledger)
    writer = GroupCommit(gate)
    writer.start()
    try:
        first, rest = await queued_behind_held_batch(
            gate, writer, [(evidence(ledger, s), None) for s in ("a", "b", "c")]
        )
        gate.fail_batch = 1  # the queued three
        gate.release.set()
        await first
        outcomes = await asyncio.gather(*rest, return_exceptions=True)
        after = await writer.submit(evidence(ledger, "d"), None)
    finally:
        await writer.stop()
    assert gate.batches == [["first"], ["a", "b", "c"], ["d"]]
    assert [repr(o) for o in outcomes] == ["RuntimeError('lost the database')"] * 3
    for subject in ("a", "b", "c"):
        with pytest.raises(NotFound):
            ledger.belief(evidence(ledger, subject).key)
    assert after.decision.outcome is Outcome.ACCEPTED


async def test_duplicates_in_one_batch_decide_as_one_call_at_a_time(
    ledger: Ledger, tmp_path: Path
) -> None:
    """The same fact and the same idempotency key several times in one batch are decided as
    sequential calls decide them: the first stored, the repeats DUPLICATE of it."""
    items: list[tuple[Evidence, str | None]] = [
        (evidence(ledger, "ana", "Porto"), None),
        (evidence(ledger, "ana", "Porto"), None),  # same evidence, no key
        (evidence(ledger, "bob", "Faro", source="x"), "retry-1"),
        (evidence(ledger, "bob", "Lisbon", source="y"), "retry-1"),  # same key, other fact
        (evidence(ledger, "ana", "Lisbon", source="z"), None),
    ]
    gate = Gate(ledger)
    writer = GroupCommit(gate)
    writer.start()
    try:
        first, rest = await queued_behind_held_batch(gate, writer, items)
        gate.release.set()
        await first
        batched = await asyncio.gather(*rest)
    finally:
        await writer.stop()
    assert gate.batches[1] == ["ana", "ana", "bob", "bob", "ana"]

    alone = new_ledger(tmp_path / "sequential.db")
    try:
        alone.ingest([(evidence(alone, "first"), None)])
        sequential = [alone.ingest([item])[0] for item in items]
    finally:
        alone.repo.close()
    assert [(d.decision.outcome, d.decision.rule, d.evidence_id) for d in batched] == [
        (d.decision.outcome, d.decision.rule, d.evidence_id) for d in sequential
    ]
    assert [d.decision.outcome for d in batched][1] is Outcome.DUPLICATE
    assert batched[3].decision.outcome is Outcome.DUPLICATE
    assert batched[3].evidence_id == batched[2].evidence_id


async def test_stop_commits_what_is_queued_and_refuses_what_comes_after(ledger: Ledger) -> None:
    """Stopping commits every queued submission, then new ones fail with WriterClosed."""
    gate = Gate(ledger)
    writer = GroupCommit(gate)
    writer.start()
    first, rest = await queued_behind_held_batch(
        gate, writer, [(evidence(ledger, s), None) for s in ("a", "b")]
    )
    stopping = asyncio.create_task(writer.stop())
    await asyncio.sleep(0)
    gate.release.set()
    await stopping
    done = await asyncio.gather(first, *rest)
    assert [d.decision.outcome for d in done] == [Outcome.ACCEPTED] * 3
    with pytest.raises(WriterClosed):
        await writer.submit(evidence(ledger, "c"), None)


class _Fatal(BaseException):
    """Not an Exception: what ends a thread, as SystemExit would."""


async def test_a_writer_that_dies_fails_its_batch_and_every_later_submission(
    ledger: Ledger,
) -> None:
    """Should ingest raise past Exception, the writer thread ends: the batch in it and every
    submission after it fail with WriterClosed instead of waiting forever."""

    def dying(
        items: Sequence[tuple[Evidence, str | None]],
        vectors: Mapping[str, Sequence[Embedding]] | None = None,
    ) -> list[Submitted]:
        raise _Fatal()

    writer = GroupCommit(dying)
    writer.start()
    try:
        with pytest.raises(WriterClosed):
            await asyncio.wait_for(writer.submit(evidence(ledger, "a"), None), WAIT)
        with pytest.raises(WriterClosed):
            await asyncio.wait_for(writer.submit(evidence(ledger, "b"), None), WAIT)
    finally:
        await asyncio.wait_for(writer.stop(), WAIT)


async def test_concurrent_submit_fact_calls_on_a_node(tmp_path: Path) -> None:
    """Concurrent SubmitFact calls on a node: a bad request fails alone, duplicates of one
    fact get one ACCEPTED and DUPLICATEs of the same evidence, distinct facts are accepted."""
    node = Node(Settings(listen="127.0.0.1:0", data_dir=tmp_path))
    port = await node.start()

    def fact(subject: str, value: str, key: str = "") -> pb.SubmitFactRequest:
        return pb.SubmitFactRequest(
            fact=pb.FactInput(
                key=pb.Key(namespace="user:ana", subject=subject, predicate="lives_in"),
                object=value,
                anchor="user_stated",
                source="ana",
            ),
            idempotency_key=key,
        )

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            facts = pb_grpc.FactServiceStub(channel)
            requests = [fact(f"s{i}", "Porto") for i in range(12)]
            requests += [fact("dup", "Faro", key="k1") for _ in range(6)]
            requests.append(fact("", "Porto"))  # invalid: empty subject
            outcomes = await asyncio.gather(
                *(facts.SubmitFact(r, timeout=WAIT) for r in requests), return_exceptions=True
            )
    finally:
        await node.stop(0)
    distinct, dups, bad = outcomes[:12], outcomes[12:18], outcomes[18]
    assert all(
        isinstance(o, pb.SubmitFactResponse) and o.decision.outcome == pb.OUTCOME_ACCEPTED
        for o in distinct
    )
    assert all(isinstance(o, pb.SubmitFactResponse) for o in dups)
    dup_outcomes = [o.decision.outcome for o in dups]  # type: ignore[union-attr]
    assert sorted(dup_outcomes) == sorted([pb.OUTCOME_ACCEPTED] + [pb.OUTCOME_DUPLICATE] * 5)
    assert len({o.evidence_id for o in dups}) == 1  # type: ignore[union-attr]
    assert isinstance(bad, grpc.aio.AioRpcError)
    assert bad.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_a_stream_whose_second_batch_fails_reports_only_what_committed(
    tmp_path: Path,
) -> None:
    """SubmitFacts commits a stream in batches, in order: when batch 2 of 3 fails the status
    counts batch 1 only, and only batch 1 is stored (batch 3 never reaches the store)."""
    node = Node(Settings(listen="127.0.0.1:0", data_dir=tmp_path))
    port = await node.start()
    # The gate calls the real ingest; the servicer calls the gate.
    gate = Gate(cast(Ledger, SimpleNamespace(ingest=node.ledger.ingest)))
    gate.fail_batch = 1
    node.ledger.ingest = gate  # type: ignore[method-assign]
    batch = 256  # the servicer's STREAM_BATCH

    async def items() -> AsyncIterator[pb.SubmitFactRequest]:
        for i in range(3 * batch):
            yield pb.SubmitFactRequest(
                fact=pb.FactInput(
                    key=pb.Key(namespace="user:ana", subject=f"s{i}", predicate="lives_in"),
                    object="Porto",
                    anchor="user_stated",
                    source="ana",
                )
            )

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await pb_grpc.FactServiceStub(channel).SubmitFacts(items(), timeout=WAIT)
        counts = await asyncio.to_thread(node.ledger.counts)
    finally:
        await node.stop(0)
    assert err.value.code() is grpc.StatusCode.INTERNAL
    status = rpc_status.from_call(err.value)
    assert status is not None
    reports = [d for d in status.details if d.Is(pb.SubmitFactsResponse.DESCRIPTOR)]
    report = pb.SubmitFactsResponse()
    reports[0].Unpack(report)
    assert (report.decided_count, report.invalid_count) == (batch, 0)
    assert len(gate.batches) == 2  # the third batch was never handed to the store
    assert counts.evidence == batch


async def test_as_of_get_belief_read_on_the_loop_answers_like_the_store(tmp_path: Path) -> None:
    """On a SQLite-file node as-of GetBelief reads on the event loop: the value then, NOT_FOUND
    before any evidence, INVALID_ARGUMENT for a time out of range; as the ledger answers."""
    node = Node(Settings(listen="127.0.0.1:0", data_dir=tmp_path))
    port = await node.start()
    key = pb.Key(namespace="user:ana", subject="ana", predicate="lives_in")
    day = 86_400

    def fact(value: str, seconds: int) -> pb.SubmitFactRequest:
        return pb.SubmitFactRequest(
            fact=pb.FactInput(
                key=key,
                object=value,
                anchor="user_stated",
                source="ana",
                valid_from={"seconds": seconds},
            )
        )

    try:
        assert node.repo.is_sqlite_file
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            facts = pb_grpc.FactServiceStub(channel)
            await facts.SubmitFact(fact("Porto", 1_700_000_000), timeout=WAIT)
            await facts.SubmitFact(fact("Faro", 1_700_000_000 + 30 * day), timeout=WAIT)
            then = await facts.GetBelief(
                pb.GetBeliefRequest(key=key, as_of={"seconds": 1_700_000_000 + day}), timeout=WAIT
            )
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await facts.GetBelief(
                    pb.GetBeliefRequest(key=key, as_of={"seconds": 1_600_000_000}), timeout=WAIT
                )
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                await facts.GetBelief(
                    pb.GetBeliefRequest(key=key, as_of={"seconds": 10**12}), timeout=WAIT
                )
        as_of = (1_700_000_000 + day) * 1_000_000
        want = await asyncio.to_thread(node.ledger.belief, _key(key), as_of)
    finally:
        await node.stop(0)
    assert then.object == "Porto" == want.object
    assert then.evidence.evidence_id == want.evidence.evidence_id
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def _key(k: pb.Key) -> Key:
    return Key(k.namespace, k.subject, k.predicate)
