"""Bearer-token authentication and role checks, made by each client RPC's handler."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from factnode.config import Settings, TokenGrant
from factnode.core import Submission
from factnode.server._errors import Context, PermissionDenied, Unauthenticated

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


class Access:
    """Checks the bearer token of every client RPC against the role it needs.

    The check runs in the RPC's own handler (`_decoding`), before its request is decoded:
    a server interceptor would cost a coroutine and a new handler object on every call."""

    def __init__(self, settings: Settings) -> None:
        self._tokens = settings.tokens
        # Why the data services are held back now (a restored node awaiting its first
        # round, `_restore.RestoreGate.refusal`), or None.
        self.hold: Callable[[], str | None] = lambda: None

    def admit(self, role: str | None, context: Context) -> None:
        """Lets the caller in with its grant (for `current_grant`), or raises
        Unauthenticated or PermissionDenied. `role` is the method's `required_role`."""
        if role is None:
            return
        if not self._tokens:
            _grant.set(LOCAL_OPERATOR)
            return
        token = _bearer(context.invocation_metadata())
        if not token:
            raise Unauthenticated("missing bearer token (metadata 'authorization: Bearer <token>')")
        grant = self._tokens.get(token)
        if grant is None:
            raise Unauthenticated("unknown bearer token")
        if not grant.may(role):
            raise PermissionDenied(f"this RPC needs the {role!r} role")
        _grant.set(grant)
