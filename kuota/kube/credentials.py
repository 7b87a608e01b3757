"""Where the API server is and how to prove who we are: :class:`ApiServerAccess`, from the pod's service account
(:func:`in_cluster`) or from a kubeconfig (:func:`kuota.kube.kubeconfig.from_kubeconfig`)."""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kuota.kube.errors import KubeconfigError
from kuota.kube.exec_plugin import ExecPlugin

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class ApiServerAccess:
    """Where the API server is and how to prove who we are."""

    server: str
    ssl_context: ssl.SSLContext
    headers: Mapping[str, str] = field(default_factory=dict)
    # A bearer token kept in a file that may be rewritten (rotated) while kuota runs.
    token_file: Path | None = None
    # The name to expect in the server's certificate when it differs from the host in ``server``.
    tls_server_name: str | None = None
    # An http:// or https:// proxy to tunnel through (a kubeconfig's proxy-url), and the headers it is sent
    # (Proxy-Authorization, from the URL's user and password).
    proxy: str | None = None
    proxy_headers: Mapping[str, str] = field(default_factory=dict)
    # The kubeconfig user's exec plugin: credentials per request, run again when they expire or are refused.
    exec_plugin: ExecPlugin | None = None


def in_cluster(account: Path = SERVICE_ACCOUNT) -> ApiServerAccess:
    """The API server as a pod sees it: the service's address from the environment, the mounted account."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeconfigError("not running in a pod (KUBERNETES_SERVICE_HOST is unset): pass --kubeconfig")
    hint = "mount the service account token (automountServiceAccountToken: true)"
    try:
        context = ssl.create_default_context(cafile=str(account / "ca.crt"))
    except (OSError, ssl.SSLError) as error:
        raise KubeconfigError(f"the service account CA {account / 'ca.crt'} is unusable: {error}; {hint}") from error
    token = read_token(account / "token", f"the service account token {account / 'token'}", hint)
    server_host = f"[{host}]" if ":" in host else host
    return ApiServerAccess(
        f"https://{server_host}:{port}",
        context,
        {"Authorization": f"Bearer {token}"},
        token_file=account / "token",
    )


def read_token(path: Path, what: str, hint: str) -> str:
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise KubeconfigError(f"{what} cannot be read ({error.strerror}); {hint}") from error
    if not token:
        raise KubeconfigError(f"{what} is empty; {hint}")
    return token


def load_client_pair(context: ssl.SSLContext, certificate: bytes, key: bytes, where: str) -> None:
    # ssl loads a client key only from a file: a private temporary one, removed right after.
    with tempfile.TemporaryDirectory() as scratch:
        pair = Path(scratch) / "client.pem"
        pair.touch(mode=0o600)
        pair.write_bytes(certificate + b"\n" + key)
        try:
            context.load_cert_chain(str(pair))
        except ssl.SSLError as error:
            raise KubeconfigError(
                f"{where}: the client certificate and key do not load ({error}); check both are PEM and belong together"
            ) from error
