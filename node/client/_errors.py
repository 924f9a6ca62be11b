"""Exceptions a client raises: one per status an agent acts on, all under ClientError."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

from factnode.api.v1 import factnode_pb2 as pb


@dataclass(frozen=True, slots=True)
class FieldError:
    """One bad request field, named as the node names it, and why."""

    field: str
    reason: str


class ClientError(Exception):
    """A call the node did not complete; `code` is the gRPC status name. `item` is the index
    of the item that failed an all-or-nothing submit_many (None for any other call)."""

    item: int | None = None

    def __init__(self, message: str, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.code = code


class InvalidFact(ClientError):
    """The node (or the client before sending) refused a field; nothing was written."""

    def __init__(self, message: str, field_errors: tuple[FieldError, ...] = ()) -> None:
        super().__init__(message, "INVALID_ARGUMENT")
        self.field_errors = field_errors


class NotFound(ClientError):
    """The key, evidence or contested entry does not exist on the node."""


class PermissionDenied(ClientError):
    """The token is missing, unknown or lacks the role the call needs."""


class FailedPrecondition(ClientError):
    """The key is not in the state the call needs (e.g. resolving a key not under review)."""


class Unavailable(ClientError):
    """The node could not be reached (after the retries) or the deadline passed."""


class Overloaded(ClientError):
    """The node ran as many calls as it takes and refused this one before doing anything
    (RESOURCE_EXHAUSTED), still so after the retries, or for a call never retried (retract,
    resolve, erase, submit_many): sending it again is safe. `retry_after` is the node's hint,
    in seconds (None if it gave none)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message, "RESOURCE_EXHAUSTED")
        self.retry_after = retry_after


def _trailers(err: grpc.RpcError) -> dict[str, str | bytes]:
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    out: dict[str, str | bytes] = {}
    for item in trailers or ():
        name, value = getattr(item, "key", None), getattr(item, "value", None)
        if name is None:
            name, value = item  # type: ignore[misc]
        if isinstance(name, str) and isinstance(value, str | bytes):
            out[name] = value
    return out


def _details(err: grpc.RpcError) -> list[Any]:
    """The google.rpc.Status details of an error, packed."""
    value = _trailers(err).get("grpc-status-details-bin")
    if not isinstance(value, bytes):
        return []
    return list(status_pb2.Status.FromString(value).details)


def field_errors(err: grpc.RpcError) -> tuple[FieldError, ...]:
    """The google.rpc.BadRequest field violations in an error's status details."""
    out: list[FieldError] = []
    for detail in _details(err):
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            out.extend(FieldError(v.field, v.description) for v in bad.field_violations)
    return tuple(out)


def retry_after(err: grpc.RpcError) -> float | None:
    """The node's hint of when to try again, in seconds: its google.rpc.RetryInfo, else
    gRPC's push-back trailer; None without either (or with a push-back saying never)."""
    for detail in _details(err):
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info.retry_delay.ToMilliseconds() / 1000
    pushback = _trailers(err).get("grpc-retry-pushback-ms")
    if isinstance(pushback, str) and pushback.isdigit():
        return int(pushback) / 1000
    return None


def refused_item(err: grpc.RpcError) -> int | None:
    """The index of the item that failed an all-or-nothing SubmitFacts: the status then
    carries a SubmitFactsResponse holding that item's result alone."""
    for detail in _details(err):
        reply = pb.SubmitFactsResponse()
        if detail.Unpack(reply) and [r.HasField("error") for r in reply.results] == [True]:
            return reply.results[0].index
    return None


def from_rpc_error(err: grpc.RpcError, *, item: int | None = None) -> ClientError:
    """The exception for a failed call, keeping the node's message and field violations;
    `item`, the index of the stream item it failed on, leads the message."""
    exc = _from_rpc_error(err, "" if item is None else f"item {item}: ")
    exc.item = item
    return exc


def _from_rpc_error(err: grpc.RpcError, lead: str) -> ClientError:
    code: grpc.StatusCode = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = lead + ((err.details() if hasattr(err, "details") else None) or str(err))
    name = code.name
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidFact(message, field_errors(err))
    if code is grpc.StatusCode.NOT_FOUND:
        return NotFound(message, name)
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        return PermissionDenied(message, name)
    if code is grpc.StatusCode.FAILED_PRECONDITION:
        return FailedPrecondition(message, name)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return Unavailable(message, name)
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        hint = retry_after(err)
        if hint is not None:
            return Overloaded(message, hint)
    return ClientError(message, name)
