"""Operators' pins: the version an operator chose for a key under review (specification §7)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select

from factnode.core import Instant, Key, ids
from factnode.core.serving import Pin
from factnode.store._part import TransactionPart
from factnode.store._rows import P
from factnode.store._sqltext import insert_rows, select_in

_SELECT_PINS = select(P.c.key_id, P.c.version_id, P.c.pinned_at)
_PIN_COLUMNS = ("key_id", "version_id", "operator", "reason", "pinned_at")


class SqlPins(TransactionPart):
    """The pin part of a transaction."""

    def pins(self, keys: Collection[Key]) -> dict[Key, Pin]:
        """The pin of each key that has one: its version and when it was recorded."""
        by_id = {ids.key_id(k): k for k in keys}
        return {
            by_id[key_id]: Pin(version_id, pinned_at)
            for key_id, version_id, pinned_at in select_in(
                self._c, _SELECT_PINS, "pin.key_id", by_id
            )
        }

    def put_pin(self, key: Key, version_id: str, operator: str, reason: str, at: Instant) -> None:
        """Pins `version_id` for `key`, replacing an earlier pin."""
        insert_rows(
            self._c,
            P,
            _PIN_COLUMNS,
            [(ids.key_id(key), version_id, operator, reason, at)],
            ("key_id",),
        )
