"""A restored federated node serves no data until its first sync round (specification §6).

An import marks the store (`AWAITING_ROUND_META`): what it brought back may include evidence
the fleet erased after the export, which the node erases again only once a member hands it
the tombstones. Until one of its own rounds with a member has completed, the client port's
FactService and ReviewService answer FAILED_PRECONDITION saying so; AdminService (status,
sync, members) keeps answering, so an operator can see why and run a round. The operator may
say otherwise (`factnode serve --serve-before-sync`). A node that does not federate has no
round to wait for and is not held.
"""

from __future__ import annotations

import logging
import threading
import time

from factnode.ledger import AWAITING_ROUND_META, Ledger
from factnode.store import Writes

log = logging.getLogger("factnode.server")

# How often a held replica reads the mark again (another replica may run the rounds).
_RECHECK_SECONDS = 1.0

HELD = (
    "this node was restored from a backup and serves no data until its first sync round with "
    "a member has completed (the backup may hold what the fleet erased since): `factnode "
    "sync` runs one now; `factnode serve --serve-before-sync` serves at once"
)


class RestoreGate:
    """Whether the client port holds a restored node's data back, and when it stops."""

    def __init__(self, ledger: Ledger, federated: bool, serve_before_sync: bool) -> None:
        self._ledger = ledger
        self._federated = federated
        self._lock = threading.Lock()
        self._held = False
        self._checked = 0.0
        self.restored()
        if self._held and serve_before_sync:
            log.warning("serving a restored node before its first sync round (--serve-before-sync)")
            self._clear()

    def _marked(self) -> bool:
        with self._ledger.repo.read() as tx:
            return bool(tx.meta(AWAITING_ROUND_META))

    def restored(self) -> None:
        """Reads the mark again (after an import on this node)."""
        held = self._federated and self._marked()
        with self._lock:
            self._held, self._checked = held, time.monotonic()
        if held:
            log.warning(HELD)

    def refusal(self) -> str | None:
        """Why the client port holds the node's data back now, or None."""
        if not self._held:
            return None
        now = time.monotonic()
        if now - self._checked >= _RECHECK_SECONDS:
            self._checked = now
            if not self._marked():
                self._held = False
                return None
        return HELD

    def synced(self) -> None:
        """A round of this node's with a member completed: the hold ends, for every replica."""
        if self._held:
            self._clear()
            log.info("first sync round since the restore completed: serving")

    def _clear(self) -> None:
        with self._ledger.repo.write() as tx:
            tx.apply(Writes(meta={AWAITING_ROUND_META: ""}))
        with self._lock:
            self._held = False
