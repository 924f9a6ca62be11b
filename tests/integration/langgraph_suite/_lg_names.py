"""What LangGraph's PostgreSQL store tests import from PostgreSQL and from their own
conftest, answered for factnode: the store classes are factnode's, and a vector store is a
factnode store on the suite's node with that `index`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from _console import OPERATOR, InProcessNode
from embed_test_utils import CharacterEmbeddings  # upstream imports it from here

from factnode.langgraph import AsyncFactnodeStore, FactnodeStore

CALL_TIMEOUT = 10.0  # seconds for one call to the node
VECTOR_TYPES = ["vector", "halfvec"]  # as upstream's conftest parametrizes vector stores
PostgresStore = FactnodeStore
AsyncPostgresStore = AsyncFactnodeStore


class _PostgresOnly:
    """A PostgreSQL-only name: the tests that use it are skipped (see conftest.EXPECTED)."""

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError("PostgreSQL internals have no factnode counterpart")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("PostgreSQL internals have no factnode counterpart")


Connection = AsyncConnection = _ainternal = _PostgresOnly()
_escape_like_literal = _namespace_match_pattern = _PostgresOnly()
DEFAULT_URI = "factnode://the-suite-node"  # never connected to; kept for upstream's text

# The suite's node, set by conftest's session fixture before any test runs.
NODE: list[InProcessNode] = []


def fresh_namespace() -> str:
    """A factnode namespace no other test writes to."""
    return f"lg-suite-{uuid.uuid4().hex[:10]}"


def _options() -> dict[str, Any]:
    return {"namespace": fresh_namespace(), "token": OPERATOR, "timeout": CALL_TIMEOUT}


def _index(
    vector_type: str | None = None,
    distance_type: str = "cosine",
    fake_embeddings: CharacterEmbeddings | None = None,
    text_fields: list[str] | None = None,
    enable_ttl: bool = True,
) -> dict[str, Any] | None:
    """upstream's `_create_vector_store` arguments as the factnode store's `index`: the
    embedder, its dimensions, the fields and the distance type. The vector type (pgvector's
    vector or halfvec) and the TTL flag have no counterpart: the node keeps float32s."""
    if fake_embeddings is None:
        return None
    return {
        "dims": fake_embeddings.dims,
        "embed": fake_embeddings,
        "fields": text_fields,
        "distance_type": distance_type,
    }


@contextmanager
def factnode_vector_store(*args: Any, **kwargs: Any) -> Iterator[FactnodeStore]:
    """upstream's `_create_vector_store`: a store with that `index`."""
    (node,) = NODE
    with FactnodeStore(node.address, index=_index(*args, **kwargs), **_options()) as store:
        yield store


@asynccontextmanager
async def afactnode_vector_store(*args: Any, **kwargs: Any) -> AsyncIterator[AsyncFactnodeStore]:
    """upstream's async `_create_vector_store`, as `factnode_vector_store`."""
    (node,) = NODE
    async with AsyncFactnodeStore(
        node.address, index=_index(*args, **kwargs), **_options()
    ) as store:
        yield store
