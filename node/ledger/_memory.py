"""The served-read memory: GetBelief's answers for hot keys, kept in step with commits."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from factnode.core import Instant, Key, ids
from factnode.ledger._model import Belief
from factnode.store.repository import Touched, Transaction


class ServedMemory:
    """Answers of the served-belief read (`Reading.served`) for hot keys, kept in step with
    commits: the repository tells it (`Repository.watch`) what each write transaction touched,
    once just before its database commit and once just after, and it forgets those keys, so
    no answer from before a commit outlives it.

    A hit is one dict lookup with no lock and no thread hop (the event loop may call `get`).
    A read that missed fills its answer only if no write forgot anything since it took
    `epoch()` before opening its read transaction: a fill that raced a commit is dropped, and
    the next read loads again. Bounded to `capacity` keys, the oldest filled leaving first.
    An answer is kept with the instant its key's next claim expires (specification §6), and
    is not given from then on: no write is needed for decay to change an answer.
    """

    def __init__(self, capacity: int, clock: Callable[[], Instant]) -> None:
        if capacity < 0:
            raise ValueError("cache capacity must not be negative")
        self.capacity = capacity
        self._clock = clock
        # Each key's answer and the instant it stops holding (None: until a write).
        self._entries: dict[Key, tuple[Belief, Instant | None]] = {}
        self._lock = threading.Lock()
        self._epoch = 0

    def get(self, key: Key) -> Belief | None:
        found = self._entries.get(key)
        if found is None:
            return None
        answer, until = found
        return answer if until is None or self._clock() < until else None

    def recall(self, tx: Transaction, key: Key) -> Belief | None:
        """The kept answer of `key`, asked inside the read transaction `tx` (`CheckedMemory`
        checks it there against other processes' writes)."""
        return self.get(key)

    def epoch(self) -> int:
        """Taken before the read whose answer is then offered to `fill`, or inside its read
        transaction after `recall` and before it reads anything."""
        return self._epoch

    def fill(self, epoch: int, key: Key, value: Belief, until: Instant | None = None) -> bool:
        """Keeps `value` for `key` until `until` unless a write forgot anything since `epoch`."""
        if self.capacity == 0:
            return False
        with self._lock:
            if epoch != self._epoch:
                return False
            self._keep({key: (value, until)})
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

    def publish(
        self, answers: Mapping[Key, tuple[Belief, Instant | None]], touched: Touched
    ) -> None:
        """Keeps the answers a write worked out as they stand at its commit, each until its
        key's next expiry. Called from the
        write's `after_commit`, after the repository's `forget` and still under its write
        lock: no other commit can come between."""
        if not answers or touched.every or self.capacity == 0:
            return
        with self._lock:
            self._keep(answers)

    def _keep(self, answers: Mapping[Key, tuple[Belief, Instant | None]]) -> None:
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


class CheckedMemory(ServedMemory):
    """Served answers of hot keys on a database other replicas write too (specification §10),
    valid as of the position `epoch()` in the log of what every write changed
    (`store._checked`). Each read catches up with the log inside its own read transaction
    before it answers from memory, so a write acknowledged on any replica before the read
    started is never hidden by a kept answer; nothing depends on being told of a write."""

    def __init__(self, capacity: int, clock: Callable[[], Instant]) -> None:
        super().__init__(capacity, clock)
        self._ids: dict[str, Key] = {}
        self._started = False
        self.hits = 0  # answers served from memory (for tests and the bench)

    def get(self, key: Key) -> Belief | None:
        """Nothing outside a read transaction: a hit needs the log's head (`recall`)."""
        return None

    def recall(self, tx: Transaction, key: Key) -> Belief | None:
        if self.capacity == 0:
            return None
        with self._lock:
            at = self._epoch if self._started else None
        log = tx.touch_log(at)
        if log is None or log.head is None:
            return None  # not a shared store, or nothing was ever written
        with self._lock:
            if (self._epoch if self._started else None) == at:
                self._catch_up(log.key_ids, log.head)
            # Entries as of the head or later reflect every write this read must see.
            return self._hit(key) if self._epoch >= log.head else None

    def _hit(self, key: Key) -> Belief | None:
        """The kept answer of `key`, counted; the caller holds the lock."""
        found = super().get(key)
        if found is not None:
            self.hits += 1
        return found

    def _catch_up(self, gone: frozenset[str] | None, head: int) -> None:
        """Forgets the keys logged up to `head` (`gone` None: every key); the caller holds
        the lock."""
        if gone is None:
            self._entries.clear()
            self._ids.clear()
        else:
            for key_id in gone:
                key = self._ids.pop(key_id, None)
                if key is not None:
                    self._entries.pop(key, None)
        self._epoch = max(self._epoch, head)
        self._started = True

    def _keep(self, answers: Mapping[Key, tuple[Belief, Instant | None]]) -> None:
        for key in answers:
            self._ids[ids.key_id(key)] = key
        super()._keep(answers)
        if len(self._ids) > 2 * max(self.capacity, 1):
            self._ids = {ids.key_id(k): k for k in self._entries}

    def forget(self, touched: Touched) -> None:
        """Nothing: the log says what changed, to every replica alike (this one's writes too)."""

    def publish(
        self, answers: Mapping[Key, tuple[Belief, Instant | None]], touched: Touched
    ) -> None:
        """Nothing: an answer worked out by a write could be kept after the log has moved
        past a later write by another replica."""
