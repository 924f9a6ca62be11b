"""Where the node's time comes from; the core never reads a clock itself."""

from __future__ import annotations

import time
from typing import Protocol

from factnode.core import Instant


class Clock(Protocol):
    """Tells the current time in microseconds since the epoch, UTC."""

    def now(self) -> Instant: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> Instant:
        return time.time_ns() // 1000
