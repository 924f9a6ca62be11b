"""factnode: deterministic, explainable beliefs for AI agents, federated over gRPC.

`factnode.Client`, `factnode.AsyncClient` and the client's exceptions are loaded on first
use, so `import factnode.core` does not import gRPC."""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_CLIENT_NAMES = frozenset(
    {"AsyncClient", "Client", "ClientError", "FailedPrecondition", "InvalidFact", "NotFound",
     "Overloaded", "PermissionDenied", "Unavailable"}
)  # fmt: skip

if TYPE_CHECKING:
    from factnode.client import (
        AsyncClient,
        Client,
        ClientError,
        FailedPrecondition,
        InvalidFact,
        NotFound,
        Overloaded,
        PermissionDenied,
        Unavailable,
    )


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from factnode import client

        return getattr(client, name)
    raise AttributeError(f"module 'factnode' has no attribute {name!r}")


__all__ = [
    "AsyncClient", "Client", "ClientError", "FailedPrecondition", "InvalidFact", "NotFound",
    "Overloaded", "PermissionDenied", "Unavailable", "__version__",
]  # fmt: skip
