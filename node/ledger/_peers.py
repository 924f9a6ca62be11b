"""Peer input: what this node offers its peers from its store, and applying what a peer
sent (tombstones, relayed evidence, votes), each item checked, never believed."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from factnode.core import Confirmation, Decision, Evidence, Instant, Key, Outcome, Rule, ids
from factnode.core.consensus import Vote, hour_of
from factnode.core.decay import confirmation_problem, confirmed_at, latest_confirmations
from factnode.core.delta import (
    PeerVotesLoad,
    Refusal,
    own_votes_to_recast,
    peer_evidence_outcome,
    plan_peer_evidence,
    plan_peer_votes,
    plan_vote_changes,
    screen_delta,
    screened,
    shown_id,
    vote_item,
    voters_waiting,
    withdrawn_keys,
)
from factnode.core.erasure_bounds import (
    ErasureBound,
    bound_on_arrival,
    bound_problem,
)
from factnode.core.peer_checks import (
    ACCEPT_ALL_ERASURES,
    ErasureGrant,
    erasure_refusal,
)
from factnode.core.quarantine import key_breaks_text_rule
from factnode.core.receipts import Receipt, receipt_problem
from factnode.core.signed import (
    Equivocation,
    Signature,
    bound_payload,
    confirmation_payload,
    evidence_payload,
    marked,
    proofs_among,
    receipt_payload,
    tombstone_payload,
    withdrawn,
)
from factnode.ledger._forgetting import Forgetting
from factnode.ledger._model import Committed, Received
from factnode.ledger._serving import Component, Serving
from factnode.ledger._writing import Writing, isolating
from factnode.store import RefusedData, Tombstone
from factnode.store.repository import Transaction, Writes

log = logging.getLogger("factnode.ledger")

# How much of a peer erasure's operator and reason its decision quotes: the peer chose them.
_LOGGED = 200
# The store's named value naming the certificate this node's votes were last signed with.
_VOTES_SIGNED_WITH = "votes_signed_with"
_DATABASE_REFUSED = "this node's database refused its data"


# A member's signed statement about one erasure: an erasure bound or a receipt.
_PerErasure = TypeVar("_PerErasure", ErasureBound, Receipt)


class PeerInput(Component):
    """Sync's side of the ledger: offer, receive and recount votes."""

    _counted_hour: int | None = None
    # Whose erasures this node applies, for which namespaces (`federation.accept_erasures_from`).
    erasure_grants: tuple[ErasureGrant, ...] = ACCEPT_ALL_ERASURES
    # Evidence ids quarantined when the store was opened (`core.quarantine`): never offered.
    quarantined: frozenset[str] = frozenset()

    def cap_for(self, origin: str) -> str:
        """The ceiling relayed evidence from `origin` counts at here: the one set for the
        origin, never the path's (specification §7), so what a piece of evidence counts never
        depends on who delivered it, or when (`Policy.cap_for`)."""
        return self.policy.cap_for(origin)

    def __init__(self, serving: Serving, writing: Writing, forgetting: Forgetting) -> None:
        super().__init__(serving)
        self._writing = writing
        self._forgetting = forgetting

    def offer(
        self, prefixes: dict[str, list[str]], have_ids: Collection[str] = ()
    ) -> tuple[list[Tombstone], list[Evidence], list[Vote]]:
        """What this node holds under the given buckets ("evidence", "tombstones", "votes":
        its own votes; "all_votes": the signed votes of every voter, relayed unchanged,
        specification §7), leaving out ids the caller already has."""
        have = set(have_ids)
        with self.repo.read() as tx:
            tombstones = [
                t
                for t in tx.tombstones_under(prefixes.get("tombstones", []))
                if t.erasure_id not in have
            ]
            evidence = [
                e
                for e in tx.evidence_under(prefixes.get("evidence", []))
                if e.evidence_id not in have and e.evidence_id not in self.quarantined
            ]
            signatures = tx.evidence_signatures([e.evidence_id for e in evidence])
            votes = tx.votes_under(self.node_id, prefixes.get("votes", []))
            if prefixes.get("all_votes"):
                # Another voter's vote travels only signed: nobody else could check it.
                votes += [
                    v
                    for v in tx.votes_under(None, prefixes["all_votes"])
                    if v.signature or v.voter == self.node_id
                ]
                # A proof travels as its two votes: a receiver finds the equivocation again.
                for first, second in tx.equivocations_under(prefixes["all_votes"]):
                    votes += [first, second]
        tombstones = [
            t if t.signature else replace(t, signature=self._own_tombstone_signature(t))
            for t in tombstones
        ]
        relayed = [
            replace(
                e,
                origin_recorded_at=e.first_recorded_at,
                signature=signatures.get(e.evidence_id) or self._own_signature(e),
            )
            for e in evidence
        ]
        return tombstones, relayed, self._offerable(votes)

    def _offerable(self, votes: list[Vote]) -> list[Vote]:
        """Votes but those on a quarantined key (a peer would refuse them every round)."""
        if not self.quarantined:
            return votes
        return [v for v in votes if not key_breaks_text_rule(v.key)]

    def offer_votes(self, items: Collection[tuple[str, str]]) -> list[Vote]:
        """The signed votes held for these (key id, voter) items, as `offer` relays them
        under "all_votes" (a proof as its two votes), read by item, not by bucket."""
        wanted = set(items)
        with self.repo.read() as tx:
            votes = [v for v in tx.votes_of(wanted) if v.signature or v.voter == self.node_id]
            proofs = tx.equivocations_under(sorted({key_id for key_id, _ in wanted}))
        for first, second in proofs:
            if (ids.key_id(first.key), first.voter) in wanted:
                votes += [first, second]
        return self._offerable(votes)

    def _own_tombstone_signature(self, t: Tombstone) -> bytes:
        """This node's signature of an erasure its operator made, as it is offered."""
        if self._serving.sign is None or t.origin_node != self.node_id:
            return b""
        return self._serving.sign(tombstone_payload(t))

    def offer_bounds(
        self, prefixes: Collection[str], have_ids: Collection[str] = ()
    ) -> list[ErasureBound]:
        """The erasure bounds held under erasure-id `prefixes` (they gossip with the
        tombstones, `core.erasure_bounds`), leaving out those whose `item_id` the caller has;
        this node's own signed as they are offered."""
        if not prefixes:
            return []
        have = set(have_ids)
        with self.repo.read() as tx:
            bounds = [b for b in tx.bounds_under(prefixes) if b.item_id not in have]
        sign = self._serving.sign
        return [
            replace(b, signature=sign(bound_payload(b)))
            if sign is not None and b.node == self.node_id and not b.signature
            else b
            for b in bounds
        ]

    def _own_signature(self, e: Evidence) -> bytes:
        """This node's signature of evidence it originated, made as it is offered (ECDSA
        signatures are not stored for its own: any one verifies); b"" for another origin's
        evidence held unsigned (stored before evidence was signed): receivers refuse it."""
        if self._serving.sign is None or e.origin_node != self.node_id:
            return b""
        return self._serving.sign(
            evidence_payload(replace(e, origin_recorded_at=e.first_recorded_at))
        )

    def on_refused(self, observer: Callable[[Mapping[str, int]], None]) -> None:
        """Calls `observer` after each delta received with its refused items by kind
        ("tombstone", "evidence", "vote"), pushed or pulled alike; not for a delta without any."""
        self._serving.refusal_observers.append(observer)

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
        """Applies what a peer sent, erasure bounds first (the tombstones they bound then
        judge what they cover by them), then tombstones: erased evidence cannot come back in
        the same delta. Relayed evidence counts with its anchor capped at the peer's ceiling. A
        vote counts for its voter, whoever delivered it, once its voter's signature checks
        (`verify_vote`; on a node that checks none, only `peer_id`'s own votes, the node the
        connection proved, are taken). A vote numbered below the one held from its voter is
        ignored, one resting on erased evidence is refused, and a kept vote counts only as
        weighed from evidence held here.

        `votes_complete_under` names key-id prefixes under which `votes` are all the peer's
        votes (a pull answers with every vote the peer holds there): a vote of the peer's held
        under them and not sent is one the peer withdrew, and it stops counting.

        An item whose data the database refuses (so that the delta's transaction fails) is
        refused alone, and the rest are applied without it (`isolating`); withdrawals then
        wait for the next delta, as only a part holding every vote sent may infer them.

        Confirmations come last, once the evidence beside them is held
        (`_receive_confirmations`), then erasure receipts, once the tombstones beside them
        are (`_receive_receipts`)."""
        taken = self._receive_bounds(peer_id, bounds, {t.erasure_id for t in tombstones})
        items: list[Tombstone | Evidence | Vote] = [*tombstones, *evidence, *votes]

        def apply(part: Sequence[Tombstone | Evidence | Vote]) -> list[Received]:
            every_vote = len([i for i in part if isinstance(i, Vote)]) == len(votes)
            return [
                self._receive(
                    peer_id,
                    peer_cap,
                    [i for i in part if isinstance(i, Tombstone)],
                    [i for i in part if isinstance(i, Evidence)],
                    [i for i in part if isinstance(i, Vote)],
                    votes_complete_under if every_vote else (),
                )
            ]

        if not items:
            parts = [self._receive(peer_id, peer_cap, [], [], [], votes_complete_under)]
        else:
            parts = isolating(apply, items, _refused_alone)
        parts.append(taken)
        parts.append(self._receive_confirmations(peer_id, confirmations))
        parts.append(self._receive_receipts(receipts))
        total: Counter[str] = Counter()
        for r in parts:
            total.update(r.refused)
        if total:
            for observer in self._serving.refusal_observers:
                observer(dict(total))
        return Received(
            sum(r.accepted for r in parts),
            [x for r in parts for x in r.rejected],
            dict(total),
        )

    def _receive(
        self,
        peer_id: str,
        peer_cap: str | None,
        tombstones: Sequence[Tombstone],
        evidence: Sequence[Evidence],
        votes: Sequence[Vote],
        votes_complete_under: Collection[str],
    ) -> Received:
        """`receive` in one transaction: every item screened first (`core.delta.screen_delta`),
        then its tombstones, evidence and votes in turn, each stage reading what the one
        before wrote."""
        now = self.clock.now()
        signing = self._serving.signing
        screened = screen_delta(
            tombstones,
            evidence,
            votes,
            peer_id=peer_id,
            node_id=self.node_id,
            policy=self.policy,
            now=now,
            verify_tombstone=signing.verify_tombstone,
            verify_evidence=signing.verify_evidence,
            verify_vote=signing.verify_vote,
        )
        accepted = len(screened.own_votes)
        refused = list(screened.refused)
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.announce(tx, fx)
            for n, r in (
                self._receive_tombstones(tx, screened.tombstones, peer_id, now, fx),
                self._receive_evidence(tx, screened.evidence, peer_cap, now, fx),
                self._receive_votes(
                    tx, screened.votes, votes, peer_id, votes_complete_under, now, fx
                ),
            ):
                accepted += n
                refused += r
            self._recast_own(tx, screened.own_votes, now, fx)
        if fx.erasures_added:
            # As after a local erase: the erased bytes must not linger in the WAL or old pages.
            self.repo.after_erase()
        return _received(accepted, refused)

    def _receive_tombstones(
        self,
        tx: Transaction,
        tombstones: Sequence[Tombstone],
        peer_id: str,
        now: Instant,
        fx: Committed,
    ) -> tuple[int, list[Refusal]]:
        """Applies the screened tombstones this node does not hold yet and its grants allow;
        returns how many were accepted (held ones too) and the refusals."""
        accepted = 0
        refused: list[Refusal] = []
        known = tx.known_erasures([t.erasure_id for t in tombstones])
        for t in tombstones:
            if t.erasure_id in known:
                accepted += 1
                continue
            problem = self._erasure_refusal(tx, t, peer_id)
            if problem:
                refused.append(Refusal(shown_id(t.erasure_id), problem, ""))
                fx.erasures_refused += 1
                continue
            accepted += 1
            known.add(t.erasure_id)
            self._apply_peer_erasure(tx, t, peer_id, now, fx)
        return accepted, refused

    def _receive_evidence(
        self,
        tx: Transaction,
        evidence: Sequence[Evidence],
        peer_cap: str | None,
        now: Instant,
        fx: Committed,
    ) -> tuple[int, tuple[Refusal, ...]]:
        """Decides the screened relayed evidence not held yet: load, plan
        (`core.delta.plan_peer_evidence`), apply (`Writing.ingest_in`)."""
        plan = plan_peer_evidence(
            evidence,
            tx.stored_evidence_ids({e.evidence_id for e in evidence}),
            link_cap=peer_cap or self.policy.default_max_anchor,
            policy=self.policy,
            node_id=self.node_id,
            signed=self._serving.signing.verify_evidence is not None,
            now=now,
        )
        accepted, refused, signatures = peer_evidence_outcome(
            self._writing.ingest_in(tx, plan.items, fx)[0]
        )
        self._serving.apply(tx, Writes(signatures=signatures), fx)
        return plan.held + accepted, refused

    def _receive_votes(
        self,
        tx: Transaction,
        votes: Sequence[Vote],
        sent: Sequence[Vote],
        peer_id: str,
        complete_under: Collection[str],
        now: Instant,
        fx: Committed,
    ) -> tuple[int, tuple[Refusal, ...]]:
        """Takes the screened votes: load, plan (`core.delta.plan_peer_votes`), equivocations,
        then the changes (`core.delta.plan_vote_changes`) put and recounted. `sent` are all
        the delta's votes, which hold every vote of the peer under `complete_under`."""
        plan = plan_peer_votes(votes, self._load_votes(tx, votes), self.policy)
        good, proven, held_votes = self._equivocations(tx, list(plan.taken), fx)
        withdrawn: frozenset[Key] = frozenset()
        if complete_under:
            withdrawn = withdrawn_keys(peer_id, sent, tx.votes_under(peer_id, complete_under))
        # The votes as they were, so a change of tally is logged (`Serving.refresh`).
        recount = {v.key for v in good} | withdrawn | proven
        before = tx.votes(recount) if recount else {}
        before.update((k, held_votes[k]) for k in proven)  # as before the markers
        changes = plan_vote_changes(good, before, withdrawn, proven)
        self._serving.apply(tx, Writes(votes_removed={peer_id: withdrawn}, votes=changes.put), fx)
        self._serving.refresh(tx, tx.key_states(changes.recount), now, fx, votes_before=before)
        return plan.accepted, plan.refused

    def _recast_own(
        self, tx: Transaction, returned: Sequence[Vote], now: Instant, fx: Committed
    ) -> None:
        """Casts again, numbered after the copies relayed back, this node's votes on the keys
        `core.delta.own_votes_to_recast` names: its held vote there, or a withdrawal where it
        holds none, so the copy is replaced on every member that holds it."""
        if not returned:
            return
        items = {(ids.key_id(v.key), self.node_id) for v in returned}
        held = {v.key: v for v in tx.votes_of(items)}
        keys_held = tx.keys_held({v.key for v in returned if v.key not in held})
        keys = own_votes_to_recast(returned, held, keys_held)
        if not keys:
            return
        copies = {v.key: v for v in returned}
        again = [held[k] if k in held else withdrawn(copies[k], now) for k in keys]
        self._serving.cast(tx, again, fx, after=max(v.seq for v in returned))
        self._serving.refresh(tx, tx.key_states(keys), now, fx)

    def _load_votes(self, tx: Transaction, votes: Sequence[Vote]) -> PeerVotesLoad:
        """What deciding the screened votes reads: the evidence they name, the keys their
        abstentions name, erasures, and how many votes of each voter wait already."""
        named = [v.evidence_id for v in votes if v.version_id is not None]
        load = PeerVotesLoad(
            erased=frozenset(tx.erased_ids(named)),
            held=tx.evidence(named),
            keys_held=frozenset(tx.keys_held({v.key for v in votes if v.version_id is None})),
            erased_keys=frozenset(tx.erased_keys({v.key for v in votes})),
        )
        waiting = {voter: tx.waiting_votes(voter) for voter in voters_waiting(votes, load)}
        return replace(load, waiting=waiting)

    def _receive_bounds(
        self, peer_id: str, bounds: Sequence[ErasureBound], arriving: Collection[str]
    ) -> Received:
        """Keeps a peer's erasure bounds (each node's lowest per erasure), checked as
        `_receive_per_erasure` checks them; an erasure arriving with them counts as held."""

        def keep(tx: Transaction, kept: Sequence[ErasureBound], fx: Committed) -> int:
            self._serving.put_bounds(tx, kept, fx)
            return len(kept)

        return self._receive_per_erasure(
            bounds, bound_problem, self._serving.signing.verify_bound, "bound", arriving, keep
        )

    def _receive_per_erasure(
        self,
        items: Sequence[_PerErasure],
        problem: Callable[[_PerErasure], str],
        verify: Callable[[_PerErasure], Signature] | None,
        kind: str,
        arriving: Collection[str],
        keep: Callable[[Transaction, Sequence[_PerErasure], Committed], int],
        *,
        own_checked: bool = False,
    ) -> Received:
        """Keeps a member's signed statements about erasures (bounds, receipts), checked item
        by item: well formed, signed by the node they name (on a node that checks
        signatures), and for an erasure held here or `arriving` with them; `keep` stores
        those and says how many changed what is held. This node's own coming back are taken
        as held (nobody else says when it applied an erasure), unless `own_checked` and this
        node checks signatures: then they are screened like the rest."""
        screen_own = own_checked and verify is not None
        accepted = 0 if screen_own else len([i for i in items if i.node == self.node_id])
        refused: list[Refusal] = []
        good = screened(
            [i for i in items if screen_own or i.node != self.node_id],
            problem,
            verify,
            lambda i: i.erasure_id,
            kind,
            refused,
        )
        if good:
            fx = Committed()
            with self.repo.write() as tx:
                self._serving.announce(tx, fx)
                held = tx.known_erasures({i.erasure_id for i in good}) | set(arriving)
                refused += [
                    Refusal(shown_id(i.erasure_id), "its erasure is not held here", kind)
                    for i in good
                    if i.erasure_id not in held
                ]
                accepted += keep(tx, [i for i in good if i.erasure_id in held], fx)
        label = {"bound": "erasure bound", "receipt": "erasure receipt"}[kind]
        return _received(accepted, [replace(r, reason=f"{label}: {r.reason}") for r in refused])

    def offer_receipts(self, prefixes: Collection[str]) -> list[Receipt]:
        """The erasure receipts held under erasure-id `prefixes` (specification §6); this
        node's own signed as they are offered."""
        if not prefixes:
            return []
        with self.repo.read() as tx:
            receipts = tx.receipts_under(prefixes)
        sign = self._serving.sign
        return [
            replace(r, signature=sign(receipt_payload(r)))
            if sign is not None and r.node == self.node_id and not r.signature
            else r
            for r in receipts
        ]

    def _receive_receipts(self, receipts: Sequence[Receipt]) -> Received:
        """Keeps peers' erasure receipts (each member's latest per erasure), checked as
        `_receive_per_erasure` checks them (a revoked member's refused). This node's own
        coming back are checked like any other where it checks signatures: one it signed
        later than the one it holds (before a restore, or before its clock was put back)
        replaces it, so that every member keeps the same receipt and idle rounds stay flat.
        A node that checks no signatures cannot tell its own from a forgery: it takes them
        as held."""

        def keep(tx: Transaction, kept: Sequence[Receipt], fx: Committed) -> int:
            return self._serving.put_receipts(tx, kept, fx)

        return self._receive_per_erasure(
            receipts,
            receipt_problem,
            self._serving.signing.verify_receipt,
            "receipt",
            (),
            keep,
            own_checked=True,
        )

    def offer_confirmations(self, prefixes: Collection[str]) -> list[Confirmation]:
        """Each signer's latest confirmation of the evidence held under evidence-id
        `prefixes` (they gossip with the evidence, specification §6); this node's own signed
        as they are offered where they were stored unsigned."""
        if not prefixes:
            return []
        with self.repo.read() as tx:
            held = latest_confirmations(tx.confirmations_under(prefixes))
        sign = self._serving.sign
        return [
            replace(c, signature=sign(confirmation_payload(c)))
            if sign is not None and c.signer == self.node_id and not c.signature
            else c
            for c in held
        ]

    def _receive_confirmations(
        self, peer_id: str, confirmations: Sequence[Confirmation]
    ) -> Received:
        """Keeps a peer's confirmations, checked item by item: well formed, not dated beyond
        this node's clock and skew allowance, signed by the member they name (on a node that
        checks signatures), and of evidence held here. Every one is kept, whoever signed it,
        so every member holds the same; each evidence's `confirmed_at` then moves to the
        latest that counts here (`core.decay.confirmed_at`: its origin's, this node's, or a
        member's capped at least at the anchor it counts as), and its key is recomputed. On
        a node that checks no signatures only `peer_id`'s own are taken, as with votes."""
        now = self.clock.now()
        refused: list[Refusal] = []
        verify = self._serving.signing.verify_confirmation
        unproven = [
            c for c in confirmations if verify is None and c.signer not in (peer_id, self.node_id)
        ]
        refused += [
            Refusal(
                shown_id(c.evidence_id), "its signer is not the peer that sent it", "confirmation"
            )
            for c in unproven
        ]
        good = screened(
            [
                replace(c, received_at=now)
                for c in confirmations
                if c.signer != self.node_id and c not in unproven
            ],
            lambda c: confirmation_problem(c, now, self.policy.clock_skew_micros),
            verify,
            lambda c: c.evidence_id,
            "confirmation",
            refused,
        )
        # This node's own coming back are held already: nobody else says when it took one.
        accepted = len([c for c in confirmations if c.signer == self.node_id])
        if good:
            fx = Committed()
            with self.repo.write() as tx:
                self._serving.announce(tx, fx)
                evidence = tx.evidence({c.evidence_id for c in good})
                held = tx.confirmations(list(evidence))
                known = {(c.evidence_id, c.signer, c.confirmed_at) for c in held}
                new = [
                    c
                    for c in {(c.evidence_id, c.signer, c.confirmed_at): c for c in good}.values()
                    if c.evidence_id in evidence
                    and (c.evidence_id, c.signer, c.confirmed_at) not in known
                ]
                waiting = [c for c in good if c.evidence_id not in evidence]
                refused += [
                    Refusal(
                        shown_id(c.evidence_id), "its evidence is not held here", "confirmation"
                    )
                    for c in waiting
                ]
                moved = []
                for e in evidence.values():
                    counted = confirmed_at(e, [*held, *new], self.policy, self.node_id)
                    if counted != e.confirmed:
                        moved.append(replace(e, confirmed_at=counted))
                self._serving.apply(tx, Writes(confirmations=new, confirmed=moved), fx)
                self._serving.refresh(tx, tx.key_states({e.key for e in moved}), now, fx)
                accepted += len(good) - len(waiting)
        return _received(
            accepted, [replace(r, reason=f"confirmation: {r.reason}") for r in refused]
        )

    def _equivocations(
        self, tx: Transaction, good: list[Vote], fx: Committed
    ) -> tuple[list[Vote], set[Key], dict[Key, list[Vote]]]:
        """Finds the proofs of equivocation among checked votes and those held (specification §7):
        each is kept (and gossiped) and its voter's vote on the key becomes a marker that
        counts zero there; votes of a voter already proven on a key are not taken, but may
        replace the proof held by the canonical one (`signed.canonical_proof`), so every node
        keeps the same proof whatever votes it saw first. Returns the votes left, the keys
        whose proof is new or replaced, and the votes held before."""
        keys = {v.key for v in good}
        held = tx.votes(keys) if keys else {}
        current = {(o.voter, k): o for k, vs in held.items() for o in vs}
        barred = {p for p, o in current.items() if o.equivocated}
        kept = {
            (first.voter, first.key): Equivocation(first.voter, first.key, first.seq, first, second)
            for first, second in (
                tx.equivocations_under(sorted({ids.key_id(k) for _, k in barred})) if barred else []
            )
            if (first.voter, first.key) in barred
        }
        proofs = proofs_among(good, {p: o for p, o in current.items() if not o.equivocated}, kept)
        barred |= {(p.voter, p.key) for p in proofs}
        self._serving.apply(tx, Writes(equivocations=proofs, votes=[marked(p) for p in proofs]), fx)
        left = [v for v in good if (v.voter, v.key) not in barred]
        return left, {p.key for p in proofs}, held

    def _erasure_refusal(self, tx: Transaction, t: Tombstone, peer_id: str) -> str:
        """Why this node does not apply a peer's tombstone it does not hold yet, or "". One
        naming this node as its origin is its own erasure coming back (this node was restored
        from an export older than it, specification §6): taken whatever the grants say, once
        its signature checked against this node's own key (`screen_delta`); a node that
        checks no signatures cannot tell it from a forgery, and refuses it."""
        if t.origin_node == self.node_id:
            if self._serving.signing.verify_tombstone is None or not t.signature:
                return (
                    "it names this node as the one where it was made, and this node holds "
                    "none such and cannot check its signature"
                )
            return ""
        covered = tx.evidence_covered(t)
        namespaces = {e.key.namespace for e in covered} if covered else None
        return erasure_refusal(self.erasure_grants, t.origin_node, peer_id, namespaces)

    def _apply_peer_erasure(
        self, tx: Transaction, t: Tombstone, peer_id: str, now: Instant, fx: Committed
    ) -> None:
        """Applies a peer's erasure, kept as its origin signed it, and logs it: a decision
        naming the erasure (hashes only), where it was made, its operator and reason, and the
        peer that delivered it. One dated beyond this node's clock and the allowance is
        bounded here (`core.erasure_bounds`): this node's evidence recorded after now is a
        later write, and the bound gossips, so every node judges that evidence alike."""
        bound = bound_on_arrival(t.erased_at, now, self.policy.clock_skew_micros)
        if bound is not None:
            self._serving.put_bounds(tx, [ErasureBound(t.erasure_id, self.node_id, bound)], fx)
        covered = tx.evidence_covered(t)
        self._forgetting.apply_erasure(tx, t, covered, fx)
        namespaces = sorted({e.key.namespace for e in covered})
        own = t.origin_node == self.node_id
        if own:
            # Hashes only, as in the decision: the log line names no key or value.
            log.warning(
                "erasure %s, made on this node at %s and not held here (restored from an older "
                "export?), came back from %s: %d piece(s) of evidence erased again",
                t.erasure_id,
                t.erased_at,
                peer_id,
                len(covered),
            )
        decided = Writes(
            decisions=[
                Decision(
                    # Hashes only: a key or subject erasure leaves no key text behind.
                    key=Key(
                        namespaces[0] if len(namespaces) == 1 else "",
                        f"erasure:{t.erasure_id}",
                        t.scope,
                    ),
                    outcome=Outcome.ERASED,
                    rule=Rule.PEER_ERASURE,
                    decided_at=now,
                    detail=(
                        f"erased {len(covered)} piece(s) of evidence by {t.scope} "
                        f"{t.scope_hash}: made on {t.origin_node or peer_id} by operator "
                        f"{t.operator[:_LOGGED]!r} ({t.reason[:_LOGGED]!r}), "
                        f"delivered by {peer_id}"
                        + (
                            "; this node's own erasure, signed with its key, taken back "
                            "after a restore"
                            if own
                            else ""
                        )
                    ),
                )
            ]
        )
        self._serving.apply(tx, decided, fx)

    def reconsider_if_hour_changed(self) -> bool:
        """Vote weights move with the UTC hour: recount every voted key once per hour."""
        hour = hour_of(self.clock.now())
        if hour == self._counted_hour:
            return False
        self._counted_hour = hour
        self.reconsider()
        return True

    def reconsider(self, keys: Collection[Key] | None = None) -> None:
        """Recounts votes (freshness moves with the UTC hour) for `keys`, or every voted key."""
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.announce(tx, fx)
            if keys is None:
                keys = {v.key for v in tx.all_votes()}
            self._serving.refresh(tx, tx.key_states(keys), self.clock.now(), fx)

    def sign_own_votes(self) -> int:
        """Numbers and signs this node's votes stored before votes were signed (migration
        0009), so peers take them again, and stops counting the unsigned votes held from
        peers, which nobody can check (their voters send them signed at their next round);
        returns how many of its own it signed. Nothing without a signing key."""
        if self._serving.sign is None:
            return 0
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.announce(tx, fx)
            unsigned = [v for v in tx.all_votes() if not v.signature]
            own = [v for v in unsigned if v.voter == self.node_id]
            if own:
                self._serving.cast(tx, own, fx)
            theirs: dict[str, set[Key]] = {}
            for v in unsigned:
                if v.voter != self.node_id:
                    theirs.setdefault(v.voter, set()).add(v.key)
            self._serving.apply(tx, Writes(votes_removed=theirs), fx)
            if theirs:
                recount = set().union(*theirs.values())
                self._serving.refresh(tx, tx.key_states(recount), self.clock.now(), fx)
        return len(own)

    def resign_own_votes(self, signing_certificate: str) -> int:
        """Numbers anew and re-signs this node's votes when the certificate it signs with
        changed since they were signed (`signing_certificate` names the current one, kept in
        the store's named values): peers then hold them under the current key, so they
        outlive the earlier certificate's expiry or revocation. Returns how many; none the
        first time (a store that names no certificate yet), nor without a signing key."""
        if self._serving.sign is None:
            return 0
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.announce(tx, fx)
            held = tx.meta(_VOTES_SIGNED_WITH)
            self._serving.apply(tx, Writes(meta={_VOTES_SIGNED_WITH: signing_certificate}), fx)
            if held is None or held == signing_certificate:
                return 0
            own = [
                v for v in tx.votes_under(self.node_id, [""]) if v.signature and not v.equivocated
            ]
            if own:
                self._serving.cast(tx, own, fx)
        return len(own)

    def stop_counting(self, voter: str) -> int:
        """Forgets every vote of `voter` (its certificate was revoked, specification §7): the keys
        it voted on are recounted without it. Returns how many of its votes were held."""
        fx = Committed()
        with self.repo.write() as tx:
            self._serving.announce(tx, fx)
            keys = {v.key for v in tx.votes_under(voter, [""])}
            if keys:
                self._serving.apply(tx, Writes(votes_removed={voter: keys}), fx)
                self._serving.refresh(tx, tx.key_states(keys), self.clock.now(), fx)
        return len(keys)


def _refused_alone(item: Tombstone | Evidence | Vote, exc: RefusedData) -> Received:
    """An item whose data the database refused, as its delta reports it."""
    if isinstance(item, Vote):
        return Received(0, [(vote_item(item), _DATABASE_REFUSED)], {"vote": 1})
    if isinstance(item, Tombstone):
        return Received(0, [(shown_id(item.erasure_id), _DATABASE_REFUSED)], {"tombstone": 1})
    return Received(0, [(shown_id(item.evidence_id), _DATABASE_REFUSED)], {"evidence": 1})


def _received(accepted: int, refused: Sequence[Refusal]) -> Received:
    """What a delta's part reports: each refusal named, and counted under its kind (and its
    failed signature check) unless counted apart."""
    kinds: Counter[str] = Counter()
    for r in refused:
        if r.kind:
            kinds[r.kind] += 1
        if r.signature:
            kinds[f"{r.kind}/{r.signature}"] += 1
    return Received(accepted, [(r.item, r.reason) for r in refused], dict(kinds))
