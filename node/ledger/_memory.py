"""The served-read memory: GetBelief's answers for hot keys, kept in step with commits."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from factnode.core import Key
from factnode.ledger._model import Belief
from factnode.store.repository import Touched


class ServedMemory:
    """Answers of the served-belief read (`Reading.served`) for hot keys, kept in step with
    commits: the repository tells it (`Repository.watch`) what each write transaction touched,
    once just before its database commit and once just after, and it forgets those keys, so
    no answer from before a commit outlives it.

    A hit is one dict lookup with no lock and no thread hop (the event loop may call `get`).
    A read that missed fills its answer only if no write forgot anything since it took
    `epoch()` before opening its read transaction: a fill that raced a commit is dropped, and
    the next read loads again. Bounded to `capacity` keys, the oldest filled leaving first.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("cache capacity must not be negative")
        self.capacity = capacity
        self._entries: dict[Key, Belief] = {}
        self._lock = threading.Lock()
        self._epoch = 0

    def get(self, key: Key) -> Belief | None:
        return self._entries.get(key)

    def epoch(self) -> int:
        """Taken before the read whose answer is then offered to `fill`."""
        return self._epoch

    def fill(self, epoch: int, key: Key, value: Belief) -> bool:
        """Keeps `value` for `key` unless a write forgot anything since `epoch`."""
        if self.capacity == 0:
            return False
        with self._lock:
            if epoch != self._epoch:
                return False
            self._keep({key: value})
            return True

    def forget(self, touched: Touched) -> None:
        """Drops what a write changed (everything where it cannot say what)."""
        if not touched:
            return
        with self._lock:
            self._epoch += 1
            if touched.every:
                self._entries.clear()
            else:
                entries = self._entries
                for key in touched.keys:
                    entries.pop(key, None)

    def publish(self, answers: Mapping[Key, Belief], touched: Touched) -> None:
        """Keeps the answers a write worked out as they stand at its commit. Called from the
        write's `after_commit`, after the repository's `forget` and still under its write
        lock: no other commit can come between."""
        if not answers or touched.every or self.capacity == 0:
            return
        with self._lock:
            self._keep(answers)

    def _keep(self, answers: Mapping[Key, Belief]) -> None:
        """Keeps `answers` as the newest entries, the oldest leaving beyond `capacity`; the
        caller holds the lock."""
        entries = self._entries
        for key, value in answers.items():
            entries.pop(key, None)
            entries[key] = value
        excess = len(entries) - self.capacity
        if excess > 0:
            oldest = iter(entries)
            for key in [next(oldest) for _ in range(excess)]:
                del entries[key]

    def __len__(self) -> int:
        return len(self._entries)
