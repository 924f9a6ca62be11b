"""The bound SubmitFacts counts each item's result by is never below the result's real size."""

from __future__ import annotations

from pathlib import Path

import pytest
from _facts import POLICY, fact

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Evidence, Key, KeyState, Policy, Rule, decide
from factnode.server._bulk import (
    COUNTS_BYTES,
    MAX_SUBMISSION_DETAIL_CHARS,
    RESULT_BYTES,
    ReplyBudget,
    ReplyTooLarge,
    items_that_fit,
    key_bytes,
)

LONGEST_PART = "é" * 128  # 256 UTF-8 bytes: a key part at its limit


def _largest_decision(index: int, key: Key) -> pb.ItemResult:
    """A result with every field of a submission's decision at its largest."""
    item = pb.ItemResult(index=index)
    d = item.decision
    d.key.namespace, d.key.subject, d.key.predicate = key.namespace, key.subject, key.predicate
    d.outcome = pb.OUTCOME_AMBIGUOUS
    d.rule = max((r.value for r in Rule), key=len)
    d.decided_at.seconds, d.decided_at.nanos = 253_402_300_799, 999_999_999
    d.evidence_id = d.version_id = d.supersedes = "f" * 32
    d.detail = "d" * MAX_SUBMISSION_DETAIL_CHARS
    return item


@pytest.mark.parametrize(
    "key",
    [
        Key("n", "s", "p"),
        Key("user:ana", "ana", "lives_in"),
        Key(LONGEST_PART, LONGEST_PART, LONGEST_PART),
    ],
)
def test_a_reply_of_largest_decisions_fits_the_bound(key: Key) -> None:
    """Results as large as a submission's can be, at the highest indexes, take no more than
    the counts plus RESULT_BYTES and key_bytes per item."""
    reply = pb.SubmitFactsResponse(decided_count=2**32 - 1, invalid_count=2**32 - 1)
    n = 40
    for i in range(n):
        reply.results.append(_largest_decision(2**32 - 1 - i, key))
    assert reply.ByteSize() <= COUNTS_BYTES + n * (RESULT_BYTES + key_bytes(key))


def test_error_results_fit_what_the_budget_takes_for_them() -> None:
    """An invalid item's error is counted at no less than its result's size in the reply."""
    error = pb.ItemError(
        code=3,
        message="m" * 1024,
        field_violations=[pb.FieldViolation(field="f" * 200, description="d" * 200)] * 20,
    )
    budget = ReplyBudget(10**9)
    start = budget.used
    reply = pb.SubmitFactsResponse(decided_count=2**32 - 1, invalid_count=2**32 - 1)
    for i in range(10):
        budget.take_error(i, error)
        reply.results.append(pb.ItemResult(index=2**32 - 1 - i, error=error))
    assert start == COUNTS_BYTES
    assert reply.ByteSize() <= budget.used


def test_the_budget_refuses_the_first_item_past_the_limit() -> None:
    """items_that_fit items are taken; the next raises ReplyTooLarge naming its index."""
    key = Key("user:ana", "ana", "lives_in")
    limit = 64 * 1024
    budget = ReplyBudget(limit)
    fits = items_that_fit(limit, key)
    for i in range(fits):
        budget.take_decision(i, key)
    with pytest.raises(ReplyTooLarge) as refused:
        budget.take_decision(fits, key)
    assert [v.field for v in refused.value.violations] == ["stream"]
    assert f"item {fits} " in refused.value.violations[0].reason


@pytest.mark.parametrize(
    ("evidence", "policy", "gate"),
    [
        (fact("Porto"), POLICY, {"duplicate": True}),
        (fact("Porto"), POLICY, {"erased": True}),
        (fact("Porto", source=""), POLICY, {}),
        (fact("Porto", confidence=0.0), Policy(min_confidence_milli=1000), {}),
    ],
)
def test_gate_details_are_within_the_bound(
    evidence: Evidence, policy: Policy, gate: dict[str, bool]
) -> None:
    """The gates' one-line reasons, the only details a submission's decision carries beside
    fixed phrases, are no longer than MAX_SUBMISSION_DETAIL_CHARS."""
    ruling = decide(
        evidence,
        KeyState([], []),
        policy,
        duplicate=gate.get("duplicate", False),
        erased=gate.get("erased", False),
    )
    assert ruling.decision.detail
    assert len(ruling.decision.detail) <= MAX_SUBMISSION_DETAIL_CHARS


def test_the_documented_bound_is_the_computed_one() -> None:
    """The API guide (docs/api.md) and the proto comment state the per-item bound this module
    computes."""
    root = Path(__file__).resolve().parents[2]
    stated = f"at most {RESULT_BYTES} bytes"
    readme = " ".join((root / "docs" / "api.md").read_text().split())
    proto = (root / "proto/factnode/api/v1/factnode.proto").read_text()
    assert stated in readme
    assert stated in " ".join(line.strip(" /") for line in proto.splitlines())
    assert key_bytes(Key("", "", "")) == 12  # "12 bytes of framing"
