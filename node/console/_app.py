"""The console's web application: Starlette routes that call the node through the public
gRPC API (factnode.client.AsyncClient) and render Jinja2 templates. No database access:
every page and action is a call with the signed-in user's own token (`_auth`), so the
node's tokens and roles apply to everything the console shows or does."""

from __future__ import annotations

import asyncio
import contextvars
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from factnode import tokens
from factnode.client import (
    AsyncClient,
    ClientError,
    Decision,
    FieldError,
    Hit,
    InvalidFact,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from factnode.client._types import ErasureCoverage, Tally
from factnode.core import Key

from . import _auth as auth
from . import _forms as forms
from ._pictures import DEFAULT_THRESHOLD, percent, tally_svg, timeline_svg
from ._words import decision_detail, version_values

HERE = Path(__file__).parent
QUEUE_PAGE = 25
DECISIONS_PAGE = 50
SEARCH_PAGE = 20  # hits per page (the node answers at most 100)
ERASURES_PAGE = 50
SCAN_PAGE = 200  # decisions asked of the node per call while filtering
MAX_SCANS = 10  # node pages read to fill one filtered page of the log
FLASHES = 256  # results kept for the page a plain form POST redirects to
POLL_SECONDS = 5.0  # an open log page reads the log at least this often
TICK_SECONDS = 1.0  # how soon an open event stream notices the console shutting down
WATCH_BACKOFF_SECONDS = 0.5
MAX_WATCH_BACKOFF_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """Where the node is and how to reach it, where the console listens, which Host names it
    answers to, and how long a sign-in lasts.

    `token` is the console's own: it only follows WatchBeliefs, to wake open log pages at
    once; it never reads or acts for a browser (each user signs in with their own token).
    `listen` decides whether a browser without a session may act as the local caller: only
    on loopback (see `_auth.sign_in_optional`)."""

    address: str
    token: str | None = None
    ca_cert: str | None = None
    timeout: float = 10.0
    allowed_hosts: tuple[str, ...] = ("127.0.0.1",)
    listen: str = "127.0.0.1:7480"
    session_seconds: float = auth.SESSION_SECONDS


class LogWatch:
    """One WatchBeliefs stream per console: every change it reports wakes the open event
    streams, which then read the new decisions themselves.

    WatchBeliefs' resume tokens are opaque and count belief changes, not decisions, so
    the console cannot start it "from now": it starts from the beginning of the log once,
    when the console starts (fast-forwarding costs one pass over the node's belief
    changes), then follows live, resuming after the last change seen if the stream breaks."""

    def __init__(self) -> None:
        self.changes = 0
        self._moved = asyncio.Condition()
        self._resume = ""

    async def follow(self, node: AsyncClient) -> None:
        backoff = WATCH_BACKOFF_SECONDS
        while True:
            try:
                async for change in node.watch(resume_token=self._resume):
                    self._resume = change.resume_token
                    backoff = WATCH_BACKOFF_SECONDS
                    async with self._moved:
                        self.changes += 1
                        self._moved.notify_all()
            except ClientError:
                pass  # the node is down or refuses: pages say so; try again later
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_WATCH_BACKOFF_SECONDS)

    async def wait_past(self, seen: int, timeout: float) -> int:
        """The change count once it passes `seen`; TimeoutError after `timeout` seconds."""
        async with self._moved:
            await asyncio.wait_for(self._moved.wait_for(lambda: self.changes > seen), timeout)
            return self.changes


class Flashes:
    """The result of an action, kept briefly so the page a plain POST redirects to shows it."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, dict[str, str]] = OrderedDict()

    def put(self, item: dict[str, str]) -> str:
        token = secrets.token_urlsafe(12)
        self._items[token] = item
        while len(self._items) > FLASHES:
            self._items.popitem(last=False)
        return token

    def get(self, token: str) -> dict[str, str] | None:
        return self._items.get(token)


def error_words(err: ClientError) -> dict[str, Any]:
    """A node's refusal in words: the status name, its message and each bad field."""
    fields = [(e.field, e.reason) for e in getattr(err, "field_errors", ())]
    return {"code": err.code, "message": str(err), "fields": fields}


HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "FAILED_PRECONDITION": 409,  # e.g. resolving a key that the rules settled meanwhile
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def http_status(err: ClientError) -> int:
    return HTTP_STATUS.get(err.code, 502)


def key_query(key: Key, **extra: str) -> str:
    return urlencode(
        {"namespace": key.namespace, "subject": key.subject, "predicate": key.predicate, **extra}
    )


CROSS_SITE = "refused: this form was not posted from a page of this console (its Origin or Referer is missing or names another site)"
MAX_TOKEN_CHARS = 1024

# The user the request being served acts as (set by Console.signed_in for each request).
_user: contextvars.ContextVar[auth.User] = contextvars.ContextVar("console_user")


class Console:
    """The routes, with the node's channel, the templates and the sessions they share."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.globals["threshold"] = percent(DEFAULT_THRESHOLD)
        self.sessions = auth.Sessions(settings.session_seconds)
        self.templates.env.globals["decision_detail"] = decision_detail
        self.flashes = Flashes()
        self.watch = LogWatch()
        # Whether the server is shutting down (set by whoever serves the app): event
        # streams end then, so a shutdown need not wait for the browsers to leave.
        self.stopping: Callable[[], bool] = lambda: False
        self._channel: AsyncClient | None = None
        self._local: auth.User | None = None  # the local caller, when sign-in is optional

    @property
    def channel(self) -> AsyncClient:
        """The connection to the node, sending the console's own token (WatchBeliefs only)."""
        assert self._channel is not None, "the console's lifespan has not started"
        return self._channel

    @property
    def node(self) -> AsyncClient:
        """The node as the request's user: their token on the console's channel."""
        return _user.get().node

    @property
    def roles(self) -> auth.Roles:
        return _user.get().roles

    # -- who a request acts as -------------------------------------------------

    def user_of(self, request: Request) -> auth.User | None:
        """The session's user; else the local caller where sign-in is optional; else None."""
        user = self.sessions.user(request.cookies.get(auth.COOKIE))
        if user is not None:
            return user
        if auth.sign_in_optional(self.settings.listen):
            if self._local is None:
                self._local = auth.User(self.channel.with_token(None), None)
            return self._local
        return None

    def to_sign_in(self, request: Request, why: str = "") -> Response:
        """A redirect to the sign-in page, coming back here afterwards; an event stream or a
        POST gets it too (nothing was done), a stream as a plain 401."""
        if request.url.path == "/decisions/live":
            return PlainTextResponse("UNAUTHENTICATED: sign in first", 401)
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.method != "GET":
            back = "/queue"
        query = {"next": back, **({"why": why} if why else {})}
        response = RedirectResponse("/login?" + urlencode(query), 303)
        if request.cookies.get(auth.COOKIE):
            response.delete_cookie(auth.COOKIE, path="/")
        return response

    def signed_in(
        self, route: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """`route` run as the request's user; without one, a redirect to the sign-in page.

        A token the node stops knowing (removed from its configuration), or a node that
        wants a token from the local caller, ends in the sign-in page too."""

        async def run(request: Request) -> Response:
            if request.method == "POST" and not auth.same_origin(request.headers):
                return PlainTextResponse(CROSS_SITE, 403)
            user = self.user_of(request)
            if user is None:
                return self.to_sign_in(request)
            request.state.user = user
            bound = _user.set(user)
            try:
                response = await route(request)
            except PermissionDenied as err:
                if err.code != "UNAUTHENTICATED":
                    raise
                self.sessions.close(request.cookies.get(auth.COOKIE))
                why = "expired" if user.signed_in else "needed"
                return self.to_sign_in(request, why)
            finally:
                _user.reset(bound)
            # Pages hold what the user may read: not kept by the browser after sign-out.
            response.headers.setdefault("cache-control", "no-store")
            return response

        return run

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        s = self.settings
        # The channel belongs to the server's event loop, so it opens here, not at import.
        self._channel = AsyncClient(
            s.address, token=s.token, ca_cert=s.ca_cert, timeout=s.timeout, retries=0
        )
        follower = asyncio.create_task(self.watch.follow(self._channel))
        try:
            yield
        finally:
            follower.cancel()
            with suppress(asyncio.CancelledError):
                await follower
            await self._channel.close()
            self._channel = None
            self._local = None

    # -- rendering -------------------------------------------------------------

    def page(
        self, request: Request, name: str, context: dict[str, Any], status: int = 200
    ) -> Response:
        context = {
            "address": self.settings.address,
            "path": request.url.path,
            "user": getattr(request.state, "user", None),
            **context,
        }
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def failure(self, request: Request, err: ClientError, title: str) -> Response:
        """A page saying what the node refused, or that it cannot be reached."""
        return self.page(
            request,
            "error.html",
            {
                "title": title,
                "error": error_words(err),
                "unreachable": isinstance(err, Unavailable),
            },
            http_status(err),
        )

    async def guarded(
        self, request: Request, title: str, render: Callable[[], Awaitable[Response]]
    ) -> Response:
        try:
            return await render()
        except ClientError as err:
            if err.code == "UNAUTHENTICATED":
                raise  # the node wants a (valid) token: `signed_in` asks for a sign-in
            return self.failure(request, err, title)

    # -- pages -----------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/queue", 303)

    async def queue(self, request: Request) -> Response:
        async def render() -> Response:
            q = request.query_params
            namespace, state = forms.text(q, "namespace"), forms.text(q, "state").upper()
            if state and state not in forms.QUEUE_STATES:
                forms.refuse([FieldError("state", "must be CONTESTED or AMBIGUOUS")])
            size = forms.page_size(q, QUEUE_PAGE)
            page = await self.node.review(
                namespace, page_size=size, page_token=forms.text(q, "page_token")
            )
            keys = [k for k in page.items if not state or k.state == state]
            threshold = next((k.threshold for k in page.items if k.threshold), DEFAULT_THRESHOLD)
            next_url = (
                "/queue?" + urlencode({"namespace": namespace, "state": state,
                                       "page_size": size, "page_token": page.next_page_token})
                if page.next_page_token else ""
            )  # fmt: skip
            return self.page(
                request,
                "queue.html",
                {
                    "title": "Review queue",
                    "keys": keys,
                    "namespace": namespace,
                    "state": state,
                    "states": forms.QUEUE_STATES,
                    "next_url": next_url,
                    "key_query": key_query,
                    "operator": await self.roles.operator(self.node),
                    "threshold": percent(threshold),
                },
            )

        return await self.guarded(request, "Review queue", render)

    async def key_page(
        self,
        request: Request,
        key: Key,
        *,
        flash: dict[str, str] | None = None,
        error: dict[str, Any] | None = None,
        typed: Mapping[str, str] | None = None,
        status: int = 200,
    ) -> Response:
        """Everything about one key: served belief, rule chain, versions with evidence, the
        timeline and the tally, what each voter believes, the key's decisions, and (for
        operators) the actions. A refused action's `error` (naming its `action`) is shown in
        that action's form, with what was `typed` there kept."""
        node = self.node
        operator = await self.roles.operator(node)
        # The calls go out together; a key may lack any of the first three (no belief after
        # a retraction, not in the queue), and the contested view is for operators only.
        try:
            async with asyncio.TaskGroup() as calls:
                explaining = calls.create_task(absent_if_not_found(node.explain(key)))
                telling = calls.create_task(absent_if_not_found(node.history(key)))
                queued = calls.create_task(
                    absent_if_not_found(node.contested(key) if operator else nothing())
                )
                logging = calls.create_task(node.decisions(key=key, page_size=DECISIONS_PAGE))
        except ExceptionGroup as failed:  # the first refusal says why; the others are cancelled
            raise failed.exceptions[0] from None
        explanation, history = explaining.result(), telling.result()
        contested, decisions = queued.result(), logging.result()
        now = datetime.now(UTC)
        belief = explanation.belief if explanation else None
        tallies = belief.tallies if belief else ()
        threshold = (belief.threshold if belief else None) or DEFAULT_THRESHOLD
        if contested is not None and contested.versions:
            tallies = contested.versions
            threshold = contested.threshold or threshold
        found = bool(explanation or history)
        kept: dict[str, dict[str, str]] = {name: {} for name in ACTIONS}
        # The forms key.html shows: a refusal goes in its own form, or at the top without one.
        shown = {
            "resolve": operator and contested is not None and bool(history),
            "retract": operator and belief is not None,
            "erase": operator and found,
        }
        if error is not None and not shown.get(error.get("action", "")):
            error = {**error, "action": ""}
        elif error is not None and typed is not None:
            kept[error["action"]] = dict(typed)
        return self.page(
            request,
            "key.html",
            {
                "title": f"{key.namespace} / {key.subject} / {key.predicate}",
                "key": key,
                "found": found,
                "belief": belief,
                "explanation": explanation,
                "versions": history or (),
                "contested": contested,
                "decisions": decisions.items,
                "values": version_values([history or ()]),
                "more_decisions": bool(decisions.next_page_token),
                "timeline": timeline_svg(history or (), now) if history else "",
                "tally": tally_svg(tallies, threshold) if tallies else "",
                "threshold": percent(threshold),
                "operator": operator,
                "flash": flash,
                "error": error,
                "kept": kept,
                "voters": voter_beliefs(tallies, self.roles.node_id),
                "node_id": self.roles.node_id,
                "key_query": key_query(key),
                "erase_key": forms.erase_phrase(key, "key"),
                "erase_subject": forms.erase_phrase(key, "subject"),
            },
            status if found or error or flash else 404,
        )

    async def key(self, request: Request) -> Response:
        async def render() -> Response:
            q = request.query_params
            flash = self.flashes.get(forms.text(q, "done")) if q.get("done") else None
            return await self.key_page(request, forms.key_of(q), flash=flash)

        return await self.guarded(request, "Key", render)

    # -- actions ---------------------------------------------------------------

    async def act(
        self,
        request: Request,
        action: Callable[[Key, Mapping[str, str]], Awaitable[dict[str, str]]],
    ) -> Response:
        """Runs an action from a form. With htmx the refreshed key page comes back at once;
        a plain form POST is redirected (303) to the key page, which shows the result."""
        form = await request.form()
        params = {k: v for k, v in form.items() if isinstance(v, str)}
        name = request.url.path.rsplit("/", 1)[-1]
        htmx = request.headers.get("hx-request") == "true"
        try:
            key = forms.key_of(params)
        except InvalidFact as err:
            return self.failure(request, err, "Action")
        try:
            result = await action(key, params)
        except ClientError as err:
            if isinstance(err, Unavailable):
                return self.failure(request, err, "Action")
            if err.code == "UNAUTHENTICATED":
                raise
            # Shown in the form that was sent, with what was typed there kept.
            refused = {**error_words(err), "action": name}
            if err.code == "PERMISSION_DENIED":
                refused["message"] = (
                    f"the node refused to {name} with the token you signed in with: {err} "
                    "(resolving, retracting and erasing need an operator's token)"
                )
            # htmx swaps only 2xx answers; a plain POST gets the status that says what failed.
            status = 200 if htmx else http_status(err)
            return await self.guarded(
                request,
                "Action",
                lambda: self.key_page(request, key, error=refused, typed=params, status=status),
            )
        if htmx:
            page = await self.guarded(
                request, "Action", lambda: self.key_page(request, key, flash=result)
            )
            # The result is at the top of the page, the form that was sent near its end:
            # the swap scrolls to the result, where the user then looks.
            if page.status_code == 200:
                page.headers["HX-Reswap"] = f"{KEY_PAGE_SWAP} show:#result:top"
            return page
        done = self.flashes.put(result)
        return RedirectResponse(f"/key?{key_query(key, done=done)}#result", 303)

    async def resolve(self, request: Request) -> Response:
        async def run(key: Key, p: Mapping[str, str]) -> dict[str, str]:
            version = forms.text(p, "version_id")
            if not version:
                forms.refuse([FieldError("version_id", "choose a version")])
            done = await self.node.resolve(key, forms.text(p, "reason"), version_id=version)
            words = decision_words("Resolved", done.decision, done.note)
            return {**words, "scope": "on this node only; the other voters keep their own beliefs"}

        return await self.act(request, run)

    async def retract(self, request: Request) -> Response:
        async def run(key: Key, p: Mapping[str, str]) -> dict[str, str]:
            value = forms.text(p, "object") or None
            decision, belief = await self.node.retract(key, forms.text(p, "reason"), object=value)
            after = (
                f"now believes {belief.object!r} (rule {belief.rule})"
                if belief.object
                else "no value is believed now"
            )
            return decision_words("Retracted", decision, after)

        return await self.act(request, run)

    async def erase(self, request: Request) -> Response:
        async def run(key: Key, p: Mapping[str, str]) -> dict[str, str]:
            scope = forms.check_erase(key, p)
            reason = forms.text(p, "reason")
            if scope == "subject":
                done = await self.node.erase(reason, subject=(key.namespace, key.subject))
            else:
                done = await self.node.erase(reason, key=key)
            return {
                "title": "Erased",
                "outcome": "ERASED",
                "rule": "",
                "detail": f"erased {done.evidence_erased} evidence across "
                f"{done.keys_affected} key(s); tombstone {done.erasure_id}",
            }

        return await self.act(request, run)

    # -- decision log ----------------------------------------------------------

    async def _scan(
        self, f: forms.DecisionFilter, page_token: str, want: int
    ) -> tuple[list[Decision], str, int]:
        """Node pages read until `want` decisions pass the filter (or MAX_SCANS pages):
        the matches, the token after the last page read, the last seq read (0: none)."""
        found: list[Decision] = []
        last_seq = 0
        token = page_token
        for _ in range(MAX_SCANS):
            page = await self.node.decisions(
                key=f.key, namespace=f.namespace, page_size=SCAN_PAGE if
                (f.outcome or f.rule or f.since or f.until) else want, page_token=token,
            )  # fmt: skip
            found += f.select(page.items)
            if page.items:
                last_seq = page.items[-1].seq
            token = page.next_page_token
            if not token or len(found) >= want:
                break
        return found, token, last_seq

    async def _values(
        self, decisions: Sequence[Decision], node: AsyncClient | None = None
    ) -> dict[str, str]:
        """The value of each version the keys of `decisions` hold (their histories, read
        together, as `node`'s user, by default the request's): the log shows values, and
        holds only ids."""
        reader = self.node if node is None else node
        keys = list(dict.fromkeys(d.key for d in decisions))
        histories = await asyncio.gather(*(absent_if_not_found(reader.history(k)) for k in keys))
        return version_values(h or () for h in histories)

    async def decisions(self, request: Request) -> Response:
        async def render() -> Response:
            q = request.query_params
            f = forms.DecisionFilter.of(q)
            size = forms.page_size(q, DECISIONS_PAGE)
            start = forms.text(q, "page_token")
            found, token, last_seq = await self._scan(f, start, size)
            if not last_seq and start:
                last_seq = tokens.decode_seq_position(start)
            filters = {k: forms.text(q, k) for k in
                       ("namespace", "subject", "predicate", "outcome", "rule", "since", "until")}  # fmt: skip
            live = (
                "/decisions/live?" + urlencode({**filters, "after": last_seq}) if not token else ""
            )
            next_url = (
                "/decisions?" + urlencode({**filters, "page_size": size, "page_token": token})
                if token
                else ""
            )
            return self.page(
                request,
                "decisions.html",
                {
                    "title": "Decision log",
                    "decisions": found,
                    "values": await self._values(found),
                    "filters": filters,
                    "next_url": next_url,
                    "live_url": live,
                    "outcomes": OUTCOMES,
                    "key_query": key_query,
                },
            )

        return await self.guarded(request, "Decision log", render)

    async def live(self, request: Request) -> Response:
        """Server-sent events: the decisions recorded after the page's last row that pass its
        filters, sent as table rows (event `decision`). WatchBeliefs wakes the stream at
        once when a belief changes; decisions that change no belief (DISBELIEVED, DUPLICATE,
        REJECTED, ...) are not in that stream, so the log is also read every POLL_SECONDS,
        which doubles as a keep-alive. The stream ends when the console shuts down."""
        q = request.query_params
        try:
            f = forms.DecisionFilter.of(q)
            after = forms.text(q, "after")
            if not after.isdigit():
                forms.refuse([FieldError("after", "must be a decision-log seq")])
        except InvalidFact as err:
            return PlainTextResponse(f"{err.code}: {err}", 400)
        rows = self.templates.get_template("_decision_rows.html")
        node = self.node  # the stream runs after this returns, still as the request's user

        async def events() -> AsyncIterator[str]:
            cursor, seen, idle = int(after), self.watch.changes, 0.0
            yield ": connected\n\n"
            while not self.stopping():
                if idle == 0.0:
                    try:
                        page = await node.decisions(
                            key=f.key, namespace=f.namespace, page_size=SCAN_PAGE,
                            page_token=tokens.seq_position(cursor) if cursor else "",
                        )  # fmt: skip
                    except ClientError as err:
                        failed = f"{escape(err.code)}: {escape(str(err))}"
                        yield sse("failure", f"<tr><td colspan=6>{failed}</td></tr>")
                        return
                    if page.items:
                        cursor = page.items[-1].seq
                    new = f.select(page.items)
                    if new:
                        values = await self._values(new, node)
                        rows_html = rows.render(decisions=new, values=values, key_query=key_query)
                        yield sse("decision", rows_html)
                    if page.next_page_token:
                        continue  # more than a page arrived at once: read on
                try:
                    seen = await self.watch.wait_past(seen, TICK_SECONDS)
                    idle = 0.0
                except TimeoutError:
                    idle += TICK_SECONDS
                    if idle >= POLL_SECONDS:
                        idle = 0.0
                        yield ": keep-alive\n\n"

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    # -- search ----------------------------------------------------------------

    async def search(self, request: Request) -> Response:
        """Beliefs found by words (SearchBeliefs, as the user's token may read them), best
        first, at `as_of` or now. A refusal is shown above the hits' place, in the page that
        keeps what was typed; a page without `q` only offers the form."""
        q = request.query_params
        typed = {name: forms.text(q, name) for name in ("q", "namespace", "as_of")}
        hits: Sequence[Hit] = ()
        next_url, error, status = "", None, 200
        if "q" in q:
            try:
                size = forms.page_size(q, SEARCH_PAGE)
                page = await self.node.search(
                    typed["q"], namespace_prefix=typed["namespace"],
                    as_of=forms.when(q, "as_of"), page_size=size,
                    page_token=forms.text(q, "page_token"),
                )  # fmt: skip
            except ClientError as err:
                if err.code == "UNAUTHENTICATED":
                    raise  # the node wants a (valid) token: `signed_in` asks for a sign-in
                error, status = error_words(err), http_status(err)
            else:
                hits = page.items
                if page.next_page_token:
                    more = {**typed, "page_size": size, "page_token": page.next_page_token}
                    next_url = "/search?" + urlencode(more)
        return self.page(
            request,
            "search.html",
            {
                "title": "Search beliefs",
                "typed": typed,
                "searched": "q" in q,
                "hits": hits,
                "error": error,
                "next_url": next_url,
                "key_query": key_query,
            },
            status,
        )

    # -- signing in and out ----------------------------------------------------

    def login_page(
        self, request: Request, target: str, *, why: str = "",
        error: dict[str, Any] | None = None, status: int = 200,
    ) -> Response:  # fmt: skip
        return self.page(
            request,
            "login.html",
            {
                "title": "Sign in",
                "next": target,
                "why": SIGN_IN_NOTES.get(why, ""),
                "error": error,
                "optional": auth.sign_in_optional(self.settings.listen),
            },
            status,
        )

    async def login_form(self, request: Request) -> Response:
        q = request.query_params
        return self.login_page(
            request, auth.local_path(q.get("next", "/queue")), why=q.get("why", "")
        )

    async def login(self, request: Request) -> Response:
        """Exchanges a token the node accepts for a session cookie (HttpOnly, SameSite=Strict,
        expiring with the session), after checking the token by calling the node with it."""
        if not auth.same_origin(request.headers):
            return PlainTextResponse(CROSS_SITE, 403)
        form = await request.form()
        token = str(form.get("token") or "").strip()
        target = auth.local_path(str(form.get("next") or "/queue"))
        problem = auth.token_problem(token, MAX_TOKEN_CHARS)
        if problem:
            refused = {"code": "INVALID_ARGUMENT", "message": f"token: {problem}",
                       "fields": [("token", problem)]}  # fmt: skip
            return self.login_page(request, target, error=refused, status=400)
        try:
            user = await self.check_token(token)
        except NodeWithoutTokens:
            if auth.sign_in_optional(self.settings.listen):
                return RedirectResponse(target, 303)  # nothing to sign in to: go on as local
            refused = {"code": "FAILED_PRECONDITION", "message": OPEN_NODE, "fields": []}
            return self.login_page(request, target, error=refused, status=403)
        except ClientError as err:
            refused = error_words(err)
            if err.code == "UNAUTHENTICATED":
                refused["message"] = "the node does not know this token"
            elif err.code == "PERMISSION_DENIED":
                refused["message"] = f"this token may neither read nor operate: {err}"
            return self.login_page(request, target, error=refused, status=http_status(err))
        self.sessions.close(request.cookies.get(auth.COOKIE))  # never two for one browser
        response = RedirectResponse(target, 303)
        response.set_cookie(
            auth.COOKIE, self.sessions.open(user), max_age=int(self.sessions.lifetime),
            path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https",
        )  # fmt: skip
        return response

    async def check_token(self, token: str) -> auth.User:
        """The user of `token` as the node sees it (operator, or may read); raises the node's
        refusal, or NodeWithoutTokens when the node takes calls without any token."""
        try:
            await self.channel.with_token(None).decisions(page_size=1)
        except PermissionDenied:
            pass  # the node wants a token: it has tokens configured, so it will check this one
        else:
            raise NodeWithoutTokens
        user = auth.User(self.channel.with_token(token), token)
        if not await user.roles.operator(user.node):
            await user.node.decisions(page_size=1)  # may it read at least?
        return user

    async def logout(self, request: Request) -> Response:
        """Ends the session here (its id stops working at once) and in the browser."""
        if not auth.same_origin(request.headers):
            return PlainTextResponse(CROSS_SITE, 403)
        self.sessions.close(request.cookies.get(auth.COOKIE))
        response = RedirectResponse("/login?why=signed-out", 303)
        response.delete_cookie(auth.COOKIE, path="/")
        return response

    # -- erasures --------------------------------------------------------------

    async def erasures(self, request: Request) -> Response:
        """The erasures the node holds, newest first, each with which members have confirmed
        it (ListErasures: an operator's call; a reader gets the node's refusal)."""

        async def render() -> Response:
            q = request.query_params
            size = forms.page_size(q, ERASURES_PAGE)
            page = await self.node.erasures(page_size=size, page_token=forms.text(q, "page_token"))
            next_url = (
                "/erasures?" + urlencode({"page_size": size, "page_token": page.next_page_token})
                if page.next_page_token
                else ""
            )
            return self.page(
                request,
                "erasures.html",
                {"title": "Erasures", "erasures": page.items, "next_url": next_url},
            )

        return await self.guarded(request, "Erasures", render)

    async def erasure(self, request: Request) -> Response:
        """One erasure: each member's receipt, or why it is missing (GetErasure, with
        GetStatus for when each member waited for was last heard from)."""

        async def render() -> Response:
            erasure_id = request.path_params["erasure_id"]
            try:
                async with asyncio.TaskGroup() as calls:
                    getting = calls.create_task(self.node.erasure(erasure_id))
                    stating = calls.create_task(self.node.status())
            except ExceptionGroup as failed:  # the first refusal says why
                raise failed.exceptions[0] from None
            e = getting.result()
            heard = {m.node_id: m.last_heard for m in stating.result().members}
            return self.page(
                request,
                "erasure.html",
                {"title": f"Erasure {e.erasure_id}", "e": e, "rows": receipt_rows(e, heard)},
            )

        return await self.guarded(request, "Erasure", render)

    # -- node and peers --------------------------------------------------------

    async def node_status(self, request: Request) -> Response:
        async def render() -> Response:
            status = await self.node.status()
            return self.page(request, "node.html", {"title": "Node and peers", "status": status})

        return await self.guarded(request, "Node and peers", render)


ACTIONS = ("resolve", "retract", "erase")
KEY_PAGE_SWAP = "outerHTML"  # how an action's answer replaces the page (key.html's hx-swap)


class NodeWithoutTokens(Exception):
    """The node answers calls that carry no token: it has no `tokens` configured."""


OPEN_NODE = (
    "the node accepts calls without a token (it has no tokens configured), so a sign-in "
    "would prove nothing; this console listens beyond loopback and acts for no one until "
    "the node has tokens (the node's `tokens` setting)"
)
SIGN_IN_NOTES = {
    "expired": "Your session ended, or the node no longer accepts its token: sign in again.",
    "needed": "The node wants a token: sign in with yours.",
    "signed-out": "You are signed out.",
}

OUTCOMES = (
    "ACCEPTED", "CORROBORATED", "SUPERSEDED", "HISTORICAL", "DISBELIEVED", "AMBIGUOUS",
    "DUPLICATE", "REJECTED", "RESOLVED", "RETRACTED", "ERASED",
)  # fmt: skip


T = TypeVar("T")


async def absent_if_not_found(call: Awaitable[T]) -> T | None:
    """The call's answer, or None when the node says NOT_FOUND."""
    try:
        return await call
    except NotFound:
        return None


async def nothing() -> None:
    return None


def receipt_rows(e: ErasureCoverage, heard: Mapping[str, datetime | None]) -> list[dict[str, Any]]:
    """Every member of an erasure's coverage: its receipt, or why there is none. A member
    waited for is said to be never heard from, not heard from since the erasure, or heard
    from since without a receipt yet (`heard`: when each member was last heard from)."""
    revoked = set(e.revoked)
    rows: list[dict[str, Any]] = [
        {
            "node": r.node_id,
            "state": "revoked" if r.node_id in revoked else "confirmed",
            "why": "revoked since: its receipt is kept, not counted"
            if r.node_id in revoked
            else "",
            "receipt": r,
        }
        for r in e.receipts
    ]
    for node in e.waiting:
        last = heard.get(node)
        if last is None:
            why = "never heard from"
        elif last < e.erased_at:
            why = f"not heard from since the erasure (last heard {stamp(last)})"
        else:
            why = f"heard from at {stamp(last)}; its receipt has not reached this node yet"
        rows.append({"node": node, "state": "waiting", "why": why, "receipt": None})
    confirmed = {r.node_id for r in e.receipts}
    rows += [
        {"node": n, "state": "revoked", "why": "revoked: not waited for", "receipt": None}
        for n in e.revoked
        if n not in confirmed
    ]
    return rows


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def voter_beliefs(tallies: Sequence[Tally], node_id: str | None) -> list[dict[str, Any]]:
    """Each voter with the value its counted vote is for, this node first (when its id is
    known), then by voter id."""
    rows = [
        {"voter": voter, "object": t.object, "version_id": t.version_id, "here": voter == node_id}
        for t in tallies
        for voter in t.voters
    ]
    return sorted(rows, key=lambda r: (not r["here"], r["voter"]))


def decision_words(title: str, d: Decision, note: str) -> dict[str, str]:
    return {
        "title": title,
        "outcome": d.outcome,
        "rule": d.rule,
        "detail": note or d.detail,
        "seq": str(d.seq),
    }


def sse(event: str, data: str) -> str:
    """One server-sent event; each line of `data` on its own `data:` line."""
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    return f"event: {event}\n{lines}\n"


# Sent with every response. The pages use no inline script or style (htmx's own indicator
# style is turned off in base.html), so the policy allows only this origin's files.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)


_NAMES = frozenset(name for name, _ in SECURITY_HEADERS)


class SecurityHeaders:
    """ASGI middleware adding SECURITY_HEADERS to every HTTP response, errors and static
    files included (outermost, so even a refused Host gets them)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _NAMES]
                message = {**message, "headers": [*kept, *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


async def favicon(request: Request) -> Response:
    """The console's icon where browsers look for it by default."""
    return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console for one node: routes, static files (htmx, vendored), Host checking and
    the security headers."""
    console = Console(settings)
    user = console.signed_in  # every page and action runs as a signed-in (or local) user
    routes = [
        Route("/", console.home),
        Route("/favicon.ico", favicon),
        Route("/login", console.login_form),
        Route("/login", console.login, methods=["POST"]),
        Route("/logout", console.logout, methods=["POST"]),
        Route("/queue", user(console.queue)),
        Route("/key", user(console.key)),
        Route("/key/resolve", user(console.resolve), methods=["POST"]),
        Route("/key/retract", user(console.retract), methods=["POST"]),
        Route("/key/erase", user(console.erase), methods=["POST"]),
        Route("/decisions", user(console.decisions)),
        Route("/decisions/live", user(console.live)),
        Route("/search", user(console.search)),
        Route("/node", user(console.node_status)),
        Route("/erasures", user(console.erasures)),
        Route("/erasures/{erasure_id}", user(console.erasure)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    # A Host header naming another site (DNS rebinding) is refused before any route runs.
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts)),
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=console.lifespan)
    app.state.console = console
    return app
