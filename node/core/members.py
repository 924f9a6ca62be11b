"""Member records: what each member of a federation says about itself (specification §7).

A record names a member's node id, the address it is dialed at, its certificate and an
incarnation that only grows; the member signs it with its certificate's key. The bytes
signed, the rule that decides which of two records of one member is kept, and the checks
on a record's shape are pure and live here; checking the certificate and the signature
against the federation's CA is the shell's (`factnode.federation.trust`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from factnode.core.validation import text_problem

RECORD_FORMAT = b"factnode member record v1"
MAX_NODE_ID_BYTES = 256
MAX_ADDRESS_BYTES = 256
MAX_CERTIFICATE_BYTES = 16 * 1024
MAX_SIGNATURE_BYTES = 256
# The highest incarnation a record may carry (docs/federation.md, "Member records"), far
# inside the wire's uint64 and the store's signed 64-bit column, so that one above any
# record held is always exact and storable. Past it a member cannot sign above a record of
# itself; a record there that it did not sign is overcome by reissuing its certificate
# (`supersedes`: a record with a later certificate replaces one with an earlier one).
MAX_INCARNATION = 2**62


def _framed(*parts: bytes) -> bytes:
    out = bytearray()
    for p in parts:
        out += len(p).to_bytes(4, "big")
        out += p
    return bytes(out)


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """One member's signed statement of who it is and where it listens."""

    node_id: str
    address: str
    certificate: bytes  # PEM, as the CA issued it
    incarnation: int
    signature: bytes = b""

    def payload(self) -> bytes:
        """The bytes the member signs: every field but the signature, framed by length."""
        return _framed(
            RECORD_FORMAT,
            self.node_id.encode(),
            self.address.encode(),
            self.certificate,
            str(self.incarnation).encode(),
        )

    @property
    def content_hash(self) -> str:
        """What the record says (its signature aside, which differs on every signing): the
        same record signed twice is one record, in digests and when two compete."""
        return hashlib.blake2b(self.payload(), digest_size=16).hexdigest()


def member_item_id(node_id: str) -> str:
    """The digest bucket id of a member's record: a hash of its node id, so records spread
    evenly over buckets and one member has one item however often it re-signs."""
    return hashlib.blake2b(node_id.encode(), digest_size=16).hexdigest()


def supersedes(offered: MemberRecord, held: MemberRecord | None, certificates: int = 0) -> bool:
    """`offered` replaces `held`: one with a later certificate (`certificates` > 0: the shell
    compares the records' certificates, a reissued one expiring later; < 0: earlier; 0: the
    same or equal), whatever the incarnations, so a record signed with a leaked key before
    the reissue never outranks one signed with the new key; then a higher incarnation; then
    the same with a lower content hash, so that every node keeps the same one of two records
    a member numbered alike. Every comparison is of exact integers or of bytes."""
    if held is None:
        return True
    if certificates:
        return certificates > 0
    if offered.incarnation != held.incarnation:
        return offered.incarnation > held.incarnation
    return offered.content_hash < held.content_hash


def can_answer(record: MemberRecord) -> bool:
    """A member can sign a record of itself above `record` (one incarnation higher)."""
    return record.incarnation < MAX_INCARNATION


def record_problem(record: MemberRecord) -> str:
    """Why the record's shape is unacceptable (before any signature is checked), or ""."""
    for name, text, most in (
        ("node_id", record.node_id, MAX_NODE_ID_BYTES),
        ("address", record.address, MAX_ADDRESS_BYTES),
    ):
        if not text.strip():
            return f"{name} is empty"
        if len(text.encode()) > most:
            return f"{name} is over {most} bytes"
        problem = text_problem(text)
        if problem:
            return f"{name} {problem}"
    host, _, port = record.address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"address {record.address[:40]!r} is not host:port"
    if not 0 < record.incarnation <= MAX_INCARNATION:
        return f"incarnation must be in [1, {MAX_INCARNATION}], got {record.incarnation}"
    if not record.certificate or len(record.certificate) > MAX_CERTIFICATE_BYTES:
        return f"certificate must be 1 to {MAX_CERTIFICATE_BYTES} bytes"
    if not record.signature or len(record.signature) > MAX_SIGNATURE_BYTES:
        return f"signature must be 1 to {MAX_SIGNATURE_BYTES} bytes"
    return ""


__all__ = [
    "MAX_INCARNATION",
    "MemberRecord",
    "can_answer",
    "member_item_id",
    "record_problem",
    "supersedes",
]
