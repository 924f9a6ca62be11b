"""A typed Python client for a factnode: `Client` (blocking) and `AsyncClient` (asyncio).

Plain values in and out (frozen dataclasses from `_types`, datetimes), bearer tokens and
TLS, per-call deadlines, retries on UNAVAILABLE and overload for calls safe to repeat, and exceptions
carrying the node's field violations. Requests are built and responses parsed once, in
`_calls`; the two clients differ only in how they send. May import factnode.core and
factnode.api; never the ledger, store, server or federation."""

from ._async import AsyncClient
from ._errors import (
    ClientError,
    FailedPrecondition,
    FieldError,
    InvalidFact,
    NotFound,
    Overloaded,
    PermissionDenied,
    Unavailable,
)
from ._sync import Client
from ._types import Belief, Decision, Evidence, Explanation, Hit, Page, Submitted, Version

__all__ = [
    "AsyncClient", "Belief", "Client", "ClientError", "Decision", "Evidence", "Explanation",
    "FailedPrecondition", "FieldError", "Hit", "InvalidFact", "NotFound", "Overloaded", "Page",
    "PermissionDenied", "Submitted",
    "Unavailable", "Version",
]  # fmt: skip
