"""Prometheus metrics. Labels carry outcomes and rules, never keys or values."""

from __future__ import annotations

import collections
import hmac
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from factnode.core import MICROS_PER_SECOND, Decision, Instant

# How often a node reads how many erasures still wait for a member's receipt (one aggregate
# query; a scrape only reads the values last read).
ERASURE_GAUGE_SECONDS = 30.0


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
            "Served beliefs that a claim's expiry changed (one DECAYED decision each).",
            registry=self.registry,
        )
        self.peer_items_refused = Counter(
            "factnode_peer_items_refused",
            "Items peers sent that this node refused, one by one, by kind "
            "(tombstone, bound, evidence, vote, confirmation, member_record).",
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
            "Evidence expired for longer than retain_decayed_days, purged as an erasure does.",
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

        self.erasures_unconfirmed = Gauge(
            "factnode_erasures_unconfirmed",
            "Erasures held that some current member has not confirmed yet (no receipt heard "
            "from it; revoked members are not waited for). Refreshed every "
            f"{ERASURE_GAUGE_SECONDS:g} s.",
            registry=self.registry,
        )
        self.erasures_unconfirmed_age = Gauge(
            "factnode_erasures_unconfirmed_oldest_age_seconds",
            "Seconds since the oldest erasure not yet confirmed by every current member was "
            "made (its erased_at, the erasing node's clock); 0 when every erasure is confirmed.",
            registry=self.registry,
        )
        self._oldest_unconfirmed: Instant | None = None

    def unconfirmed_erasures(
        self, count: int, oldest: Instant | None, now: Callable[[], Instant]
    ) -> None:
        """Sets the erasure gauges from one refresh: the age is computed as it is scraped
        (from `now`), so it grows between refreshes as the erasure does."""
        self.erasures_unconfirmed.set(count)
        self._oldest_unconfirmed = oldest

        def age() -> float:
            held = self._oldest_unconfirmed
            return 0.0 if held is None else max(0.0, (now() - held) / MICROS_PER_SECOND)

        self.erasures_unconfirmed_age.set_function(age)

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


# --- the /metrics listener (`metrics_listen`, `metrics_token`) --------------------------

UNAUTHORIZED = b"unauthorized: send Authorization: Bearer <metrics_token>\n"
WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]


def bearer_gate(app: WsgiApp, token: str | None) -> WsgiApp:
    """`app` behind `Authorization: Bearer <token>` (401 without it); open when token is None."""
    if token is None:
        return app
    expected = token.encode()

    def gate(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        scheme, _, given = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        given_bytes = given.strip().encode("latin-1", "replace")
        if scheme.lower() == "bearer" and hmac.compare_digest(given_bytes, expected):
            return app(environ, start_response)
        start_response("401 Unauthorized", [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("WWW-Authenticate", 'Bearer realm="factnode-metrics"'),
            ("Content-Length", str(len(UNAUTHORIZED))),
        ])  # fmt: skip
        return [UNAUTHORIZED]

    return gate


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged, as with prometheus_client's own server."""


def serve_metrics(
    host: str, port: int, registry: CollectorRegistry, token: str | None
) -> WSGIServer:
    """Serves `registry` at /metrics on host:port from a daemon thread (prometheus_client's
    start_http_server, with the bearer check in front when `token` is set)."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]

    class Server(ThreadingWSGIServer):
        address_family = family

    app = bearer_gate(make_wsgi_app(registry), token)
    httpd = make_server(str(sockaddr[0]), port, app, Server, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, name="factnode-metrics", daemon=True).start()
    return httpd
