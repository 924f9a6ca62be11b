"""Bucketed set digests for anti-entropy: compare roots first, descend only where they differ.

Each item has a 128-bit hash; a bucket's digest is the XOR of its items' hashes and
its count. XOR makes a digest independent of insertion order and cheap to keep up to
date, so an idle round (equal roots) costs the same for a hundred items or a million.
Buckets are hex prefixes of the item id, kept for every prefix length up to `DEPTH`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable

DEPTH = 4  # hex digits: 65,536 leaf buckets
HEX = "0123456789abcdef"


def item_hash(*parts: str) -> int:
    """A 128-bit item hash over its parts."""
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        raw = p.encode()
        h.update(len(raw).to_bytes(4, "big"))
        h.update(raw)
    return int.from_bytes(h.digest(), "big")


class SetDigest:
    """The digest of one set of (id, hash) items at every prefix length up to DEPTH."""

    def __init__(self) -> None:
        self._levels: list[dict[str, list[int]]] = [{} for _ in range(DEPTH + 1)]
        self._items: dict[str, int] = {}
        # The ids in each leaf bucket, so finding the ids under a prefix reads only its leaves.
        self._leaves: dict[str, set[str]] = {}
        # The non-empty children of each non-empty bucket above the leaves, so a sparse
        # bucket's descendants are found without visiting every possible prefix below it.
        self._kids: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def _apply(self, item_id: str, h: int, delta: int) -> None:
        for level, buckets in enumerate(self._levels):
            prefix = item_id[:level]
            cell = buckets.get(prefix)
            if cell is None:
                cell = buckets[prefix] = [0, 0]
                if level:
                    self._kids.setdefault(prefix[:-1], set()).add(prefix)
            cell[0] ^= h
            cell[1] += delta
            if cell[1] == 0:
                del buckets[prefix]
                if level:
                    kids = self._kids[prefix[:-1]]
                    kids.discard(prefix)
                    if not kids:
                        del self._kids[prefix[:-1]]

    def put(self, item_id: str, h: int) -> None:
        """Adds an item, or replaces its hash."""
        old = self._items.get(item_id)
        if old == h:
            return
        if old is not None:
            self._apply(item_id, old, -1)
        else:
            self._leaves.setdefault(item_id[:DEPTH], set()).add(item_id)
        self._items[item_id] = h
        self._apply(item_id, h, +1)

    def discard(self, item_id: str) -> None:
        """Removes an item if present."""
        old = self._items.pop(item_id, None)
        if old is not None:
            self._apply(item_id, old, -1)
            leaf = self._leaves[item_id[:DEPTH]]
            leaf.discard(item_id)
            if not leaf:
                del self._leaves[item_id[:DEPTH]]

    def get(self, item_id: str) -> int | None:
        """The item's hash; None when the set does not hold it."""
        return self._items.get(item_id)

    def bucket(self, prefix: str) -> tuple[bytes, int]:
        """(digest, count) of the bucket; an empty bucket has an empty digest."""
        if len(prefix) > DEPTH:
            prefix_items = [(i, h) for i, h in self._items.items() if i.startswith(prefix)]
            x = 0
            for _, h in prefix_items:
                x ^= h
            return (x.to_bytes(16, "big") if prefix_items else b"", len(prefix_items))
        cell = self._levels[len(prefix)].get(prefix)
        if cell is None:
            return b"", 0
        return cell[0].to_bytes(16, "big"), cell[1]

    def children(self, prefix: str, depth: int) -> list[tuple[str, bytes, int]]:
        """The non-empty buckets `depth` hex digits below `prefix`."""
        target = min(len(prefix) + depth, DEPTH)
        if target == len(prefix):
            return [(prefix, *self.bucket(prefix))]
        level = self._levels[target]
        found = [prefix] if prefix in self._levels[len(prefix)] else []
        for _ in range(target - len(prefix)):
            found = sorted(k for p in found for k in self._kids.get(p, ()))
        return [(p, level[p][0].to_bytes(16, "big"), level[p][1]) for p in found]

    def ids_under(self, prefixes: Iterable[str]) -> list[str]:
        """Ids of the items under any of the prefixes, read from the leaf buckets below them."""
        found: set[str] = set()
        for p in set(prefixes):
            if not p:
                return sorted(self._items)
            if len(p) >= DEPTH:
                found.update(i for i in self._leaves.get(p[:DEPTH], ()) if i.startswith(p))
            else:
                for leaf, _digest, _count in self.children(p, DEPTH - len(p)):
                    found.update(self._leaves[leaf])
        return sorted(found)


def vote_item_hash(
    key_id: str,
    version_id: str | None,
    evidence_id: str,
    anchor: int,
    worth_milli: int,
    fresh_since: int,
) -> int:
    """A vote's digest hash: its content without cast_at, so re-casting the same vote changes nothing."""
    return item_hash(
        key_id, version_id or "", evidence_id, str(anchor), str(worth_milli), str(fresh_since)
    )


class FederationIndex:
    """The digests a node compares with its peers: evidence, tombstones, votes per voter, and
    member records (kept by the roster, `factnode.federation.members`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.evidence = SetDigest()
        self.tombstones = SetDigest()
        # Erasure receipts, one item per erasure and member ("<erasure id>/<node>").
        self.receipts = SetDigest()
        self.members = SetDigest()
        self._votes: dict[str, SetDigest] = {}
        # Every signed vote held, of any voter: one item per (key id, voter), so that votes
        # relay through any member (specification §7). Bucketed by key id.
        self.signed_votes = SetDigest()
        # The confirmed_at of each confirmation item in `evidence` ("<evidence id>/<signer>"):
        # a later confirmation of one signer replaces its earlier one.
        self.confirmed: dict[str, int] = {}

    def votes(self, voter: str) -> SetDigest:
        """The digest of one voter's votes (empty if unknown)."""
        return self._votes.setdefault(voter, SetDigest())

    def put_evidence(self, evidence_id: str) -> None:
        self.evidence.put(
            evidence_id, int(evidence_id, 16) if _is_hex(evidence_id) else item_hash(evidence_id)
        )

    def put_tombstone(self, erasure_id: str) -> None:
        self.tombstones.put(
            erasure_id, int(erasure_id, 16) if _is_hex(erasure_id) else item_hash(erasure_id)
        )

    def put_vote(self, voter: str, key_id: str, h: int) -> None:
        self.votes(voter).put(key_id, h)

    def discard_vote(self, voter: str, key_id: str) -> None:
        self.votes(voter).discard(key_id)


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return len(text) == 32
