"""The write path's memory of hot keys: what each key holds, serves and is voted, and how
it was last arbitrated, kept across transactions so that a busy key is not read back from
the database on every write.

Only write transactions use it, and they run one at a time (the repository's writer lock,
and the database's own). A transaction sees the committed entries plus its own staged
changes; its changes reach the committed entries only after the database commit succeeds,
so a rollback leaves the cache as it was. A write the cache cannot follow precisely
(decay, erasure, bulk vote removal) clears it. Another process writing the same database is
noticed by a generation number the repository keeps in the database (`SqlRepository`).

Values are immutable (tuples) so that what a caller holds can never change under it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from factnode.core import Arbitrated, Evidence, Key, KeyState
from factnode.core.consensus import Vote
from factnode.core.refresh import StoredBelief
from factnode.core.serving import Pin

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Staged in place of an entry the transaction has made stale.
_DROPPED: Any = object()

# A repository opened without settings keeps this many hot keys; `factnode.config` has the
# same default for the setting (the store never imports config).
DEFAULT_CACHE_KEYS = 20_000


class _Facet(Generic[K, V]):
    """One kind of entry by key, bounded to `capacity` keys, least recently written out first."""

    __slots__ = ("capacity", "entries")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: dict[K, V] = {}

    def apply(self, staged: dict[K, V]) -> None:
        entries = self.entries
        # Re-inserted, so the most recently used go last (dict operations in C, not a loop).
        for key in staged.keys() & entries.keys():
            del entries[key]
        entries.update(staged)
        for key in [k for k, v in staged.items() if v is _DROPPED]:
            del entries[key]
        excess = len(entries) - self.capacity
        if excess > 0:
            oldest = iter(entries)
            for key in [next(oldest) for _ in range(excess)]:
                del entries[key]


class _TxFacet(Generic[K, V]):
    """A facet as one transaction sees it: committed entries under its staged ones."""

    __slots__ = ("cleared", "committed", "staged")

    def __init__(self, committed: _Facet[K, V]) -> None:
        self.committed = committed
        self.staged: dict[K, V] = {}
        self.cleared = False

    def get(self, key: K) -> V | None:
        found = self.staged.get(key)
        if found is None and not self.cleared:
            found = self.committed.entries.get(key)
        return None if found is _DROPPED else found

    def read(self, keys: Collection[K], load: Callable[[list[K]], dict[K, V]]) -> dict[K, V]:
        """Each key's entry, loading the missing ones (and keeping them, as staged)."""
        out: dict[K, V] = {}
        missing: list[K] = []
        staged = self.staged
        committed = {} if self.cleared else self.committed.entries
        for key in keys:
            found = staged.get(key)
            if found is None:
                found = committed.get(key)
            if found is None or found is _DROPPED:
                missing.append(key)
            else:
                out[key] = found
        if missing:
            loaded = load(missing)
            self.staged.update(loaded)
            out.update(loaded)
            # In the order asked for, as an uncached read gives them: callers log in it.
            out = {key: out[key] for key in keys}
        return out

    def missing(self, keys: Collection[K]) -> list[K]:
        """The keys `read` would load."""
        return [key for key in keys if self.get(key) is None]

    def keep(self, loaded: Mapping[K, V]) -> None:
        """Entries loaded from the database by the caller, kept as `read` keeps its own."""
        self.staged.update(loaded)

    def change(self, key: K, update: Callable[[V], V]) -> None:
        """Changes a key's entry where it is known; unknown keys are loaded when next read."""
        found = self.get(key)
        if found is not None:
            self.staged[key] = update(found)

    def set(self, key: K, value: V) -> None:
        self.staged[key] = value

    def drop(self, key: K) -> None:
        self.staged[key] = _DROPPED

    def clear(self) -> None:
        self.staged.clear()
        self.cleared = True

    def commit(self) -> None:
        if self.cleared:
            self.committed.entries.clear()
        if self.committed.capacity > 0:
            self.committed.apply(self.staged)


Beliefs = tuple[StoredBelief, ...]
Votes = tuple[Vote, ...]
# A key's pin as a tuple of at most one: empty where the key has none (None means unknown).
Pins = tuple[Pin, ...]
# A named value of the node (`node_meta`) the same way: empty where it was never set.
Named = tuple[str, ...]


class KeyCache:
    """The committed entries of each hot key's five facets (state, served rows, votes, last
    arbitration, pin) and of the node's named values; see the module docstring."""

    def __init__(self, capacity: int = DEFAULT_CACHE_KEYS) -> None:
        if capacity < 0:
            raise ValueError("cache capacity must not be negative")
        self.capacity = capacity
        self.states: _Facet[Key, KeyState] = _Facet(capacity)
        self.beliefs: _Facet[Key, Beliefs] = _Facet(capacity)
        self.votes: _Facet[Key, Votes] = _Facet(capacity)
        self.arbitrated: _Facet[Key, Arbitrated] = _Facet(capacity)
        self.pins: _Facet[Key, Pins] = _Facet(capacity)
        # The node's named values by name: a batch that signs votes reads its last vote
        # number here, not from the database (on PostgreSQL a round trip mid-batch).
        self.meta: _Facet[str, Named] = _Facet(capacity)
        # The database generation these entries belong to (None: not yet known).
        self.generation: str | None = None

    def clear(self) -> None:
        for facet in (self.states, self.beliefs, self.votes, self.arbitrated, self.pins, self.meta):
            facet.entries.clear()

    def begin(self) -> TxCache:
        return TxCache(self)


class TxCache:
    """One write transaction's view of the cache and its staged changes."""

    def __init__(self, cache: KeyCache) -> None:
        self.cache = cache
        self.states = _TxFacet(cache.states)
        self.beliefs = _TxFacet(cache.beliefs)
        self.votes = _TxFacet(cache.votes)
        self.arbitrated = _TxFacet(cache.arbitrated)
        self.pins = _TxFacet(cache.pins)
        self.meta = _TxFacet(cache.meta)

    def _facets(self) -> tuple[_TxFacet[Any, Any], ...]:
        return (self.states, self.beliefs, self.votes, self.arbitrated, self.pins, self.meta)

    def commit(self) -> None:
        """Called once the database commit has succeeded."""
        for facet in self._facets():
            facet.commit()

    def clear(self) -> None:
        """A write the cache cannot follow: forget everything, now and at commit."""
        for facet in self._facets():
            facet.clear()

    # -- following the transaction's writes ----------------------------------

    def added_evidence(self, evidence: Iterable[Evidence]) -> None:
        for e in evidence:
            if e.retracts:
                self.bears_on([(e.key, e)])
                continue
            self.states.change(e.key, lambda s, e=e: KeyState((*s.evidence, e), s.retractions))  # type: ignore[misc]
            self.arbitrated.drop(e.key)

    def confirmed(self, moved: Iterable[Evidence]) -> None:
        """Held evidence whose `confirmed_at` moved: it replaces the copy in its key's state."""
        for e in moved:
            self.states.change(
                e.key,
                lambda s, e=e: KeyState(  # type: ignore[misc]
                    tuple(e if h.evidence_id == e.evidence_id else h for h in s.evidence),
                    s.retractions,
                ),
            )
            self.arbitrated.drop(e.key)

    def bears_on(self, pairs: Iterable[tuple[Key, Evidence]]) -> None:
        """Retraction-like evidence (`KeyState.retractions`) added to each key's state."""
        for key, r in pairs:
            self.states.change(key, lambda s, r=r: KeyState(s.evidence, (*s.retractions, r)))  # type: ignore[misc]
            self.arbitrated.drop(key)

    def replaced_beliefs(self, key: Key, served: Sequence[StoredBelief]) -> None:
        self.beliefs.set(key, tuple(sorted(served, key=lambda b: b.version_id)))

    def put_votes(self, votes: Iterable[Vote]) -> None:
        for v in votes:
            self.votes.change(
                v.key,
                lambda held, v=v: by_voter((*(o for o in held if o.voter != v.voter), v)),  # type: ignore[misc]
            )

    def deleted_votes(self, voter: str, keys: Iterable[Key]) -> None:
        for key in keys:
            self.votes.change(key, lambda held: tuple(o for o in held if o.voter != voter))


def by_voter(votes: Iterable[Vote]) -> Votes:
    """A key's votes in one order, however they were read or written."""
    return tuple(sorted(votes, key=lambda v: v.voter))
