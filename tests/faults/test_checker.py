"""The checker's judgements on hand-made histories and stores: each promise it checks can
fail, and what the rules allow passes."""

from __future__ import annotations

from typing import Any

from _checker import Judge, NodeStore, Violation
from _history import Op

from factnode.core import Policy, Submission, make_evidence

KEY = ("camp:a", "s1", "lives_in")
T0 = 1_800_000_000_000_000  # microseconds: the nodes' clock at the history's start


def submitted(index: int, node: str, value: str, at: float) -> tuple[Op, Any]:
    """An acknowledged submission and the evidence the node made of it."""
    source = f"client-0-0-{index}"
    sub = Submission(*KEY, value, "user_stated", source, 0.5, 0.9, T0)
    evidence = make_evidence(sub, Policy(), recorded_at=T0 + int(at * 1e6), origin_node=node)
    op = Op(index, 0, "submit", node, KEY, {"value": value, "source": source}, at, at + 0.01)
    op.status = "ok"
    op.result = {
        "evidence": evidence.evidence_id,
        "outcome": "ACCEPTED",
        "at": evidence.recorded_at,
    }
    return op, evidence


def erased(index: int, node: str, at: float) -> Op:
    """An acknowledged erasure of KEY."""
    op = Op(index, 0, "erase-key", node, KEY, {}, at, at + 0.01)
    op.status = "ok"
    op.result = {"erasure": "e" * 32, "erased": 1, "erased_at": T0 + int(at * 1e6) + 5000}
    return op


def read(index: int, node: str, at: float, evidence_id: str) -> Op:
    op = Op(index, 0, "read", node, KEY, {}, at, at + 0.01)
    op.status = "ok"
    op.result = {"values": (("porto", evidence_id),)}
    return op


def stores(**held: list[Any]) -> dict[str, NodeStore]:
    return {n: NodeStore(n, evidence={e.evidence_id: e for e in es}) for n, es in held.items()}


def checks(violations: list[Violation]) -> list[tuple[str, str]]:
    return sorted((v.check, v.node) for v in violations)


def test_a_fact_held_everywhere_and_nothing_else_passes() -> None:
    """One acknowledged fact held by both nodes, served nowhere: no violation."""
    fact, evidence = submitted(0, "n1", "porto", 1.0)
    assert Judge([fact]).check(stores(n1=[evidence], n2=[evidence])) == []


def test_a_lost_or_unsynced_fact_and_diverged_evidence_are_named() -> None:
    """A fact missing on its node is lost, missing elsewhere unsynced, and the sets differ."""
    fact, lost = submitted(0, "n1", "porto", 1.0)
    other, evidence = submitted(1, "n2", "braga", 1.5)
    found = checks(Judge([fact, other]).check(stores(n1=[evidence], n2=[evidence, lost])))
    assert ("ack-lost", "n1") in found and ("diverged", "n2") in found


def test_evidence_acknowledged_before_an_erasure_must_be_gone_and_not_read() -> None:
    """Evidence acknowledged before a key erasure is erased-held where still held, and a
    read on the erasing node after the erasure that returns it is read-erased."""
    fact, evidence = submitted(0, "n1", "porto", 1.0)
    erase = erased(1, "n1", 2.0)
    late = read(2, "n1", 3.0, evidence.evidence_id)
    found = checks(Judge([fact, erase, late]).check(stores(n1=[evidence], n2=[])))
    assert ("erased-held", "n1") in found and ("read-erased", "n1") in found


def test_a_fact_recorded_after_the_erasure_by_a_clock_ahead_is_spared_not_erased() -> None:
    """A fact acknowledged first but stamped after the erasure's erased_at (its node's clock
    ran ahead) is not covered by the erasure (specification §6): held, it is no violation."""
    fact, evidence = submitted(0, "n1", "porto", 1.0)
    erase = erased(1, "n2", 2.0)
    erase.result["erased_at"] = evidence.recorded_at - 1
    judge = Judge([fact, erase])
    assert judge.check(stores(n1=[evidence], n2=[evidence])) == []
    assert judge.spared_by_skew() == [fact]


def test_evidence_no_call_asked_for_is_a_phantom() -> None:
    """Evidence whose source no call used is named as a phantom."""
    _, evidence = submitted(0, "n1", "porto", 1.0)
    assert ("phantom", "n1") in checks(Judge([]).check(stores(n1=[evidence])))
