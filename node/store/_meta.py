"""Named values the node keeps about itself (`node_meta`)."""

from __future__ import annotations

from collections.abc import Collection

from factnode.store._part import TransactionPart
from factnode.store._rows import M
from factnode.store._sqltext import insert_rows, scalar
from factnode.store.cache import Named

META_QUERY = "SELECT value FROM node_meta WHERE name = ?"  # one named value
# The named value that changes with every write transaction: how a write learns whether its
# cache is still the database's (`SqlRepository`), so it is always read from the database.
GENERATION_META = "write_generation"


class SqlMeta(TransactionPart):
    """The meta part of a transaction."""

    def meta(self, name: str) -> str | None:
        """The value of `name` (None: never set); in a write transaction, from the write
        cache where it holds it."""
        if self._cache is None or name == GENERATION_META:
            return self._read_meta(name)
        held = self._cache.meta.read([name], self._load_named)[name]
        return held[0] if held else None

    def _load_named(self, names: Collection[str]) -> dict[str, Named]:
        """Each named value as the write cache keeps it (empty: never set)."""
        return {n: () if (v := self._read_meta(n)) is None else (v,) for n in names}

    def _read_meta(self, name: str) -> str | None:
        value = scalar(self._c, META_QUERY, (name,))
        return None if value is None else str(value)

    def set_meta(self, name: str, value: str) -> None:
        insert_rows(self._c, M, ("name", "value"), [(name, value)], ("name",))
        if self._cache is not None and name != GENERATION_META:
            self._cache.meta.set(name, (value,))
