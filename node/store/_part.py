"""What every part of a transaction shares: its connection and, when writing, the key cache."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy.engine import Connection

from factnode.core import Decision, Key
from factnode.store.cache import TxCache
from factnode.store.repository import Touched


class TransactionPart:
    """A unit of work on one connection; a write transaction also keeps the key cache.

    `SqlTransaction` is composed of one part per aggregate, all over the same connection
    and cache."""

    def __init__(
        self, conn: Connection, cache: TxCache | None = None, touched: Touched | None = None
    ) -> None:
        self._c = conn
        self._cache = cache
        self._touched = touched
        # Run by the repository once this write has committed (`after_commit`).
        self.committed: list[Callable[[Touched], None]] = []
        # The decisions this transaction logged, in the order it inserted them.
        self._logged: list[Decision] = []

    def _forget(self) -> None:
        """Before a write the key cache does not follow: it starts over, and so does the
        served-read memory."""
        if self._cache is not None:
            self._cache.clear()
        if self._touched is not None:
            self._touched.every = True

    def after_commit(self, then: Callable[[Touched], None]) -> None:
        """Calls `then` with what this write touched once it has committed (the ledger keeps
        its served answers so); a read transaction commits nothing and never calls it."""
        if self._touched is not None:
            self.committed.append(then)

    def _touch(self, keys: Iterable[Key]) -> None:
        """These keys' served answers change with this write (served rows or votes)."""
        if self._touched is not None:
            self._touched.keys.update(keys)
