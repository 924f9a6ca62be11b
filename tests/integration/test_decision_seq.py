"""Replies carry the real decision number: SubmitFact (one call, or many at once through group
commit), each SubmitFacts item, Retract and ResolveContested answer with the `seq` that
ListDecisions lists for that very decision, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from factnode import tokens
from factnode.client import AsyncClient, Client
from factnode.client import _types as t
from factnode.config import Settings
from factnode.core import Key, Submission
from factnode.ledger import Ledger
from factnode.server.app import Node

WAIT = 20.0  # seconds: the deadline of every call
TIE = datetime(2024, 3, 1, tzinfo=UTC)  # one event time: two values of it tie (AMBIGUOUS)


@pytest.fixture
async def address(repository_url: str, tmp_path: Path) -> AsyncIterator[str]:
    """A node on `repository_url` (SQLite file or a fresh PostgreSQL schema), on loopback."""
    node = Node(Settings(listen="127.0.0.1:0", data_dir=tmp_path, database_url=repository_url))
    port = await node.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await node.stop(0)


async def logged(client: AsyncClient, namespace: str) -> dict[int, t.Decision]:
    """Every decision ListDecisions lists for `namespace`, by seq (all pages)."""
    out: dict[int, t.Decision] = {}
    token = ""
    while True:
        page = await client.decisions(namespace=namespace, page_size=50, page_token=token)
        out.update((d.seq, d) for d in page.items)
        token = page.next_page_token
        if not token:
            return out


def assert_listed(replies: list[t.Decision], log: dict[int, t.Decision]) -> None:
    """Each reply's seq is positive, strictly increasing in reply order, and names the
    decision the log lists under it, field for field."""
    seqs = [d.seq for d in replies]
    assert all(s > 0 for s in seqs), seqs
    assert seqs == sorted(set(seqs)), seqs
    for d in replies:
        assert log.get(d.seq) == d, (d, log.get(d.seq))


async def test_every_write_reply_carries_the_seq_the_log_lists(address: str) -> None:
    """Submit, group-committed submits, bulk items, retract and resolve: each reply's seq is
    the one ListDecisions lists for that decision, increasing from one reply to the next."""
    ns = "user:seq"
    replies: list[t.Decision] = []
    async with AsyncClient(address, timeout=WAIT) as client:
        ana = {"source": "ana", "valid_from": datetime(2024, 1, 1, tzinfo=UTC)}
        first = await client.submit((ns, "ana", "lives_in"), "Porto", "user_stated", **ana)
        replies.append(first.decision)
        # Concurrent calls: the node's group commit decides several in one transaction.
        many = await asyncio.gather(
            *(
                client.submit((ns, f"s{i}", "lives_in"), "Porto", "user_stated", source="ana")
                for i in range(12)
            )
        )
        replies.extend(sorted((s.decision for s in many), key=lambda d: d.seq))
        # A duplicate is logged too, and answered with its own entry.
        again = await client.submit((ns, "ana", "lives_in"), "Porto", "user_stated", **ana)
        assert again.decision.outcome == "DUPLICATE"
        replies.append(again.decision)
        items = await client.submit_many(
            [
                {
                    "key": (ns, "bob", "lives_in"),
                    "object": v,
                    "attribution": "user_stated",
                    "source": s,
                    "valid_from": TIE,
                    "confidence": 0.9,
                }
                for v, s in [("Faro", "bob"), ("Braga", "eve"), ("Faro", "bob")]
            ]
        )
        bulk = [i.decision for i in items]
        assert all(d is not None for d in bulk)
        replies.extend(d for d in bulk if d is not None)
        retracted, _ = await client.retract((ns, "ana", "lives_in"), "moved away")
        replies.append(retracted)
        review = await client.review(ns)
        assert [c.key.subject for c in review.items] == ["bob"]
        resolved = await client.resolve((ns, "bob", "lives_in"), "asked bob", object="Faro")
        replies.append(resolved.decision)
        log = await logged(client, ns)
    assert_listed(replies, log)


async def test_the_blocking_client_gets_the_logged_seq_too(address: str) -> None:
    """The blocking client's submit, submit_many, retract and resolve replies carry the seq
    the log lists for each decision."""
    await asyncio.to_thread(blocking_writes, address, "user:seqsync")


def blocking_writes(address: str, ns: str) -> None:
    """`test_the_blocking_client_gets_the_logged_seq_too`'s calls, off the node's loop."""
    with Client(address, timeout=WAIT) as client:
        replies = [
            client.submit((ns, "ana", "lives_in"), "Porto", "user_stated", source="ana").decision,
            *(
                i.decision
                for i in client.submit_many(
                    [
                        {
                            "key": (ns, "bob", "lives_in"),
                            "object": v,
                            "attribution": "user_stated",
                            "source": s,
                            "valid_from": TIE,
                            "confidence": 0.9,
                        }
                        for v, s in [("Faro", "bob"), ("Braga", "eve")]
                    ]
                )
                if i.decision is not None
            ),
            client.retract((ns, "ana", "lives_in"), "moved away")[0],
            client.resolve((ns, "bob", "lives_in"), "asked bob", object="Braga").decision,
        ]
        log = {d.seq: d for d in client.decisions(namespace=ns, page_size=100).items}
    assert len(replies) == 5
    assert_listed(replies, log)


def test_a_seq_is_never_reused_after_an_erasure_removes_the_newest(ledger: Ledger) -> None:
    """Erasing the key of the newest decision deletes its log row; the next decision still
    gets a higher seq than every one answered before (SQLite alone would reuse the highest
    row id), and a reader that had read up to that seq sees it."""
    ana, bob = Key("user:e", "ana", "lives_in"), Key("user:e", "bob", "lives_in")
    first = ledger.submit(Submission(*ana, "Porto", "user_stated", "ana"))
    second = ledger.submit(Submission(*bob, "Faro", "user_stated", "bob"))
    ledger.erase(key=bob, operator="olga", reason="asked")
    third = ledger.submit(Submission(*ana, "Lisbon", "user_stated", "ana", valid_from=10**15))
    again = ledger.retract(ana, reason="moved")
    seqs = [first.seq, second.seq, third.seq, again.seq]
    assert seqs == sorted(set(seqs)) and seqs[0] > 0, seqs
    after = tokens.seq_position(second.seq)
    assert [d.seq for d in ledger.decisions(page_token=after).items] == seqs[2:]
