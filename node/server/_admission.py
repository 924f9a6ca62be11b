"""The client port's admission: how many calls the node runs at once, and the answer to one
more (the rule and the wait it names: `factnode.core.overload`).

gRPC's server, left to itself, drops a call the application has not picked up while more
than about a thousand wait (at random between 1,000 and 3,000 waiting, every one beyond),
and the caller sees CANCELLED, which no client retries (issue 41, finding 10). The node
lifts that backlog (`app.MAX_WAITING_CALLS`) and answers a call beyond `max_calls_in_flight`
itself, RESOURCE_EXHAUSTED with a retry push-back (`Overloaded`), before the request is read:
the clients' retry policy waits as told and sends it again."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator

from factnode.core.overload import admits, retry_after_ms

from ._errors import Overloaded

# How far back refusals count as callers that will come back, in seconds (two such windows).
REFUSAL_WINDOW = 1.0
# Weight of the latest call in the running mean of call durations.
MEAN_WEIGHT = 0.05


class CallGate:
    """Counts the calls the client port runs; refuses one beyond `most` with the wait
    `factnode.core.overload.retry_after_ms` names. Used on the event loop's thread only."""

    def __init__(
        self,
        most: int,
        on_refused: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.most = most
        self.in_flight = 0
        self.mean_call_seconds: float | None = None  # running mean of finished calls
        self._on_refused = on_refused
        self._clock = clock
        self._draw = draw
        # Calls refused in this window and the one before.
        self._window_start = clock()
        self._refused_now = self._refused_before = 0

    def refused_lately(self, now: float) -> int:
        """Calls refused in the current window and the one before (windows move on here)."""
        elapsed = now - self._window_start
        if elapsed >= REFUSAL_WINDOW:
            before = self._refused_now if elapsed < 2 * REFUSAL_WINDOW else 0
            self._refused_before, self._refused_now = before, 0
            self._window_start = now
        return self._refused_now + self._refused_before

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Holds one place while the call runs; Overloaded when none is free."""
        now = self._clock()
        if not admits(self.in_flight, self.most):
            self._on_refused()
            refused = self.refused_lately(now)
            self._refused_now += 1
            wait = retry_after_ms(self.in_flight, refused, self.mean_call_seconds, self._draw())
            raise Overloaded(self.in_flight, self.most, wait)
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            took = self._clock() - now
            mean = self.mean_call_seconds
            self.mean_call_seconds = took if mean is None else mean + MEAN_WEIGHT * (took - mean)
