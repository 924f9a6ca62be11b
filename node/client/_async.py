"""The asyncio client: Client's methods as coroutines over grpc.aio."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

import grpc

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key

from . import _calls as c
from . import _types as t
from ._errors import from_rpc_error, refused_item

R = TypeVar("R")
KeyLike = Key | tuple[str, str, str]


class AsyncClient(c.Connection):
    """Client for asyncio: the same methods and options, each a coroutine; watch is an async iterator.

    A connection to one factnode; every method sends one call and returns plain values.

    `token` is sent as a bearer token; `ca_cert` (and `client_cert`/`client_key` for mutual
    TLS) switch to TLS. `timeout` is each call's deadline in seconds, retries included (a
    method's `timeout=` overrides it). Calls that are safe to repeat (reads, and submit,
    which always carries an idempotency key) are retried up to `retries` times (at most 4)
    on UNAVAILABLE and RESOURCE_EXHAUSTED by gRPC's own retry policy, after random waits of
    up to `backoff` seconds, doubling, or the wait an overloaded node names. At most
    `max_in_flight` calls are sent at once; more wait in the client within their deadline.
    Failures raise a ClientError subclass: InvalidFact (with `field_errors`), NotFound,
    PermissionDenied, FailedPrecondition, Overloaded, Unavailable."""

    _channel: grpc.aio.Channel

    def _open(
        self, address: str, creds: grpc.ChannelCredentials | None, options: list[tuple[str, Any]]
    ) -> grpc.aio.Channel:
        self._places = asyncio.Semaphore(self.max_in_flight)
        if creds:
            return grpc.aio.secure_channel(address, creds, options=options)
        return grpc.aio.insecure_channel(address, options=options)

    @contextlib.asynccontextmanager
    async def _place(self, timeout: float) -> AsyncIterator[float]:
        """One of the client's `max_in_flight` places, waited for within `timeout`; gives the
        time left of it for the call."""
        start = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                await self._places.acquire()
        except TimeoutError:
            raise self._no_place(timeout) from None
        try:
            yield max(timeout - (time.monotonic() - start), 0.0)
        finally:
            self._places.release()

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _send(self, call: c.Call[R], request: Any, timeout: float | None = None) -> R:
        # Retries, where the call is safe to repeat, are the channel's (`c.service_config`).
        rpc = self._channel.unary_unary(
            call.path, request_serializer=type(request).SerializeToString,
            response_deserializer=call.response.FromString,
        )  # fmt: skip
        async with self._place(timeout or self._timeout) as left:
            try:
                response = await rpc(request, timeout=left, metadata=self._metadata)
            except grpc.RpcError as err:
                raise from_rpc_error(err) from None
        return call.parse(response)

    async def submit(
        self, key: KeyLike, object: str, anchor: str | None = None, *, source: str = "",
        worth: float | None = None, confidence: float | None = None,
        valid_from: datetime | None = None, corrects: str | None = None,
        contradicts: KeyLike | None = None, idempotency_key: str | None = None,
        timeout: float | None = None, attribution: str | None = None,
        embeddings: Sequence[c.EmbeddingLike] = (),
    ) -> t.Submitted:  # fmt: skip
        """Submits one fact with its trust `anchor` (`attribution=`, its former name, is
        accepted too); returns the decision (check `.rejected`) and the belief after it.
        `embeddings`: (space, vector) pairs of the fact from your embedder, for `search`."""
        req = c.submit_request(key, object, anchor, source, worth, confidence, valid_from,
                               corrects, contradicts, idempotency_key,
                               attribution=attribution, embeddings=embeddings)  # fmt: skip
        return await self._send(c.SUBMIT, req, timeout)

    async def submit_many(
        self, facts: Iterable[dict[str, Any]], *, progress: Callable[[int], None] | None = None,
        timeout: float | None = None, all_or_nothing: bool = False,
    ) -> tuple[t.ItemOutcome, ...]:  # fmt: skip
        """Streams facts (each a dict of submit's arguments); `progress(n)` after each is sent.
        `all_or_nothing`: one transaction; a refused item raises (its index in `.item`) and
        nothing is written."""
        requests = c.submit_requests(facts, all_or_nothing)

        def stream() -> Iterator[pb.SubmitFactRequest]:
            for n, req in enumerate(requests, 1):
                yield req
                if progress is not None:
                    progress(n)

        rpc = self._channel.stream_unary(
            c.SUBMIT_MANY.path, request_serializer=pb.SubmitFactRequest.SerializeToString,
            response_deserializer=pb.SubmitFactsResponse.FromString,
        )  # fmt: skip
        async with self._place(timeout or self._timeout) as left:
            try:
                response = await rpc(stream(), timeout=left, metadata=self._metadata)
            except grpc.RpcError as err:
                raise from_rpc_error(
                    err, item=refused_item(err) if all_or_nothing else None
                ) from None
        return c.SUBMIT_MANY.parse(response)

    async def belief(
        self, key: KeyLike, *, as_of: datetime | None = None, known_at: datetime | None = None
    ) -> t.Belief:
        """What the node believes for a key (now, or as of / as known at a time)."""
        req = c.time_travel(pb.GetBeliefRequest(key=c.key_pb(key)), as_of, known_at)
        return await self._send(c.BELIEF, req)

    async def beliefs(
        self, namespace: str, *, subject: str | None = None, page_size: int = 0,
        page_token: str = "", subject_prefix: str = "",
    ) -> t.Page[t.Belief]:  # fmt: skip
        """One page of a namespace's beliefs, optionally for one subject or the subjects
        starting with `subject_prefix`."""
        return await self._send(
            c.BELIEFS, c.beliefs_request(namespace, subject, page_size, page_token, subject_prefix)
        )

    async def subjects(
        self, namespace: str, *, subject_prefix: str = "", page_size: int = 0,
        page_token: str = "",
    ) -> t.Page[str]:  # fmt: skip
        """One page of the subjects with a belief in a namespace (starting with
        `subject_prefix`), each once."""
        req = c.listing(
            pb.ListSubjectsRequest(namespace=namespace, subject_prefix=subject_prefix),
            page_size, page_token,
        )  # fmt: skip
        return await self._send(c.SUBJECTS, req)

    async def recall(
        self, namespace: str, subject: str, *, limit: int = c.RECALL_LIMIT
    ) -> tuple[t.Belief, ...]:
        """Every current belief about a subject in a namespace (at most `limit`, in key order),
        for an agent that knows whom it asks about but not which predicates the node holds."""
        out: list[t.Belief] = []
        token = ""
        while True:
            req = c.beliefs_request(namespace, subject, c.recall_page(limit, len(out)), token)
            page = await self._send(c.BELIEFS, req)
            out.extend(page.items)
            token = page.next_page_token
            if not token or len(out) >= limit:
                return tuple(out[:limit])

    async def search(
        self, query: str, *, namespace_prefix: str = "", subject: str | None = None,
        predicate: str | None = None, states: Sequence[str] = (), anchors: Sequence[str] = (),
        as_of: datetime | None = None, known_at: datetime | None = None, page_size: int = 0,
        page_token: str = "", embedding: c.EmbeddingLike | None = None,
    ) -> t.Page[t.Hit]:  # fmt: skip
        """One page of the beliefs a text query finds, best first (SearchBeliefs): only values
        the node serves at (as_of, known_at), in the namespaces this token may read. With
        `embedding` (space, vector of the query), values with a vector of that space are
        ranked by it too."""
        req = c.search_request(
            query, namespace_prefix, subject, predicate, states, anchors, as_of, known_at,
            page_size, page_token, embedding,
        )  # fmt: skip
        return await self._send(c.SEARCH, req)

    async def history(
        self, key: KeyLike, *, known_at: datetime | None = None
    ) -> tuple[t.Version, ...]:
        """Every value a key has had, when it held, and the evidence for it."""
        return await self._send(c.HISTORY, c.history_request(key, known_at))

    async def explain(
        self, key: KeyLike, *, as_of: datetime | None = None, known_at: datetime | None = None
    ) -> t.Explanation:
        """The belief and every comparison that decided it."""
        req = c.time_travel(pb.ExplainRequest(key=c.key_pb(key)), as_of, known_at)
        return await self._send(c.EXPLAIN, req)

    async def retract(
        self, key: KeyLike, reason: str, *, object: str | None = None, at: datetime | None = None,
        anchor: str | None = None, source: str | None = None, worth: float | None = None,
        confidence: float | None = None, attribution: str | None = None,
    ) -> tuple[t.Decision, t.Belief]:  # fmt: skip
        """Records a retraction of a key's value (or of one `object` of a multi-valued key):
        it ends what it outranks. Unset: anchor user_stated (`attribution=` is its former
        name), source the caller's identity."""
        req = c.retract_request(key, reason, object, at, anchor, source, worth, confidence,
                                attribution=attribution)  # fmt: skip
        return await self._send(c.RETRACT, req)

    async def decisions(
        self, *, key: KeyLike | None = None, namespace: str = "", page_size: int = 0,
        page_token: str = "",
    ) -> t.Page[t.Decision]:  # fmt: skip
        """One page of the decision log, for a key or a namespace."""
        req = c.decisions_request(key, namespace, page_size, page_token)
        return await self._send(c.DECISIONS, req)

    async def watch(
        self, *, namespace: str | None = None, resume_token: str = ""
    ) -> AsyncIterator[t.Change]:
        """Belief changes as they happen; stops when the iterator is closed or the call ends."""
        req = c.watch_request(namespace, resume_token)
        rpc = self._channel.unary_stream(
            c.WATCH.path, request_serializer=pb.WatchBeliefsRequest.SerializeToString,
            response_deserializer=pb.BeliefChange.FromString,
        )  # fmt: skip
        stream = rpc(req, metadata=self._metadata)
        try:
            async for m in stream:
                yield c.change(m)
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.CANCELLED:
                raise from_rpc_error(err) from None
        finally:
            stream.cancel()

    async def review(
        self, namespace: str = "", *, page_size: int = 0, page_token: str = ""
    ) -> t.Page[t.Contested]:
        """One page of contested keys awaiting an operator."""
        req = c.listing(pb.ListContestedRequest(namespace=namespace), page_size, page_token)
        return await self._send(c.REVIEW, req)

    async def contested(self, key: KeyLike) -> t.Contested:
        """One contested key with every version's tally."""
        return await self._send(c.CONTESTED, pb.GetContestedRequest(key=c.key_pb(key)))

    async def resolve(
        self, key: KeyLike, reason: str, *, version_id: str | None = None,
        object: str | None = None, operator: str = "",
    ) -> t.Resolved:  # fmt: skip
        """Resolves a contested key to one version (by id or by value)."""
        return await self._send(
            c.RESOLVE, c.resolve_request(key, reason, version_id, object, operator)
        )

    async def erase(
        self, reason: str, *, evidence_id: str | None = None, key: KeyLike | None = None,
        subject: tuple[str, str] | None = None, operator: str = "",
    ) -> t.Erased:  # fmt: skip
        """Erases evidence (one item, a key's, or a subject's) and leaves a tombstone."""
        return await self._send(
            c.ERASE, c.erase_request(reason, operator, evidence_id, key, subject)
        )

    async def erasures(
        self, *, page_size: int = 0, page_token: str = ""
    ) -> t.Page[t.ErasureCoverage]:
        """One page of the erasures the node holds, newest first, each with which members
        have confirmed it (operator)."""
        req = c.listing(pb.ListErasuresRequest(), page_size, page_token)
        return await self._send(c.ERASURES, req)

    async def erasure(self, erasure_id: str) -> t.ErasureCoverage:
        """One erasure and every member's receipt, or who is still waited for (operator)."""
        return await self._send(c.ERASURE, pb.GetErasureRequest(erasure_id=erasure_id))

    async def decay(self, *, now: datetime | None = None) -> t.Decayed:
        """Runs the decay pass now (or as of `now`)."""
        return await self._send(c.DECAY, c.decay_request(now))

    async def status(self) -> t.Status:
        """The node's identity, counts and peers."""
        return await self._send(c.STATUS, pb.GetStatusRequest())

    async def members(self) -> t.Members:
        """Every member of the federation the node knows, and its revocation list's number."""
        return await self._send(c.MEMBERS, pb.ListMembersRequest())

    async def revoke(self, revocation_list: bytes) -> t.Revoked:
        """Hands the node a revocation list the federation's CA signed (`factnode certs revoke`)."""
        return await self._send(c.REVOKE, pb.RevokeRequest(revocation_list=revocation_list))

    async def sync(self, peer_node_id: str = "") -> tuple[t.SyncResult, ...]:
        """Runs a sync round with one peer (or all) and reports what moved."""
        return await self._send(c.SYNC, pb.SyncNowRequest(peer_node_id=peer_node_id))
