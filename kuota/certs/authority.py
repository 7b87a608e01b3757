"""Issue and inspect the webhook's CA and serving certificate; decide when they must be renewed.

No I/O and no clock: the caller passes ``now``. Keys are ECDSA P-256 (fast to generate, accepted by every
Kubernetes API server and by TLS 1.2/1.3 clients).
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kuota.certs.errors import CertificateMaterialError

CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
# Renew once this fraction of a certificate's lifetime is used: a year-long certificate is renewed with about
# four months to spare, far more than any replica's check interval.
RENEW_AT_LIFETIME_FRACTION = 2 / 3


@dataclass(frozen=True)
class ServingIdentity:
    """The names a serving certificate must carry: the Service's DNS names and any extra IPs."""

    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...] = ()

    @classmethod
    def for_service(
        cls,
        service: str,
        namespace: str,
        ip_addresses: tuple[str, ...] = (),
        cluster_domain: str = "cluster.local",
    ) -> ServingIdentity:
        names = (
            service,
            f"{service}.{namespace}",
            f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.{cluster_domain}",
        )
        return cls(dns_names=names, ip_addresses=ip_addresses)

    def __post_init__(self) -> None:
        if not self.dns_names and not self.ip_addresses:
            raise CertificateMaterialError("a serving certificate needs at least one DNS name or IP address")
        for address in self.ip_addresses:
            try:
                ipaddress.ip_address(address)
            except ValueError as error:
                raise CertificateMaterialError(
                    f"serving IP address {address!r} is not an IPv4 or IPv6 address: fix --ip"
                ) from error


@dataclass(frozen=True)
class CertificateBundle:
    """PEM bytes of a CA and a serving pair it signed.

    ``ca_cert_pem`` is the trust bundle the API server gets as ``caBundle``; its first certificate is the one
    whose key is ``ca_key_pem`` and which signed ``cert_pem``.
    """

    ca_cert_pem: bytes
    ca_key_pem: bytes
    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class BundleFacts:
    """What renewal decisions need to know about a bundle, read once."""

    ca_not_before: datetime
    ca_not_after: datetime
    serving_not_before: datetime
    serving_not_after: datetime
    dns_names: frozenset[str]
    ip_addresses: frozenset[str]


class Renewal(enum.Enum):
    NOT_DUE = "not-due"
    SERVING_CERTIFICATE = "serving-certificate"
    AUTHORITY = "authority"


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _issue_authority(now: datetime, validity: timedelta) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kuota-webhook-ca-{int(now.timestamp())}")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Backdated a little so a replica whose clock runs slightly behind still accepts it.
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def _issue_serving(
    ca_certificate: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    identity: ServingIdentity,
    now: datetime,
    validity: timedelta,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    common_name = identity.dns_names[0] if identity.dns_names else identity.ip_addresses[0]
    alternative_names: list[x509.GeneralName] = [x509.DNSName(name) for name in identity.dns_names]
    alternative_names += [x509.IPAddress(ipaddress.ip_address(address)) for address in identity.ip_addresses]
    # A serving certificate never outlives the CA that signed it.
    not_after = min(now + validity, ca_certificate.not_valid_after_utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return certificate, key


def issue_bundle(
    identity: ServingIdentity,
    now: datetime,
    ca_validity: timedelta = CA_VALIDITY,
    serving_validity: timedelta = SERVING_VALIDITY,
    previous_trust: bytes = b"",
) -> CertificateBundle:
    """A fresh CA and a serving pair for ``identity``.

    ``previous_trust`` (the old bundle's CA PEMs) is appended to the new trust bundle so that replicas still
    serving the old pair stay verifiable until they reload.
    """
    ca_certificate, ca_key = _issue_authority(now, ca_validity)
    certificate, key = _issue_serving(ca_certificate, ca_key, identity, now, serving_validity)
    trust = ca_certificate.public_bytes(serialization.Encoding.PEM) + _unexpired_pems(previous_trust, now)
    return CertificateBundle(
        ca_cert_pem=trust,
        ca_key_pem=_key_pem(ca_key),
        cert_pem=certificate.public_bytes(serialization.Encoding.PEM),
        key_pem=_key_pem(key),
    )


def renew_serving(
    bundle: CertificateBundle,
    identity: ServingIdentity,
    now: datetime,
    serving_validity: timedelta = SERVING_VALIDITY,
) -> CertificateBundle:
    """A new serving pair signed by the bundle's CA; the trust bundle (and so every caBundle) is unchanged."""
    ca_certificate = _load_certificates(bundle.ca_cert_pem, "ca.crt")[0]
    ca_key = _load_key(bundle.ca_key_pem, "ca.key")
    certificate, key = _issue_serving(ca_certificate, ca_key, identity, now, serving_validity)
    return CertificateBundle(
        ca_cert_pem=bundle.ca_cert_pem,
        ca_key_pem=bundle.ca_key_pem,
        cert_pem=certificate.public_bytes(serialization.Encoding.PEM),
        key_pem=_key_pem(key),
    )


def _unexpired_pems(trust: bytes, now: datetime) -> bytes:
    if not trust.strip():
        return b""
    return b"".join(
        certificate.public_bytes(serialization.Encoding.PEM)
        for certificate in _load_certificates(trust, "ca.crt")
        if certificate.not_valid_after_utc > now
    )


def _load_certificates(pem: bytes, source: str) -> list[x509.Certificate]:
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError as error:
        raise CertificateMaterialError(f"{source} holds no readable PEM certificate: {error}") from error
    return certificates


def _load_key(pem: bytes, source: str) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise CertificateMaterialError(f"{source} holds no readable unencrypted PEM private key: {error}") from error
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateMaterialError(f"{source} is not an ECDSA key; kuota issues ECDSA P-256 CA keys")
    return key


def inspect_bundle(bundle: CertificateBundle) -> BundleFacts:
    """Parse and cross-check a bundle: the serving key matches its certificate and the CA signed it."""
    ca_certificate = _load_certificates(bundle.ca_cert_pem, "ca.crt")[0]
    ca_key = _load_key(bundle.ca_key_pem, "ca.key")
    if ca_key.public_key().public_numbers() != _ec_public_key(ca_certificate, "ca.crt").public_numbers():
        raise CertificateMaterialError("ca.key does not belong to the first certificate in ca.crt")
    serving = _load_certificates(bundle.cert_pem, "tls.crt")[0]
    verify_serving_pair(bundle.cert_pem, bundle.key_pem)
    try:
        serving.verify_directly_issued_by(ca_certificate)
    except (ValueError, TypeError, InvalidSignature) as error:
        raise CertificateMaterialError(f"tls.crt was not signed by the CA in ca.crt: {error}") from error
    return _facts(ca_certificate, serving)


def verify_serving_pair(cert_pem: bytes, key_pem: bytes) -> None:
    """Raise unless ``key_pem`` is the private key of the first certificate in ``cert_pem``."""
    serving = _load_certificates(cert_pem, "tls.crt")[0]
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as error:
        raise CertificateMaterialError(f"tls.key holds no readable unencrypted PEM private key: {error}") from error
    public = serving.public_key()
    if key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        raise CertificateMaterialError("tls.key does not belong to the certificate in tls.crt")


def _ec_public_key(certificate: x509.Certificate, source: str) -> ec.EllipticCurvePublicKey:
    key = certificate.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise CertificateMaterialError(f"{source} does not carry an ECDSA public key")
    return key


def _facts(ca_certificate: x509.Certificate, serving: x509.Certificate) -> BundleFacts:
    try:
        names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        dns_names: frozenset[str] = frozenset()
        addresses: frozenset[str] = frozenset()
    else:
        dns_names = frozenset(names.get_values_for_type(x509.DNSName))
        addresses = frozenset(str(address) for address in names.get_values_for_type(x509.IPAddress))
    return BundleFacts(
        ca_not_before=ca_certificate.not_valid_before_utc,
        ca_not_after=ca_certificate.not_valid_after_utc,
        serving_not_before=serving.not_valid_before_utc,
        serving_not_after=serving.not_valid_after_utc,
        dns_names=dns_names,
        ip_addresses=addresses,
    )


def _renewal_point(not_before: datetime, not_after: datetime) -> datetime:
    return not_before + (not_after - not_before) * RENEW_AT_LIFETIME_FRACTION


def renewal_due(facts: BundleFacts, identity: ServingIdentity, now: datetime) -> Renewal:
    """Which part of the bundle must be reissued now, if any.

    The CA is reissued once it is past its renewal point; the serving certificate once it is past its own
    renewal point or its names no longer cover ``identity`` (a new Service name or IP). Names it holds beyond
    the identity's are kept: during a rolling upgrade that adds a name, the old replicas accept the new
    replicas' certificate instead of reissuing it back and forth.
    """
    if now >= _renewal_point(facts.ca_not_before, facts.ca_not_after):
        return Renewal.AUTHORITY
    names_covered = facts.dns_names >= frozenset(identity.dns_names) and facts.ip_addresses >= frozenset(
        str(ipaddress.ip_address(address)) for address in identity.ip_addresses
    )
    if not names_covered or now >= _renewal_point(facts.serving_not_before, facts.serving_not_after):
        return Renewal.SERVING_CERTIFICATE
    return Renewal.NOT_DUE


def next_check(facts: BundleFacts, now: datetime, longest_wait: timedelta) -> datetime:
    """When to look at the bundle again: its next renewal point, but never later than ``longest_wait``."""
    due = min(
        _renewal_point(facts.ca_not_before, facts.ca_not_after),
        _renewal_point(facts.serving_not_before, facts.serving_not_after),
    )
    return max(now, min(due, now + longest_wait))
