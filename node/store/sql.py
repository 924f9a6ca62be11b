"""The SQLModel store: SQLite by default, PostgreSQL by URL.

`SqlTransaction` is composed of one part per aggregate (`_evidence`, `_decisions`,
`_beliefs`, `_votes`, `_pins`, `_tombstones`, `_digests`, `_members`, `_signatures`,
`_meta`, `_export`), all over one connection and key cache; `SqlRepository` opens them
and keeps the cache in step with the database."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import sqlalchemy.exc
from sqlalchemy import Connection

from factnode.core import Evidence, Key, ids
from factnode.core.plan import ErasurePlan
from factnode.store._beliefs import SqlBeliefs, belief_query
from factnode.store._checked import log_touched, read_touch_log
from factnode.store._checkpoints import WAL_LIMIT_BYTES, Checkpoints
from factnode.store._decisions import SqlDecisions
from factnode.store._digests import SqlDigests
from factnode.store._engine import (
    is_disk_full,
    is_memory,
    lock_writer,
    make_engine,
    reclaim_erased,
)
from factnode.store._evidence import SqlEvidence, state_queries
from factnode.store._export import SqlExport
from factnode.store._members import SqlMembers
from factnode.store._meta import GENERATION_META, META_QUERY, SqlMeta
from factnode.store._notify import notify_commit
from factnode.store._pins import SqlPins, pin_query
from factnode.store._rows import _SELECT_EVIDENCE_ID
from factnode.store._rows import _evidence_row as _evidence_row  # the bench builds rows with it
from factnode.store._signatures import SqlSignatures
from factnode.store._sqltext import (
    deferred_writes,
    driver_form,
    in_statements,
    select_in_together,
    statement_reads,
)
from factnode.store._tombstones import ANY_ERASURE, SqlTombstones
from factnode.store._votes import SqlVotes, vote_query
from factnode.store.cache import DEFAULT_CACHE_KEYS, KeyCache, by_voter
from factnode.store.migrations import upgrade
from factnode.store.repository import (
    CommitWatcher,
    Loaded,
    RefusedData,
    StorageFull,
    Touched,
    TouchLog,
    Writes,
)

__all__ = ["SqlRepository", "SqlTransaction", "make_engine"]


class SqlTransaction(
    SqlEvidence,
    SqlDecisions,
    SqlBeliefs,
    SqlVotes,
    SqlPins,
    SqlTombstones,
    SqlDigests,
    SqlMembers,
    SqlMeta,
    SqlSignatures,
    SqlExport,
):
    """A unit of work on one connection; a write transaction also keeps the key cache."""

    def load(
        self, keys: Collection[Key], evidence: Sequence[tuple[Evidence, str | None]]
    ) -> Loaded:
        """What deciding `evidence` on `keys` reads (`Transaction.load`): on PostgreSQL in one
        round trip where the key cache lacks them (`preload`)."""
        evidence_ids = [e.evidence_id for e, _ in evidence]
        self.preload(keys, evidence_ids)
        return Loaded(
            states=self.key_states(keys),
            remembered=self.remembered(keys),
            stored=frozenset(self.stored_evidence_ids(evidence_ids)),
            by_idempotency=self.evidence_for_idempotency_keys([k for _, k in evidence if k]),
            erased=frozenset(self.erased([e for e, _ in evidence])),
            votes=self.votes(keys),
        )

    def apply(self, changes: Writes) -> None:
        """Writes `changes` in the order of its fields (`Transaction.apply`)."""
        for name, value in changes.meta.items():
            self.set_meta(name, value)
        if changes.members:
            self.put_member_records(changes.members)
        if changes.erasure_bounds:
            self.put_erasure_bounds(changes.erasure_bounds)
        if changes.erasure is not None:
            self._erase(changes.erasure)
        if changes.tombstone is not None:
            self.add_tombstone(changes.tombstone)
        if changes.receipts:
            self.put_receipts(changes.receipts)
        if changes.evidence:
            self.add_evidence(changes.evidence)
        if changes.bears_on:
            self.bears_on(changes.bears_on)
        self.remember(changes.arbitrated)
        if changes.confirmations or changes.confirmed:
            self.confirm(changes.confirmations, changes.confirmed)
        if changes.signatures:
            self.put_evidence_signatures(changes.signatures)
        for proof in changes.equivocations:
            self.put_equivocation(proof)
        for voter, keys in changes.votes_removed.items():
            if keys:
                self.delete_votes(voter, keys)
        if changes.votes:
            self.put_votes(changes.votes)
        for pin in changes.pins:
            self.put_pin(*pin)
        if changes.beliefs:
            self.replace_beliefs(changes.beliefs, changes.changed_at)
        if changes.decisions:
            self.add_decisions(changes.decisions)

    def _erase(self, erasure: ErasurePlan) -> None:
        """Destroys the evidence, the votes resting on it and the forgotten keys' votes."""
        self.delete_votes_on_evidence(erasure.evidence_ids)
        if erasure.forget:
            self.delete_votes_on_keys(erasure.forget)
        self.delete_confirmations(erasure.evidence_ids)
        self.unindex(erasure.evidence_ids)
        self.erase(erasure.evidence_ids, erasure.held_by, erasure.forget)

    def preload(
        self,
        keys: Collection[Key],
        evidence_ids: Collection[str] = (),
        also: Sequence[tuple[str, tuple[Any, ...]]] = (),
    ) -> None:
        """Reads ahead what a write is about to read: the states, served rows, votes and pins
        of `keys` that the key cache lacks (kept in the cache as their own reads would keep
        them), whether `evidence_ids` are stored, whether anything was ever erased, and
        the driver-level reads `also` (`driver_form`). What is already read ahead, and keys
        the cache holds, are not read again: then it may send nothing.

        On PostgreSQL these go out as one text, one round trip instead of seven. Every wait
        for an answer gives up the GIL, and under load getting it back from the event loop
        took most of a write batch's time (bench/README.md). Elsewhere, and in a
        transaction without the cache, it does nothing."""
        cache = self._cache
        if cache is None or self._c.dialect.name != "postgresql":
            return
        states = cache.states.missing(keys)
        beliefs = cache.beliefs.missing(keys)
        votes = cache.votes.missing(keys)
        pins = cache.pins.missing(keys)
        own, against, served, voted, pinned = select_in_together(
            self._c,
            [
                *state_queries({ids.key_id(k) for k in states}),
                belief_query({ids.key_id(k) for k in beliefs}),
                vote_query({ids.key_id(k) for k in votes}),
                pin_query({ids.key_id(k) for k in pins}),
            ],
            ahead=[
                *in_statements(self._c, _SELECT_EVIDENCE_ID, "evidence.evidence_id", evidence_ids),
                driver_form(self._c, ANY_ERASURE),
                *also,
            ],
        )
        cache.states.keep(self._load_states(states, (own, against)))
        cache.beliefs.keep({k: tuple(bs) for k, bs in self._load_beliefs(beliefs, served).items()})
        cache.votes.keep({k: by_voter(vs) for k, vs in self._load_votes(votes, voted).items()})
        cache.pins.keep(self._load_pins(pins, pinned))

    def touch_log(self, after: int | None) -> TouchLog | None:
        """The log of what every replica's writes changed past `after` (`store._checked`);
        None on SQLite, whose store one process writes."""
        if self._c.dialect.name == "sqlite":
            return None
        return read_touch_log(self._c, after)


# How long `close` waits for reads still running on kept connections.
CLOSE_WAIT_SECONDS = 10.0


class SqlRepository:
    """Opens transactions on a SQLModel engine; the schema is migrated on open.

    Write transactions run one at a time in this process and share a `KeyCache` of up to
    `cache_keys` hot keys (0 turns it off). Each write moves a generation number kept in the
    database, so a write by anything else (another process on the same file) is noticed at
    the next write here and the cache starts over.

    Each `watch`er (the ledger's served-read memory) is told the keys every write
    transaction here touched, around its commit. On PostgreSQL, where other replicas of
    the node write too (specification §10), every write also logs the keys it touched
    (`store._checked`), and a memory that may be stale reads that log in each read
    transaction (`Transaction.touch_log`) before it answers from memory.
    """

    def __init__(
        self,
        url: str,
        cache_keys: int = DEFAULT_CACHE_KEYS,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
    ) -> None:
        self.url = url
        self.engine = make_engine(url, wal_limit_bytes=wal_limit_bytes)
        # An in-memory database is one shared connection: one transaction at a time.
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if is_memory(self.engine) else nullcontext()
        )
        self._writer = threading.Lock()
        self._pinned: Connection | None = None
        self._cache = KeyCache(cache_keys)
        self._watchers: list[CommitWatcher] = []
        self._writes = 0  # write transactions begun here (the touch log's pruning counts them)
        upgrade(self.engine)
        # A SQLite file's reads: one connection kept per thread that reads (`_read_connection`),
        # outside the pool, whose size would otherwise bound how many threads may read.
        self._readers: dict[threading.Thread, Connection] = {}
        self._readers_lock = threading.Lock()
        # Reads under way on kept connections: `close` waits for them (bounded), since closing
        # a SQLite connection while another thread reads on it crashes the process.
        self._reading = threading.Condition()
        self._reads_active = 0
        self._read_engine = (
            make_engine(url, unpooled=True, wal_limit_bytes=wal_limit_bytes)
            if self.is_sqlite_file
            else None
        )
        # A SQLite file's checkpoints run beside the writer, not inside its commits; they
        # hold writes back (the writer lock) to start an overgrown log over.
        self.checkpoints = (
            Checkpoints(self.engine, self._writer, wal_limit_bytes=wal_limit_bytes)
            if self.is_sqlite_file
            else None
        )
        # What a refused value raises: through SQLAlchemy, or from the hand-built SQL's cursors.
        self._data_errors: tuple[type[Exception], ...] = (
            sqlalchemy.exc.DataError,
            self.engine.dialect.loaded_dbapi.DataError,
        )

    @property
    def cache_keys(self) -> int:
        """How many hot keys the caches keep (0: none)."""
        return self._cache.capacity

    def watch(self, watcher: CommitWatcher) -> None:
        """Tells `watcher` what each write transaction touched, just before its commit and
        just after (`CommitWatcher`)."""
        # Replaced, not changed in place: a commit under way goes on with the list it read.
        self._watchers = [*self._watchers, watcher]

    def unwatch(self, watcher: CommitWatcher) -> None:
        """Stops telling `watcher` what write transactions touch (`watch`)."""
        self._watchers = [w for w in self._watchers if w is not watcher]

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @property
    def shared(self) -> bool:
        """Other processes may write this database (PostgreSQL replicas, specification §10)."""
        return not self.is_sqlite

    @property
    def is_sqlite_file(self) -> bool:
        """A SQLite file (WAL): its reads are local and never wait for a writer."""
        return self.is_sqlite and not is_memory(self.engine)

    @property
    def disk(self) -> str:
        """Where the store's bytes live, as a disk-full error names it."""
        if not self.is_sqlite:
            return "the database server's data directory"
        if self.is_sqlite_file:
            return f"the data directory {Path(self.engine.url.database or '').resolve().parent}"
        return "SQLite's temporary files"

    @contextmanager
    def write(
        self, keys: Collection[Key] = (), evidence_ids: Collection[str] = ()
    ) -> Iterator[SqlTransaction]:
        """A write transaction; StorageFull (and nothing written) when the disk has no room,
        RefusedData when the database refuses a value it carries."""
        try:
            with self._write(keys, evidence_ids) as tx:
                yield tx
        except self._data_errors as exc:
            raise RefusedData(f"the database refused a value ({type(exc).__name__})") from exc
        except Exception as exc:
            if is_disk_full(exc):
                raise StorageFull(self.disk) from None
            raise

    @contextmanager
    def _write(
        self, keys: Collection[Key], evidence_ids: Collection[str]
    ) -> Iterator[SqlTransaction]:
        cache = self._cache
        touched = Touched()
        with self._writer, self._serial:
            with (
                self._write_connection() as conn,
                conn.begin(),
                deferred_writes(conn, commit=True),
            ):
                lock_writer(conn)
                tx = SqlTransaction(conn, cache.begin() if cache.capacity else None, touched)
                if keys:
                    # With the lock and the generation: on PostgreSQL one round trip. What
                    # it reads stays valid if the generation moved; the rest is dropped.
                    tx.preload(
                        keys, evidence_ids, [driver_form(conn, META_QUERY, (GENERATION_META,))]
                    )
                seen = tx.meta(GENERATION_META)
                elsewhere = seen != cache.generation
                if elsewhere:
                    cache.clear()  # written by someone else since our last write
                yield tx
                if not self.is_sqlite:
                    # What this transaction changed, for every replica's served memory; and
                    # a wake-up for every replica's watchers.
                    self._writes += 1
                    log_touched(conn, touched, self._writes)
                    if touched:
                        notify_commit(conn)
                touched.every = touched.every or elsewhere
                generation = uuid.uuid4().hex
                tx.set_meta(GENERATION_META, generation)
                # Before the commit too: a read filling from the old rows meanwhile is refused.
                for watcher in self._watchers:
                    watcher.forget(touched)
            # Committed: the caches follow.
            for watcher in self._watchers:
                watcher.forget(touched)
            for then in tx.committed:
                then(touched)
            cache.generation = generation
            if tx._cache is not None:
                tx._cache.commit()
            if self.checkpoints is not None:
                self.checkpoints.committed()

    @contextmanager
    def _write_connection(self) -> Iterator[Connection]:
        """The connection a write transaction runs on. A SQLite file's writes all run on one
        connection kept open (a replaced one if it was invalidated): its page cache stays
        valid from one write to the next, as no other connection writes. Taken from the pool
        in turn, each connection found its cache outdated by the others' commits and read
        back every page it touched (several times the reads; bench/README.md). PostgreSQL's connections come from the pool, whose checkout pings
        one idle for long (`_ping_when_idle`)."""
        if not self.is_sqlite_file:
            with self.engine.connect().execution_options(write=True) as conn:
                yield conn
            return
        kept = self._pinned
        if kept is None or kept.closed or kept.invalidated:
            kept = self._pinned = self.engine.connect().execution_options(write=True)
        yield kept

    @contextmanager
    def read(self) -> Iterator[SqlTransaction]:
        with self._reading:
            kept = self._read_connection()
            if kept is not None:
                self._reads_active += 1
        if kept is not None:
            try:
                with kept.begin():
                    yield SqlTransaction(kept)
            finally:
                with self._reading:
                    self._reads_active -= 1
                    self._reading.notify_all()
            return
        with self._serial, self.engine.connect() as conn, statement_reads(conn), conn.begin():
            yield SqlTransaction(conn)

    @contextmanager
    def snapshot(self) -> Iterator[SqlTransaction]:
        """A read transaction that sees one snapshot from start to end, for a long read (an
        export): on PostgreSQL at REPEATABLE READ on a connection of its own (`read` runs
        each statement on its own there); a SQLite read transaction is one already."""
        if self.is_sqlite:
            with self.read() as tx:
                yield tx
            return
        with (
            self.engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn,
            conn.begin(),
        ):
            yield SqlTransaction(conn)

    def _read_connection(self) -> Connection | None:
        """A SQLite file's read transactions run on a connection kept open by each thread
        that reads, instead of one taken from the pool and given back each time: checkout,
        a new Connection and the return were most of a read transaction's cost (an as-of
        GetBelief is read on the event loop; bench/README.md).
        Between reads it holds no transaction, so it keeps no snapshot and blocks no
        checkpoint. None elsewhere, and for a read begun inside another read on the same
        thread (which takes a pooled connection, as every read did before)."""
        if self._read_engine is None:
            return None
        me = threading.current_thread()
        kept = self._readers.get(me)
        if kept is None or kept.closed or kept.invalidated:
            kept = self._read_engine.connect()
            with self._readers_lock:
                old = self._readers.pop(me, None)
                # Threads that ended leave their connection behind: closed here.
                ended = [t for t in self._readers if not t.is_alive()]
                gone = [self._readers.pop(t) for t in ended] + ([old] if old is not None else [])
                self._readers[me] = kept
            for conn in gone:
                conn.close()
        return None if kept.in_transaction() else kept

    def after_erase(self) -> None:
        """Pushes erased bytes out of the WAL (SQLite) or dead tuples (PostgreSQL)."""
        # Not beside a background checkpoint: the log's truncation must not find one running.
        pause = self.checkpoints.lock if self.checkpoints is not None else nullcontext()
        with self._serial, pause:
            reclaim_erased(self.engine)

    def close(self) -> None:
        if self._pinned is not None:
            self._pinned.close()
        with self._reading:
            # A read a cancelled call left running in its thread finishes first (bounded: a
            # read still running then keeps its connection, which the process's exit closes).
            self._reading.wait_for(lambda: self._reads_active == 0, timeout=CLOSE_WAIT_SECONDS)
            idle = self._reads_active == 0
            with self._readers_lock:
                readers = list(self._readers.values())
                self._readers.clear()
        if idle:
            for conn in readers:
                conn.close()
        if self._read_engine is not None:
            self._read_engine.dispose()
        if self.checkpoints is not None:
            self.checkpoints.close()
        self.engine.dispose()
