"""The overload rule (factnode.core.overload) and the client port's gate that applies it: a
call beyond the limit is refused before it runs, with a wait that grows with the backlog and
spreads the callers refused together."""

from __future__ import annotations

import asyncio

import pytest

from factnode.core.overload import (
    MAX_RETRY_MS,
    MIN_RETRY_MS,
    UNKNOWN_CALL_SECONDS,
    admits,
    retry_after_ms,
)
from factnode.server._admission import REFUSAL_WINDOW, CallGate
from factnode.server._errors import Overloaded


@pytest.mark.parametrize(
    ("in_flight", "most", "taken"),
    [(0, 1, True), (999, 1000, True), (1000, 1000, False), (1001, 1000, False)],
)
def test_a_node_takes_a_call_while_it_runs_fewer_than_its_limit(
    in_flight: int, most: int, taken: bool
) -> None:
    """admits is true below the limit and false at it and beyond."""
    assert admits(in_flight, most) is taken


@pytest.mark.parametrize(
    ("in_flight", "ahead", "mean", "draw", "wait"),
    [
        (100, 0, 0.01, 0.5, 10),  # the calls held, at 100 a 10 ms: 10 ms
        (100, 900, 0.01, 0.5, 100),  # and 900 coming back: ten times as long
        (100, 900, 0.01, 0.0, 50),  # the draw spreads it from half ...
        (100, 900, 0.01, 0.999, 150),  # ... to one and a half times
        (4, 96, 0.013, 0.5, 325),  # a small limit: the backlog over the calls held
        (1000, 0, None, 0.5, round(1000 * UNKNOWN_CALL_SECONDS)),  # no call finished yet
        (1, 0, 0.0001, 0.0, MIN_RETRY_MS),  # never below the floor
        (1000, 100_000, 1.0, 0.5, MAX_RETRY_MS),  # never beyond the ceiling
    ],
)
def test_the_wait_is_the_time_to_finish_the_backlog_spread_by_the_draw(
    in_flight: int, ahead: int, mean: float | None, draw: float, wait: int
) -> None:
    """retry_after_ms is (running + ahead) x mean call time / running, times 0.5 + draw,
    within its bounds."""
    assert retry_after_ms(in_flight, ahead, mean, draw) == wait


@pytest.mark.parametrize("draw", [-0.1, 1.0, float("nan")])
def test_a_draw_outside_zero_to_one_is_refused(draw: float) -> None:
    """The random draw must lie in [0, 1)."""
    with pytest.raises(ValueError, match="draw"):
        retry_after_ms(1, 0, 0.01, draw)


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_gate_refuses_beyond_its_places_and_queue_and_counts_the_refusals() -> None:
    """Two places, no queue: a third call is refused Overloaded (naming both settings) with
    the rule's wait, and on_refused is called once; a place freed takes the next call."""
    clock, refusals = FakeTime(), []
    gate = CallGate(2, 0, lambda: refusals.append(1), clock=clock, draw=lambda: 0.5)

    async def run() -> None:
        async with gate.hold(), gate.hold():
            assert gate.in_flight == 2
            with pytest.raises(Overloaded) as refused:
                async with gate.hold():
                    pytest.fail("a third call ran")
            assert "max_calls_in_flight" in str(refused.value)
            assert "max_calls_waiting" in str(refused.value)
            assert refused.value.retry_after_ms == retry_after_ms(2, 0, None, 0.5)
            assert refusals == [1]
        assert gate.in_flight == 0
        async with gate.hold():
            assert gate.in_flight == 1

    asyncio.run(run())


def test_waiting_calls_run_in_arrival_order_and_a_cancelled_one_gives_way() -> None:
    """One place, a queue of three: calls wait and run in arrival order; one cancelled while
    waiting leaves the queue and the next takes its turn; a fourth waiting call is refused,
    its wait counting those ahead of it."""
    gate = CallGate(1, 3, clock=FakeTime(), draw=lambda: 0.5)
    ran: list[str] = []

    async def call(name: str, release: asyncio.Event) -> None:
        async with gate.hold():
            ran.append(name)
            await release.wait()

    async def run() -> None:
        first = asyncio.Event()
        free = asyncio.Event()
        free.set()
        holder = asyncio.create_task(call("first", first))
        await asyncio.sleep(0)
        waiting = {n: asyncio.create_task(call(n, free)) for n in ("a", "b", "c")}
        await asyncio.sleep(0)
        assert (gate.in_flight, gate.waiting) == (1, 3)
        with pytest.raises(Overloaded) as refused:
            async with gate.hold():
                pass
        assert refused.value.retry_after_ms == retry_after_ms(1, 3, None, 0.5)
        waiting["b"].cancel()
        first.set()
        await asyncio.gather(holder, waiting["a"], waiting["c"])
        assert ran == ["first", "a", "c"]
        assert (gate.in_flight, gate.waiting) == (0, 0)

    asyncio.run(run())


def test_the_gate_learns_the_call_time_and_counts_recent_refusals() -> None:
    """A finished call sets the mean call time; each refusal in this window and the one before
    lengthens the next refused caller's wait, and refusals older than that are forgotten."""
    clock = FakeTime()
    gate = CallGate(1, 0, clock=clock, draw=lambda: 0.5)

    async def refused_wait() -> int:
        with pytest.raises(Overloaded) as refused:
            async with gate.hold():
                pass
        return refused.value.retry_after_ms

    async def run() -> None:
        async with gate.hold():
            clock.now += 0.02
        assert gate.mean_call_seconds == pytest.approx(0.02)
        async with gate.hold():
            waits = [await refused_wait() for _ in range(3)]
            assert waits == [retry_after_ms(1, n, 0.02, 0.5) for n in range(3)]
            clock.now += 3 * REFUSAL_WINDOW
            assert await refused_wait() == retry_after_ms(1, 0, 0.02, 0.5)

    asyncio.run(run())
