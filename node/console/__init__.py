"""`factnode console`: the operators' web console for one node.

A Starlette application (`_app`) rendering Jinja2 templates with htmx (vendored under
`static/`, no build step), served by uvicorn. It talks to the node only through the public
gRPC API (`factnode.client.AsyncClient`), so the node's tokens and roles apply. Its pictures
(`_pictures`: the history timeline and the tally bars) are pure functions drawing SVG.
May import factnode.client and factnode.core; never the ledger, store, server or federation."""

import socket
from collections.abc import Callable

from factnode.client import AsyncClient, ClientError, PermissionDenied

from ._app import ConsoleSettings, create_app
from ._auth import host_names, sign_in_optional
from ._pictures import tally_svg, timeline_svg

__all__ = [
    "ConsoleSettings",
    "create_app",
    "host_names",
    "node_without_tokens",
    "serve",
    "sign_in_optional",
    "tally_svg",
    "timeline_svg",
]


async def node_without_tokens(settings: ConsoleSettings) -> bool | ClientError:
    """Whether the node answers a call that carries no token (True: it has no tokens, so
    no sign-in could mean anything); the error when it cannot be asked."""
    async with AsyncClient(
        settings.address, ca_cert=settings.ca_cert, timeout=settings.timeout, retries=0
    ) as anonymous:
        try:
            await anonymous.decisions(page_size=1)
        except PermissionDenied:
            return False
        except ClientError as err:
            return err
    return True


def serve(
    settings: ConsoleSettings, host: str, port: int, announce: Callable[[str], None] = print
) -> None:
    """Runs the console with uvicorn until interrupted (Ctrl-C or SIGTERM); `announce` gets
    the URL it serves once the port is bound (port 0 picks a free one)."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening before the URL is announced: a client that connects at once is queued until
    # uvicorn accepts, never refused.
    sock.listen(socket.SOMAXCONN)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    app = create_app(settings)
    # Open event streams end within a second of a shutdown; anything else is cut after 2 s.
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    app.state.console.stopping = lambda: server.should_exit
    announce(f"factnode console on http://{shown}:{bound} for the node at {settings.address}")
    server.run(sockets=[sock])
