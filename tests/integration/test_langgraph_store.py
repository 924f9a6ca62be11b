"""factnode.langgraph against a real node served in-process on a loopback port: LangGraph's
store operations agree with InMemoryStore where the semantics are meant to (one writer, one
anchor), and differ where the node's rules decide (a weaker anchor does not replace a
stronger one)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from _console import OPERATOR, READER, InProcessNode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from factnode.client import Client, InvalidFact, PermissionDenied
from factnode.core import MICROS_PER_DAY
from factnode.core.decay import lifetime
from factnode.langgraph import AsyncFactnodeStore, FactnodeStore, ItemError, Rejected
from factnode.testing import FakeClock

CALL_TIMEOUT = 10.0  # seconds for one call to the node


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node served in-process on a loopback port chosen by the kernel."""
    n = InProcessNode(tmp_path_factory.mktemp("langgraph-node"))
    yield n
    n.close()


def _root() -> str:
    return f"lg-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def store(node: InProcessNode) -> Iterator[FactnodeStore]:
    """A blocking store in a factnode namespace of its own, closed at teardown."""
    with FactnodeStore(node.address, namespace=_root(), token=OPERATOR, timeout=CALL_TIMEOUT) as s:
        yield s


# --- the differential test -------------------------------------------------------------

NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("d",), ("d", "a")]
PREFIXES = [(), ("a",), ("a", "b"), ("d",), ("x",)]
KEYS = ["k1", "k2", "k.3"]
values = st.fixed_dictionaries(
    {"n": st.integers(0, 3), "s": st.text("xyé", max_size=3)},
    optional={"tags": st.lists(st.sampled_from(["p", "q"]), max_size=2)},
)
filters = st.one_of(
    st.none(),
    st.builds(lambda n: {"n": n}, st.integers(0, 3)),
    st.builds(lambda n: {"n": {"$gte": n}}, st.integers(0, 3)),
    st.builds(lambda s: {"s": {"$ne": s}}, st.text("xy", max_size=1)),
)
names = st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(KEYS))
batch_ops = st.one_of(
    st.builds(lambda nk, v: PutOp(*nk, v), names, values | st.none()),
    st.builds(lambda nk: GetOp(*nk), names),
    st.builds(lambda p, f: SearchOp(p, f, 100), st.sampled_from(PREFIXES), filters),
)
operations = st.one_of(
    st.tuples(st.just("batch"), st.lists(batch_ops, min_size=1, max_size=5)),
    st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), values),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("get"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("search"), st.sampled_from(PREFIXES), filters),
    st.tuples(st.just("page"), st.sampled_from(PREFIXES), st.integers(1, 3), st.integers(0, 3)),
    st.tuples(
        st.just("namespaces"),
        st.sampled_from([None, ("a",), ("*", "b")]),
        st.sampled_from([None, ("a",), ("b", "*")]),
        st.sampled_from([None, 1, 2]),
    ),
)


def _rows(items: list[Any]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """Search results as (namespace, key, value), in factnode's order: namespace, then key."""
    return sorted((tuple(i.namespace), i.key, i.value) for i in items)


def _apply(s: Any, op: tuple[Any, ...]) -> Any:
    kind, *args = op
    if kind == "put":
        return s.put(args[0], args[1], args[2])
    if kind == "delete":
        return s.delete(args[0], args[1])
    if kind == "get":
        item = s.get(args[0], args[1])
        return None if item is None else (tuple(item.namespace), item.key, item.value)
    if kind == "search":
        return _rows(s.search(args[0], filter=args[1], limit=100))
    if kind == "batch":
        return [
            _rows(r) if isinstance(r, list) else None if r is None else
            (tuple(r.namespace), r.key, r.value)
            for r in s.batch(args[0])
        ]  # fmt: skip
    if kind == "namespaces":
        if isinstance(s, InMemoryStore):
            # InMemoryStore lists a namespace once any op named it, even with no item left
            # (a delete, even a get); a store lists those holding items, as PostgresStore does.
            for empty in [ns for ns, items in s._data.items() if not items]:
                del s._data[empty]
        return s.list_namespaces(prefix=args[0], suffix=args[1], max_depth=args[2])
    raise AssertionError(kind)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(operations, min_size=1, max_size=20))
def test_one_writer_agrees_with_in_memory_store(
    node: InProcessNode, ops: list[tuple[Any, ...]]
) -> None:
    """With one writer and one anchor, every get, search, list_namespaces and mixed batch
    answer equals InMemoryStore's (search compared in the factnode store's order, namespace
    then key; namespaces those holding items), and each limit/offset page is that page."""
    reference = InMemoryStore()
    with FactnodeStore(node.address, namespace=_root(), token=OPERATOR) as ours:
        for op in ops:
            if op[0] == "page":
                _, prefix, limit, offset = op
                everything = _rows(reference.search(prefix, limit=100))
                page = _rows(ours.search(prefix, limit=limit, offset=offset))
                assert page == everything[offset : offset + limit], op
                continue
            assert _apply(ours, op) == _apply(reference, op), op


# --- where the stores deliberately differ ----------------------------------------------


def test_a_weaker_anchor_does_not_replace_a_stronger_one(store: FactnodeStore) -> None:
    """What the user stated survives a later agent_inferred put and delete (InMemoryStore
    would answer the later value, then nothing): the belief is decided by trust anchor."""
    ns = ("memories", "ana")
    stated = {"city": "Lisbon", "_factnode": {"anchor": "user_stated", "source": "user:ana"}}
    store.put(ns, "home", stated)
    store.put(ns, "home", {"city": "Porto"})  # the store's default anchor, agent_inferred
    got = store.get(ns, "home")
    assert got is not None and got.value == {"city": "Lisbon"}
    store.delete(ns, "home")
    got = store.get(ns, "home")
    assert got is not None and got.value == {"city": "Lisbon"}

    reference = InMemoryStore()
    reference.put(ns, "home", {"city": "Lisbon"})
    reference.put(ns, "home", {"city": "Porto"})
    assert reference.get(ns, "home").value == {"city": "Porto"}  # type: ignore[union-attr]


def test_an_older_event_time_does_not_replace_a_newer_one(store: FactnodeStore) -> None:
    """A later put saying when its value became true, earlier than the belief's, is history:
    the belief keeps the value with the later event time (recency), unlike InMemoryStore."""
    store.put(("m",), "home", {"city": "Lisbon", "_factnode": {"valid_from": "2025-06-01"}})
    store.put(("m",), "home", {"city": "Porto", "_factnode": {"valid_from": "2024-01-01"}})
    assert store.get(("m",), "home").value == {"city": "Lisbon"}  # type: ignore[union-attr]


def test_a_rejected_delete_raises_naming_the_rule(node: InProcessNode) -> None:
    """A delete is a retraction with the store's provenance: below the confidence floor it
    is REJECTED, says so, and the item stays."""
    with FactnodeStore(node.address, namespace=_root(), token=OPERATOR, confidence=0.1) as s:
        s.put(("m",), "k", {"v": 1, "_factnode": {"confidence": 0.9}})
        with pytest.raises(Rejected) as err:
            s.delete(("m",), "k")
        assert err.value.rule == "min_confidence"
        assert s.get(("m",), "k").value == {"v": 1}  # type: ignore[union-attr]


def test_put_keeps_every_version(node: InProcessNode, store: FactnodeStore) -> None:
    """Each put is evidence: the key's history holds every value put, the belief the last."""
    store.put(("a",), "k", {"v": 1})
    store.put(("a",), "k", {"v": 2})
    with Client(node.address, token=OPERATOR) as client:
        history = client.history((store.namespace, "a", "k"))
    assert sorted(v.object for v in history) == ['{"v":1}', '{"v":2}']
    assert store.get(("a",), "k").value == {"v": 2}  # type: ignore[union-attr]


def test_the_mapping_is_readable_from_factnode(node: InProcessNode, store: FactnodeStore) -> None:
    """An item is the fact (store namespace, labels joined with '.', key) = canonical JSON,
    with the store's provenance; the reserved provenance key is not part of the value."""
    at = datetime(2025, 3, 1, tzinfo=UTC)
    value = {
        "b": [1, "é"],
        "a": None,
        "_factnode": {"source": "chat:7", "valid_from": "2025-03-01"},
    }
    store.put(("memories", "ana"), "prefs.ui", value)
    with Client(node.address, token=OPERATOR) as client:
        belief = client.belief((store.namespace, "memories.ana", "prefs.ui"))
    assert belief.object == '{"a":null,"b":[1,"é"]}'
    assert belief.evidence is not None
    assert (belief.evidence.anchor, belief.evidence.source) == ("agent_inferred", "chat:7")
    assert belief.evidence.valid_from == at


def test_get_stamps_come_from_the_evidence(store: FactnodeStore) -> None:
    """created_at is when the key was first written, updated_at when the believed value was
    last put; both are the node's recording times."""
    store.put(("t",), "k", {"v": 1})
    first = store.get(("t",), "k")
    store.put(("t",), "k", {"v": 2})
    store.put(("t",), "k", {"v": 2})
    second = store.get(("t",), "k")
    assert first is not None and second is not None
    assert first.created_at == first.updated_at
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    [found] = store.search(("t",))
    assert (found.created_at, found.updated_at) == (second.created_at, second.updated_at)


def test_within_a_batch_reads_see_the_store_before_its_puts(store: FactnodeStore) -> None:
    """As in InMemoryStore: a get in a batch answers from before the batch's puts, and of two
    puts to one item the last counts."""
    reference = InMemoryStore()
    ops = [
        PutOp(("b",), "k", {"v": 1}), GetOp(("b",), "k"), PutOp(("b",), "k", {"v": 2}),
        SearchOp(("b",)),
    ]  # fmt: skip
    ours, theirs = store.batch(ops), reference.batch(ops)
    assert ours == theirs == [None, None, None, []]
    assert store.get(("b",), "k").value == reference.get(("b",), "k").value == {"v": 2}  # type: ignore[union-attr]


# --- refusals: a clear error naming the field, nothing written -------------------------


def _nothing_written(node: InProcessNode, store: FactnodeStore) -> bool:
    with Client(node.address, token=OPERATOR) as client:
        return client.beliefs(store.namespace).items == ()


@pytest.mark.parametrize(
    ("namespace", "key", "value", "field"),
    [
        (("a",), "k", {"x": "y" * 5000}, "value"),
        (("a",), "k", {"x": float("nan")}, "value.x"),
        (("a",), "k", {"x": object()}, "value.x"),
        (("a",), " ", {"x": 1}, "key"),
        (("a",), "k" * 300, {"x": 1}, "key"),
        (("a",), "speaks", {"x": 1}, "key"),
        (("l" * 200, "m" * 100), "k", {"x": 1}, "namespace"),
        (("a",), "k", {"_factnode": {"worth": 2}}, "value._factnode.worth"),
        (("a",), "k", {"_factnode": {"anchors": "x"}}, "value._factnode.anchors"),
        (("a",), "k", {"_factnode": {"valid_from": "soon"}}, "value._factnode.valid_from"),
    ],
)
def test_bad_items_are_refused_by_field(
    node: InProcessNode, store: FactnodeStore, namespace: Any, key: str, value: Any, field: str
) -> None:
    """A put the store cannot map is refused before sending, naming the bad field."""
    with pytest.raises(ItemError) as err:
        store.batch([PutOp(("ok",), "first", {"v": 1}), PutOp(namespace, key, value)])
    assert err.value.field == field
    assert _nothing_written(node, store)


def test_a_label_with_a_period_is_langgraphs_invalid_namespace(store: FactnodeStore) -> None:
    """A namespace label holding '.' (the join's separator) is refused as LangGraph does."""
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"v": 1})])


def test_the_node_refuses_an_unknown_anchor_by_field(
    node: InProcessNode, store: FactnodeStore
) -> None:
    """An anchor the node does not know is the node's INVALID_ARGUMENT naming `anchor`."""
    with pytest.raises(InvalidFact) as err:
        store.put(("a",), "k", {"v": 1, "_factnode": {"anchor": "hearsay"}})
    assert [e.field for e in err.value.field_errors] == ["anchor"]
    assert _nothing_written(node, store)


def test_a_rejected_put_raises_naming_the_rule(store: FactnodeStore) -> None:
    """A put below the node's confidence floor is REJECTED and says so; nothing is believed."""
    with pytest.raises(Rejected) as err:
        store.put(("a",), "k", {"v": 1, "_factnode": {"confidence": 0.1}})
    assert err.value.rule == "min_confidence"
    assert store.get(("a",), "k") is None


def test_ttl_is_refused_clearly_and_a_query_searches_words(
    node: InProcessNode, store: FactnodeStore
) -> None:
    """ttl is refused (evidence decays by its anchor instead); a query without an `index`
    is answered by the node's word index (SearchBeliefs), and only the believed value of
    each item is found."""
    for refused in (
        lambda: store.put(("a",), "k", {"v": 1}, ttl=5),
        lambda: asyncio.run(store.aput(("a",), "k", {"v": 1}, ttl=5)),
        lambda: store.batch([PutOp(("a",), "k", {"v": 1}, ttl=5.0)]),
    ):
        with pytest.raises(NotImplementedError) as err:
            refused()
        # It says what sets a memory's life instead, and where that is documented.
        for words in ("ttl is not supported", "`anchor` and `confidence`", "put the same value",
                      "How long a memory lives", "docs/agents/langgraph.md"):  # fmt: skip
            assert words in str(err.value)
    assert store.get(("a",), "k") is None
    store.put(("a",), "drink", {"text": "Ana likes coffee"})
    store.put(("a",), "drink", {"text": "Ana likes green tea"})
    store.put(("b",), "food", {"text": "Ravi likes rice"})
    [hit] = store.search(("a",), query="tea")
    assert (hit.key, hit.value) == ("drink", {"text": "Ana likes green tea"})
    assert hit.score is not None and hit.score > 0
    # The superseded value is not found; its words find nothing else in ("a",).
    assert store.search(("a",), query="coffee") == []
    # Any word may match; more matching words rank higher.
    assert [i.key for i in store.search((), query="likes rice")] == ["food", "drink"]
    # The stamps are the item's own, as `get` gives them.
    item = store.get(("a",), "drink")
    assert item is not None
    assert (hit.created_at, hit.updated_at) == (item.created_at, item.updated_at)
    with pytest.warns(DeprecationWarning, match="unindexed_query has no effect"):
        FactnodeStore(node.address, namespace=store.namespace, token=OPERATOR,
                      unindexed_query="ignore").close()  # fmt: skip


def test_items_are_forgotten_by_decay_not_ttl(tmp_path: Path) -> None:
    """In place of a ttl, decay: an item put with the store's defaults (agent_inferred,
    confidence 0.5) expires 30 x log2(0.5 / 0.4) days after its last put, as
    docs/agents/langgraph.md's table says. Reading does not extend it; putting the same
    value again does (new evidence, recorded now; with an explicit valid_from, a
    restatement); a user_stated item never expires; an expired item is still in history
    and in views of earlier times, and a put brings it back."""
    clock = FakeClock()
    node = InProcessNode(tmp_path, clock=clock)
    try:
        with (
            FactnodeStore(node.address, namespace="lg", token=OPERATOR) as s,
            Client(node.address, token=OPERATOR) as client,
        ):
            _decays_from_the_last_put(s, client, clock)
    finally:
        node.close()


def _decays_from_the_last_put(s: FactnodeStore, client: Client, clock: FakeClock) -> None:
    start = clock.now()
    life = lifetime(500, 400, 30 * MICROS_PER_DAY)  # the table's 9.66 days
    assert round(life / MICROS_PER_DAY, 2) == 9.66
    s.put(("m",), "guess", {"v": 1})
    s.put(("m",), "kept", {"v": 2})
    s.put(("m",), "told", {"v": 3, "_factnode": {"anchor": "user_stated"}})
    old = {"v": 4, "_factnode": {"valid_from": "2020-01-01T00:00:00Z", "confidence": 0.9}}
    s.put(("m",), "old", old)

    def end(item: str) -> datetime | None:
        [version] = client.history(("lg", "m", item))
        return version.intervals[-1].end

    assert end("guess") == _at(start + life) and end("told") is None
    assert end("old") == _at(start + lifetime(900, 400, 30 * MICROS_PER_DAY))

    clock.advance(5 * MICROS_PER_DAY)
    assert s.get(("m",), "guess") is not None and s.search(("m",), limit=10)
    assert end("guess") == _at(start + life)  # reading extends nothing
    s.put(("m",), "kept", {"v": 2})  # the node's time as valid_from: new evidence, now
    s.put(("m",), "old", old)  # the same evidence: a restatement
    logged = client.decisions(namespace="lg").items
    kept = [d for d in logged if d.key.predicate == "kept"]
    assert [d.outcome for d in kept] == ["ACCEPTED", "CORROBORATED"]
    assert kept[0].evidence_id != kept[1].evidence_id
    restated = [d for d in logged if d.key.predicate == "old"]
    assert [d.outcome for d in restated] == ["ACCEPTED", "DUPLICATE"]
    assert restated[1].detail.startswith("restated: ")
    assert end("kept") == _at(clock.now() + life)
    assert end("old") == _at(clock.now() + lifetime(900, 400, 30 * MICROS_PER_DAY))

    clock.current = start + life - 1
    assert s.get(("m",), "guess") is not None
    clock.current = start + life
    assert s.get(("m",), "guess") is None
    assert [i.key for i in s.search(("m",))] == ["kept", "old", "told"]
    [version] = client.history(("lg", "m", "guess"))
    assert (version.status, version.decayed_at) == ("DECAYED", _at(start + life))
    earlier = client.belief(("lg", "m", "guess"), as_of=_at(start + life - 1))
    assert earlier.object == '{"v":1}'
    s.put(("m",), "guess", {"v": 1})  # a put brings an expired item back
    item = s.get(("m",), "guess")
    assert item is not None and item.value == {"v": 1}

    clock.advance(30 * MICROS_PER_DAY)
    assert [i.key for i in s.search(("m",))] == ["old", "told"]
    done = client.decay()  # logs DECAYED decisions; no answer changes
    assert done.tombstoned == 0 and done.decayed >= 1
    assert [i.key for i in s.search(("m",))] == ["old", "told"]
    assert s.get(("m",), "told") is not None


def _at(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1_000_000, UTC)


def test_a_reader_token_cannot_put(node: InProcessNode) -> None:
    """The store carries the client's token: a reader's put is PERMISSION_DENIED."""
    with (
        FactnodeStore(node.address, namespace=_root(), token=READER) as s,
        pytest.raises(PermissionDenied),
    ):
        s.put(("a",), "k", {"v": 1})


def test_foreign_facts_are_not_items(node: InProcessNode, store: FactnodeStore) -> None:
    """A fact in the store's namespace whose value is not a JSON object is not an item: get
    and search skip it. list_namespaces reads the node's subject index, so the namespace it
    names is listed (docs/agents/langgraph.md says so)."""
    with Client(node.address, token=OPERATOR) as client:
        client.submit((store.namespace, "a", "city"), "Porto", "user_stated", source="u")
        assert client.subjects(store.namespace).items == ("a",)
    assert store.get(("a",), "city") is None
    assert store.search(()) == [] and store.search(("a",), query="Porto") == []
    assert store.list_namespaces() == [("a",)]


# --- the async store ----------------------------------------------------------------------


async def test_async_store_puts_gets_and_serves_blocking_threads(node: InProcessNode) -> None:
    """AsyncFactnodeStore answers on the caller's loop; its blocking methods work from
    another thread and refuse on the loop itself."""
    async with AsyncFactnodeStore(node.address, namespace=_root(), token=OPERATOR) as s:
        await s.aput(("m", "ana"), "k", {"v": 1})
        item = await s.aget(("m", "ana"), "k")
        assert isinstance(item, Item) and item.value == {"v": 1}
        from_thread = await asyncio.wait_for(
            asyncio.to_thread(s.get, ("m", "ana"), "k"), CALL_TIMEOUT
        )
        assert from_thread == item
        with pytest.raises(asyncio.InvalidStateError, match="would block its own event loop"):
            s.get(("m", "ana"), "k")
        assert await s.alist_namespaces() == [("m", "ana")]
        assert [i.key for i in await s.asearch(("m",))] == ["k"]


async def test_async_store_binds_to_the_loop_it_is_made_on(node: InProcessNode) -> None:
    """Made on a loop, AsyncFactnodeStore serves blocking calls from other threads before
    its first await, and a call from another event loop raises InvalidStateError."""
    async with AsyncFactnodeStore(node.address, namespace=_root(), token=OPERATOR) as s:
        await asyncio.wait_for(asyncio.to_thread(s.put, ("m",), "k", {"v": 1}), CALL_TIMEOUT)
        item = await asyncio.wait_for(asyncio.to_thread(s.get, ("m",), "k"), CALL_TIMEOUT)
        assert item is not None and item.value == {"v": 1}

        def on_another_loop() -> None:
            with pytest.raises(asyncio.InvalidStateError, match="bound to the event loop"):
                asyncio.run(s.aget(("m",), "k"))

        await asyncio.wait_for(asyncio.to_thread(on_another_loop), CALL_TIMEOUT)


async def test_sync_store_async_methods(store: FactnodeStore) -> None:
    """FactnodeStore's async methods run on its own loop thread and await the answer."""
    await store.aput(("m",), "k", {"v": 3})
    item = await store.aget(("m",), "k")
    assert item is not None and item.value == {"v": 3}


def test_a_closed_store_says_so(node: InProcessNode) -> None:
    """After close, the blocking store's loop thread is gone and a call says the store is
    closed instead of hanging."""
    s = FactnodeStore(node.address, namespace=_root(), token=OPERATOR)
    s.close()
    s.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        s.get(("a",), "k")


def test_an_unreadable_certificate_fails_the_constructor(tmp_path: Path) -> None:
    """A ca_cert that cannot be read raises at construction and leaves no loop thread."""
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(OSError):
        FactnodeStore("127.0.0.1:1", ca_cert=tmp_path / "missing.pem")
    assert not [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]


async def test_recall_lists_a_langgraph_namespace(node: InProcessNode) -> None:
    """A LangGraph namespace is a subject: the client's recall lists its items' facts."""
    async with AsyncFactnodeStore(node.address, namespace=_root(), token=OPERATOR) as s:
        await s.aput(("memories", "ana"), "tea", {"content": "likes tea"})
        await s.aput(("memories", "ana"), "home", {"content": "Porto"})
        await s.aput(("memories", "bo"), "home", {"content": "Oslo"})
        with Client(node.address, token=READER) as client:
            found = await asyncio.to_thread(client.recall, s.namespace, "memories.ana")
    assert sorted((b.key.predicate, b.object) for b in found) == [
        ("home", '{"content":"Porto"}'), ("tea", '{"content":"likes tea"}'),
    ]  # fmt: skip


# --- LangMem's memory tools -------------------------------------------------------------


async def test_langmem_manage_and_search_tools(node: InProcessNode) -> None:
    """LangMem's manage_memory creates, updates and deletes through the default store and
    its search_memory finds what is believed by the query's words, never the old value."""
    langmem = pytest.importorskip("langmem")
    ns = ("memories", "ana")
    with FactnodeStore(node.address, namespace=_root(), token=OPERATOR) as store:
        manage = langmem.create_manage_memory_tool(namespace=ns, store=store)
        search = langmem.create_search_memory_tool(
            namespace=ns, store=store, response_format="content_and_artifact"
        )
        created = await manage.ainvoke({"content": "Ana prefers tea", "action": "create"})
        memory_id = created.removeprefix("created memory ")
        uuid.UUID(memory_id)  # the tool made the key
        [item] = store.search(ns)
        assert (item.key, item.value) == (memory_id, {"content": "Ana prefers tea"})

        await manage.ainvoke(
            {"content": "Ana prefers green tea", "action": "update", "id": memory_id}
        )
        call = {"type": "tool_call", "name": search.name, "id": "call-1", "args": {"query": "tea"}}
        found = (await search.ainvoke(call)).artifact
        assert [i.value["content"] for i in found] == ["Ana prefers green tea"]
        # Sync too; a query for a word only the old value had finds nothing.
        call["args"] = {"query": "which green drink does Ana prefer?"}
        assert [i.value["content"] for i in search.invoke(call).artifact] == [
            "Ana prefers green tea"
        ]

        await manage.ainvoke({"action": "delete", "id": memory_id})
        assert store.search(ns) == []
        call["args"] = {"query": "tea"}
        assert search.invoke(call).artifact == []  # deleted: a retraction ended it
        assert manage.invoke({"content": "sync too", "action": "create"}).startswith("created")


# --- the LangGraph page's example (docs/agents/langgraph.md) ---------------------------------------------------------------


@pytest.mark.parametrize("marker", ["langgraph-example", "langgraph-search-example"])
def test_readme_langgraph_example_runs(node: InProcessNode, marker: str) -> None:
    """The LangGraph page's examples run as printed and print what their comments say."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "agents" / "langgraph.md").read_text()
    section = readme[readme.index(f"<!-- {marker} -->") :]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    address = 'FactnodeStore("127.0.0.1:7420"'
    assert address in code
    code = code.replace(address, f"FactnodeStore({node.address!r}, token={OPERATOR!r}")
    printed: list[str] = []
    expected = [
        line.split("# ", 1)[1] for line in code.splitlines() if line.strip().startswith("print(")
    ]
    run = {"__name__": "readme", "print": lambda *a: printed.append(" ".join(map(str, a)))}
    exec(compile(code, "docs/agents/langgraph.md", "exec"), run)
    assert printed == expected and expected
