"""The members a node knows, their signed records, and the revocation list it holds (specification §7).

Who is a member is decided by certificates alone: the CA signed it, it is within its
validity period, and the revocation list this node holds does not name it. Members learn
of each other from member records, which each member signs itself and which gossip in the
sync rounds like any other data (digest set MEMBERS): a record is taken when its
certificate is the CA's, its signature is its certificate's key's, and its node id is its
certificate's common name; a higher incarnation replaces a lower one. The roster keeps the
records in the store, so a restarted node remembers the fleet. A revocation list names
certificate serials; the roster applies it to every member whose certificate it holds, and
a revoked member's votes stop counting here at once, its links are refused and it is never
dialed (its record is kept, marked revoked).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from factnode.config import Peer
from factnode.core import Confirmation, Evidence
from factnode.core.consensus import Vote
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.members import (
    MAX_INCARNATION,
    MemberRecord,
    can_answer,
    member_item_id,
    record_problem,
    supersedes,
)
from factnode.core.receipts import Receipt
from factnode.core.signed import (
    Signature,
    bound_payload,
    confirmation_payload,
    evidence_payload,
    receipt_payload,
    tombstone_payload,
    vote_payload,
)
from factnode.federation._index import index_of
from factnode.federation.trust import (
    MAX_REVOCATION_LIST_BYTES,
    Authority,
    Identity,
    NotAMember,
    RevocationList,
    Signer,
    signed_by,
)
from factnode.ledger import Ledger, Signing
from factnode.store import StoredMember, Tombstone, Writes

log = logging.getLogger("factnode.federation")

# How many checked signatures `Roster.verify` remembers (16 bytes each) before starting over.
_VERIFIED_KEPT = 100_000
# How many earlier certificates of one member the roster keeps (the latest expiring), so the
# items it signed with an earlier key still check after it was reissued a new one.
_EARLIER_KEPT = 4
# Where they are kept across restarts: the store's named values, as PEM.
_EARLIER_META = "member_certificates_earlier"


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
    incarnation: int  # of the record held; 0: none yet (a configured peer or seed)


@dataclass(frozen=True, slots=True)
class Revocation:
    """What handing a revocation list to the node did."""

    applied: bool
    number: int
    revoked: tuple[str, ...]  # known members the list held now revokes


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Roster:
    """The federation's members as this node knows them, and the revocation list it holds.

    `load` and `save` keep the list across restarts (the composition root passes the store's
    named values); member records are kept in the ledger's store. `ledger` is told when a
    member's votes must stop counting. `publish` signs this node's own record once its
    federation address is known."""

    def __init__(
        self,
        ledger: Ledger,
        authority: Authority,
        signer: Signer,
        peers: Sequence[Peer] = (),
        load: Callable[[], bytes | None] = lambda: None,
        save: Callable[[bytes], None] = lambda der: None,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self._ledger = ledger
        self.authority = authority
        self.signer = signer
        self.own = signer.identity
        self._save = save
        self._now = now
        self._lock = threading.RLock()
        self._index = index_of(ledger)
        self._identities: dict[str, Identity] = {self.own.node_id: self.own}
        # Each member's earlier certificates (not the one held in `_identities`), by serial:
        # what it signed with an earlier key still checks while they are valid.
        self._earlier: dict[str, dict[int, Identity]] = {}
        self._earlier_saved = b""
        # Configured peers: their addresses until their records say otherwise.
        self._configured = {p.node_id: p.address for p in peers}
        self._records: dict[str, MemberRecord] = {}
        self._by_item: dict[str, str] = {}  # digest item id -> node id
        # Certificates already checked, by their PEM: a peer presents the same one on every
        # call, and its CA signature need not be verified again each time.
        self._by_pem: dict[bytes, Identity] = {}
        self._refusal_observers: list[Callable[[int], None]] = []
        # Digests of signatures already found valid (`verify`), each with its certificate.
        self._verified: set[bytes] = set()
        held = load()
        self.revocations: RevocationList | None = (
            None if held is None else authority.revocation_list(held)
        )
        with ledger.repo.read() as tx:
            stored = tx.member_records()
            earlier = tx.meta(_EARLIER_META)
        self._earlier_saved = (earlier or "").encode("ascii")
        for pem in _pems(earlier or ""):
            try:
                self._learn(self._identity(pem))
            except NotAMember as exc:  # a CA changed under a kept store
                log.warning("an earlier member certificate no longer checks: %s", exc)
        for m in stored:
            try:
                self._hold(m.record, self._identity(m.record.certificate))
            except NotAMember as exc:  # a CA changed under a kept store
                log.warning("member record of %s no longer checks: %s", m.record.node_id, exc)

    # -- certificates --------------------------------------------------------------

    def _identity(self, certificate: bytes) -> Identity:
        identity = self._by_pem.get(certificate)
        if identity is None:
            identity = self._by_pem[certificate] = self.authority.identity(certificate)
        return identity

    def _learn(self, identity: Identity) -> bool:
        """Holds `identity` as its node's certificate unless an older one, which is kept
        among the node's earlier certificates (as is the one a newer replaces); True if new."""
        held = self._identities.get(identity.node_id)
        # A reissued certificate replaces the one held; an older one never comes back.
        if held is None or identity.not_after >= held.not_after:
            self._identities[identity.node_id] = identity
            if held is not None and held.serial != identity.serial:
                self._keep_earlier(held)
            self._earlier.get(identity.node_id, {}).pop(identity.serial, None)
            return held is None or held.serial != identity.serial
        if held.serial != identity.serial:
            self._keep_earlier(identity)
        return False

    def _keep_earlier(self, identity: Identity) -> None:
        """Keeps an earlier certificate of a member (the latest expiring few), persisted."""
        kept = self._earlier.setdefault(identity.node_id, {})
        if identity.serial in kept:
            return
        kept[identity.serial] = identity
        for old in sorted(kept.values(), key=lambda i: i.not_after)[:-_EARLIER_KEPT]:
            del kept[old.serial]
        pems = b"".join(i.pem for ring in self._earlier.values() for i in ring.values())
        if pems != self._earlier_saved:
            with self._ledger.repo.write() as tx:
                tx.apply(Writes(meta={_EARLIER_META: pems.decode("ascii")}))
            self._earlier_saved = pems

    def earlier_certificates(self, node_id: str) -> list[Identity]:
        """The earlier certificates held for `node_id`, latest expiring first."""
        with self._lock:
            kept = list(self._earlier.get(node_id, {}).values())
        return sorted(kept, key=lambda i: i.not_after, reverse=True)

    def seen(self, certificate: bytes) -> Identity:
        """Remembers the certificate a member presented (PEM); NotAMember if the CA did not sign it."""
        identity = self._identity(certificate)
        with self._lock:
            self._learn(identity)
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
        """The certificates (DER) held for `node_ids`, to travel beside their signed items:
        each one's current certificate, then its earlier ones (items it signed before it was
        reissued a certificate travel on too)."""
        out: list[bytes] = []
        for n in sorted(set(node_ids)):
            current = self._identities.get(n)
            if current is not None:
                out.append(current.der)
                out += [i.der for i in self.earlier_certificates(n)]
        return out

    def signing(self) -> Signing:
        """This node's signing key and this roster's checks of what peers sign, as the ledger
        takes them (`Ledger.signing`)."""
        return Signing(
            sign=self.signer.sign,
            verify_vote=self.verify_vote,
            verify_evidence=self.verify_evidence,
            verify_tombstone=self.verify_tombstone,
            verify_bound=self.verify_bound,
            verify_confirmation=self.verify_confirmation,
            verify_receipt=self.verify_receipt,
        )

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

    def verify_bound(self, b: ErasureBound, now: dt.datetime | None = None) -> Signature:
        """Checks an erasure bound's signature against the certificate of the node it names
        as the one that bounded the erasure (`verify`)."""
        return self.verify(b.node, bound_payload(b), b.signature, now)

    def verify_receipt(self, r: Receipt, now: dt.datetime | None = None) -> Signature:
        """Checks an erasure receipt's signature against the certificate of the member it
        names as the one that applied the erasure (`verify`)."""
        return self.verify(r.node, receipt_payload(r), r.signature, now)

    def verify_confirmation(self, c: Confirmation, now: dt.datetime | None = None) -> Signature:
        """Checks a confirmation's signature against the certificate of the member it names
        as the one that took the restatement (`verify`)."""
        return self.verify(c.signer, confirmation_payload(c), c.signature, now)

    def verify(
        self, signer: str, payload: bytes, signature: bytes, now: dt.datetime | None = None
    ) -> Signature:
        """Checks a signature against its signer's certificate: the signer must be a member
        (CA-signed, in its validity period, not revoked: a revoked member's items arriving
        after the revocation are refused, whatever date they claim) and the signature must
        cover exactly the bytes as they arrived (specification §7)."""
        if not signature:
            return Signature.UNSIGNED
        identity = self._identities.get(signer)
        if identity is None:
            return Signature.UNKNOWN_SIGNER
        at = now or dt.datetime.now(dt.UTC)
        if self.refusal(identity, at):
            return Signature.NOT_A_MEMBER
        if self._signed_with(identity, payload, signature):
            return Signature.VALID
        # Signed before its member was reissued a certificate with a new key: it checks
        # against an earlier certificate while that is valid and not revoked.
        for earlier in self.earlier_certificates(signer):
            if not self.refusal(earlier, at) and self._signed_with(earlier, payload, signature):
                return Signature.VALID
        return Signature.BAD

    def _signed_with(self, identity: Identity, payload: bytes, signature: bytes) -> bool:
        """`signature` is `identity`'s key's over `payload`, remembered once checked: the same
        signed item arrives from every relay that holds it."""
        seen = hashlib.blake2b(signature + payload, digest_size=16, key=identity.der[-64:])
        if seen.digest() in self._verified:
            return True
        if not signed_by(identity, payload, signature):
            return False
        if len(self._verified) >= _VERIFIED_KEPT:
            self._verified.clear()
        self._verified.add(seen.digest())
        return True

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

    def is_member(self, node_id: str) -> bool:
        """`node_id`'s certificate, as held here, is valid now and not revoked; a node whose
        certificate this node has not seen yet (a configured peer) counts as one."""
        identity = self._identities.get(node_id)
        return identity is None or self.refusal(identity, self._now()) is None

    # -- member records --------------------------------------------------------------

    def on_refused(self, observer: Callable[[int], None]) -> None:
        """Calls `observer` with the number of member records refused by each `take`."""
        self._refusal_observers.append(observer)

    def _hold(self, record: MemberRecord, identity: Identity) -> None:
        self._learn(identity)
        self._records[record.node_id] = record
        item = member_item_id(record.node_id)
        self._by_item[item] = record.node_id
        with self._index.lock:
            self._index.members.put(item, int(record.content_hash, 16))

    def record(self, node_id: str) -> MemberRecord | None:
        """The record held for `node_id`."""
        return self._records.get(node_id)

    def publish(self, address: str) -> MemberRecord:
        """This node's own record, signed anew (one incarnation up) if the address or the
        certificate changed since the one held."""
        with self._lock:
            held = self._records.get(self.own.node_id)
            pem = self.own.pem
            if held is not None and (held.address, held.certificate) == (address, pem):
                return held
            return self._sign_own(address, held.incarnation + 1 if held else 1)

    def _sign_own(self, address: str, incarnation: int) -> MemberRecord:
        if incarnation > MAX_INCARNATION:  # `take` never asks; a store edited by hand might
            raise ValueError(
                f"this node's member record is at incarnation {incarnation - 1}, the highest "
                "(docs/federation.md, 'Member records'): reissue its certificate"
            )
        unsigned = MemberRecord(self.own.node_id, address, self.own.pem, incarnation)
        record = MemberRecord(
            unsigned.node_id,
            address,
            unsigned.certificate,
            incarnation,
            self.signer.sign(unsigned.payload()),
        )
        self._hold(record, self.own)
        self._persist([record])
        return record

    def _persist(self, records: Collection[MemberRecord]) -> None:
        if not records:
            return
        rows = [StoredMember(r, self.is_revoked(r.node_id)) for r in records]
        with self._ledger.repo.write() as tx:
            tx.apply(Writes(members=rows))

    def _check(self, record: MemberRecord, now: dt.datetime) -> tuple[Identity | None, str]:
        """The record's certificate's identity, or why the record is refused."""
        problem = record_problem(record)
        if problem:
            return None, problem
        try:
            identity = self._identity(record.certificate)
        except NotAMember as exc:
            return None, str(exc)
        if identity.node_id != record.node_id:
            return None, f"its certificate names {identity.node_id!r}, not {record.node_id[:40]!r}"
        if not signed_by(identity, record.payload(), record.signature):
            return None, "its signature is not its certificate's key's"
        if now < identity.not_before or now >= identity.not_after:
            # A revoked member's record is kept (marked); an expired one names no member.
            refusal = self.authority.admits(identity, now, None)
            return None, refusal or "certificate not valid now"
        return identity, ""

    def _certificate_order(self, offered: MemberRecord, held: MemberRecord | None) -> int:
        """Which of two records of one member has the later certificate: 1 offered's, -1
        held's, 0 the same or equal. A certificate the revocation list held revokes is
        earlier than one it does not (a leaked key's is revoked once reissued); otherwise
        the later expiring is the later, as `_learn` takes a reissued one."""
        if held is None or held.certificate == offered.certificate:
            return 0
        a, b = self._identity(offered.certificate), self._identity(held.certificate)
        revoked = [self.revocations is not None and self.revocations.revokes(i) for i in (a, b)]
        if revoked[0] != revoked[1]:
            return -1 if revoked[0] else 1
        return (a.not_after > b.not_after) - (a.not_after < b.not_after)

    def take(self, records: Sequence[MemberRecord], by: str) -> list[tuple[str, str]]:
        """Takes the records a peer passed on, each checked; returns the refused ones, each
        with its reason. A record of a member this node holds a later record of is taken
        as held. A record of this node that is later than its own is answered by signing
        its own anew above it, so the fleet keeps what this node says of itself."""
        refused: list[tuple[str, str]] = []
        changed: list[MemberRecord] = []
        newly_revoked: list[str] = []
        now = self._now()
        with self._lock:
            for record in records:
                identity, problem = self._check(record, now)
                if identity is None:
                    refused.append((f"member:{record.node_id[:64]}", f"member record: {problem}"))
                    continue
                held = self._records.get(record.node_id)
                if not supersedes(record, held, self._certificate_order(record, held)):
                    continue
                own = held if record.node_id == self.own.node_id else None
                if own is not None and own.content_hash != record.content_hash:
                    if not can_answer(record):
                        refused.append(_unanswerable(record))
                        continue
                    self._sign_own(own.address, record.incarnation + 1)
                    continue
                new = self._learn(identity)
                self._hold(record, identity)
                changed.append(record)
                if new and self.is_revoked(record.node_id):
                    newly_revoked.append(record.node_id)
            self._persist(changed)
        for node_id in newly_revoked:
            self._ledger.stop_counting(node_id)
        if refused:
            log.warning("%d member record(s) from %s refused: %s", len(refused), by, refused[0][1])
            for observer in self._refusal_observers:
                observer(len(refused))
        return refused

    def records_under(self, prefixes: Collection[str]) -> list[MemberRecord]:
        """The records whose digest items lie under the given bucket prefixes."""
        with self._index.lock:
            items = self._index.members.ids_under(prefixes)
        with self._lock:
            return [self._records[self._by_item[i]] for i in items if i in self._by_item]

    def dialable(self) -> list[Peer]:
        """Every member this node may dial now: known by record or configuration, with an
        address, not this node, not revoked and not expired; by node id."""
        with self._lock:
            addresses = dict(self._configured)
            addresses.update((n, r.address) for n, r in self._records.items())
        return [
            Peer(address, node_id, self._ledger.policy.cap_for(node_id))
            for node_id, address in sorted(addresses.items())
            if node_id != self.own.node_id and self.is_member(node_id)
        ]

    def remember(self, node_id: str, address: str) -> None:
        """Dials `node_id` at `address` (a seed's) until its record says where it listens."""
        with self._lock:
            self._configured.setdefault(node_id, address)

    def knows(self, node_id: str) -> bool:
        """This node holds a record for `node_id` or has it configured."""
        return node_id in self._records or node_id in self._configured

    # -- revocation ------------------------------------------------------------------

    def revoke(self, data: bytes) -> Revocation:
        """Applies a revocation list the CA signed, if it is newer than the one held; the
        members it revokes stop counting at once. NotAMember for anything the CA did not sign."""
        if len(data) > MAX_REVOCATION_LIST_BYTES:
            raise NotAMember(
                f"revocation list is {len(data)} bytes; at most {MAX_REVOCATION_LIST_BYTES}"
            )
        offered = self.authority.revocation_list(data)
        with self._lock:
            was = {n for n in self._records if self.is_revoked(n)}
            applied = offered.supersedes(self.revocations)
            if applied:
                self._save(offered.der)
                self.revocations = offered
            revoked = tuple(sorted(n for n in self._identities if self.is_revoked(n)))
            # Records are kept, marked: they say who was revoked, and are never dialed.
            self._persist(
                [self._records[n] for n in revoked if n in self._records and n not in was]
            )
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

    # -- what operators see ----------------------------------------------------------

    def membership(self, now: dt.datetime | None = None) -> dict[str, bool]:
        """Every member known, by whether it is revoked (an erasure's coverage counts them)."""
        return {m.node_id: m.revoked for m in self.members(now or dt.datetime.now(dt.UTC))}

    def members(self, now: dt.datetime) -> list[MemberView]:
        """Every member known: this node first, then by node id."""
        with self._lock:
            names = set(self._configured) | set(self._identities) | set(self._records)
            records = dict(self._records)
        out = []
        for node_id in sorted(names, key=lambda n: (n != self.own.node_id, n)):
            identity = self._identities.get(node_id)
            record = records.get(node_id)
            out.append(
                MemberView(
                    node_id=node_id,
                    address=record.address if record else self._configured.get(node_id, ""),
                    certificate_expires=identity.not_after if identity else None,
                    revoked=self.is_revoked(node_id),
                    max_anchor=self._ledger.policy.cap_for(node_id),
                    is_self=node_id == self.own.node_id,
                    refused="" if identity is None else (self.refusal(identity, now) or ""),
                    incarnation=record.incarnation if record else 0,
                )
            )
        return out


def _unanswerable(record: MemberRecord) -> tuple[str, str]:
    """Why a record of this node that it did not sign, at the highest incarnation, is not
    taken: no incarnation is left above it, so its key must be assumed leaked."""
    reason = (
        f"member record: a record of this node at incarnation {record.incarnation} (the "
        f"highest, {MAX_INCARNATION}) that this node did not sign, naming address "
        f"{record.address[:60]!r}: its key may have leaked; reissue this node's certificate "
        "and revoke the old one (docs/federation.md, 'A leaked key')"
    )
    log.error("%s", reason)
    return f"member:{record.node_id[:64]}", reason


def _pems(text: str) -> list[bytes]:
    """The PEM certificates in `text`, each with its armour."""
    end = "-----END CERTIFICATE-----"
    return [(part + end + "\n").strip().encode("ascii") for part in text.split(end) if part.strip()]


__all__ = ["MAX_REVOCATION_LIST_BYTES", "MemberView", "NotAMember", "Revocation", "Roster"]
