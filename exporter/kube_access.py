"""How to reach the API server: its URL, TLS context and auth header, from a kubeconfig or the pod's
service account. Plain aiohttp + ssl rather than kubernetes_asyncio, whose client package imports every
model and costs ~50 MiB of resident memory, most of the exporter's budget on each node.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from exporter.errors import ConfigurationError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class ApiServerAccess:
    server: str
    ssl_context: ssl.SSLContext
    headers: Mapping[str, str] = field(default_factory=dict)


def in_cluster() -> ApiServerAccess:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigurationError(
            "not running in a pod (KUBERNETES_SERVICE_HOST is unset): pass --kubeconfig, or --no-pod-watch"
        )
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    token = (SERVICE_ACCOUNT / "token").read_text().strip()
    server_host = f"[{host}]" if ":" in host else host
    return ApiServerAccess(f"https://{server_host}:{port}", context, {"Authorization": f"Bearer {token}"})


def _named(entries: list[dict[str, Any]], name: str, kind: str, path: Path) -> dict[str, Any]:
    for entry in entries or []:
        if entry.get("name") == name:
            found: dict[str, Any] = entry.get(kind) or {}
            return found
    raise ConfigurationError(f"kubeconfig {path}: no {kind} named {name!r}; fix its contexts/{kind}s")


def _pem(section: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    if section.get(f"{key}-data"):
        return base64.b64decode(str(section[f"{key}-data"]))
    if section.get(key):
        return (base / str(section[key])).read_bytes()
    return None


def from_kubeconfig(path: Path) -> ApiServerAccess:
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigurationError(f"--kubeconfig {path} cannot be read: {error}") from error
    current = document.get("current-context")
    context = _named(document.get("contexts"), str(current), "context", path)
    cluster = _named(document.get("clusters"), str(context.get("cluster")), "cluster", path)
    user = _named(document.get("users"), str(context.get("user")), "user", path)
    base = path.parent
    tls = ssl.create_default_context()
    ca = _pem(cluster, "certificate-authority", base)
    if ca is not None:
        tls.load_verify_locations(cadata=ca.decode())
    if cluster.get("insecure-skip-tls-verify"):
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    certificate, key = _pem(user, "client-certificate", base), _pem(user, "client-key", base)
    if certificate is not None and key is not None:
        # ssl loads a client key only from a file: a private temporary one, removed right after.
        with tempfile.TemporaryDirectory() as scratch:
            pair = Path(scratch) / "client.pem"
            pair.touch(mode=0o600)
            pair.write_bytes(certificate + b"\n" + key)
            tls.load_cert_chain(str(pair))
    headers = {}
    token = user.get("token") or (
        (base / user["tokenFile"]).read_text().strip() if user.get("tokenFile") else None
    )
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return ApiServerAccess(str(cluster["server"]).rstrip("/"), tls, headers)
