"""The decision counter counts every decision of a call, however many share a label pair."""

from __future__ import annotations

from prometheus_client import generate_latest

from factnode.core import Decision, Key, Outcome, Rule
from factnode.metrics import Metrics


def _decision(outcome: Outcome, rule: Rule) -> Decision:
    return Decision(key=Key("ns", "s", "p"), outcome=outcome, rule=rule, decided_at=0)


def test_a_batch_counts_each_decision_under_its_outcome_and_rule() -> None:
    metrics = Metrics()
    accepted = _decision(Outcome.ACCEPTED, Rule.FIRST_VERSION)
    duplicate = _decision(Outcome.DUPLICATE, Rule.DUPLICATE)
    metrics.decided([accepted, duplicate, accepted, accepted])
    metrics.decided([duplicate])
    metrics.decided([])
    body = generate_latest(metrics.registry).decode()
    assert 'factnode_decisions_total{outcome="ACCEPTED",rule="first_version"} 3.0' in body
    assert 'factnode_decisions_total{outcome="DUPLICATE",rule="duplicate"} 2.0' in body
    assert body.count("factnode_decisions_total{") == 2
