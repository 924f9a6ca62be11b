"""The ledger: the imperative shell around the pure core, one module per responsibility.

It loads what a key holds from the store, asks the core (`factnode.core`) for decisions
and verdicts, and persists them. `Ledger` is a façade over one component per
responsibility, all sharing one `Serving` component (composition, not a mixin chain). The gRPC servicers and the federation call it; it imports
only `factnode.core`, `factnode.store` and `factnode.clock`, never the server or the
federation (the federation follows commits through `Ledger.on_commit`).

- `_model`: the values it answers with (`Belief`, `Submitted`, `Page`, ...).
- `_serving`: what every part shares: recomputing served beliefs and this node's vote.
- `_memory`: GetBelief's answers for hot keys, kept in step with commits.
- `_writing`: submissions and relayed evidence decided in order; retractions.
- `_reading`: beliefs, as-of beliefs, history, explain, pages, the change feed.
- `_forgetting`: privacy erasure and decay.
- `_review`: operators' resolutions.
- `_peers`: what a peer is offered, and applying what a peer sent.
- `_backup`: the logical backup (export, and import into an empty node by replay).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import IO

from factnode.clock import Clock
from factnode.core import (
    Confirmation,
    Evidence,
    Instant,
    Key,
    Policy,
    Submission,
    VersionHistory,
)
from factnode.core.consensus import Tally, Vote
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.peer_checks import ErasureGrant
from factnode.core.quarantine import Quarantined, quarantined
from factnode.core.recall import Embedding
from factnode.core.receipts import Receipt
from factnode.core.validation import DEFAULT_RETRACTION_ANCHOR, DEFAULT_UNIT
from factnode.ledger import _backup
from factnode.ledger._backup import (
    AWAITING_ROUND_META,
    REVOCATION_META,
    BadExport,
    ImportRefused,
    Restored,
)
from factnode.ledger._forgetting import Forgetting
from factnode.ledger._memory import ServedMemory
from factnode.ledger._model import (
    Belief,
    Committed,
    DecayReport,
    ErasureReport,
    ErasureStatus,
    Explanation,
    Hit,
    NotFound,
    NotUnderReview,
    Page,
    Received,
    Resolution,
    Signing,
    Submitted,
)
from factnode.ledger._peers import PeerInput
from factnode.ledger._reading import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Reading
from factnode.ledger._review import Review
from factnode.ledger._serving import Serving
from factnode.ledger._writing import Writing, isolating
from factnode.store import (
    BeliefChange,
    Counts,
    LoggedDecision,
    RefusedData,
    Repository,
    Tombstone,
    Writes,
)

__all__ = [
    "AWAITING_ROUND_META",
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "REVOCATION_META",
    "BadExport",
    "Belief",
    "Committed",
    "DecayReport",
    "ErasureReport",
    "ErasureStatus",
    "Explanation",
    "Hit",
    "ImportRefused",
    "Ledger",
    "NotFound",
    "NotUnderReview",
    "Page",
    "Received",
    "Resolution",
    "Restored",
    "Signing",
    "Submitted",
    "ensure_node_id",
]


log = logging.getLogger("factnode.ledger")


class Ledger:
    """One node's beliefs: submit, read, explain, retract, resolve, erase, decay, and apply
    what peers send. A façade: each responsibility is a component of its own (see the
    package doc), and every method here hands the call to the one that owns it."""

    def __init__(self, repo: Repository, policy: Policy, node_id: str, clock: Clock) -> None:
        self.serving = Serving(repo, policy, node_id, clock)
        self.writing = Writing(self.serving)
        self.reading = Reading(self.serving)
        self.forgetting = Forgetting(self.serving)
        self.review = Review(self.serving)
        self.peer_input = PeerInput(self.serving, self.writing, self.forgetting)
        self.forgetting.recount_after_upgrade()
        # Opening the store: what it holds from before the text rule is quarantined.
        with repo.read() as tx:
            held = tx.evidence_breaking_text_rule()
        self.quarantine: tuple[Quarantined, ...] = tuple(
            q for q in map(quarantined, held) if q is not None
        )
        self.peer_input.quarantined = frozenset(q.evidence_id for q in self.quarantine)
        if self.quarantine:
            log.warning(
                "%d piece(s) of evidence quarantined: held from before the text rule, which "
                "refuses them; never offered to peers. `factnode status` lists them; erase "
                "each by id to remove it (docs/operations.md, 'Quarantine')",
                len(self.quarantine),
            )

    def quarantined_now(self) -> list[Quarantined]:
        """The quarantined evidence still held (an operator erases it by id)."""
        if not self.quarantine:
            return []
        held = self.evidence_by_ids([q.evidence_id for q in self.quarantine])
        return [q for q in self.quarantine if q.evidence_id in held]

    # -- identity and observers ----------------------------------------------------------

    @property
    def repo(self) -> Repository:
        return self.serving.repo

    @property
    def policy(self) -> Policy:
        return self.serving.policy

    @property
    def node_id(self) -> str:
        return self.serving.node_id

    @property
    def clock(self) -> Clock:
        return self.serving.clock

    @property
    def memory(self) -> ServedMemory:
        """GetBelief's answers for hot keys (`served_in_memory`)."""
        return self.serving.memory

    @property
    def erasure_grants(self) -> tuple[ErasureGrant, ...]:
        """Whose erasures this node applies, for which namespaces."""
        return self.peer_input.erasure_grants

    @erasure_grants.setter
    def erasure_grants(self, grants: tuple[ErasureGrant, ...]) -> None:
        self.peer_input.erasure_grants = grants

    @property
    def signing(self) -> Signing:
        """This node's signing key and its checks of what peers sign (`Signing`)."""
        return self.serving.signing

    @signing.setter
    def signing(self, signing: Signing) -> None:
        self.serving.signing = signing

    def on_commit(self, observer: Callable[[Committed], None]) -> None:
        """`Serving.on_commit`."""
        self.serving.on_commit(observer)

    def on_refused(self, observer: Callable[[Mapping[str, int]], None]) -> None:
        """`PeerInput.on_refused`."""
        self.peer_input.on_refused(observer)

    def close(self) -> None:
        """Unregisters what this ledger set up on its repository (the served memory's watch),
        leaving the repository open: for a second ledger on a node's repository, such as an
        import's replay. The ledger must not be used after."""
        self.serving.close()

    # -- writing -------------------------------------------------------------------------

    def evidence_of(self, sub: Submission, recorded_at: Instant | None = None) -> Evidence:
        """`Writing.evidence_of`."""
        return self.writing.evidence_of(sub, recorded_at)

    def submit(self, sub: Submission) -> Submitted:
        """`Writing.submit`."""
        return self.writing.submit(sub)

    def submit_many(self, subs: Sequence[Submission]) -> list[Submitted]:
        """`Writing.submit_many`."""
        return self.writing.submit_many(subs)

    def ingest(
        self,
        items: Sequence[tuple[Evidence, str | None]],
        vectors: Mapping[str, Sequence[Embedding]] | None = None,
    ) -> list[Submitted]:
        """`Writing.ingest`."""
        return self.writing.ingest(items, vectors)

    def ingest_each(
        self,
        items: Sequence[tuple[Evidence, str | None]],
        vectors: Mapping[str, Sequence[Embedding]] | None = None,
    ) -> list[Submitted | RefusedData]:
        """`ingest`, except that an item whose data the database refuses gets the error as its
        answer alone, and the others are decided and committed as if it had not been sent."""

        def apply(chunk: Sequence[tuple[Evidence, str | None]]) -> list[Submitted | RefusedData]:
            return [*self.ingest(chunk, vectors)]

        def refused(item: tuple[Evidence, str | None], exc: RefusedData) -> RefusedData:
            return exc

        return isolating(apply, items, refused)

    def retract(
        self,
        key: Key,
        obj: str | None = None,
        at: Instant | None = None,
        reason: str = "",
        *,
        attribution: str = DEFAULT_RETRACTION_ANCHOR,
        source: str = "local",
        worth: float = DEFAULT_UNIT,
        confidence: float = DEFAULT_UNIT,
    ) -> LoggedDecision:
        """`Writing.retract`."""
        return self.writing.retract(
            key,
            obj,
            at,
            reason,
            attribution=attribution,
            source=source,
            worth=worth,
            confidence=confidence,
        )

    # -- reading -------------------------------------------------------------------------

    def belief(
        self, key: Key, as_of: Instant | None = None, known_at: Instant | None = None
    ) -> Belief:
        """`Reading.belief`."""
        return self.reading.belief(key, as_of, known_at)

    def served_in_memory(self, key: Key) -> Belief | None:
        """`Reading.served_in_memory`."""
        return self.reading.served_in_memory(key)

    def served(self, key: Key) -> tuple[Belief, Explanation | None]:
        """`Reading.served`."""
        return self.reading.served(key)

    def list_beliefs(
        self,
        namespace: str,
        subject: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        subject_prefix: str = "",
    ) -> Page[Belief]:
        """`Reading.list_beliefs`."""
        return self.reading.list_beliefs(namespace, subject, page_size, page_token, subject_prefix)

    def review_queue(
        self, namespace: str = "", page_size: int = 0, page_token: str = ""
    ) -> Page[Belief]:
        """`Reading.review_queue`."""
        return self.reading.review_queue(namespace, page_size, page_token)

    def history(self, key: Key, known_at: Instant | None = None) -> list[VersionHistory]:
        """`Reading.history`."""
        return self.reading.history(key, known_at)

    def explain(
        self, key: Key, as_of: Instant | None = None, known_at: Instant | None = None
    ) -> Explanation:
        """`Reading.explain`."""
        return self.reading.explain(key, as_of, known_at)

    def explain_many(self, keys: Sequence[Key]) -> dict[Key, Explanation]:
        """`Reading.explain_many`."""
        return self.reading.explain_many(keys)

    def evidence_by_ids(self, evidence_ids: Sequence[str]) -> dict[str, Evidence]:
        """`Reading.evidence_by_ids`."""
        return self.reading.evidence_by_ids(evidence_ids)

    def decisions(
        self, key: Key | None = None, namespace: str = "", page_size: int = 0, page_token: str = ""
    ) -> Page[LoggedDecision]:
        """`Reading.decisions`."""
        return self.reading.decisions(key, namespace, page_size, page_token)

    def changes(
        self, namespace: str = "", after_seq: int = 0, limit: int = 100
    ) -> list[BeliefChange]:
        """`Reading.changes`."""
        return self.reading.changes(namespace, after_seq, limit)

    def last_change(self) -> int:
        """`Reading.last_change`."""
        return self.reading.last_change()

    def counts(self) -> Counts:
        """`Reading.counts`."""
        return self.reading.counts()

    def tally_of(self, key: Key) -> Tally | None:
        """`Reading.tally_of`."""
        return self.reading.tally_of(key)

    def meta(self, name: str) -> str | None:
        """`Reading.meta`."""
        return self.reading.meta(name)

    # -- forgetting and review -----------------------------------------------------------

    def erase(
        self,
        *,
        evidence_id: str | None = None,
        key: Key | None = None,
        subject: tuple[str, str] | None = None,
        operator: str,
        reason: str,
    ) -> ErasureReport:
        """`Forgetting.erase`."""
        return self.forgetting.erase(
            evidence_id=evidence_id, key=key, subject=subject, operator=operator, reason=reason
        )

    def run_decay(self, now: Instant | None = None, batch: int = 2000) -> DecayReport:
        """`Forgetting.run_decay`."""
        return self.forgetting.run_decay(now, batch)

    def resolve(
        self, key: Key, *, version_id: str | None, obj: str | None, reason: str, operator: str
    ) -> Resolution:
        """`Review.resolve`."""
        return self.review.resolve(
            key, version_id=version_id, obj=obj, reason=reason, operator=operator
        )

    # -- peer input ----------------------------------------------------------------------

    def offer(
        self, prefixes: dict[str, list[str]], have_ids: Collection[str] = ()
    ) -> tuple[list[Tombstone], list[Evidence], list[Vote]]:
        """`PeerInput.offer`."""
        return self.peer_input.offer(prefixes, have_ids)

    def offer_votes(self, items: Collection[tuple[str, str]]) -> list[Vote]:
        """`PeerInput.offer_votes`."""
        return self.peer_input.offer_votes(items)

    def offer_bounds(
        self, prefixes: Collection[str], have_ids: Collection[str] = ()
    ) -> list[ErasureBound]:
        """`PeerInput.offer_bounds`."""
        return self.peer_input.offer_bounds(prefixes, have_ids)

    def receive(
        self,
        peer_id: str,
        peer_cap: str | None,
        tombstones: Sequence[Tombstone],
        evidence: Sequence[Evidence],
        votes: Sequence[Vote],
        votes_complete_under: Collection[str] = (),
        bounds: Sequence[ErasureBound] = (),
        confirmations: Sequence[Confirmation] = (),
        receipts: Sequence[Receipt] = (),
    ) -> Received:
        """`PeerInput.receive`."""
        return self.peer_input.receive(
            peer_id,
            peer_cap,
            tombstones,
            evidence,
            votes,
            votes_complete_under,
            bounds,
            confirmations,
            receipts,
        )

    def offer_confirmations(self, prefixes: Collection[str]) -> list[Confirmation]:
        """`PeerInput.offer_confirmations`."""
        return self.peer_input.offer_confirmations(prefixes)

    def reconsider_if_hour_changed(self) -> bool:
        """`PeerInput.reconsider_if_hour_changed`."""
        return self.peer_input.reconsider_if_hour_changed()

    def reconsider(self, keys: Collection[Key] | None = None) -> None:
        """`PeerInput.reconsider`."""
        self.peer_input.reconsider(keys)

    def stop_counting(self, voter: str) -> int:
        """`PeerInput.stop_counting`."""
        return self.peer_input.stop_counting(voter)

    def sign_own_votes(self) -> int:
        """`PeerInput.sign_own_votes`."""
        return self.peer_input.sign_own_votes()

    def resign_own_votes(self, signing_certificate: str) -> int:
        """`PeerInput.resign_own_votes`."""
        return self.peer_input.resign_own_votes(signing_certificate)

    def export(self) -> Iterator[bytes]:
        """The logical backup, line by line, read in one snapshot (`_backup`)."""
        return _backup.export_lines(self)

    def restore(
        self,
        stream: IO[bytes],
        *,
        force_policy: bool = False,
        check_revocations: Callable[[bytes], str] | None = None,
    ) -> Restored:
        """Checks an export and replays it into this empty node (`_backup.restore`)."""
        return _backup.restore(
            self, stream, force_policy=force_policy, check_revocations=check_revocations
        )

    def restored_from(self) -> str | None:
        """What the last import into this store restored, or None (`_backup.restored_from`)."""
        return _backup.restored_from(self)


def ensure_node_id(repo: Repository, configured: str | None, fresh: str) -> str:
    """The node id persisted on first start; a configured id must match the stored one."""
    with repo.write() as tx:
        stored = tx.meta("node_id")
        if stored is None:
            tx.apply(Writes(meta={"node_id": configured or fresh}))
            return configured or fresh
    if configured and configured != stored:
        raise ValueError(
            f"node_id {configured!r} is configured but this database belongs to node {stored!r}"
        )
    return stored
