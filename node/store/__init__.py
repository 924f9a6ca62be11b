"""Persistence: the repository interface and its SQLModel implementation.

What lives here:
- `repository`: the interface the ledger needs (`Repository`, and `Transaction`: one Protocol
  of queries per aggregate (evidence, decisions, beliefs, votes, pins, tombstones, digests,
  members, meta), plus `load`, what a write batch reads before it decides, and `apply`, which
  writes a `Writes`) and the stored value types (`Tombstone`, `LoggedDecision`, ...).
- `sql`: `SqlRepository` and `SqlTransaction`, composed of one part per aggregate
  (`_evidence`, `_decisions`, `_beliefs`, `_votes`, `_pins`, `_tombstones`, `_digests`, `_meta`)
  over the shared connection and key cache (`_part`, `cache`); each write tells the
  repository's watchers (the ledger's served-read memory) what it touched around its commit.
- `_lock`: `StoreLock`, one process per SQLite store (a lock file the OS releases).
- `_lease`: `Lease`, the background-work lease of a node's replicas on PostgreSQL.
- `_notify`: `CommitListener`, which hears of every replica's commits (`LISTEN`/`NOTIFY`).
- `_engine` (engine set-up, SQLite pragmas, PostgreSQL specifics), `_sqltext` (hand-built
  SQL for the hot paths, run on DBAPI cursors), `_rows` (columns, statements and row
  mapping), `_tables` (the SQLModel tables) and `migrations` (Alembic).

What it may import: the pure core (`factnode.core`), the standard library and its database
libraries; never the ledger, server, federation, config or API.
"""

from factnode.store._lease import Lease, replica_name
from factnode.store._lock import StoreInUse, StoreLock
from factnode.store._notify import CommitListener
from factnode.store.repository import (
    BeliefChange,
    Counts,
    LoggedDecision,
    RefusedData,
    Repository,
    StorageFull,
    StoredMember,
    Tombstone,
    Transaction,
    Writes,
)
from factnode.store.sql import SqlRepository, make_engine

__all__ = [
    "BeliefChange",
    "CommitListener",
    "Counts",
    "Lease",
    "LoggedDecision",
    "RefusedData",
    "Repository",
    "SqlRepository",
    "StorageFull",
    "StoreInUse",
    "StoreLock",
    "StoredMember",
    "Tombstone",
    "Transaction",
    "Writes",
    "make_engine",
    "replica_name",
]
