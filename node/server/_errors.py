"""Exceptions become rich gRPC statuses here, never a bare UNKNOWN."""

from __future__ import annotations

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
from factnode.ledger import NotFound

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


class ResourceExhausted(Exception):
    """The caller is over a limit (streams held, requests per second); it may retry later."""


# A status travels in trailers, which clients cap (grpc: 16 KiB); echoed input is cut short.
MAX_MESSAGE_CHARS = 1024
MAX_DESCRIPTION_CHARS = 200
MAX_VIOLATIONS = 20


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _status(code: int, message: str, details: Sequence[Message] = ()) -> grpc.Status:
    proto = status_pb2.Status(code=code, message=_short(message, MAX_MESSAGE_CHARS))
    for d in details:
        packed = any_pb2.Any()
        packed.Pack(d)
        proto.details.append(packed)
    return rpc_status.to_status(proto)


def status_for(exc: BaseException, extra: Sequence[Message] = ()) -> grpc.Status:
    """The gRPC status an exception maps to; `extra` joins its details."""
    return _status_of(exc, list(extra))


def _status_of(exc: BaseException, extra: list[Message]) -> grpc.Status:
    if isinstance(exc, InvalidInput):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=_short(v.field, MAX_DESCRIPTION_CHARS),
                    description=_short(v.reason, MAX_DESCRIPTION_CHARS),
                )
                for v in exc.violations[:MAX_VIOLATIONS]
            ]
        )
        return _status(code_pb2.INVALID_ARGUMENT, f"invalid request: {exc}", [bad, *extra])
    if isinstance(exc, NotFound):
        return _status(code_pb2.NOT_FOUND, str(exc), extra)
    if isinstance(exc, PermissionDenied):
        return _status(code_pb2.PERMISSION_DENIED, str(exc), extra)
    if isinstance(exc, Unauthenticated):
        return _status(code_pb2.UNAUTHENTICATED, str(exc), extra)
    if isinstance(exc, ResourceExhausted):
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(exc), extra)
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
