"""Requests arrive as bytes and are decoded and checked here, in one place for every RPC,
after the caller's token is checked (`_auth.Access`).

gRPC would otherwise decode before any node code runs and answer a message that does not
parse (invalid UTF-8, truncated or random bytes) with UNKNOWN. Here it is INVALID_ARGUMENT
naming the method and what protobuf says is wrong; a decoded unary request is then checked
against the API's documented rules (`_requests.check`) before the servicer reads or writes
anything. Items of a client stream are decoded here and checked one by one by the servicer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import FieldViolation, InvalidInput
from factnode.server._admission import CallGate
from factnode.server._auth import Access, required_role
from factnode.server._errors import (
    Context,
    FailedPrecondition,
    Overloaded,
    PermissionDenied,
    Unauthenticated,
    abort,
)
from factnode.server._requests import check

# What a handler refuses before the servicer runs.
_REFUSED = (InvalidInput, PermissionDenied, Unauthenticated, FailedPrecondition, Overloaded)
# The services a restored node holds back until its first round (`_restore`); admin answers.
_HELD_SERVICES = frozenset({"FactService", "ReviewService"})


class Undecodable(InvalidInput):
    """A request (or stream item) whose bytes are not a valid protobuf message."""

    def __init__(self, method: str, error: DecodeError, index: int | None = None) -> None:
        where = "request" if index is None else f"request item {index}"
        self.method, self.index = method, index
        super().__init__([FieldViolation(where, f"{method} {where} does not decode: {error}")])


def decode(method: str, cls: type[Message], data: bytes, index: int | None = None) -> Any:
    """The message `data` encodes; Undecodable when it is not one."""
    try:
        return cls.FromString(data)
    except DecodeError as exc:
        raise Undecodable(method, exc, index) from None


def _handler(
    method: str,
    impl: Callable[..., Any],
    cls: type[Message],
    desc: Any,
    access: Access | None,
    gate: CallGate | None,
) -> Any:
    """The one handler layer of an RPC: the caller's access (before anything is decoded),
    a place among the calls the node runs at once (`gate`; a refused call did nothing), then
    the request's bytes decoded and checked, then the servicer's method. Streams out
    (WatchBeliefs) have their own quota and take no place."""
    response = getattr(pb, desc.output_type.name)
    role = required_role(f"/{desc.containing_service.full_name}/{desc.name}")
    held_back = desc.containing_service.name in _HELD_SERVICES

    def place() -> contextlib.AbstractAsyncContextManager[None]:
        return gate.hold() if gate is not None else contextlib.nullcontext()

    def admit(context: Context) -> None:
        if access is not None:
            access.admit(role, context)
            held = access.hold() if held_back else None
            if held:
                raise FailedPrecondition(held)

    if desc.client_streaming:

        async def stream_in(raw: AsyncIterator[bytes], context: Context) -> Any:
            async def items() -> AsyncIterator[Any]:
                index = 0
                async for data in raw:
                    yield decode(method, cls, data, index)
                    index += 1

            async with contextlib.AsyncExitStack() as held:
                try:
                    admit(context)
                    await held.enter_async_context(place())
                except _REFUSED as exc:
                    await abort(context, exc)
                return await impl(items(), context)

        return grpc.stream_unary_rpc_method_handler(
            stream_in, response_serializer=response.SerializeToString
        )

    def parsed(data: bytes) -> Any:
        request = decode(method, cls, data)
        check(request)
        return request

    if desc.server_streaming:

        async def stream_out(data: bytes, context: Context) -> AsyncIterator[Any]:
            try:
                admit(context)
                request = parsed(data)
            except _REFUSED as exc:
                await abort(context, exc)
            async for item in impl(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(
            stream_out, response_serializer=response.SerializeToString
        )

    async def unary(data: bytes, context: Context) -> Any:
        async with contextlib.AsyncExitStack() as held:
            try:
                admit(context)
                await held.enter_async_context(place())
                request = parsed(data)
            except _REFUSED as exc:
                await abort(context, exc)
            return await impl(request, context)

    return grpc.unary_unary_rpc_method_handler(
        unary, response_serializer=response.SerializeToString
    )


def add_service(
    server: grpc.aio.Server,
    servicer: object,
    service: str,
    access: Access | None,
    gate: CallGate | None = None,
) -> None:
    """Registers `servicer` for the API's `service` with bytes-in handlers decoded here.
    With `access` (the client port) each RPC first checks its caller's token; None is for
    the federation port, whose callers mutual TLS has already checked. With `gate` (the
    client port) each call but a stream out first takes a place among those running."""
    desc = pb.DESCRIPTOR.services_by_name[service]
    handlers = {
        m.name: _handler(
            f"{service}.{m.name}",
            getattr(servicer, m.name),
            getattr(pb, m.input_type.name),
            m,
            access,
            gate,
        )
        for m in desc.methods
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(desc.full_name, handlers),)
    )
