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


def describe_skew(micros: int, *, signed: bool = True) -> str:
    """A clock difference for people: "2h00m05s ahead", "2d00h00m behind", "5m00s", "1.250s"."""
    seconds = abs(micros) / 1_000_000
    if seconds < 60:
        text = f"{seconds:.3f}s"
    else:
        days, rest = divmod(round(seconds), 86_400)
        hours, rest = divmod(rest, 3600)
        minutes, secs = divmod(rest, 60)
        if days:
            text = f"{days}d{hours:02d}h{minutes:02d}m"
        elif hours:
            text = f"{hours}h{minutes:02d}m{secs:02d}s"
        else:
            text = f"{minutes}m{secs:02d}s"
    if not signed:
        return text
    return f"{text} {'ahead' if micros >= 0 else 'behind'}"
