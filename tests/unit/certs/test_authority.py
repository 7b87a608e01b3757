"""Issuing, inspecting and renewing the webhook's CA and serving certificate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509

from kuota.certs.authority import (
    CertificateBundle,
    Renewal,
    ServingIdentity,
    inspect_bundle,
    issue_bundle,
    next_check,
    renew_serving,
    renewal_due,
)
from kuota.certs.errors import CertificateMaterialError

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IDENTITY = ServingIdentity.for_service("kuota-webhook", "kuota-system", ("127.0.0.1",))


def test_service_identity_carries_every_in_cluster_dns_name() -> None:
    assert IDENTITY.dns_names == (
        "kuota-webhook",
        "kuota-webhook.kuota-system",
        "kuota-webhook.kuota-system.svc",
        "kuota-webhook.kuota-system.svc.cluster.local",
    )


def test_serving_certificate_has_the_identity_as_sans_and_is_signed_by_the_ca() -> None:
    facts = inspect_bundle(issue_bundle(IDENTITY, NOW))
    assert facts.dns_names == frozenset(IDENTITY.dns_names)
    assert facts.ip_addresses == {"127.0.0.1"}
    assert facts.serving_not_after == NOW + timedelta(days=365)


def test_a_bad_ip_is_refused_with_the_flag_to_fix() -> None:
    with pytest.raises(CertificateMaterialError, match=r"not-an-ip.*--ip"):
        ServingIdentity(dns_names=("a",), ip_addresses=("not-an-ip",))


def test_fresh_bundle_needs_no_renewal() -> None:
    facts = inspect_bundle(issue_bundle(IDENTITY, NOW))
    assert renewal_due(facts, IDENTITY, NOW + timedelta(days=200)) is Renewal.NOT_DUE


def test_serving_certificate_is_renewed_after_two_thirds_of_its_life() -> None:
    facts = inspect_bundle(issue_bundle(IDENTITY, NOW))
    assert renewal_due(facts, IDENTITY, NOW + timedelta(days=244)) is Renewal.SERVING_CERTIFICATE


def test_changed_names_renew_the_serving_certificate() -> None:
    facts = inspect_bundle(issue_bundle(IDENTITY, NOW))
    other = ServingIdentity.for_service("kuota-webhook", "other-namespace")
    assert renewal_due(facts, other, NOW) is Renewal.SERVING_CERTIFICATE


def test_a_certificate_with_more_names_than_needed_is_kept_so_replicas_of_two_versions_agree() -> None:
    """An upgrade adds the conversion Service's names: the old replicas' identity is a subset of the new one's."""
    new = ServingIdentity.for_service("kuota-webhook", "kuota-system", ("127.0.0.1",))
    new = ServingIdentity(
        dns_names=(*new.dns_names, "kuota-webhook-conversion.kuota-system.svc"), ip_addresses=("127.0.0.1",)
    )
    facts = inspect_bundle(issue_bundle(new, NOW))
    assert renewal_due(facts, IDENTITY, NOW) is Renewal.NOT_DUE, "an old replica keeps the new certificate"
    old_facts = inspect_bundle(issue_bundle(IDENTITY, NOW))
    assert renewal_due(old_facts, new, NOW) is Renewal.SERVING_CERTIFICATE, "a new replica adds its name once"


def test_authority_is_renewed_after_two_thirds_of_its_life() -> None:
    facts = inspect_bundle(issue_bundle(IDENTITY, NOW))
    assert renewal_due(facts, IDENTITY, NOW + timedelta(days=2440)) is Renewal.AUTHORITY


def test_renewing_the_serving_certificate_keeps_the_ca_bundle() -> None:
    bundle = issue_bundle(IDENTITY, NOW)
    later = NOW + timedelta(days=300)
    renewed = renew_serving(bundle, IDENTITY, later)
    assert renewed.ca_cert_pem == bundle.ca_cert_pem
    assert renewed.cert_pem != bundle.cert_pem
    assert inspect_bundle(renewed).serving_not_after == later + timedelta(days=365)


def test_new_authority_keeps_trusting_the_old_ca_until_replicas_reload() -> None:
    old = issue_bundle(IDENTITY, NOW)
    new = issue_bundle(IDENTITY, NOW + timedelta(days=2500), previous_trust=old.ca_cert_pem)
    trusted = x509.load_pem_x509_certificates(new.ca_cert_pem)
    old_ca = x509.load_pem_x509_certificates(old.ca_cert_pem)[0]
    assert len(trusted) == 2
    assert trusted[1] == old_ca
    assert inspect_bundle(new).ca_not_before > old_ca.not_valid_before_utc


def test_an_expired_old_ca_is_dropped_from_the_trust_bundle() -> None:
    old = issue_bundle(IDENTITY, NOW, ca_validity=timedelta(days=1))
    new = issue_bundle(IDENTITY, NOW + timedelta(days=2), previous_trust=old.ca_cert_pem)
    assert len(x509.load_pem_x509_certificates(new.ca_cert_pem)) == 1


def test_serving_certificate_never_outlives_its_ca() -> None:
    bundle = issue_bundle(IDENTITY, NOW, ca_validity=timedelta(days=30))
    facts = inspect_bundle(bundle)
    assert facts.serving_not_after == facts.ca_not_after


def test_a_key_that_does_not_match_the_certificate_is_refused() -> None:
    first = issue_bundle(IDENTITY, NOW)
    second = issue_bundle(IDENTITY, NOW)
    mixed = CertificateBundle(first.ca_cert_pem, first.ca_key_pem, first.cert_pem, second.key_pem)
    with pytest.raises(CertificateMaterialError, match=r"tls\.key does not belong"):
        inspect_bundle(mixed)


def test_a_certificate_from_another_ca_is_refused() -> None:
    first = issue_bundle(IDENTITY, NOW)
    second = issue_bundle(IDENTITY, NOW)
    mixed = CertificateBundle(first.ca_cert_pem, first.ca_key_pem, second.cert_pem, second.key_pem)
    with pytest.raises(CertificateMaterialError, match="not signed by the CA"):
        inspect_bundle(mixed)


def test_garbage_pem_names_the_file() -> None:
    bundle = issue_bundle(IDENTITY, NOW)
    broken = CertificateBundle(b"garbage", bundle.ca_key_pem, bundle.cert_pem, bundle.key_pem)
    with pytest.raises(CertificateMaterialError, match=r"ca\.crt"):
        inspect_bundle(broken)


def test_next_check_is_the_renewal_point_or_the_longest_wait() -> None:
    facts = inspect_bundle(issue_bundle(IDENTITY, NOW))
    assert next_check(facts, NOW, timedelta(minutes=10)) == NOW + timedelta(minutes=10)
    late = NOW + timedelta(days=243)
    assert next_check(facts, late, timedelta(days=30)) < late + timedelta(days=2)
