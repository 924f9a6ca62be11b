"""A LangGraph batch is all or nothing on both backends: every op is checked before anything
is written, the puts are one transaction, and a bad op fails the call naming its index
(issue 41, finding 5)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _console import OPERATOR, InProcessNode
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp

from factnode.client import Client, InvalidFact
from factnode.langgraph import AsyncFactnodeStore, FactnodeStore, ItemError, Rejected

CALL_TIMEOUT = 10.0  # seconds for one call to the node
NS = ("users", "ana")


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def node(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    module_postgres_url: str | None,
) -> Iterator[InProcessNode]:
    """A node served in-process on a loopback port, on a SQLite file or a PostgreSQL schema."""
    if request.param == "postgres" and module_postgres_url is None:
        pytest.skip("FACTNODE_TEST_POSTGRES_URL is not set: PostgreSQL variant skipped")
    url = module_postgres_url if request.param == "postgres" else None
    n = InProcessNode(tmp_path_factory.mktemp("langgraph-batches"), database_url=url)
    yield n
    n.close()


@pytest.fixture
def store(node: InProcessNode) -> Iterator[FactnodeStore]:
    """A blocking store in a factnode namespace of its own."""
    root = f"lgb-{uuid.uuid4().hex[:10]}"
    with FactnodeStore(node.address, namespace=root, token=OPERATOR, timeout=CALL_TIMEOUT) as s:
        yield s


def _written(node: InProcessNode, namespace: str) -> tuple[int, int]:
    """(beliefs, decisions) the node holds in a factnode namespace."""
    with Client(node.address, token=OPERATOR, timeout=CALL_TIMEOUT) as client:
        beliefs = client.beliefs(namespace, page_size=1000).items
        decisions = client.decisions(namespace=namespace, page_size=1000).items
    return len(beliefs), len(decisions)


BAD_SECOND_OPS: list[Any] = [
    pytest.param(PutOp(NS, "b\x00", {"v": 2}), "key", id="nul-in-key"),
    pytest.param(
        PutOp(NS, "b", {"v": 2, "_factnode": {"source": "s\x00"}}), "source", id="nul-in-source"
    ),
    pytest.param(
        PutOp(NS, "b", {"v": 2, "_factnode": {"valid_from": "9999-12-31T23:59:59-14:00"}}),
        "valid_from",
        id="valid-from-past-9999",
    ),
    pytest.param(PutOp(NS, "b\x00", None), "key", id="nul-in-deleted-key"),
]


@pytest.mark.parametrize(("bad", "field"), BAD_SECOND_OPS)
def test_a_bad_op_fails_the_batch_naming_its_index_and_writes_nothing(
    node: InProcessNode, store: FactnodeStore, bad: PutOp, field: str
) -> None:
    """A batch whose second op the store refuses names op 1 and its field; 'a' is not stored."""
    with pytest.raises(ItemError) as err:
        store.batch([PutOp(NS, "a", {"v": 1}), bad])
    assert err.value.index == 1
    assert field in err.value.field
    assert "op 1" in str(err.value)
    assert _written(node, store.namespace) == (0, 0)
    assert store.get(NS, "a") is None


def test_a_bad_namespace_label_fails_the_batch_naming_its_index(
    node: InProcessNode, store: FactnodeStore
) -> None:
    """LangGraph's own namespace refusal (a NUL in a label) names op 1; nothing is written."""
    with pytest.raises(InvalidNamespaceError, match="op 1"):
        store.batch([PutOp(NS, "a", {"v": 1}), PutOp(("us\x00er",), "b", {"v": 2})])
    assert _written(node, store.namespace) == (0, 0)


def test_an_unknown_anchor_in_a_later_op_writes_nothing(
    node: InProcessNode, store: FactnodeStore
) -> None:
    """The node refuses op 2's anchor; the whole batch fails naming op 2 and nothing is written."""
    ops = [
        PutOp(NS, "a", {"v": 1}),
        GetOp(NS, "a"),
        PutOp(NS, "b", {"v": 2, "_factnode": {"attribution": "hearsay"}}),
    ]
    with pytest.raises(InvalidFact) as err:
        store.batch(ops)
    assert err.value.item == 2
    assert "op 2" in str(err.value)
    assert [e.field for e in err.value.field_errors] == ["anchor"]
    assert _written(node, store.namespace) == (0, 0)


def test_a_long_batch_is_one_transaction(node: InProcessNode, store: FactnodeStore) -> None:
    """300 good puts (more than SubmitFacts' 256 per commit) and a bad last one: none stored."""
    ops = [PutOp(NS, f"k{i}", {"v": i}) for i in range(300)]
    ops.append(PutOp(NS, "z", {"v": 0, "_factnode": {"attribution": "hearsay"}}))
    with pytest.raises(InvalidFact) as err:
        store.batch(ops)
    assert err.value.item == 300
    assert _written(node, store.namespace) == (0, 0)
    store.batch(ops[:300])
    assert _written(node, store.namespace)[0] == 300


def test_a_rejected_put_is_decided_with_the_rest_and_named(
    node: InProcessNode, store: FactnodeStore
) -> None:
    """REJECTED is a recorded decision, not a refusal: the batch is written and the call
    raises Rejected naming the op."""
    ops = [PutOp(NS, "a", {"v": 1}), PutOp(NS, "b", {"v": 2, "_factnode": {"confidence": 0.1}})]
    with pytest.raises(Rejected) as err:
        store.batch(ops)
    assert err.value.rule == "min_confidence"
    assert err.value.index == 1
    assert store.get(NS, "a") is not None and store.get(NS, "b") is None
    assert _written(node, store.namespace) == (1, 2)


async def test_abatch_is_all_or_nothing_too(node: InProcessNode) -> None:
    """The async store's abatch refuses the same batch the same way, nothing written."""
    root = f"lgb-{uuid.uuid4().hex[:10]}"
    async with AsyncFactnodeStore(
        node.address, namespace=root, token=OPERATOR, timeout=CALL_TIMEOUT
    ) as store:
        with pytest.raises(ItemError) as err:
            await store.abatch([PutOp(NS, "a", {"v": 1}), PutOp(NS, "b\x00", {"v": 2})])
        assert err.value.index == 1
        with pytest.raises(InvalidFact) as refused:
            await store.abatch(
                [PutOp(NS, "a", {"v": 1}), PutOp(NS, "b", {"_factnode": {"attribution": "x"}})]
            )
        assert refused.value.item == 1
        assert await store.aget(NS, "a") is None
    assert _written(node, root) == (0, 0)


def test_all_or_nothing_submit_many_names_the_refused_item(node: InProcessNode) -> None:
    """The client's all-or-nothing stream: a refused item fails the call with its index and
    nothing is written; without the flag the valid items are committed, as before."""
    root = f"aon-{uuid.uuid4().hex[:10]}"
    facts = [
        {"key": (root, "s", "p1"), "object": "x", "attribution": "user_stated", "source": "t"},
        {"key": (root, "s", "p2"), "object": "y", "attribution": "hearsay", "source": "t"},
    ]
    with Client(node.address, token=OPERATOR, timeout=CALL_TIMEOUT) as client:
        with pytest.raises(InvalidFact) as err:
            client.submit_many(facts, all_or_nothing=True)
        assert err.value.item == 1
        assert "item 1" in str(err.value)
        assert _written(node, root) == (0, 0)
        outcomes = client.submit_many(facts)
    assert [o.decision is not None for o in outcomes] == [True, False]
    assert _written(node, root) == (1, 1)
