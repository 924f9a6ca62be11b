"""factnode as LangGraph's long-term memory: `FactnodeStore` and `AsyncFactnodeStore`
implement `langgraph.store.base.BaseStore` on `factnode.AsyncClient`.

Every put is evidence and never overwrites; `get` answers with the node's belief, decided
by its rules. The mapping (docs/agents/langgraph.md): the store's factnode namespace, the
LangGraph namespace joined with "." as subject, the key as predicate, the value as
canonical JSON. Needs the `langgraph` extra (`pip install 'factnode[langgraph]'`)."""

try:
    import langgraph.store.base  # noqa: F401  (the optional dependency, checked once here)
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is in the test install
    raise ModuleNotFoundError(
        f"{exc}; factnode.langgraph needs the langgraph extra: pip install 'factnode[langgraph]'",
        name=exc.name,
    ) from None

from ._mapping import PROVENANCE_KEY, ItemError, Provenance
from ._store import AsyncFactnodeStore, FactnodeStore, Rejected

__all__ = [
    "PROVENANCE_KEY", "AsyncFactnodeStore", "FactnodeStore", "ItemError", "Provenance",
    "Rejected",
]  # fmt: skip
