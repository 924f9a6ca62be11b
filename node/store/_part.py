"""What every part of a transaction shares: its connection and, when writing, the key cache."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy.engine import Connection

from factnode.core import Key
from factnode.store.cache import Touched, TxCache


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

    def _forget(self) -> None:
        """Before a write the key cache does not follow: it starts over, and so does the
        served-read memory."""
        if self._cache is not None:
            self._cache.clear()
        if self._touched is not None:
            self._touched.every = True

    def publish_served(self, answers: Mapping[Key, Any]) -> None:
        """Served answers (of keys without peer votes) as they stand once this write commits,
        kept in the served memory after the commit; a read transaction keeps nothing."""
        if self._touched is not None:
            self._touched.published.update(answers)

    def _touch(self, keys: Iterable[Key]) -> None:
        """These keys' served answers change with this write (served rows or votes)."""
        if self._touched is not None:
            self._touched.keys.update(keys)
