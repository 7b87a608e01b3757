"""Exceptions raised by :mod:`certs`.

::

    CertsError
    ├── CertificateMaterialError   PEM that cannot be read, a key that does not match, a wrong SAN set
    ├── CertificateStoreError      the Secret holding the pair cannot be read or written
    └── CaBundleInjectionError     a webhook configuration cannot be updated with the caBundle
"""

from __future__ import annotations

from kuota.errors import KuotaError


class CertsError(KuotaError):
    """Base of every error raised by :mod:`certs`."""


class CertificateMaterialError(CertsError):
    """Certificate or key bytes are unusable; the message says which file or Secret key and why."""


class CertificateStoreError(CertsError):
    """The Secret that holds the webhook's certificates could not be read or written."""


class CaBundleInjectionError(CertsError):
    """A Mutating/ValidatingWebhookConfiguration could not be given the CA bundle."""
