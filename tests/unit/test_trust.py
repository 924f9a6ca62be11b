"""Membership by certificates: the CA vouches for members, signs revocations, and a member's
signature holds only for exactly the bytes it signed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from factnode.certs import REVOCATION_FILE, ensure_ca, issue_node_cert, revoke
from factnode.cli import main
from factnode.federation.trust import (
    Authority,
    NotAMember,
    Signer,
    sign_revocation_list,
    signed_by,
)


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    """A development CA with certificates for alpha and beta."""
    for node in ("alpha", "beta"):
        issue_node_cert(tmp_path, node)
    return tmp_path


def _authority(ca_dir: Path) -> Authority:
    return Authority((ca_dir / "ca.crt").read_bytes())


def _signer(ca_dir: Path, node: str) -> Signer:
    return Signer(
        _authority(ca_dir),
        (ca_dir / f"{node}.crt").read_bytes(),
        (ca_dir / f"{node}.key").read_bytes(),
    )


def test_a_ca_signed_certificate_names_its_node_id(ca_dir: Path) -> None:
    """The common name of a certificate the CA signed is the member's node id."""
    identity = _authority(ca_dir).identity((ca_dir / "alpha.crt").read_bytes())
    assert identity.node_id == "alpha"
    assert _authority(ca_dir).admits(identity, dt.datetime.now(dt.UTC), None) is None


def test_another_ca_vouches_for_no_member(
    ca_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A certificate from another CA, even with the same names, is not a member's."""
    other = tmp_path_factory.mktemp("other-ca")
    issue_node_cert(other, "alpha")
    with pytest.raises(NotAMember, match="not signed by the federation CA"):
        _authority(ca_dir).identity((other / "alpha.crt").read_bytes())


def test_the_ca_certificate_itself_is_not_a_member(ca_dir: Path) -> None:
    """The CA's own (self-issued) certificate is refused as a member certificate."""
    with pytest.raises(NotAMember, match="CA certificate"):
        _authority(ca_dir).identity((ca_dir / "ca.crt").read_bytes())


def test_garbage_is_not_a_certificate(ca_dir: Path) -> None:
    """Bytes that do not parse are refused with a reason, not an exception of the parser."""
    with pytest.raises(NotAMember, match="not a certificate"):
        _authority(ca_dir).identity(
            b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"
        )


def test_an_expired_or_future_certificate_is_not_admitted(ca_dir: Path) -> None:
    """Membership holds only within the certificate's validity period."""
    authority = _authority(ca_dir)
    identity = authority.identity((ca_dir / "alpha.crt").read_bytes())
    assert "expired" in (authority.admits(identity, identity.not_after, None) or "")
    early = identity.not_before - dt.timedelta(seconds=1)
    assert "not valid before" in (authority.admits(identity, early, None) or "")


def test_a_signature_holds_for_exactly_the_signed_bytes(ca_dir: Path) -> None:
    """A member's signature verifies against its certificate, and fails for altered bytes or
    another member's certificate."""
    alpha, beta = _signer(ca_dir, "alpha"), _signer(ca_dir, "beta")
    payload = b"vote: key k, version v, seq 7"
    signature = alpha.sign(payload)
    assert signed_by(alpha.identity, payload, signature)
    assert not signed_by(alpha.identity, payload + b"8", signature)
    assert not signed_by(beta.identity, payload, signature)
    assert not signed_by(alpha.identity, payload, b"\x30\x00")


def test_a_key_that_is_not_the_certificates_is_refused(ca_dir: Path) -> None:
    """A signer must hold the key its certificate names."""
    with pytest.raises(NotAMember, match="does not belong"):
        Signer(
            _authority(ca_dir),
            (ca_dir / "alpha.crt").read_bytes(),
            (ca_dir / "beta.key").read_bytes(),
        )


def test_revocation_lists_are_numbered_and_cumulative(ca_dir: Path) -> None:
    """Each `revoke` adds to the list the CA signed before it, with the next number."""
    authority = _authority(ca_dir)
    alpha = authority.identity((ca_dir / "alpha.crt").read_bytes())
    beta = authority.identity((ca_dir / "beta.crt").read_bytes())
    path, number = revoke(ca_dir, ["beta"])
    first = authority.revocation_list(path.read_bytes())
    assert (number, first.number) == (1, 1)
    assert first.revokes(beta) and not first.revokes(alpha)
    assert authority.admits(beta, dt.datetime.now(dt.UTC), first) is not None
    _, number = revoke(ca_dir, ["alpha"])
    second = authority.revocation_list(path.read_bytes())
    assert number == 2 and second.revokes(alpha) and second.revokes(beta)
    assert second.supersedes(first) and not first.supersedes(second)


def test_a_revocation_list_not_signed_by_the_ca_is_refused(
    ca_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A list signed by any other key, or bytes that are no list, are refused."""
    other = tmp_path_factory.mktemp("other-ca")
    cert, key = ensure_ca(other)
    forged = sign_revocation_list(cert, key, [1, 2, 3], None, dt.datetime.now(dt.UTC))
    with pytest.raises(NotAMember, match="not signed by the federation CA"):
        _authority(ca_dir).revocation_list(forged)
    with pytest.raises(NotAMember, match="not a certificate revocation list"):
        _authority(ca_dir).revocation_list(b"hello")


def test_a_revocation_list_without_a_number_is_refused(ca_dir: Path) -> None:
    """Without a CRL number no list can be said to be newer, so none is taken."""
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    now = dt.datetime.now(dt.UTC)
    crl = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "factnode development CA")])
        )
        .last_update(now)
        .next_update(now + dt.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    with pytest.raises(NotAMember, match="no CRL number"):
        _authority(ca_dir).revocation_list(crl.public_bytes(serialization.Encoding.PEM))


def test_certs_revoke_on_the_command_line(ca_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`factnode certs revoke --out DIR NODE_ID` writes the signed list and says how to use it;
    an unknown node id is a usage error that writes nothing."""
    assert main(["certs", "revoke", "--out", str(ca_dir), "beta"]) == 0
    out = capsys.readouterr().out
    assert "number 1" in out and "factnode revoke" in out
    assert (ca_dir / REVOCATION_FILE).exists()
    before = (ca_dir / REVOCATION_FILE).read_bytes()
    assert main(["certs", "revoke", "--out", str(ca_dir), "gamma"]) == 2
    assert "no certificate at" in capsys.readouterr().err
    assert (ca_dir / REVOCATION_FILE).read_bytes() == before


def test_revoke_is_not_a_node_id(ca_dir: Path) -> None:
    """No certificate can be issued for the node id `revoke`, which the verb takes."""
    with pytest.raises(ValueError, match="reserved"):
        issue_node_cert(ca_dir, "revoke")


def test_certs_refuses_unknown_options_after_node_ids(ca_dir: Path) -> None:
    """Node ids may follow options, but an unknown option is still a usage error."""
    with pytest.raises(SystemExit) as exited:
        main(["certs", "--out", str(ca_dir), "gamma", "--bogus"])
    assert exited.value.code == 2
