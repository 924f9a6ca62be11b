"""Who belongs to a federation, and what its members signed (specification §7).

A member is a node holding a certificate that the federation's CA signed, in its validity
period, and not revoked: its common name is its node id. Revocation is a certificate
revocation list (X.509 CRL) signed by the CA's key, which never has to be on a node: an
operator signs it with `factnode certs revoke` and hands it to any one member, and it
gossips. A later list (a higher CRL number) replaces an earlier one, so a list only grows
by being reissued, and nobody but the CA can shrink it.

Members sign with their certificate's key (ECDSA P-256, SHA-256); a signature is checked
against the signer's certificate before the signed item is used, so a relay can carry an
item but never forge, alter or re-attribute it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# How long a revocation list says it is current; members keep using the newest they hold
# after that too (a stale list still revokes), so this only informs tools that read it.
REVOCATION_LIST_DAYS = 365
# The largest revocation list a node takes: a CRL entry costs about 40 bytes, so this holds
# tens of thousands of revocations and bounds what one request can make the node parse.
MAX_REVOCATION_LIST_BYTES = 1024 * 1024


class NotAMember(ValueError):
    """A certificate, signature or revocation list the federation's CA does not vouch for."""


@dataclass(frozen=True, slots=True)
class Identity:
    """A certificate the CA signed: who it names and until when."""

    node_id: str
    serial: int
    not_before: dt.datetime
    not_after: dt.datetime
    certificate: x509.Certificate

    @property
    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)


@dataclass(frozen=True, slots=True)
class RevocationList:
    """A CRL the CA signed: the serials it revokes, and its number (later lists are higher)."""

    number: int
    issued_at: dt.datetime
    serials: frozenset[int]
    der: bytes

    def revokes(self, identity: Identity) -> bool:
        """The certificate is on this list."""
        return identity.serial in self.serials

    def supersedes(self, other: RevocationList | None) -> bool:
        """This list replaces `other`: it is the first, or it has a higher number."""
        return other is None or self.number > other.number


class Authority:
    """The federation's CA, as a node knows it: its certificate only, never its key."""

    def __init__(self, ca_pem: bytes) -> None:
        self.certificate = x509.load_pem_x509_certificate(ca_pem)
        key = self.certificate.public_key()
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise NotAMember("the federation CA's key must be an elliptic-curve key")
        self._key = key

    def identity(self, cert: bytes | x509.Certificate) -> Identity:
        """The certificate's identity, if the CA signed it (PEM or DER bytes, or parsed).

        Validity dates and revocation are the caller's to check (`admits`), since they
        depend on the time and on the revocation list the caller holds."""
        certificate = cert if isinstance(cert, x509.Certificate) else _load_certificate(cert)
        if certificate.issuer != self.certificate.subject:
            raise NotAMember("certificate is not issued by the federation CA")
        try:
            certificate.verify_directly_issued_by(self.certificate)
        except (ValueError, TypeError, InvalidSignature) as exc:
            raise NotAMember("certificate is not signed by the federation CA") from exc
        try:
            is_ca = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        if is_ca:
            raise NotAMember("a CA certificate is not a member's certificate")
        names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if len(names) != 1 or not str(names[0].value):
            raise NotAMember("certificate must name exactly one node id as its common name")
        return Identity(
            node_id=str(names[0].value),
            serial=certificate.serial_number,
            not_before=certificate.not_valid_before_utc,
            not_after=certificate.not_valid_after_utc,
            certificate=certificate,
        )

    def admits(
        self, identity: Identity, now: dt.datetime, revocations: RevocationList | None
    ) -> str | None:
        """Why `identity` is not a member at `now` under `revocations`, or None if it is."""
        if now < identity.not_before:
            return f"certificate of {identity.node_id!r} is not valid before {identity.not_before:%Y-%m-%dT%H:%M:%SZ}"
        if now >= identity.not_after:
            return f"certificate of {identity.node_id!r} expired at {identity.not_after:%Y-%m-%dT%H:%M:%SZ}"
        if revocations is not None and revocations.revokes(identity):
            return f"certificate of {identity.node_id!r} (serial {identity.serial:x}) is revoked"
        return None

    def revocation_list(self, data: bytes) -> RevocationList:
        """A CRL (PEM or DER) the CA signed; NotAMember for anything else."""
        try:
            crl = (
                x509.load_pem_x509_crl(data)
                if data.lstrip().startswith(b"-----")
                else x509.load_der_x509_crl(data)
            )
        except ValueError as exc:
            raise NotAMember("not a certificate revocation list") from exc
        if crl.issuer != self.certificate.subject or not crl.is_signature_valid(self._key):
            raise NotAMember("revocation list is not signed by the federation CA")
        try:
            number = crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number
        except x509.ExtensionNotFound as exc:
            raise NotAMember("revocation list has no CRL number") from exc
        return RevocationList(
            number=number,
            issued_at=crl.last_update_utc,
            serials=frozenset(r.serial_number for r in crl),
            der=crl.public_bytes(serialization.Encoding.DER),
        )


class Signer:
    """This node's signing identity: its certificate and the key that goes with it."""

    def __init__(self, authority: Authority, cert_pem: bytes, key_pem: bytes) -> None:
        self.identity = authority.identity(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise NotAMember("a node's key must be an elliptic-curve key")
        public = self.identity.certificate.public_key()
        if not isinstance(public, ec.EllipticCurvePublicKey) or public.public_numbers() != (
            key.public_key().public_numbers()
        ):
            raise NotAMember("the key does not belong to the certificate")
        self._key = key

    @property
    def node_id(self) -> str:
        return self.identity.node_id

    def sign(self, payload: bytes) -> bytes:
        """The signature of `payload` by this node's key."""
        return self._key.sign(payload, ec.ECDSA(hashes.SHA256()))


def signed_by(identity: Identity, payload: bytes, signature: bytes) -> bool:
    """`signature` is `identity`'s key's signature of exactly `payload`."""
    key = identity.certificate.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        return False
    try:
        key.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def sign_revocation_list(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    serials: Iterable[int],
    previous: RevocationList | None,
    now: dt.datetime,
) -> bytes:
    """A CRL (PEM) revoking `serials` and everything `previous` revoked, numbered after it."""
    revoked = sorted(set(serials) | (previous.serials if previous else frozenset()))
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(now)
        .next_update(now + dt.timedelta(days=REVOCATION_LIST_DAYS))
        .add_extension(x509.CRLNumber(previous.number + 1 if previous else 1), critical=False)
    )
    for serial in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now).build()
        )
    return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _load_certificate(data: bytes) -> x509.Certificate:
    try:
        if data.lstrip().startswith(b"-----"):
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    except ValueError as exc:
        raise NotAMember("not a certificate") from exc
