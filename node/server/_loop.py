"""The event loop a node runs on (setting `event_loop`): uvloop where it is installed, else
asyncio's own. uvloop's loop costs the node less CPU per call (measured by bench/e2e.py;
bench/README.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from factnode.config import ConfigError

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(choice: str) -> tuple[str, LoopFactory]:
    """The name of the loop `choice` (one of config.EVENT_LOOPS) gives here, and a factory
    for it. ConfigError when `uvloop` is asked for and is not installed; `auto` then falls
    back to asyncio's loop."""
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise ConfigError(
                    "event_loop", "uvloop is not installed here (pip install uvloop)"
                ) from None
        else:
            return "uvloop", uvloop.new_event_loop
    return "asyncio", asyncio.new_event_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """`uvloop` or `asyncio`: which kind of loop this is, for the startup log."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
