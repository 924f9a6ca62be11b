"""Signed data (specification §7): the exact bytes a member signs, and the pure checks on them.

A vote is signed by its voter, numbered by a sequence it signs: its current vote on a key is
the one with the highest number, never the latest clock. Two validly signed votes of one
voter on one key with the same number and different content prove that it equivocated.

Pure: signing and verifying are the shell's (`federation.trust`); the core says what is
signed, what a verification's answer means, and what a set of verified votes proves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from factnode.core._model import Confirmation, Evidence, Instant, Key
from factnode.core.consensus import Vote
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.peer_checks import ErasureRecord
from factnode.core.receipts import Receipt

# A domain tag per kind of item: a signature over one kind never verifies as another.
_VOTE_TAG = b"factnode/vote/v1"
_EVIDENCE_TAG = b"factnode/evidence/v1"
_TOMBSTONE_TAG = b"factnode/tombstone/v1"
_BOUND_TAG = b"factnode/erasure-bound/v1"
_CONFIRMATION_TAG = b"factnode/confirmation/v1"
_RECEIPT_TAG = b"factnode/erasure-receipt/v1"


class Signature(StrEnum):
    """What checking an item's signature against its signer's certificate found; the
    value names the refusal in the metric (`factnode_peer_signatures_refused_total`)."""

    VALID = "valid"
    UNSIGNED = "unsigned"
    BAD = "bad_signature"
    UNKNOWN_SIGNER = "unknown_signer"
    NOT_A_MEMBER = "not_a_member"


_REASONS = {
    Signature.UNSIGNED: "it carries no signature",
    Signature.BAD: "its signature does not verify against its signer's certificate",
    Signature.UNKNOWN_SIGNER: "its signer's certificate is not known here",
    Signature.NOT_A_MEMBER: "its signer is not a member (certificate revoked, expired or not "
    "signed by the federation CA)",
}


def refusal(check: Signature) -> str:
    """Why an item with this signature check is refused; "" when it is valid."""
    return _REASONS.get(check, "")


def _encode(parts: Iterable[str | int]) -> bytes:
    """Length-prefixed parts: no two different part lists give the same bytes."""
    out = bytearray()
    for p in parts:
        raw = str(p).encode("utf-8", "surrogatepass")
        out += len(raw).to_bytes(4, "big") + raw
    return bytes(out)


def vote_payload(v: Vote) -> bytes:
    """The bytes a voter signs: everything the vote says, its voter and number included, so
    a relay can neither alter it, credit it to another voter, nor renumber it."""
    return _VOTE_TAG + _encode(
        (
            v.voter,
            *v.key,
            v.version_id or "",
            v.evidence_id,
            v.anchor,
            v.worth_milli,
            v.fresh_since,
            v.cast_at,
            v.seq,
        )
    )


def evidence_payload(e: Evidence) -> bytes:
    """The bytes an origin signs: the statement, its provenance and who first recorded it,
    when; not the cap a relay counted it at (each receiver sets its own for the origin)."""
    contradicts = e.contradicts or ("", "", "")
    return _EVIDENCE_TAG + _encode(
        (
            e.evidence_id,
            *e.key,
            e.object,
            e.attribution,
            e.source,
            e.worth_milli,
            e.confidence_milli,
            e.valid_from,
            int(e.valid_from_defaulted),
            e.first_recorded_at,
            e.origin_node,
            e.corrects or "",
            *contradicts,
            int(e.retracts),
        )
    )


def tombstone_payload(t: ErasureRecord) -> bytes:
    """The bytes the node whose operator erased signs: the erasure as it replicates (hashes,
    time, operator, reason, the ids it erased, and itself as its origin)."""
    return _TOMBSTONE_TAG + _encode(
        (
            t.erasure_id,
            t.scope,
            t.scope_hash,
            t.erased_at,
            t.operator,
            t.reason,
            t.origin_node,
            len(t.evidence_ids),
            *sorted(t.evidence_ids),
        )
    )


def bound_payload(b: ErasureBound) -> bytes:
    """The bytes a node signs when it bounds an erasure dated beyond its clock: the erasure,
    itself, and the time it applied it (`erasure_bounds`)."""
    return _BOUND_TAG + _encode((b.erasure_id, b.node, b.bound_at))


def receipt_payload(r: Receipt) -> bytes:
    """The bytes a member signs when it applied an erasure: the erasure, itself, when, and
    how many pieces of evidence it removed (`core.receipts`)."""
    return _RECEIPT_TAG + _encode((r.erasure_id, r.node, r.applied_at, r.removed))


def confirmation_payload(c: Confirmation) -> bytes:
    """The bytes the node that took a restatement signs: which evidence, itself, and when
    (specification §6); not when a receiver got it."""
    return _CONFIRMATION_TAG + _encode((c.evidence_id, c.signer, c.confirmed_at))


def withdrawn(v: Vote, now: Instant) -> Vote:
    """The vote that withdraws `v` (its voter no longer believes anything for the key): it
    votes for nothing, like an abstention, and once numbered after `v` it replaces it on
    every member a relay reaches, where a deleted row would leave the old vote behind."""
    return Vote(v.voter, v.key, None, "", 0, 0, 0, now)


def votes_numbered_after(counter: int, after: int, now: Instant) -> int:
    """The number a voter's next votes are numbered after (the first takes one more): above
    its store's counter (`counter`: the highest number it signed, 0 where the store counts
    none) and any number of its own a relay showed it (`after`), and no lower than the clock
    (`now`, microseconds), the epoch that grows while its store does not. A voter that lost its
    store (emptied, or restored from an export or an older copy) has lost its counter, not the
    time: its next votes still number above every vote it signed before, so no peer holds two
    different votes of it under one number and takes it for an equivocator (specification §7).
    The clock only picks numbers; receivers order a voter's votes by number alone."""
    return max(counter, after, now)


def equivocates(a: Vote, b: Vote) -> bool:
    """`a` and `b` prove their voter equivocated: one voter, one key, one number, and
    different signed content (each must have been verified before this is asked)."""
    return (
        a.voter == b.voter
        and a.key == b.key
        and a.seq == b.seq
        and a.seq > 0
        and vote_payload(a) != vote_payload(b)
    )


@dataclass(frozen=True, slots=True)
class Equivocation:
    """Proof that `voter` signed two different votes numbered `seq` on `key`."""

    voter: str
    key: Key
    seq: int
    first: Vote
    second: Vote


def equivocation_in(held: Vote | None, offered: Vote) -> Equivocation | None:
    """The proof, when the vote held from a voter and one offered for the same key conflict;
    the two are ordered by their bytes, so every node holding them keeps the same pair."""
    if held is None or not equivocates(held, offered):
        return None
    first, second = sorted((held, offered), key=vote_payload)
    return Equivocation(offered.voter, offered.key, offered.seq, first, second)


def canonical_proof(votes: Iterable[Vote]) -> Equivocation | None:
    """The proof of equivocation every node keeps for one voter and key among `votes` (all
    verified, of that voter on that key): at the lowest sequence number at which it signed
    two different votes, the two whose signed bytes sort first; None without two such.

    A node keeps only the proof, not every vote it saw, so this must give the same answer
    however the votes are split among the proofs merged: keeping the lowest number, and
    within it the two smallest byte strings, is a min over a total order (the two smallest
    of a union are the two smallest of the unions' two smallest), so merging proofs in any
    order, repeated or not, ends with one proof on every node that holds the same ones."""
    variants: dict[int, dict[bytes, Vote]] = {}
    for v in votes:
        if v.seq > 0 and not v.equivocated:
            variants.setdefault(v.seq, {})[vote_payload(v)] = v
    for seq in sorted(variants):
        found = variants[seq]
        if len(found) > 1:
            first, second = (found[p] for p in sorted(found)[:2])
            return Equivocation(first.voter, first.key, seq, first, second)
    return None


def proofs_among(
    offered: Iterable[Vote],
    held: Mapping[tuple[str, Key], Vote],
    proven: Mapping[tuple[str, Key], Equivocation] | None = None,
) -> list[Equivocation]:
    """The proofs of equivocation to keep after verified votes are offered: for each voter and
    key, the canonical proof (`canonical_proof`) among the offered votes, the vote held from
    it there (`held`) and the proof held (`proven`), where that is a new proof or replaces the
    one held; so a node that saw other votes than a peer ends with the peer's proof once
    they have exchanged theirs."""
    proven = proven or {}
    seen: dict[tuple[str, Key], list[Vote]] = {}
    for v in offered:
        seen.setdefault((v.voter, v.key), []).append(v)
    out: list[Equivocation] = []
    for pair, votes in seen.items():
        kept = proven.get(pair)
        before = [kept.first, kept.second] if kept is not None else []
        if pair in held:
            before.append(held[pair])
        proof = canonical_proof([*before, *votes])
        if proof is not None and (kept is None or _proof_bytes(proof) != _proof_bytes(kept)):
            out.append(proof)
    return out


def _proof_bytes(p: Equivocation) -> tuple[bytes, bytes]:
    return vote_payload(p.first), vote_payload(p.second)


def marked(proof: Equivocation) -> Vote:
    """The vote row a proven equivocator keeps on the key: it votes for nothing and counts
    zero (`consensus.tally`), and no vote of its voter on the key is taken after it."""
    return Vote(
        proof.voter, proof.key, None, "", 0, 0, 0, proof.second.cast_at, proof.seq,
        equivocated=True,
    )  # fmt: skip


def without_equivocators(votes: Iterable[Vote], equivocators: Iterable[str]) -> list[Vote]:
    """The votes that count on a key: an equivocating voter's count zero there (specification §7)."""
    barred = set(equivocators)
    return [v for v in votes if v.voter not in barred]
