"""Who a console request acts as: browser sessions, the login's check against the node, and
the request checks (Host names, same-origin POSTs) that keep other sites out.

The console holds no tokens of its own for its users: a user signs in with a token the node
knows (an operator's, or one that may read), the console checks it by calling the node with
it, and every page and action of that session is then a call with that token, so the node's
own roles decide. Only a loopback console in front of a node without tokens (where every
local caller is the node's operator anyway) serves without a sign-in."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from factnode.client import AsyncClient, PermissionDenied
from factnode.config import is_loopback

COOKIE = "factnode_console_session"
SESSION_SECONDS = 8 * 3600.0  # a sign-in lasts a working day, then the token is asked again
MAX_SESSIONS = 10_000  # the oldest sign-in is dropped beyond this many
ROLE_TTL_SECONDS = 10.0
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


class Roles:
    """Whether a token may act as an operator, learnt from the node.

    The node has no "who am I" call; an operator-only call (GetStatus) that fails with
    PERMISSION_DENIED means a reader (or writer) token, and the console shows no action
    buttons. The answer is kept for ROLE_TTL_SECONDS, so a token the node demotes loses its
    buttons soon (the node refuses its actions at once anyway)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._known: tuple[float, bool] | None = None
        # The node's id, from that same GetStatus: None until an operator call succeeds.
        self.node_id: str | None = None

    async def operator(self, node: AsyncClient) -> bool:
        now = self._clock()
        if self._known is not None and now - self._known[0] < ROLE_TTL_SECONDS:
            return self._known[1]
        try:
            self.node_id = (await node.status()).node_id
            allowed = True
        except PermissionDenied as err:
            if err.code == "UNAUTHENTICATED":
                raise  # not a role: the node does not know the token (the caller signs in)
            allowed = False
        self._known = (now, allowed)
        return allowed

    @property
    def known_operator(self) -> bool | None:
        """The last answer, without asking (None: not asked yet)."""
        return None if self._known is None else self._known[1]


@dataclass(eq=False)
class User:
    """Who a request acts as: a signed-in token, or (token None) the local caller of a
    loopback console in front of a node without tokens."""

    node: AsyncClient
    token: str | None
    roles: Roles = field(default_factory=Roles)

    @property
    def signed_in(self) -> bool:
        return self.token is not None

    @property
    def role(self) -> str:
        """'operator' or 'reader' as last learnt ('reader' until the node says otherwise)."""
        return "operator" if self.roles.known_operator else "reader"


@dataclass(eq=False)
class Session:
    user: User
    expires: float  # on the console's monotonic clock


class Sessions:
    """Signed-in browsers, kept in the console's memory: a random id in the cookie, the
    token here.

    Chosen over a signed cookie (itsdangerous, Starlette's SessionMiddleware): a signed
    cookie would carry the user's bearer token to and from the browser on every request
    (signed, not encrypted) and could not be revoked before it expires, while an id held
    here reveals nothing, dies at sign-out, and needs no secret to configure. Restarting
    the console signs everyone out, which a console can afford."""

    def __init__(
        self, lifetime: float = SESSION_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.lifetime = lifetime
        self._clock = clock
        self._open: OrderedDict[str, Session] = OrderedDict()

    def open(self, user: User) -> str:
        """A new session for `user` (a fresh id every sign-in: none is ever reused)."""
        self._drop_expired()
        sid = secrets.token_urlsafe(32)
        self._open[sid] = Session(user, self._clock() + self.lifetime)
        while len(self._open) > MAX_SESSIONS:
            self._open.popitem(last=False)
        return sid

    def user(self, sid: str | None) -> User | None:
        """The user of a live session; None for no, an unknown or an expired id."""
        if not sid:
            return None
        session = self._open.get(sid)
        if session is None:
            return None
        if self._clock() >= session.expires:
            del self._open[sid]
            return None
        return session.user

    def close(self, sid: str | None) -> None:
        if sid:
            self._open.pop(sid, None)

    def _drop_expired(self) -> None:
        now = self._clock()
        for sid in [s for s, session in self._open.items() if now >= session.expires]:
            del self._open[sid]


def host_names(listen_host: str, configured: Iterable[str]) -> tuple[str, ...]:
    """The Host names the console answers to: its --listen host (unless a wildcard, which no
    browser sends) and the configured names, nothing else: no loopback name is implied,
    so `Host: 127.0.0.1` does not pass a console listening elsewhere. An IPv6 address is
    named in brackets, as Host headers carry it."""
    listen = listen_host.strip("[]")
    own = [] if listen in WILDCARDS else [f"[{listen}]" if ":" in listen else listen]
    names = [n.strip() for n in configured if n.strip()]
    return tuple(dict.fromkeys([*own, *names]))


def sign_in_optional(listen: str) -> bool:
    """Whether requests without a session may act as the local caller: only on a loopback
    console, and the node then still decides (a node with tokens refuses a call without one,
    and the console asks for a sign-in)."""
    return is_loopback(listen)


def same_origin(headers: Mapping[str, str]) -> bool:
    """A POST from a page of this console: its Origin (or, lacking one, its Referer) names
    the host and port the request was sent to. A POST carrying neither is refused: every
    browser sends one on a form or htmx POST (the pages set Referrer-Policy same-origin), so
    only a client that is not a page of this console leaves both out."""
    claimed = headers.get("origin") or headers.get("referer")
    if not claimed or claimed == "null":
        return False
    parts = urlsplit(claimed)
    return parts.netloc == headers.get("host", "") and parts.scheme in ("http", "https")


def local_path(target: str) -> str:
    """Where to go after signing in: a path on this console, else the review queue (never
    another site: `//evil.example` and `https://...` are not paths)."""
    parts = urlsplit(target)
    if not target.startswith("/") or target.startswith("//") or parts.scheme or parts.netloc:
        return "/queue"
    if "\\" in target or any(ord(ch) < 0x20 for ch in target):
        return "/queue"
    return target


def token_problem(token: str, longest: int) -> str:
    """Why a typed token cannot be sent as a bearer token ('' when it can): the node checks
    the rest."""
    if not token:
        return "is required"
    if len(token) > longest:
        return f"is longer than {longest} characters"
    if not all("\x21" <= ch <= "\x7e" for ch in token):
        return "may hold only visible ASCII characters (no spaces or controls)"
    return ""
