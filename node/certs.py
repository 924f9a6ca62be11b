"""A development certificate authority and node certificates for mutual TLS between peers.

Each node certificate names its node id (as common name and as a DNS name), which is
how a peer connection proves which node is on the other end.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from factnode.federation.trust import Authority, NotAMember, sign_revocation_list

VALID_DAYS = 825
REVOCATION_FILE = "revoked.crl"
# `factnode certs revoke NODE_ID...` revokes instead of issuing, so no node may be named so.
REVOKE_VERB = "revoke"


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    """Readable by its owner only, from the first byte: the file is created 0600.

    The owner is whoever runs `factnode certs`, so run it as the user that serves
    (the compose file does, in the image; Kubernetes mounts keys from a Secret).
    """
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.unlink(missing_ok=True)  # a reissue must not inherit an older file's mode
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)


def _load(out: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    crt, key = out / "ca.crt", out / "ca.key"
    if not crt.exists():
        return None
    private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    return x509.load_pem_x509_certificate(crt.read_bytes()), private


def ensure_ca(
    out: Path, name: str = "factnode development CA"
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Loads `out/ca.crt` and `out/ca.key`, or makes them."""
    out.mkdir(parents=True, exist_ok=True)
    found = _load(out)
    if found is not None:
        return found
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    (out / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(out / "ca.key", key)
    return cert, key


def issue_node_cert(
    out: Path, node_id: str, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")
) -> tuple[Path, Path]:
    """Makes `out/<node_id>.crt` and `.key`, signed by the CA in `out`, for server and client use."""
    if not node_id or any(c in node_id for c in "/\\ ") or node_id.startswith("."):
        raise ValueError(f"node id {node_id!r} cannot name a certificate file")
    if node_id == REVOKE_VERB:
        raise ValueError(
            f"node id {node_id!r} is reserved: `factnode certs revoke` signs revocations"
        )
    ca_cert, ca_key = ensure_ca(out)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(node_id)]
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node_id)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    crt_path, key_path = out / f"{node_id}.crt", out / f"{node_id}.key"
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return crt_path, key_path


def revoke(out: Path, node_ids: Sequence[str], cert_files: Sequence[Path] = ()) -> tuple[Path, int]:
    """Adds the certificates of `node_ids` (`out/<node_id>.crt`) and `cert_files` to the CA's
    revocation list `out/revoked.crl`, signed with `out/ca.key`, and returns its path and
    number. Each call numbers the list after the one it replaces (specification §7)."""
    found = _load(out)
    if found is None:
        raise ValueError(f"no CA in {out} (ca.crt and ca.key): revocations are signed by the CA")
    ca_cert, ca_key = found
    authority = Authority(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths = [out / f"{n}.crt" for n in node_ids] + list(cert_files)
    if not paths:
        raise ValueError("name at least one node id or --cert to revoke")
    serials = []
    for path in paths:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ValueError(f"no certificate at {path}") from None
        try:
            serials.append(authority.identity(data).serial)
        except NotAMember as exc:
            raise ValueError(f"{path}: {exc}") from None
    target = out / REVOCATION_FILE
    previous = authority.revocation_list(target.read_bytes()) if target.exists() else None
    pem = sign_revocation_list(ca_cert, ca_key, serials, previous, dt.datetime.now(dt.UTC))
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(pem)
    tmp.replace(target)  # a reader never sees half a list
    return target, authority.revocation_list(pem).number
