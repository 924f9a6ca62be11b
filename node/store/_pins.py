"""Operators' pins: the version an operator chose for a key under review (specification §7)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.sql.expression import ClauseElement

from factnode.core import Instant, Key, ids
from factnode.core.serving import Pin
from factnode.store._part import TransactionPart
from factnode.store._rows import P
from factnode.store._sqltext import insert_rows, select_in
from factnode.store.cache import Pins

_SELECT_PINS = select(P.c.key_id, P.c.version_id, P.c.pinned_at)
_PIN_COLUMNS = ("key_id", "version_id", "operator", "reason", "pinned_at")


def pin_query(key_ids: Collection[str]) -> tuple[ClauseElement, str, Collection[str]]:
    """What pins are read from (`select_in` arguments)."""
    return _SELECT_PINS, "pin.key_id", key_ids


class SqlPins(TransactionPart):
    """The pin part of a transaction."""

    def pins(self, keys: Collection[Key]) -> dict[Key, Pin]:
        """The pin of each key that has one: its version and when it was recorded. A write
        transaction reads them through its key cache (a review key's every batch asks)."""
        if self._cache is None:
            held = self._load_pins(keys)
        else:
            held = self._cache.pins.read(keys, self._load_pins)
        return {k: pins[0] for k, pins in held.items() if pins}

    def _load_pins(
        self, keys: Collection[Key], rows: Iterable[Any] | None = None
    ) -> dict[Key, Pins]:
        """Each key's pin, as a tuple of at most one; `rows` is the answer of `pin_query`
        when the caller already read it."""
        by_id = {ids.key_id(k): k for k in keys}
        out: dict[Key, Pins] = dict.fromkeys(keys, ())
        if rows is None:
            rows = select_in(self._c, *pin_query(by_id))
        for key_id, version_id, pinned_at in rows:
            out[by_id[key_id]] = (Pin(version_id, pinned_at),)
        return out

    def put_pin(self, key: Key, version_id: str, operator: str, reason: str, at: Instant) -> None:
        """Pins `version_id` for `key`, replacing an earlier pin."""
        insert_rows(
            self._c,
            P,
            _PIN_COLUMNS,
            [(ids.key_id(key), version_id, operator, reason, at)],
            ("key_id",),
        )
        if self._cache is not None:
            self._cache.pins.set(key, (Pin(version_id, at),))
