"""The client port's admission: how many calls the node runs at once, how many wait for a
place, and the answer to one more (the rule and the wait it names: `factnode.core.overload`).

gRPC's server, left to itself, drops a call the application has not picked up while more
than about a thousand wait (at random between 1,000 and 3,000 waiting, every one beyond),
and the caller sees CANCELLED, which no client retries (issue 41, finding 10). The node
lifts that backlog (`app.MAX_WAITING_CALLS`) and picks every call up: it runs
`max_calls_in_flight` at once, lets `max_calls_waiting` more wait for a place in arrival
order (each within its own deadline), and answers one more at once, RESOURCE_EXHAUSTED with a
retry push-back (`Overloaded`), before its request is read: the clients' retry policy waits
as told and sends it again. A queue rather than refusals alone: a refused call's retry
competes with calls that never waited, and five attempts do not always win."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

from factnode.core.overload import admits, retry_after_ms

from ._errors import Overloaded

# How far back refusals count as callers that will come back, in seconds (two such windows).
REFUSAL_WINDOW = 1.0
# Weight of the latest call in the running mean of call durations.
MEAN_WEIGHT = 0.05


class CallGate:
    """Counts the calls the client port runs and those waiting for a place; refuses one
    beyond both with the wait `factnode.core.overload.retry_after_ms` names. Used on the
    event loop's thread only."""

    def __init__(
        self,
        most: int,
        waiting_most: int = 0,
        on_refused: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.most = most
        self.waiting_most = waiting_most
        self.in_flight = 0
        self.mean_call_seconds: float | None = None  # running mean of finished calls
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._on_refused = on_refused
        self._clock = clock
        self._draw = draw
        # Calls refused in this window and the one before.
        self._window_start = clock()
        self._refused_now = self._refused_before = 0

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def refused_lately(self, now: float) -> int:
        """Calls refused in the current window and the one before (windows move on here)."""
        elapsed = now - self._window_start
        if elapsed >= REFUSAL_WINDOW:
            before = self._refused_now if elapsed < 2 * REFUSAL_WINDOW else 0
            self._refused_before, self._refused_now = before, 0
            self._window_start = now
        return self._refused_now + self._refused_before

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Holds one place while the call runs, after waiting for one in arrival order if
        none is free; Overloaded, at once, when none is free and the queue is full."""
        if admits(self.in_flight, self.most) and not self._waiters:
            self.in_flight += 1
        else:
            await self._wait()
        start = self._clock()
        try:
            yield
        finally:
            took = self._clock() - start
            mean = self.mean_call_seconds
            self.mean_call_seconds = took if mean is None else mean + MEAN_WEIGHT * (took - mean)
            self._release()

    async def _wait(self) -> None:
        """Waits for a place handed over by a finishing call, or refuses."""
        if len(self._waiters) >= self.waiting_most:
            self._on_refused()
            ahead = self.waiting + self.refused_lately(self._clock())
            self._refused_now += 1
            wait = retry_after_ms(self.in_flight, ahead, self.mean_call_seconds, self._draw())
            raise Overloaded(self.in_flight, self.most, self.waiting_most, wait)
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(place)
        try:
            await place
        except BaseException:
            if place.done() and not place.cancelled():
                self._release()  # handed a place just as it was cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):  # a release may have passed it by
                    self._waiters.remove(place)
            raise

    def _release(self) -> None:
        """A finished call's place goes to the first call still waiting, else is freed."""
        while self._waiters:
            place = self._waiters.popleft()
            if not place.done():
                place.set_result(None)
                return
        self.in_flight -= 1
