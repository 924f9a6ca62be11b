"""Persistence: the repository interface and its SQLModel implementation."""

from factnode.store.repository import (
    BeliefChange,
    Counts,
    LoggedDecision,
    Repository,
    StoredBelief,
    Tombstone,
    Transaction,
)
from factnode.store.sql import SqlRepository, make_engine

__all__ = [
    "BeliefChange",
    "Counts",
    "LoggedDecision",
    "Repository",
    "SqlRepository",
    "StoredBelief",
    "Tombstone",
    "Transaction",
    "make_engine",
]
