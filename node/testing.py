"""Fakes shared by the tests and by users who embed factnode: a clock and a store."""

from __future__ import annotations

from node.core import MICROS_PER_DAY, Instant, Policy
from node.ledger import Ledger
from node.store import SqlRepository


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: Instant = 20_000 * MICROS_PER_DAY) -> None:
        self.current = start

    def now(self) -> Instant:
        return self.current

    def advance(self, micros: Instant) -> Instant:
        self.current += micros
        return self.current


def memory_repository() -> SqlRepository:
    """A private in-memory SQLite store.

    The real SQL code path on an in-memory database, rather than a second
    hand-written store: fast enough for tests and it cannot drift from the real one.
    """
    return SqlRepository("sqlite://")


def memory_ledger(
    policy: Policy | None = None, clock: FakeClock | None = None, node_id: str = "node-test"
) -> Ledger:
    """A ledger on a fresh in-memory store with a fake clock."""
    return Ledger(memory_repository(), policy or Policy(), node_id, clock or FakeClock())
