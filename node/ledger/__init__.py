"""The ledger: the imperative shell around the pure core, one module per responsibility.

It loads what a key holds from the store, asks the core (`factnode.core`) for decisions
and verdicts, and persists them. The gRPC servicers and the federation call it; it imports
only `factnode.core`, `factnode.store` and `factnode.clock`, never the server or the
federation (the federation follows commits through `Ledger.on_commit`).

- `_model`: the values it answers with (`Belief`, `Submitted`, `Page`, ...).
- `_serving`: what every write shares: recomputing served beliefs and this node's vote.
- `_writing`: submissions and relayed evidence decided in order; retractions.
- `_reading`: beliefs, as-of beliefs, history, explain, pages, the change feed.
- `_forgetting`: privacy erasure and decay.
- `_review`: operators' resolutions.
- `_peers`: what a peer is offered, and applying what a peer sent.
- `_backup`: the logical backup (export, and import into an empty node by replay).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from factnode.ledger import _backup
from factnode.ledger._backup import BadExport, ImportRefused, Restored
from factnode.ledger._model import (
    Belief,
    Committed,
    DecayReport,
    ErasureReport,
    Explanation,
    NotFound,
    NotUnderReview,
    Page,
    Received,
    Resolution,
    Submitted,
)
from factnode.ledger._peers import PeerInput
from factnode.ledger._reading import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from factnode.ledger._review import Review
from factnode.store import Repository

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "BadExport",
    "Belief",
    "Committed",
    "DecayReport",
    "ErasureReport",
    "Explanation",
    "ImportRefused",
    "Ledger",
    "NotFound",
    "NotUnderReview",
    "Page",
    "Received",
    "Resolution",
    "Restored",
    "Submitted",
    "ensure_node_id",
]


class Ledger(PeerInput, Review):
    """One node's beliefs: submit, read, explain, retract, resolve, erase, decay, and apply
    what peers send. Each responsibility lives in its own module (see the package doc)."""

    def export(self) -> Iterator[bytes]:
        """The logical backup, line by line, read in one snapshot (`_backup`)."""
        return _backup.export_lines(self)

    def restore(self, stream: IO[bytes], *, force_policy: bool = False) -> Restored:
        """Checks an export and replays it into this empty node (`_backup.restore`)."""
        return _backup.restore(self, stream, force_policy=force_policy)


def ensure_node_id(repo: Repository, configured: str | None, fresh: str) -> str:
    """The node id persisted on first start; a configured id must match the stored one."""
    with repo.write() as tx:
        stored = tx.meta("node_id")
        if stored is None:
            tx.set_meta("node_id", configured or fresh)
            return configured or fresh
    if configured and configured != stored:
        raise ValueError(
            f"node_id {configured!r} is configured but this database belongs to node {stored!r}"
        )
    return stored
