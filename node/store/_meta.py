"""Named values the node keeps about itself (`node_meta`)."""

from __future__ import annotations

from factnode.store._part import TransactionPart
from factnode.store._rows import M
from factnode.store._sqltext import insert_rows, scalar

META_QUERY = "SELECT value FROM node_meta WHERE name = ?"  # one named value


class SqlMeta(TransactionPart):
    """The meta part of a transaction."""

    def meta(self, name: str) -> str | None:
        value = scalar(self._c, META_QUERY, (name,))
        return None if value is None else str(value)

    def set_meta(self, name: str, value: str) -> None:
        insert_rows(self._c, M, ("name", "value"), [(name, value)], ("name",))
