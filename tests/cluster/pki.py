"""Certificates for the loopback control plane, made with ``cryptography``: a CA, the apiserver's serving
certificate, an admin client certificate in ``system:masters``, the service-account signing key, and the
aggregation layer's front proxy: its own CA (the requestheader client CA) and the API server's proxy client
certificate (common name ``front-proxy-client``, the one requestheader allowed name)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class ControlPlanePki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_pub: Path
    front_proxy_ca_cert: Path
    front_proxy_ca_key: Path
    proxy_client_cert: Path
    proxy_client_key: Path


FRONT_PROXY_CLIENT = "front-proxy-client"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
    )


def write_client_identity(
    pki: ControlPlanePki,
    user: str,
    groups: tuple[str, ...],
    cert: Path,
    key: Path,
    *,
    signed_by: tuple[Path, Path] | None = None,
) -> None:
    """A client certificate for ``user`` in ``groups``, signed by the cluster CA (the API server trusts it), or
    by ``signed_by`` (a CA's certificate and key files)."""
    ca_cert_path, ca_key_path = signed_by or (pki.ca_cert, pki.ca_key)
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    client_key = _key()
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    certificate = (
        _builder(x509.Name(subject), ca_cert.subject, client_key.public_key())
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_key(key, client_key)


def _write_ca(common_name: str, cert: Path, key: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, ca_key)
    return ca_cert, ca_key


def write_pki(folder: Path) -> ControlPlanePki:
    folder.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _write_ca("kuota-test-ca", folder / "ca.crt", folder / "ca.key")
    ca_name = ca_cert.subject

    serving_key = _key()
    serving_cert = (
        _builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]), ca_name, serving_key.public_key()
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    admin_key = _key()
    admin_cert = (
        _builder(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                    x509.NameAttribute(NameOID.COMMON_NAME, "kuota-test-admin"),
                ]
            ),
            ca_name,
            admin_key.public_key(),
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    service_account_key = _key()
    paths = ControlPlanePki(
        ca_cert=folder / "ca.crt",
        ca_key=folder / "ca.key",
        serving_cert=folder / "apiserver.crt",
        serving_key=folder / "apiserver.key",
        admin_cert=folder / "admin.crt",
        admin_key=folder / "admin.key",
        service_account_key=folder / "sa.key",
        service_account_pub=folder / "sa.pub",
        front_proxy_ca_cert=folder / "front-proxy-ca.crt",
        front_proxy_ca_key=folder / "front-proxy-ca.key",
        proxy_client_cert=folder / "front-proxy-client.crt",
        proxy_client_key=folder / "front-proxy-client.key",
    )
    _write_ca("kuota-test-front-proxy-ca", paths.front_proxy_ca_cert, paths.front_proxy_ca_key)
    write_client_identity(
        paths,
        FRONT_PROXY_CLIENT,
        (),
        paths.proxy_client_cert,
        paths.proxy_client_key,
        signed_by=(paths.front_proxy_ca_cert, paths.front_proxy_ca_key),
    )
    paths.serving_cert.write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(paths.serving_key, serving_key)
    paths.admin_cert.write_bytes(admin_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(paths.admin_key, admin_key)
    _write_key(paths.service_account_key, service_account_key)
    paths.service_account_pub.write_bytes(
        service_account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return paths
