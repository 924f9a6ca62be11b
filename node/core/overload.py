"""When a node takes another call, and how long a caller it refuses is told to wait.

A node runs at most `max_calls_in_flight` calls on its client port at once, and lets
`max_calls_waiting` more wait for a place; beyond that it answers at once, before reading
the request, so a refused call did nothing and sending it again is safe. The wait it names
(gRPC's retry push-back) is the time the node takes to finish the calls it runs and those
ahead of the caller (waiting, or lately refused: each will come back): running
`in_flight` calls that each take `mean_call_seconds`, it finishes `in_flight / mean` a second
(Little's law). The wait is spread by a random factor so that callers refused together do
not come back together: they return at about the rate the node finishes calls. Pure: the
counts, the mean and the random draw come in as arguments.
"""

from __future__ import annotations

# Bounds of the wait a refused caller is told, in milliseconds. gRPC makes at most five
# attempts of a call, so four waits of the longest still fit a call's default deadline (10 s).
MIN_RETRY_MS = 10
MAX_RETRY_MS = 2_000
# A call's duration assumed until the node has finished one.
UNKNOWN_CALL_SECONDS = 0.01


def admits(in_flight: int, most: int) -> bool:
    """A node holding `in_flight` calls takes one more while it holds fewer than `most`."""
    return in_flight < most


def retry_after_ms(in_flight: int, ahead: int, mean_call_seconds: float | None, draw: float) -> int:
    """The wait, in whole milliseconds, to tell a caller refused while `in_flight` calls run
    (each lately taking `mean_call_seconds`; None: none finished yet) and `ahead` others
    wait or were lately refused: `(in_flight + ahead) * mean / in_flight` seconds, times
    0.5 + `draw` (a draw in [0, 1)), within [MIN_RETRY_MS, MAX_RETRY_MS]."""
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"draw must be in [0, 1), got {draw!r}")
    mean = UNKNOWN_CALL_SECONDS if mean_call_seconds is None else max(0.0, mean_call_seconds)
    base = 1000.0 * (in_flight + ahead) * mean / max(1, in_flight)
    return max(MIN_RETRY_MS, min(MAX_RETRY_MS, round(base * (0.5 + draw))))
