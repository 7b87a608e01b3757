"""Who is asking, as the API server's front proxy vouches: requestheader authentication, as every aggregated
API server does it.

The API server proxies a request for ``visibility.kueue.x-k8s.io`` to the manager with its front-proxy client
certificate (``--proxy-client-cert-file``) and the user it authenticated in headers (``X-Remote-User``,
``X-Remote-Group``, ``X-Remote-Extra-<key>``, and ``X-Remote-Uid`` where configured). Those headers are believed
only from a client certificate issued by the requestheader client CA and, when allowed names are configured,
with one of them as its common name; anything else is refused, as is a request naming no user.

The API server publishes that configuration in the ``kube-system/extension-apiserver-authentication``
ConfigMap (the chart binds ``extension-apiserver-authentication-reader`` for it); :class:`FrontProxy` reads it
at start and again every minute, and adds the CA to the serving context so the TLS handshake asks for (and
checks) client certificates. A CA dropped from the ConfigMap stays in the handshake's trust until the manager
restarts, but its certificates are refused from the next read on, as each one is checked again here against
the CAs of the current configuration.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID
from multidict import CIMultiDictProxy

from kuota.kube.client import KubeApi
from kuota.kube.errors import KubeApiError
from kuota.webhook.access_reviews import User
from kuota.webhook.visibility.errors import FrontProxyConfigError, Unauthenticated

log = logging.getLogger(__name__)

AUTHENTICATION_CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
_REFRESH_SECONDS = 60.0


@dataclass(frozen=True)
class RequestHeaderConfig:
    """The ConfigMap's ``requestheader-*`` keys, parsed."""

    client_cas: tuple[x509.Certificate, ...]
    client_ca_pem: bytes
    allowed_names: frozenset[str]  # empty: any certificate the CA issued
    username_headers: tuple[str, ...]
    uid_headers: tuple[str, ...]
    group_headers: tuple[str, ...]
    extra_prefixes: tuple[str, ...]


def _names(data: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = data.get(key)
    if raw is None or raw == "":
        return ()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise FrontProxyConfigError(f"{key} is not a JSON list ({error}): {raw!r}") from error
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise FrontProxyConfigError(f"{key} is not a JSON list of strings: {raw!r}")
    return tuple(value)


def parse_request_header_config(data: Mapping[str, str]) -> RequestHeaderConfig:
    """The configuration from the ConfigMap's data; :class:`FrontProxyConfigError` says what is unusable."""
    pem = data.get("requestheader-client-ca-file")
    if not pem:
        raise FrontProxyConfigError(
            "requestheader-client-ca-file is missing: start kube-apiserver with --requestheader-client-ca-file "
            "(and --proxy-client-cert-file/--proxy-client-key-file) so it can proxy to aggregated APIs"
        )
    try:
        cas = tuple(x509.load_pem_x509_certificates(pem.encode()))
    except ValueError as error:
        raise FrontProxyConfigError(f"requestheader-client-ca-file holds no PEM certificate: {error}") from error
    username_headers = _names(data, "requestheader-username-headers")
    if not username_headers:
        raise FrontProxyConfigError("requestheader-username-headers is empty: set --requestheader-username-headers")
    return RequestHeaderConfig(
        client_cas=cas,
        client_ca_pem=pem.encode(),
        allowed_names=frozenset(_names(data, "requestheader-allowed-names")),
        username_headers=username_headers,
        uid_headers=_names(data, "requestheader-uid-headers"),
        group_headers=_names(data, "requestheader-group-headers"),
        extra_prefixes=_names(data, "requestheader-extra-headers-prefix"),
    )


def _issued_by_one_of(certificate: x509.Certificate, cas: tuple[x509.Certificate, ...]) -> bool:
    for ca in cas:
        try:
            certificate.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def authenticate(
    config: RequestHeaderConfig | None,
    peer_certificate_der: bytes | None,
    headers: CIMultiDictProxy[str],
    now: datetime.datetime | None = None,
) -> User:
    """The user the front proxy names, or :class:`Unauthenticated` saying why the request is not believed."""
    if config is None:
        raise Unauthenticated(
            "the front proxy's configuration (kube-system/extension-apiserver-authentication) is not loaded yet"
        )
    if peer_certificate_der is None:
        raise Unauthenticated("no client certificate: only the API server's front proxy may call this API")
    certificate = x509.load_der_x509_certificate(peer_certificate_der)
    moment = now or datetime.datetime.now(datetime.UTC)
    if not certificate.not_valid_before_utc <= moment <= certificate.not_valid_after_utc:
        raise Unauthenticated("the client certificate is expired or not yet valid")
    if not _issued_by_one_of(certificate, config.client_cas):
        raise Unauthenticated("the client certificate is not issued by the requestheader client CA")
    common_names = [str(a.value) for a in certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if config.allowed_names and not any(name in config.allowed_names for name in common_names):
        raise Unauthenticated(
            f"the client certificate's common name {', '.join(common_names) or '(none)'} is not among the "
            "requestheader allowed names"
        )
    name = next((value for header in config.username_headers for value in headers.getall(header, ()) if value), "")
    if not name:
        raise Unauthenticated(f"the front proxy named no user ({', '.join(config.username_headers)} is missing)")
    uid = next((value for header in config.uid_headers for value in headers.getall(header, ()) if value), "")
    groups = tuple(value for header in config.group_headers for value in headers.getall(header, ()) if value)
    extra: dict[str, list[str]] = {}
    for header, value in headers.items():
        for prefix in config.extra_prefixes:
            if header.lower().startswith(prefix.lower()) and len(header) > len(prefix):
                extra.setdefault(unquote(header[len(prefix) :].lower()), []).append(value)
    return User(name, uid, groups, tuple(sorted((key, tuple(values)) for key, values in extra.items())))


class FrontProxy:
    """The current requestheader configuration, kept up to date from the ConfigMap."""

    def __init__(self, api: KubeApi, context: ssl.SSLContext) -> None:
        self._api = api
        self._context = context
        self._trusted: set[bytes] = set()
        self.config: RequestHeaderConfig | None = None

    def load(self, config: RequestHeaderConfig) -> None:
        """Use ``config`` from the next request on; its CA is added to the handshake's trust."""
        if config.client_ca_pem not in self._trusted:
            self._context.load_verify_locations(cadata=config.client_ca_pem.decode())
            self._trusted.add(config.client_ca_pem)
        # Optional: the same listener serves the API server's webhook calls, which carry no client certificate.
        self._context.verify_mode = ssl.CERT_OPTIONAL
        self.config = config

    async def refresh(self) -> None:
        try:
            answer = (await self._api.request("GET", AUTHENTICATION_CONFIGMAP)).object()
            config = parse_request_header_config(_string_data(answer))
        except (KubeApiError, FrontProxyConfigError) as error:
            log.warning("the visibility API cannot read the front proxy's configuration: %s", error)
            return
        if config != self.config:
            log.info(
                "visibility API: front proxy configuration loaded (allowed names: %s)", sorted(config.allowed_names)
            )
        self.load(config)

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(_REFRESH_SECONDS)


def _string_data(configmap: Mapping[str, Any]) -> dict[str, str]:
    data = configmap.get("data") or {}
    return {str(key): str(value) for key, value in data.items()}
