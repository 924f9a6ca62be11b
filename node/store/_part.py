"""What every part of a transaction shares: its connection and, when writing, the key cache."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from factnode.store.cache import TxCache


class TransactionPart:
    """A unit of work on one connection; a write transaction also keeps the key cache.

    `SqlTransaction` is composed of one part per aggregate, all over the same connection
    and cache."""

    def __init__(self, conn: Connection, cache: TxCache | None = None) -> None:
        self._c = conn
        self._cache = cache

    def _forget(self) -> None:
        """Before a write the key cache does not follow: it starts over."""
        if self._cache is not None:
            self._cache.clear()
