"""Named values the node keeps about itself (`node_meta`)."""

from __future__ import annotations

from sqlalchemy import select

from factnode.store._part import TransactionPart
from factnode.store._rows import M
from factnode.store._sqltext import insert_rows


class SqlMeta(TransactionPart):
    """The meta part of a transaction."""

    def meta(self, name: str) -> str | None:
        return self._c.scalar(select(M.c.value).where(M.c.name == name))

    def set_meta(self, name: str, value: str) -> None:
        insert_rows(self._c, M, ("name", "value"), [(name, value)], ("name",))
