"""Bearer-token authentication and role checks, in one server interceptor."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from factnode.config import Settings, TokenGrant
from factnode.core import Submission
from factnode.server._errors import Context, PermissionDenied, Unauthenticated, abort

PACKAGE = "factnode.v1"
OPEN_SERVICES = frozenset(
    {
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)
OPERATOR_SERVICES = frozenset({f"{PACKAGE}.ReviewService", f"{PACKAGE}.AdminService"})
WRITE_METHODS = frozenset({"SubmitFact", "SubmitFacts", "Retract"})
FEDERATION_SERVICE = f"{PACKAGE}.FederationService"

# Without configured tokens the node is loopback-only and every local caller is an operator.
LOCAL_OPERATOR = TokenGrant(frozenset({"operator"}), ("*",), "local")

if TYPE_CHECKING:
    # grpc-stubs makes these generic; the runtime classes are not subscriptable.
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
    _Interceptor: TypeAlias = grpc.aio.ServerInterceptor[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    _Interceptor = grpc.aio.ServerInterceptor

_grant: contextvars.ContextVar[TokenGrant] = contextvars.ContextVar("factnode_grant")


def current_grant() -> TokenGrant:
    """The grant of the caller of the RPC being served."""
    return _grant.get(LOCAL_OPERATOR)


def caller_identity() -> str:
    """Who the caller is, as recorded for an operator who gives no name: the token's name."""
    return current_grant().name or "unnamed token"


def require_write(namespace: str) -> None:
    """Writers may write only in the namespaces their token names."""
    grant = current_grant()
    if not grant.may_write(namespace):
        raise PermissionDenied(f"this token may not write to namespace {namespace!r}")


def require_write_submission(sub: Submission) -> None:
    """A submission writes its own key's namespace and, through `contradicts`, the other
    key's: the token must allow both."""
    require_write(sub.namespace)
    if sub.contradicts is not None:
        require_write(sub.contradicts.namespace)


def required_role(method: str) -> str | None:
    """The role an RPC needs; None for open services and peer-only ones."""
    service, _, name = method.lstrip("/").partition("/")
    if service in OPEN_SERVICES or service == FEDERATION_SERVICE:
        return None
    if service in OPERATOR_SERVICES:
        return "operator"
    if name in WRITE_METHODS:
        return "writer"
    return "reader"


def _bearer(metadata: Any) -> str | None:
    for k, v in metadata or ():
        if k == "authorization":
            value = v.decode() if isinstance(v, bytes) else v
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return None


def _wrap(handler: Handler, grant: TokenGrant | None, error: Exception | None) -> Handler:
    """The same handler, run with `grant` in context, or refusing with `error`."""

    def around(inner: Callable[..., Any], streaming_response: bool) -> Callable[..., Any]:
        if streaming_response:

            async def gen(request: Any, context: Context) -> Any:
                if error is not None:
                    await abort(context, error)
                assert grant is not None
                _grant.set(grant)
                async for item in inner(request, context):
                    yield item

            return gen

        async def call(request: Any, context: Context) -> Any:
            if error is not None:
                await abort(context, error)
            assert grant is not None
            _grant.set(grant)
            return await inner(request, context)

        return call

    kinds = (
        ("unary_unary", grpc.unary_unary_rpc_method_handler, False),
        ("unary_stream", grpc.unary_stream_rpc_method_handler, True),
        ("stream_unary", grpc.stream_unary_rpc_method_handler, False),
        ("stream_stream", grpc.stream_stream_rpc_method_handler, True),
    )
    for attr, make, streams in kinds:
        inner = getattr(handler, attr)
        if inner is not None:
            return make(
                around(inner, streams),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
    return handler


class AuthInterceptor(_Interceptor):
    """Checks the bearer token of every client RPC against the role it needs."""

    def __init__(self, settings: Settings) -> None:
        self._tokens = settings.tokens

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        if handler is None:
            return handler
        method = details.method
        token = _bearer(details.invocation_metadata)
        if method.lstrip("/").startswith(FEDERATION_SERVICE + "/"):
            if token is not None:
                return _wrap(
                    handler,
                    None,
                    PermissionDenied("FederationService is for peer nodes, not client tokens"),
                )
            return handler
        role = required_role(method)
        if role is None:
            return handler
        if not self._tokens:
            return _wrap(handler, LOCAL_OPERATOR, None)
        if not token:
            return _wrap(
                handler,
                None,
                Unauthenticated("missing bearer token (metadata 'authorization: Bearer <token>')"),
            )
        grant = self._tokens.get(token)
        if grant is None:
            return _wrap(handler, None, Unauthenticated("unknown bearer token"))
        if not grant.may(role):
            return _wrap(handler, None, PermissionDenied(f"this RPC needs the {role!r} role"))
        return _wrap(handler, grant, None)
