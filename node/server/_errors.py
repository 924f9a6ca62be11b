"""Exceptions become rich gRPC statuses here, never a bare UNKNOWN."""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from factnode.core import InvalidInput
from factnode.ledger import NotFound, NotUnderReview
from factnode.store import RefusedData, StorageFull

log = logging.getLogger("factnode.server")

R = TypeVar("R")

if TYPE_CHECKING:
    # grpc-stubs makes the aio ServicerContext generic; the runtime class is not subscriptable.
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
else:
    Context = grpc.aio.ServicerContext


class PermissionDenied(Exception):
    """The caller's credentials do not allow this."""


class Unauthenticated(Exception):
    """The caller gave no valid credentials."""


class FailedPrecondition(Exception):
    """The request is well formed, but the node is not in a state to carry it out."""


class ResourceExhausted(Exception):
    """The caller is over a limit (streams held, requests per second); it may retry later."""


class Overloaded(ResourceExhausted):
    """The node runs as many calls as it takes (`max_calls_in_flight`) and as many wait for a
    place as may (`max_calls_waiting`): this one was refused before anything was read or
    done, and may be sent again after `retry_after_ms`."""

    def __init__(self, in_flight: int, most: int, waiting: int, retry_after_ms: int) -> None:
        super().__init__(
            f"the node is overloaded: {in_flight} calls running, {waiting} waiting (at most "
            f"{most} and {waiting}: max_calls_in_flight, max_calls_waiting); nothing was "
            f"done, retry after {retry_after_ms} ms"
        )
        self.retry_after_ms = retry_after_ms


# gRPC's retry push-back trailer: a client's retry policy waits this many milliseconds
# before its next attempt; a negative value tells it not to retry (gRFC A6).
PUSHBACK = "grpc-retry-pushback-ms"


class _Status(
    collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status
):
    """A status with trailers of our own beside grpc-status-details-bin."""


# A status travels in trailers, which clients cap (grpc: 16 KiB); echoed input is cut short.
# In UTF-8 bytes: the message goes out percent-encoded (up to three bytes for each), and
# the details base64-encoded, so a bound in characters let 1,024 emoji overflow the cap.
MAX_MESSAGE_BYTES = 1024
MAX_DESCRIPTION_BYTES = 200
MAX_VIOLATIONS = 20
MAX_VIOLATION_BYTES = 4096  # all field violations together


def _size(text: str) -> int:
    return len(text.encode("utf-8", "backslashreplace"))


def _short(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, marked with an ellipsis where it was cut."""
    raw = text.encode("utf-8", "backslashreplace")
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode("utf-8", "ignore") + "…"


def _status(
    code: int, message: str, details: Sequence[Message] = (), pushback_ms: int | None = None
) -> grpc.Status:
    proto = status_pb2.Status(code=code, message=_short(message, MAX_MESSAGE_BYTES))
    for d in details:
        packed = any_pb2.Any()
        packed.Pack(d)
        proto.details.append(packed)
    status = rpc_status.to_status(proto)
    if pushback_ms is None:
        return status
    trailers = (*status.trailing_metadata, (PUSHBACK, str(pushback_ms)))
    return _Status(status.code, status.details, trailers)


def status_for(exc: BaseException, extra: Sequence[Message] = ()) -> grpc.Status:
    """The gRPC status an exception maps to; `extra` joins its details."""
    return _status_of(exc, list(extra))


def _status_of(exc: BaseException, extra: list[Message]) -> grpc.Status:
    if isinstance(exc, InvalidInput):
        bad = error_details_pb2.BadRequest()
        budget = MAX_VIOLATION_BYTES
        for v in exc.violations[:MAX_VIOLATIONS]:
            field = _short(v.field, MAX_DESCRIPTION_BYTES)
            description = _short(v.reason, MAX_DESCRIPTION_BYTES)
            budget -= _size(field) + _size(description)
            if budget < 0 and bad.field_violations:
                break  # the first ones are named; the message lists on as far as it fits
            bad.field_violations.add(field=field, description=description)
        return _status(code_pb2.INVALID_ARGUMENT, f"invalid request: {exc}", [bad, *extra])
    if isinstance(exc, RefusedData):
        # Its item alone: a batch it was in was committed without it (`Ledger.ingest_each`).
        return _status(
            code_pb2.INVALID_ARGUMENT,
            "the database refused a value this request carries; nothing of it was written",
            extra,
        )
    if isinstance(exc, NotFound):
        return _status(code_pb2.NOT_FOUND, str(exc), extra)
    if isinstance(exc, PermissionDenied):
        return _status(code_pb2.PERMISSION_DENIED, str(exc), extra)
    if isinstance(exc, Unauthenticated):
        return _status(code_pb2.UNAUTHENTICATED, str(exc), extra)
    if isinstance(exc, (FailedPrecondition, NotUnderReview)):
        return _status(code_pb2.FAILED_PRECONDITION, str(exc), extra)
    if isinstance(exc, Overloaded):
        info = error_details_pb2.RetryInfo()
        info.retry_delay.FromMilliseconds(exc.retry_after_ms)
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(exc), [info, *extra], exc.retry_after_ms)
    if isinstance(exc, (ResourceExhausted, StorageFull)):
        # Over a limit that waiting a moment does not lift: the clients' retry policy, which
        # retries RESOURCE_EXHAUSTED for Overloaded, is told not to.
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(exc), extra, -1)
    # The type only: a message or traceback could quote a fact's value or source.
    log.error("internal error: %s", type(exc).__name__)
    return _status(code_pb2.INTERNAL, "internal error; the node's log has the details", extra)


async def abort(context: Context, exc: BaseException, extra: Sequence[Message] = ()) -> NoReturn:
    """Ends the RPC with the rich status `exc` maps to; the one caller of abort_with_status."""
    if isinstance(exc, grpc.aio.AbortError):
        raise exc
    # grpc-stubs' aio ServicerContext lacks abort_with_status, which grpcio's aio context has.
    await context.abort_with_status(status_for(exc, extra))  # type: ignore[attr-defined]
    raise AssertionError("abort_with_status returned")  # pragma: no cover


def unary(
    method: Callable[..., Awaitable[R]],
) -> Callable[..., Awaitable[R]]:
    """Maps a unary (or client-streaming) RPC's exceptions to statuses."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Context) -> R:
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort(context, exc)

    return wrapper


def streaming(
    method: Callable[..., AsyncIterator[R]],
) -> Callable[..., AsyncIterator[R]]:
    """Maps a server-streaming RPC's exceptions to statuses."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Context) -> AsyncIterator[R]:
        try:
            async for item in method(self, request, context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort(context, exc)

    return wrapper
