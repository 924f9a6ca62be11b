"""FactnodeStore and AsyncFactnodeStore: LangGraph's BaseStore over factnode.AsyncClient.

`put` submits evidence and the node's belief decides what `get` answers; nothing is
overwritten. Both stores run the same coroutine, `_Batch.run`, on an AsyncClient: the async
store on the caller's event loop, the blocking one on a loop thread of its own."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import threading
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from factnode.client import AsyncClient, Belief, ClientError, Hit, NotFound
from factnode.core.policy import DEFAULT_MULTI_VALUED

from . import _mapping as m

R = TypeVar("R")
_Scanned = tuple[tuple[str, ...], str, Belief, dict[str, Any]]  # namespace, key, belief, value
UnindexedQuery = Literal["refuse", "ignore"]

# Reads run concurrently within a batch, at most this many calls at a time.
_CONCURRENT_CALLS = 16
_PAGE = 100  # ListBeliefs page size for search and list_namespaces' scans
_SEARCH_PAGE = 100  # SearchBeliefs' largest page
_SUBJECT_PAGE = 1000  # ListSubjects' largest page
MAX_DIMS = 4096  # the node's longest vector

# Why a put's `ttl` is refused, and what sets a memory's life instead.
TTL_REFUSED = (
    "ttl is not supported by the factnode store: the node gives no single item a timer. "
    "A memory expires when its confidence x 0.5^(age / its trust anchor's half-life) falls "
    "below the node's min_confidence, age counted from the last put of the same value: set "
    "its life with `anchor` and `confidence` (the store's, or the value's '_factnode'), put "
    "the same value again to extend it, and use anchor 'user_stated' for a memory that "
    "never expires. See 'How long a memory lives' in docs/agents/langgraph.md"
)


class Rejected(ValueError):
    """The node REJECTED a put (too low a confidence, no source, erased): nothing is believed
    from it; the decision is in the node's log under `rule`. `index` is the op's position in
    its batch (the batch's other puts were decided with it)."""

    def __init__(
        self, namespace: tuple[str, ...], key: str, rule: str, detail: str, index: int = 0
    ) -> None:
        super().__init__(
            f"op {index}: put {namespace}/{key!r} was REJECTED by rule {rule}: {detail}"
        )
        self.rule = rule
        self.index = index


def _fact(w: m.Write, vectors: Sequence[Sequence[float]], space: str) -> dict[str, Any]:
    """A checked put as submit_many's item, with its vectors (one per indexed text)."""
    p = w.provenance
    return {
        "key": w.key, "object": w.object, "anchor": p.anchor, "source": p.source,
        "worth": p.worth, "confidence": p.confidence, "valid_from": p.valid_from,
        "embeddings": [(space, v) for v in vectors],
    }  # fmt: skip


# How a cosine similarity reads as each of LangGraph's distance types: for normalised
# vectors (what embedders give) the inner product is the cosine and the L2 distance is
# sqrt(2 - 2 cos). The node ranks by cosine, so every type ranks alike.
_SCORES: dict[str, Callable[[float], float]] = {
    "cosine": lambda c: c,
    "inner_product": lambda c: c,
    "l2": lambda c: -math.sqrt(max(0.0, 2.0 - 2.0 * c)),
}


class _Index:
    """The store's `index` (LangGraph's IndexConfig): the embedder, the fields embedded by
    default, and the space its vectors are kept in on the node."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        dims = config.get("dims")
        if isinstance(dims, bool) or not isinstance(dims, int) or not 0 < dims <= MAX_DIMS:
            raise m.ItemError("index.dims", f"must be a whole number from 1 to {MAX_DIMS}")
        if config.get("embed") is None:
            raise m.ItemError("index.embed", "an embeddings object or function is required")
        distance = config.get("distance_type", "cosine")
        if distance not in _SCORES:
            raise m.ItemError("index.distance_type", f"must be one of {', '.join(_SCORES)}")
        self.dims = dims
        self.embeddings = ensure_embeddings(config["embed"])
        fields = config.get("fields") or ["$"]
        self.fields = [(p, tokenize_path(p) if p != "$" else p) for p in fields]
        self.space = str(config.get("space") or f"langgraph:{dims}")
        self.score = _SCORES[distance]

    def texts(
        self, value: Mapping[str, Any], index: Literal[False] | list[str] | None
    ) -> list[str]:
        """What a put embeds: its value's text at each indexed field (`index`: the put's own
        fields, False: none)."""
        if index is False:
            return []
        paths = self.fields if index is None else [(p, tokenize_path(p)) for p in index]
        return [t for _, path in paths for t in get_text_at_path(value, path) if t]


def _subject_prefix(prefix: Sequence[str]) -> str:
    """The subject text every namespace under `prefix` starts with ("" for none, or for
    labels no subject can hold: then every subject is read and the caller filters)."""
    if not prefix:
        return ""
    try:
        return m.subject_of(prefix)
    except m.ItemError:
        return ""


class _Options:
    """What both stores are built from: the node's address and credentials, the store's
    factnode namespace and default provenance, and how a semantic query is answered."""

    def __init__(
        self,
        address: str,
        *,
        namespace: str,
        token: str | None,
        ca_cert: str | Path | None,
        client_cert: str | Path | None,
        client_key: str | Path | None,
        timeout: float,
        anchor: str | None,
        attribution: str | None,
        source: str,
        worth: float | None,
        confidence: float | None,
        multi_valued: Iterable[str],
        index: Mapping[str, Any] | None,
    ) -> None:
        if not isinstance(namespace, str) or not namespace.strip():
            raise m.ItemError("namespace", "the store's factnode namespace is required")
        self.address = address
        self.root = namespace
        self.client_options: dict[str, Any] = {
            "token": token, "ca_cert": ca_cert, "client_cert": client_cert,
            "client_key": client_key, "timeout": timeout,
        }  # fmt: skip
        defaults = m.provenance_of(
            {"anchor": anchor, "attribution": attribution, "source": source}
            | ({"worth": worth} if worth is not None else {})
            | ({"confidence": confidence} if confidence is not None else {}),
            m.Provenance(),
            "provenance",
        )
        self.defaults = defaults
        self.multi_valued = frozenset(multi_valued)
        self.index = _Index(index) if index is not None else None

    def client(self) -> AsyncClient:
        return AsyncClient(self.address, **self.client_options)


class _Batch:
    """One batch of ops against the node. Reads see the store as it was before the batch's
    puts, and of several puts to one item the last counts (as in InMemoryStore)."""

    def __init__(self, options: _Options, client: AsyncClient) -> None:
        self.o = options
        self.client = client
        self.gate = asyncio.Semaphore(_CONCURRENT_CALLS)
        # One scan serves every search and list_namespaces of the batch: its reads all see
        # the store as it was before the batch's puts.
        self._scanned: dict[str, asyncio.Future[list[_Scanned]]] = {}

    async def run(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        # Every op is checked and converted before anything is sent (a refusal names its
        # index); of several writes to one item the last counts.
        writes: dict[tuple[tuple[str, ...], str], tuple[int, m.Write]] = {}
        self.texts: dict[int, list[str]] = {}  # a put's texts to embed, by op index
        for index, op in enumerate(ops):
            if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
                raise m.ItemError("op", f"unknown operation type {type(op).__name__}", index)
            try:
                validate_op_namespace(op)
            except InvalidNamespaceError as exc:
                raise InvalidNamespaceError(f"op {index}: {exc}") from None
            try:
                if isinstance(op, PutOp):
                    writes[(tuple(op.namespace), op.key)] = (index, self._write_of(op))
                    if self.o.index is not None and op.value is not None:
                        rest, _ = m.split_provenance(op.value, self.o.defaults)
                        self.texts[index] = self.o.index.texts(rest, op.index)
                elif isinstance(op, SearchOp):
                    self._check_search(op)
            except m.ItemError as exc:
                raise exc.at(index) from None
        results = await asyncio.gather(*(self._read(op) for op in ops))
        await self._write(sorted(writes.values(), key=lambda w: w[0]))
        return list(results)

    async def _call(self, coro: Awaitable[R]) -> R:
        async with self.gate:
            return await coro

    def _write_of(self, op: PutOp) -> m.Write:
        """A put or delete, refused before anything is sent: every op of a batch is first."""
        if op.ttl is not None:
            raise NotImplementedError(TTL_REFUSED)
        return m.write_of(
            self.o.root, op.namespace, op.key, op.value, self.o.defaults, self.o.multi_valued
        )

    def _check_search(self, op: SearchOp) -> None:
        for name in ("limit", "offset"):
            number = getattr(op, name)
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise m.ItemError(name, f"must be a whole number >= 0, got {number!r}")

    async def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return await self._get(op)
        if isinstance(op, SearchOp):
            return await self._search(op)
        if isinstance(op, ListNamespacesOp):
            return await self._list_namespaces(op)
        return None

    async def _get(self, op: GetOp) -> Item | None:
        if not op.namespace:
            return None
        key = (self.o.root, m.subject_of(op.namespace), m.predicate_of(op.key, frozenset()))
        try:
            belief = await self._call(self.client.belief(key))
        except NotFound:
            return None
        return await self._item(belief, Item)

    async def _item(self, belief: Belief, kind: type[Item]) -> Item | None:
        """The item a belief holds, stamped from its key's evidence; None if it is not one."""
        value = m.value_of(belief.object) if belief.version_id else None
        if value is None:
            return None
        created, updated = belief.first_recorded_at, belief.last_recorded_at
        if created is None or updated is None:  # not stamped by the node: ask the history
            stamped = await self._stamps(belief)
            created, updated = stamped.created_at, stamped.updated_at
        namespace = m.namespace_of(belief.key.subject)
        if kind is SearchItem:
            return SearchItem(namespace, belief.key.predicate, value, created, updated)
        return Item(
            value=value, key=belief.key.predicate, namespace=namespace,
            created_at=created, updated_at=updated,
        )  # fmt: skip

    async def _stamps(self, belief: Belief) -> m.Stamped:
        """created_at and updated_at of an item from its key's history."""
        versions = await self._call(self.client.history(belief.key))
        recorded = [(v.version_id, e.recorded_at) for v in versions for e in v.evidence]
        fallback = belief.evidence.recorded_at if belief.evidence else None
        if fallback is None:
            fallback = min((at for _, at in recorded), default=None)
        if fallback is None:  # pragma: no cover - a belief always rests on evidence
            raise m.ItemError("key", f"{belief.key} has a belief but no evidence")
        return m.stamps(recorded, belief.version_id, fallback)

    async def _items(self, prefix: tuple[str, ...]) -> list[_Scanned]:
        """The items under a namespace prefix (with others whose subject starts alike),
        read once per batch and prefix."""
        subject_prefix = _subject_prefix(prefix)
        scan = self._scanned.get(subject_prefix)
        if scan is None:
            scan = self._scanned[subject_prefix] = asyncio.ensure_future(self._scan(subject_prefix))
        return await asyncio.shield(scan)

    async def _scan(self, subject_prefix: str) -> list[_Scanned]:
        """The items whose subject starts with `subject_prefix` (ListBeliefs, by the node's
        subject index): (namespace, key, belief, value)."""
        out: list[_Scanned] = []
        token = ""
        while True:
            page = await self._call(
                self.client.beliefs(
                    self.o.root, page_size=_PAGE, page_token=token, subject_prefix=subject_prefix
                )
            )
            for b in page.items:
                value = m.value_of(b.object) if b.version_id else None
                if value is not None:
                    out.append((m.namespace_of(b.key.subject), b.key.predicate, b, value))
            token = page.next_page_token
            if not token:
                return out

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            return await self._query(op)
        prefix = tuple(op.namespace_prefix)
        found = [
            (ns, key, b)
            for ns, key, b, value in await self._items(prefix)
            if ns[: len(prefix)] == prefix and m.matches_filter(value, op.filter)
        ]
        found.sort(key=lambda row: (row[0], row[1]))
        page = found[op.offset : op.offset + op.limit]
        items = await asyncio.gather(*(self._item(b, SearchItem) for _, _, b in page))
        return [i for i in items if isinstance(i, SearchItem)]

    async def _query(self, op: SearchOp) -> list[SearchItem]:
        """A search with a query: by the query's vector where the store has an `index`, by its
        words otherwise (SearchBeliefs); only what the node believes now is found, best first."""
        assert op.query
        index = self.o.index
        embedding = None
        words = op.query
        if index is not None:
            vector = await index.embeddings.aembed_query(op.query)
            embedding, words = (index.space, vector), ""
        prefix = tuple(op.namespace_prefix)
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        token = ""
        while len(found) < wanted:
            page = await self._call(
                self.client.search(
                    words, namespace_prefix=self.o.root, page_size=_SEARCH_PAGE,
                    page_token=token, embedding=embedding,
                )
            )  # fmt: skip
            for hit in page.items:
                item = self._hit_item(hit, prefix, op.filter)
                if item is not None:
                    found.append(item)
            token = page.next_page_token
            if not token:
                break
        return found[op.offset : wanted]

    def _hit_item(
        self, hit: Hit, prefix: tuple[str, ...], filter: Mapping[str, Any] | None
    ) -> SearchItem | None:
        """The item a search hit is, if it belongs to this store, the namespace prefix and the
        filter; its score as the index's distance type reads it."""
        key = hit.belief.key
        if key.namespace != self.o.root:  # a namespace that only starts like the store's
            return None
        namespace = m.namespace_of(key.subject)
        value = m.value_of(hit.object)
        if value is None or namespace[: len(prefix)] != prefix:
            return None
        if not m.matches_filter(value, filter):
            return None
        score = self.o.index.score(hit.score) if self.o.index is not None else hit.score
        return SearchItem(
            namespace, key.predicate, value, hit.first_recorded_at, hit.last_recorded_at,
            score=score,
        )  # fmt: skip

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """The namespaces holding a belief, from the node's subject index (ListSubjects),
        under the literal labels of the first prefix condition."""
        conditions = [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]
        literal: tuple[str, ...] = ()
        for match_type, path in conditions:
            if match_type == "prefix":
                literal = tuple(itertools.takewhile(lambda label: label != "*", path))
                break
        subject_prefix = _subject_prefix(literal)
        subjects: list[str] = []
        token = ""
        while True:
            page = await self._call(
                self.client.subjects(
                    self.o.root, subject_prefix=subject_prefix, page_size=_SUBJECT_PAGE,
                    page_token=token,
                )
            )  # fmt: skip
            subjects.extend(page.items)
            token = page.next_page_token
            if not token:
                break
        namespaces = {m.namespace_of(s) for s in subjects}
        return m.listed_namespaces(namespaces, conditions, op.max_depth, op.limit, op.offset)

    async def _write(self, writes: list[tuple[int, m.Write]]) -> None:
        """The batch's puts in one all-or-nothing SubmitFacts (one transaction: an item the
        node refuses fails the call, naming its op, and nothing is written), then its deletes.
        A REJECTED put is a recorded decision: the rest stay written and the call raises."""
        puts = [(i, w) for i, w in writes if w.object is not None]
        if puts:
            vectors = await self._vectors([i for i, _ in puts])
            space = self.o.index.space if self.o.index is not None else ""
            try:
                outcomes = await self.client.submit_many(
                    [_fact(w, vectors.get(i, ()), space) for i, w in puts], all_or_nothing=True
                )
            except ClientError as exc:
                if exc.item is None:
                    raise
                index = puts[exc.item][0]
                exc.args = (f"op {index}: {str(exc).removeprefix(f'item {exc.item}: ')}",)
                exc.item = index
                raise
            for (index, w), outcome in zip(puts, outcomes, strict=True):
                d = outcome.decision
                if d is not None and d.outcome == "REJECTED":
                    raise Rejected(m.namespace_of(w.key[1]), w.key[2], d.rule, d.detail, index)
        for index, w in writes:
            if w.object is None:
                await self._retract(m.namespace_of(w.key[1]), w.key[2], w.key, index)

    async def _vectors(self, indexes: Sequence[int]) -> dict[int, list[list[float]]]:
        """The puts' vectors by op index, their texts embedded in one call."""
        if self.o.index is None:
            return {}
        texts = [(i, t) for i in indexes for t in self.texts.get(i, ())]
        if not texts:
            return {}
        vectors = await self.o.index.embeddings.aembed_documents([t for _, t in texts])
        out: dict[int, list[list[float]]] = {}
        for (i, _), v in zip(texts, vectors, strict=True):
            out.setdefault(i, []).append(list(v))
        return out

    async def _retract(
        self, namespace: tuple[str, ...], item_key: str, key: Any, index: int
    ) -> None:
        """A delete is a retraction with the store's provenance: it ends the belief unless
        the belief outranks it (a weaker anchor cannot end a stronger one)."""
        d = self.o.defaults
        # NotFound: nothing believed; deleting an absent item changes nothing, as in LangGraph.
        with contextlib.suppress(NotFound):
            decision, _ = await self.client.retract(
                key, f"LangGraph store delete of {item_key!r}", anchor=d.anchor,
                source=d.source, worth=d.worth, confidence=d.confidence,
            )  # fmt: skip
            if decision.outcome == "REJECTED":
                raise Rejected(namespace, item_key, decision.rule, decision.detail, index)


class _FactnodeStore(BaseStore):
    """What both stores share: their options, built once from the constructor's arguments."""

    supports_ttl = False
    __slots__ = ("_options", "index_config")

    def __init__(
        self,
        address: str,
        *,
        namespace: str = "langgraph",
        token: str | None = None,
        ca_cert: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        timeout: float = 10.0,
        anchor: str | None = None,
        source: str = "langgraph",
        worth: float | None = None,
        confidence: float | None = None,
        multi_valued: Iterable[str] = DEFAULT_MULTI_VALUED,
        unindexed_query: UnindexedQuery | None = None,
        attribution: str | None = None,
        index: IndexConfig | None = None,
    ) -> None:
        if unindexed_query is not None:
            warnings.warn(
                "unindexed_query has no effect: a query is answered by the node's word index, "
                "or by vectors with `index`",
                DeprecationWarning,
                stacklevel=3,
            )
        self._options = _Options(
            address, namespace=namespace, token=token, ca_cert=ca_cert, client_cert=client_cert,
            client_key=client_key, timeout=timeout, anchor=anchor, attribution=attribution,
            source=source, worth=worth, confidence=confidence, multi_valued=multi_valued,
            index=index,
        )  # fmt: skip
        # As LangGraph's stores have it: the configuration as given (None: words only).
        self.index_config = dict(index) if index is not None else None
        self._connect()

    def _connect(self) -> None:
        """Prepares the store's connection to the node (each store in its own way)."""
        raise NotImplementedError

    @property
    def namespace(self) -> str:
        """The factnode namespace that holds the store's items."""
        return self._options.root

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """BaseStore.put; a `ttl` is refused saying what sets a memory's life instead."""
        if ttl not in (NOT_PROVIDED, None):
            raise NotImplementedError(TTL_REFUSED)
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """BaseStore.aput; a `ttl` is refused as `put` refuses it."""
        if ttl not in (NOT_PROVIDED, None):
            raise NotImplementedError(TTL_REFUSED)
        await super().aput(namespace, key, value, index, ttl=ttl)


class AsyncFactnodeStore(_FactnodeStore):
    """A LangGraph store on a factnode, for asyncio: every version kept, `get` the belief.

    Items live in the factnode namespace `namespace`; a LangGraph namespace tuple is the
    subject (labels joined with "."), the key is the predicate, the value is the object as
    canonical JSON. A put is evidence with the store's provenance (`anchor`, `source`,
    `worth`, `confidence`) or the one its value names under "_factnode"; a delete is a
    retraction. Made on an event loop, it is bound to it (its blocking methods work from
    other threads while that loop runs; from the loop itself, or on another loop, a call
    raises asyncio.InvalidStateError)."""

    __slots__ = ("_client", "_loop")

    def _connect(self) -> None:
        # Bound to the event loop it is made on, as LangGraph's async stores are, so that its
        # blocking methods work from other threads before its first await (a grpc.aio channel
        # belongs to one loop). Made outside a loop, it binds at its first async call.
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._client: AsyncClient | None = self._options.client() if self._loop else None

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise asyncio.InvalidStateError(
                "AsyncFactnodeStore is bound to the event loop it was made on (or, made "
                "outside one, of its first call); make one store per event loop"
            )
        if self._client is None:
            self._client = self._options.client()
        return await _Batch(self._options, self._client).run(ops)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self._loop
        if loop is None or not loop.is_running():
            raise asyncio.InvalidStateError(
                "AsyncFactnodeStore's blocking methods need the event loop it was made on "
                "running in another thread; use FactnodeStore for blocking code"
            )
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise asyncio.InvalidStateError(
                "AsyncFactnodeStore's blocking methods would block its own event loop: "
                "use the async methods (aget, aput, asearch, ...) here"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), loop).result()

    async def aclose(self) -> None:
        """Closes the connection to the node."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> AsyncFactnodeStore:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class FactnodeStore(_FactnodeStore):
    """A LangGraph store on a factnode for blocking code: AsyncFactnodeStore's mapping and
    options, run on an event loop thread the store owns (its async methods hop onto it)."""

    __slots__ = ("_client", "_loop", "_thread")

    def _connect(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="factnode-store", daemon=True
        )
        self._thread.start()
        try:
            self._client: AsyncClient = self._on_loop(self._open())
        except BaseException:  # an unreadable certificate file: leave no thread behind
            self._stop_loop()
            raise

    async def _open(self) -> AsyncClient:
        return self._options.client()

    def _on_loop(self, coro: Coroutine[Any, Any, R]) -> R:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _run(self, ops: list[Op]) -> list[Result]:
        return await _Batch(self._options, self._client).run(ops)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if not self._thread.is_alive():
            raise RuntimeError("the FactnodeStore is closed")
        return self._on_loop(self._run(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if not self._thread.is_alive():
            raise RuntimeError("the FactnodeStore is closed")
        future = asyncio.run_coroutine_threadsafe(self._run(list(ops)), self._loop)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Closes the connection and stops the store's loop thread."""
        if not self._thread.is_alive():
            return
        self._on_loop(self._client.close())
        self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> FactnodeStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
