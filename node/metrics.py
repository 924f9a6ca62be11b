"""Prometheus metrics. Labels carry outcomes and rules, never keys or values."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter

from factnode.core import Decision


class Metrics:
    """The node's counters, on a registry of its own (so several nodes fit in one process)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.decisions = Counter(
            "factnode_decisions",
            "Decisions recorded, by outcome and rule.",
            ["outcome", "rule"],
            registry=self.registry,
        )
        self.decayed = Counter(
            "memory_decayed",
            "Evidence whose effective confidence has decayed.",
            registry=self.registry,
        )
        self.peer_items_refused = Counter(
            "factnode_peer_items_refused",
            "Items peers sent that this node refused, one by one, by kind "
            "(tombstone, bound, evidence, vote, member_record).",
            ["kind"],
            registry=self.registry,
        )
        self.signatures_refused = Counter(
            "factnode_peer_signatures_refused",
            "Signed items peers sent that this node refused for their signature, by kind and "
            "reason (unsigned, bad_signature, unknown_signer, not_a_member); each is also "
            "counted in factnode_peer_items_refused.",
            ["kind", "reason"],
            registry=self.registry,
        )
        self.tombstoned = Counter(
            "memory_tombstoned",
            "Evidence turned into a tombstone by decay.",
            registry=self.registry,
        )
        self.calls_overloaded = Counter(
            "factnode_calls_overloaded",
            "Client calls answered RESOURCE_EXHAUSTED because the node ran max_calls_in_flight "
            "calls and max_calls_waiting waited (each refused attempt counts; the clients "
            "retry them).",
            registry=self.registry,
        )
        self.erasures_refused = Counter(
            "federation_erasures_refused",
            "Peers' erasure tombstones not applied, by federation.accept_erasures_from.",
            registry=self.registry,
        )

    def peer_refused(self, by_kind: Mapping[str, int]) -> None:
        """Counts items a peer sent that this node refused, by kind; an entry "kind/reason"
        counts the refusals of that kind for their signature, by reason."""
        for name, n in by_kind.items():
            kind, _, reason = name.partition("/")
            if reason:
                self.signatures_refused.labels(kind, reason).inc(n)
            else:
                self.peer_items_refused.labels(kind).inc(n)

    def decided(self, decisions: Iterable[Decision]) -> None:
        """Counts decisions by outcome and rule: each label pair looked up and incremented once
        per call, not once per decision (a SubmitFacts batch is hundreds of decisions)."""
        for (outcome, rule), n in collections.Counter(
            (d.outcome, d.rule) for d in decisions
        ).items():
            self.decisions.labels(outcome.value, rule.value).inc(n)

    def decay(self, decayed: int, tombstoned: int) -> None:
        self.decayed.inc(decayed)
        self.tombstoned.inc(tombstoned)
