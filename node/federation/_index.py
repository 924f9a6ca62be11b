"""The digests a ledger's peers compare, kept in step with its commits."""

from __future__ import annotations

import hashlib
import threading
import weakref

from factnode.core import Confirmation, ids
from factnode.core.consensus import Vote
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.quarantine import key_breaks_text_rule
from factnode.core.receipts import Receipt
from factnode.core.signed import vote_payload
from factnode.federation._digest import FederationIndex, item_hash, vote_item_hash
from factnode.ledger import Committed, Ledger

_indexes: weakref.WeakKeyDictionary[Ledger, FederationIndex] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def vote_hash(v: Vote) -> int:
    """A vote's digest hash (its content, not its cast time)."""
    return vote_item_hash(
        ids.key_id(v.key), v.version_id, v.evidence_id, v.anchor, v.worth_milli, v.fresh_since
    )


def signed_vote_id(v: Vote) -> str:
    """A vote's item id in the set of every voter's votes: its key id, then its voter."""
    return f"{ids.key_id(v.key)}/{v.voter}"


def signed_vote_hash(v: Vote) -> int:
    """A vote's hash in that set: over everything its voter signed, its number included."""
    return int.from_bytes(hashlib.blake2b(vote_payload(v), digest_size=16).digest(), "big")


def bound_hash(b: ErasureBound) -> int:
    """An erasure bound's hash among the tombstones: what it says, not its signature (ECDSA
    signatures differ each time, and a node signs its own as it offers them)."""
    return item_hash(b.erasure_id, b.node, str(b.bound_at))


def receipt_hash(r: Receipt) -> int:
    """An erasure receipt's hash: what its member signed, not the signature."""
    return item_hash(r.erasure_id, r.node, str(r.applied_at), str(r.removed))


def confirmation_item(c: Confirmation) -> str:
    """A confirmation's item id among the evidence: its evidence id (so it lies in its
    evidence's bucket), then its signer. One item per signer: its latest confirmation."""
    return f"{c.evidence_id}/{c.signer}"


def confirmation_hash(c: Confirmation) -> int:
    """A confirmation's hash: what its signer signed, not the signature."""
    return item_hash(c.evidence_id, c.signer, str(c.confirmed_at))


def _put_confirmation(index: FederationIndex, c: Confirmation) -> None:
    """Keeps the signer's latest confirmation of the evidence as its item."""
    item = confirmation_item(c)
    held = index.confirmed.get(item)
    if held is None or c.confirmed_at > held:
        index.confirmed[item] = c.confirmed_at
        index.evidence.put(item, confirmation_hash(c))


def _relayed(ledger: Ledger, v: Vote) -> bool:
    """The vote travels in the set of every voter's votes: signed, or this node's own."""
    return bool(v.signature) or v.voter == ledger.node_id


def index_of(ledger: Ledger) -> FederationIndex:
    """The ledger's digests: built from its store on first use, then following its commits."""
    with _lock:
        index = _indexes.get(ledger)
        if index is not None:
            return index
        index = FederationIndex()
        with index.lock:
            # Following first, loading second: a commit racing the load is applied after it
            # (every update is idempotent), never lost.
            ledger.on_commit(lambda committed: _follow(ledger, index, committed))
            # Quarantined evidence, and votes on its keys, are never offered (`core.quarantine`):
            # left out of the digests, peers never ask for them.
            quarantined = ledger.peer_input.quarantined
            with ledger.repo.read() as tx:
                for eid in tx.all_evidence_ids():
                    if eid not in quarantined:
                        index.put_evidence(eid)
                for c in tx.confirmations_under([""]):
                    if c.evidence_id not in quarantined:
                        _put_confirmation(index, c)
                for erasure_id in tx.all_erasure_ids():
                    index.put_tombstone(erasure_id)
                for b in tx.all_erasure_bounds():
                    index.tombstones.put(b.item_id, bound_hash(b))
                for r in tx.all_receipts():
                    index.receipts.put(r.item_id, receipt_hash(r))
                for v in tx.all_votes():
                    if quarantined and key_breaks_text_rule(v.key):
                        continue
                    index.put_vote(v.voter, ids.key_id(v.key), vote_hash(v))
                    if _relayed(ledger, v):
                        index.signed_votes.put(signed_vote_id(v), signed_vote_hash(v))
                for first, second in tx.all_equivocations():
                    _put_proof(index, first, second)
        _indexes[ledger] = index
        return index


def _follow(ledger: Ledger, index: FederationIndex, fx: Committed) -> None:
    # One commit can put a vote and later remove it (a delta's erasure by id re-casts this
    # node's vote, its erasure of the key then drops it), or the other way round; Committed
    # keeps no order between the two lists, so for such a vote the store says which came last.
    put = {(v.voter, v.key): v for v in fx.votes_put}
    both = put.keys() & set(fx.votes_removed)
    held: list[Vote] = []
    if both:
        with ledger.repo.read() as tx:
            stored = tx.votes({key for _, key in both})
        held = [v for vs in stored.values() for v in vs if (v.voter, v.key) in both]
    with index.lock:
        for eid in fx.evidence_added:
            index.put_evidence(eid)
        for eid in fx.evidence_removed:
            index.evidence.discard(eid)
            for item in index.evidence.ids_under([eid]):
                if item.startswith(f"{eid}/"):  # its confirmations go with it
                    index.evidence.discard(item)
                    index.confirmed.pop(item, None)
        for c in fx.confirmations_put:
            _put_confirmation(index, c)
        for erasure_id in fx.erasures_added:
            index.put_tombstone(erasure_id)
        for b in fx.bounds_put:
            index.tombstones.put(b.item_id, bound_hash(b))
        for r in fx.receipts_put:
            index.receipts.put(r.item_id, receipt_hash(r))
        for voter, key in fx.votes_removed:
            index.discard_vote(voter, ids.key_id(key))
            index.signed_votes.discard(f"{ids.key_id(key)}/{voter}")
        for v in [v for pair, v in put.items() if pair not in both] + held:
            index.put_vote(v.voter, ids.key_id(v.key), vote_hash(v))
            if _relayed(ledger, v):
                index.signed_votes.put(signed_vote_id(v), signed_vote_hash(v))
            else:
                index.signed_votes.discard(signed_vote_id(v))
        for proof in fx.equivocations:
            _put_proof(index, proof.first, proof.second)


def _put_proof(index: FederationIndex, first: Vote, second: Vote) -> None:
    """A proof of equivocation is the (voter, key) item, hashed over both its votes: two
    nodes holding it compare equal, and one holding a single vote of the two differs."""
    index.signed_votes.put(
        signed_vote_id(first), signed_vote_hash(first) ^ signed_vote_hash(second)
    )
