"""Keep the webhook's TLS context supplied with a valid certificate for as long as the manager runs.

Each source loads its first certificate before ``ready`` is set (the webhook's /readyz waits on it), then
keeps checking: the Secret-backed source renews before expiry and re-injects the caBundle; the directory
source reloads when cert-manager rewrites the files.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
from kuota.certs.ca_bundle_injection import WebhookConfigurations, inject_ca_bundle
from kuota.certs.errors import CertificateMaterialError, CertsError
from kuota.certs.secret_store import SecretLocation, StoredBundle, load_or_create, replace_bundle
from kuota.certs.serving_context import ReloadableServerContext
from kuota.kube.client import KubeApi

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class SecretBackedCertificates:
    """Self-managed CA and serving pair, shared by all replicas through one Secret."""

    api: KubeApi
    secret: SecretLocation
    identity: ServingIdentity
    configurations: WebhookConfigurations
    context: ReloadableServerContext
    request_timeout: float = 10.0
    # Other replicas may renew the Secret; this bounds how stale our copy can get.
    longest_wait: timedelta = timedelta(minutes=10)
    retry_after_error: float = 5.0
    now: Callable[[], datetime] = _utc_now

    async def run(self, ready: asyncio.Event) -> None:
        while True:
            try:
                wait = await self.reconcile_once()
            except CertsError as error:
                # Serving the previous certificate is still correct; log and retry, do not crash the webhook.
                log.error("webhook certificates: %s (retrying in %.0fs)", error, self.retry_after_error)
                wait = self.retry_after_error
            if self.context.loaded:
                ready.set()
            await asyncio.sleep(wait)

    async def reconcile_once(self) -> float:
        """Load or renew the bundle, serve it and inject its CA; returns seconds until the next check."""
        stored = await load_or_create(self.api, self.secret, self._fresh, self.request_timeout)
        facts = inspect_bundle(stored.bundle)
        due = renewal_due(facts, self.identity, self.now())
        if due is not Renewal.NOT_DUE:
            stored = await self._renew(stored, due)
            facts = inspect_bundle(stored.bundle)
        if self.context.cert_pem != stored.bundle.cert_pem:
            self.context.load(stored.bundle.cert_pem, stored.bundle.key_pem)
            log.info(
                "webhook certificates: serving certificate from %s valid until %s",
                self.secret,
                facts.serving_not_after.isoformat(),
            )
        await inject_ca_bundle(self.api, self.configurations, stored.bundle.ca_cert_pem, self.request_timeout)
        now = self.now()
        return (next_check(facts, now, self.longest_wait) - now).total_seconds()

    def _fresh(self) -> CertificateBundle:
        return issue_bundle(self.identity, self.now())

    async def _renew(self, stored: StoredBundle, due: Renewal) -> StoredBundle:
        now = self.now()
        if due is Renewal.AUTHORITY:
            renewed = issue_bundle(self.identity, now, previous_trust=stored.bundle.ca_cert_pem)
        else:
            renewed = renew_serving(stored.bundle, self.identity, now)
        log.info("webhook certificates: renewing the %s in %s", due.value, self.secret)
        return await replace_bundle(self.api, self.secret, stored, renewed, self.request_timeout)


@dataclass
class DirectoryCertificates:
    """Certificates written by cert-manager (``tls.crt``, ``tls.key``) into a mounted directory."""

    directory: Path
    context: ReloadableServerContext
    poll_interval: float = 10.0

    async def run(self, ready: asyncio.Event) -> None:
        while True:
            try:
                self.reload_if_changed()
            except CertsError as error:
                log.error("webhook certificates from %s: %s", self.directory, error)
            if self.context.loaded:
                ready.set()
            await asyncio.sleep(self.poll_interval)

    def reload_if_changed(self) -> bool:
        """Load the files if their content differs from what is served; True when it reloaded."""
        cert_path = self.directory / "tls.crt"
        key_path = self.directory / "tls.key"
        try:
            cert_pem = cert_path.read_bytes()
            key_pem = key_path.read_bytes()
        except OSError as error:
            raise CertificateMaterialError(
                f"cannot read {error.filename}: {error.strerror}; mount the cert-manager Secret at --cert-dir"
            ) from error
        if cert_pem == self.context.cert_pem:
            return False
        self.context.load(cert_pem, key_pem)
        log.info("webhook certificates: loaded %s", cert_path)
        return True
