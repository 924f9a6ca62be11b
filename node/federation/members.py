"""The members a node knows, and the revocation list it holds (DESIGN §7).

Who is a member is decided by certificates alone: the CA signed it, it is within its
validity period, and the revocation list this node holds does not name it. The roster
remembers each member's certificate as it sees it (on an authenticated link today; from
the member records that gossip, with the fleet's sync), so a revocation list, which names
certificate serials, can be applied to node ids. When a list revokes a member, its votes
stop counting here at once and its links are refused from then on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from factnode.config import Peer
from factnode.core import Evidence
from factnode.core.consensus import Vote
from factnode.core.signed import Signature, evidence_payload, tombstone_payload, vote_payload
from factnode.federation.trust import (
    MAX_REVOCATION_LIST_BYTES,
    Authority,
    Identity,
    NotAMember,
    RevocationList,
    signed_by,
)
from factnode.ledger import Ledger
from factnode.store import Tombstone

log = logging.getLogger("factnode.federation")

# How many checked signatures `Roster.verify` remembers (16 bytes each) before starting over.
_VERIFIED_KEPT = 100_000


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member as this node sees it, for `ListMembers` and `factnode members`."""

    node_id: str
    address: str
    certificate_expires: dt.datetime | None
    revoked: bool
    max_anchor: str
    is_self: bool
    refused: str


@dataclass(frozen=True, slots=True)
class Revocation:
    """What handing a revocation list to the node did."""

    applied: bool
    number: int
    revoked: tuple[str, ...]  # known members the list held now revokes


class Roster:
    """The federation's members as this node knows them, and the revocation list it holds.

    `load` and `save` keep the list across restarts (the composition root passes the store's
    named values); `ledger` is told when a member's votes must stop counting."""

    def __init__(
        self,
        ledger: Ledger,
        authority: Authority,
        own: Identity,
        own_address: str,
        peers: Sequence[Peer],
        load: Callable[[], bytes | None],
        save: Callable[[bytes], None],
    ) -> None:
        self._ledger = ledger
        self.authority = authority
        self.own = own
        self._save = save
        self._identities: dict[str, Identity] = {own.node_id: own}
        self._addresses = {own.node_id: own_address} | {p.node_id: p.address for p in peers}
        self._caps = {p.node_id: p.max_anchor for p in peers if p.max_anchor}
        # Certificates already checked, by their PEM: a peer presents the same one on every
        # call, and its CA signature need not be verified again each time.
        self._by_pem: dict[bytes, Identity] = {}
        # Digests of signatures already found valid (`verify`), each with its certificate.
        self._verified: set[bytes] = set()
        held = load()
        self.revocations: RevocationList | None = (
            None if held is None else authority.revocation_list(held)
        )

    def seen(self, certificate: bytes) -> Identity:
        """Remembers the certificate a member presented (PEM); NotAMember if the CA did not sign it."""
        identity = self._by_pem.get(certificate)
        if identity is None:
            identity = self._by_pem[certificate] = self.authority.identity(certificate)
        held = self._identities.get(identity.node_id)
        # A reissued certificate replaces the one held; an older one never comes back.
        if held is None or identity.not_after >= held.not_after:
            self._identities[identity.node_id] = identity
        return identity

    def certificate_of(self, node_id: str) -> Identity | None:
        """The certificate this node holds for `node_id` (checked against the CA when it was
        learned), or None: the one place a signer's certificate is looked up, whichever way
        it arrived (a link, a delta's certificates, a member record)."""
        return self._identities.get(node_id)

    def learn(self, certificates: Iterable[bytes], by: str) -> None:
        """Remembers the certificates a peer passed on (DER or PEM) that the CA signed;
        one it did not sign is logged and left out, and its signer's items stay unknown."""
        for der in certificates:
            try:
                self.seen(der)
            except NotAMember as exc:
                log.warning("certificate from %s refused: %s", by, exc)

    def certificates(self, node_ids: Iterable[str]) -> list[bytes]:
        """The certificates (DER) held for `node_ids`, to travel beside their signed items."""
        found = (self._identities.get(n) for n in sorted(set(node_ids)))
        return [i.der for i in found if i is not None]

    def verify_vote(self, v: Vote, now: dt.datetime | None = None) -> Signature:
        """Checks a vote's signature against its voter's certificate (`verify`)."""
        return self.verify(v.voter, vote_payload(v), v.signature, now)

    def verify_evidence(self, e: Evidence, now: dt.datetime | None = None) -> Signature:
        """Checks relayed evidence's signature against its origin's certificate (`verify`):
        a relay cannot re-attribute evidence to another origin."""
        return self.verify(e.origin_node, evidence_payload(e), e.signature, now)

    def verify_tombstone(self, t: Tombstone, now: dt.datetime | None = None) -> Signature:
        """Checks a tombstone's signature against the certificate of the node it names as
        where the erasure was made (`verify`)."""
        return self.verify(t.origin_node, tombstone_payload(t), t.signature, now)

    def verify(
        self, signer: str, payload: bytes, signature: bytes, now: dt.datetime | None = None
    ) -> Signature:
        """Checks a signature against its signer's certificate: the signer must be a member
        (CA-signed, in its validity period, not revoked: a revoked member's items arriving
        after the revocation are refused, whatever date they claim) and the signature must
        cover exactly the bytes as they arrived (DESIGN §7)."""
        if not signature:
            return Signature.UNSIGNED
        identity = self._identities.get(signer)
        if identity is None:
            return Signature.UNKNOWN_SIGNER
        if self.refusal(identity, now or dt.datetime.now(dt.UTC)):
            return Signature.NOT_A_MEMBER
        # The same signed item arrives from every relay that holds it: a signature checked
        # once against this certificate need not be checked again (membership is, above).
        seen = hashlib.blake2b(signature + payload, digest_size=16, key=identity.der[-64:])
        if seen.digest() in self._verified:
            return Signature.VALID
        if not signed_by(identity, payload, signature):
            return Signature.BAD
        if len(self._verified) >= _VERIFIED_KEPT:
            self._verified.clear()
        self._verified.add(seen.digest())
        return Signature.VALID

    def refusal(self, identity: Identity, now: dt.datetime) -> str | None:
        """Why `identity` is not a member now, or None if it is."""
        return self.authority.admits(identity, now, self.revocations)

    def is_revoked(self, node_id: str) -> bool:
        """The list held revokes the certificate this node knows for `node_id`."""
        identity = self._identities.get(node_id)
        return (
            identity is not None
            and self.revocations is not None
            and self.revocations.revokes(identity)
        )

    def revoke(self, data: bytes) -> Revocation:
        """Applies a revocation list the CA signed, if it is newer than the one held; the
        members it revokes stop counting at once. NotAMember for anything the CA did not sign."""
        if len(data) > MAX_REVOCATION_LIST_BYTES:
            raise NotAMember(
                f"revocation list is {len(data)} bytes; at most {MAX_REVOCATION_LIST_BYTES}"
            )
        offered = self.authority.revocation_list(data)
        applied = offered.supersedes(self.revocations)
        if applied:
            self._save(offered.der)
            self.revocations = offered
        revoked = tuple(sorted(n for n in self._identities if self.is_revoked(n)))
        for node_id in revoked:
            if node_id != self.own.node_id:
                self._ledger.stop_counting(node_id)
        return Revocation(applied, self.number, revoked)

    @property
    def number(self) -> int:
        """The number of the revocation list held; 0 when none is."""
        return self.revocations.number if self.revocations else 0

    def later_than(self, number: int) -> bytes | None:
        """The list held (DER), if it is later than a peer's list `number`: for gossip."""
        if self.revocations is None or self.revocations.number <= number:
            return None
        return self.revocations.der

    def offered(self, data: bytes, by: str) -> str:
        """Applies a revocation list a peer passed on; why it was refused, or "". Any member
        may carry it: it counts only if the CA signed it, and only if it is later."""
        try:
            done = self.revoke(data)
        except NotAMember as exc:
            log.warning("revocation list from %s refused: %s", by, exc)
            return f"revocation list: {exc}"
        if done.applied:
            log.info(
                "revocation list number %d from %s applied; revoked: %s",
                done.number,
                by,
                ", ".join(done.revoked) or "no member known here",
            )
        return ""

    def members(self, now: dt.datetime, default_cap: str) -> list[MemberView]:
        """Every member known: this node first, then by node id."""
        names = sorted(
            set(self._addresses) | set(self._identities), key=lambda n: (n != self.own.node_id, n)
        )
        out = []
        for node_id in names:
            identity = self._identities.get(node_id)
            out.append(
                MemberView(
                    node_id=node_id,
                    address=self._addresses.get(node_id, ""),
                    certificate_expires=identity.not_after if identity else None,
                    revoked=self.is_revoked(node_id),
                    max_anchor=self._caps.get(node_id, default_cap),
                    is_self=node_id == self.own.node_id,
                    refused="" if identity is None else (self.refusal(identity, now) or ""),
                )
            )
        return out


__all__ = ["MAX_REVOCATION_LIST_BYTES", "MemberView", "NotAMember", "Revocation", "Roster"]
