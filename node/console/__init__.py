"""`factnode console`: the operators' web console for one node.

A Starlette application (`_app`) rendering Jinja2 templates with htmx (vendored under
`static/`, no build step), served by uvicorn. It talks to the node only through the public
gRPC API (`factnode.client.AsyncClient`), so the node's tokens and roles apply. Its pictures
(`_pictures`: the history timeline and the tally bars) are pure functions drawing SVG.
May import factnode.client and factnode.core; never the ledger, store, server or federation."""

from ._app import ConsoleSettings, create_app
from ._pictures import tally_svg, timeline_svg

__all__ = ["ConsoleSettings", "create_app", "serve", "tally_svg", "timeline_svg"]


def serve(settings: ConsoleSettings, host: str, port: int) -> None:
    """Runs the console with uvicorn until interrupted (Ctrl-C or SIGTERM)."""
    import uvicorn

    # Open server-sent event streams are cut after this many seconds at shutdown.
    uvicorn.run(
        create_app(settings), host=host, port=port, log_level="warning",
        timeout_graceful_shutdown=2,
    )  # fmt: skip
