"""How many items a SubmitFacts reply can carry: the stream is refused before it commits
anything whose result the reply could not send (specification §9).

The reply is one message, capped by the node's `max_message_bytes` like any other. Each
valid item's result is its decision; its size is bounded by its key's bytes plus a fixed
part (`RESULT_BYTES`: index, outcome, rule, timestamp, ids, a one-line detail, framing),
computed here from the largest value of each field. An invalid item's result is its error,
whose size is known when the item is refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import FieldViolation, InvalidInput, Key, Rule, ids

# Longer than any detail a submission's decision carries (the gates' and arbitration's
# one-line reasons, which name no value); tests/unit/test_reply_budget.py checks them.
MAX_SUBMISSION_DETAIL_CHARS = 100
_ID_CHARS = len(ids.version_id(Key("", "", ""), ""))
_MAX_UINT32 = 2**32 - 1
# Each key part: its tag, a length of up to 2 bytes (parts are at most 256 bytes); then the
# key's, the decision's and the item's lengths, each one byte longer than in `RESULT_BYTES`.
_PER_KEY_PART = 3
_LENGTH_GROWTH = 3


def _largest_result() -> pb.SubmitFactsResponse:
    """One decision as large as a submission's can be, its key's parts left empty."""
    reply = pb.SubmitFactsResponse()
    item = reply.results.add(index=_MAX_UINT32)
    d = item.decision
    d.key.SetInParent()  # the key's parts are counted per item
    d.outcome = cast(pb.Outcome, max(pb.Outcome.values()))
    d.rule = "x" * max(len(rule.value) for rule in Rule)
    d.decided_at.seconds = 253_402_300_799  # 9999-12-31T23:59:59Z
    d.decided_at.nanos = 999_999_999
    d.evidence_id = d.version_id = d.supersedes = "x" * _ID_CHARS
    d.detail = "x" * MAX_SUBMISSION_DETAIL_CHARS  # SubmitFacts sets no `seq`
    return reply


# What a valid item's result adds to the reply at most, its key aside.
RESULT_BYTES = _largest_result().ByteSize()
# The reply's counts, sent once.
COUNTS_BYTES = pb.SubmitFactsResponse(
    decided_count=_MAX_UINT32, invalid_count=_MAX_UINT32
).ByteSize()
# An invalid item's result: its error's size, and the item's tag, length and index.
_ERROR_FRAMING = pb.SubmitFactsResponse(results=[pb.ItemResult(index=_MAX_UINT32)]).ByteSize() + 6


def key_bytes(key: Key) -> int:
    """What a decision's key adds to its result, at most."""
    parts = (key.namespace, key.subject, key.predicate)
    return sum(len(p.encode()) + _PER_KEY_PART for p in parts) + _LENGTH_GROWTH


class ReplyTooLarge(InvalidInput):
    """A SubmitFacts stream longer than its reply can carry; nothing of it was written."""

    def __init__(self, index: int, limit: int) -> None:
        super().__init__(
            [
                FieldViolation(
                    "stream",
                    f"item {index} takes the reply past the node's max_message_bytes ({limit} "
                    "bytes); nothing of this stream was written: send it in shorter streams",
                )
            ]
        )


class ReplyBudget:
    """The room left in a SubmitFacts reply as a stream's items arrive."""

    def __init__(self, max_reply_bytes: int) -> None:
        self.limit = max_reply_bytes
        self.used = COUNTS_BYTES

    def take_decision(self, index: int, key: Key) -> None:
        """Counts a valid item's decision; ReplyTooLarge once the reply could not carry it."""
        self._take(index, RESULT_BYTES + key_bytes(key))

    def take_error(self, index: int, error: pb.ItemError) -> None:
        """Counts an invalid item's error; ReplyTooLarge once the reply could not carry it."""
        self._take(index, error.ByteSize() + _ERROR_FRAMING)

    def _take(self, index: int, size: int) -> None:
        if self.used + size > self.limit:
            raise ReplyTooLarge(index, self.limit)
        self.used += size


# What of a refused stream's remainder is still read, at most (`drain_refused`).
DRAIN_ITEMS = 100_000
DRAIN_SECONDS = 5.0


async def drain_refused(requests: AsyncIterator[Any]) -> None:
    """Reads and drops what a refused stream's client still sends: up to DRAIN_ITEMS more
    items, for up to DRAIN_SECONDS. Refused while the client is still writing, a grpc.aio
    client whose next write fails after the refusal arrived reports INTERNAL ("Internal
    error from Core") instead of the refusal (grpc/grpc#36066); once its writes are read it
    gets the refusal as sent. Bounded, so a client that goes on sending cannot keep the call
    open: past either bound the refusal goes out anyway."""
    read = 0
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in requests:
                read += 1
                if read >= DRAIN_ITEMS:
                    return
    except TimeoutError:
        return


def items_that_fit(max_reply_bytes: int, key: Key) -> int:
    """How many valid items with keys the size of `key` one stream may carry."""
    return (max_reply_bytes - COUNTS_BYTES) // (RESULT_BYTES + key_bytes(key))
