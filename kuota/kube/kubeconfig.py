"""Reading kubeconfigs as kubectl reads them: which files, how they merge, which context, and what its cluster
and user give (:class:`~kuota.kube.credentials.ApiServerAccess`).

Files: ``--kubeconfig PATH`` alone; else every file ``KUBECONFIG`` lists (``os.pathsep``-separated; files that do
not exist are skipped); else ``~/.kube/config``. Merged as kubectl merges them: the first file to name a cluster,
user or context gives the whole entry, and ``current-context`` comes from the first file that sets it. Paths in
an entry (certificate files, tokenFile, an exec command with a folder in it) are relative to its own file.

Supported credentials: bearer ``token`` or ``tokenFile`` (re-read while running, as client-go does, because a
projected service-account token rotates), client certificate and key (inline ``-data`` or files), an exec
plugin (:mod:`kuota.kube.exec_plugin`; unused when the user also has a token or certificate, as in client-go),
a CA (inline or file) or ``insecure-skip-tls-verify``, ``tls-server-name``, and an http:// or https://
``proxy-url``. Auth-provider plugins, basic auth and SOCKS proxies are refused with an error naming the file
and entry, never ignored.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from kuota.kube.credentials import ApiServerAccess, load_client_pair, read_token
from kuota.kube.errors import KubeconfigError
from kuota.kube.exec_plugin import ExecConfig, ExecPlugin

DEFAULT_KUBECONFIG = Path(".kube") / "config"  # under the home folder
# The cluster extension whose value an exec plugin with provideClusterInfo gets as spec.cluster.config.
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
ENTRY_KINDS = ("cluster", "user", "context")

_UNSUPPORTED_USER_KEYS = {
    "auth-provider": "an auth-provider plugin",
    "username": "basic auth",
    "password": "basic auth",
}


def from_kubeconfig(
    path: Path | None = None, context: str | None = None, environ: Mapping[str, str] | None = None
) -> ApiServerAccess:
    """Context ``context`` (default: the current-context) of the kubeconfig at ``path``, or (None) of the files
    ``KUBECONFIG`` in ``environ`` (default ``os.environ``) lists, else of ``~/.kube/config``."""
    merged = _Merged.read(_files(path, os.environ if environ is None else environ))
    return merged.access(context)


def _files(path: Path | None, environ: Mapping[str, str]) -> list[Path]:
    if path is not None:
        return [path]  # named on purpose: it must exist
    listed = environ.get("KUBECONFIG", "")
    if listed:
        paths = list(dict.fromkeys(Path(entry) for entry in listed.split(os.pathsep) if entry))
        existing = [candidate for candidate in paths if candidate.exists()]
        if not existing:
            raise KubeconfigError(
                f"none of the kubeconfigs KUBECONFIG lists exists ({listed}); fix KUBECONFIG or pass --kubeconfig PATH"
            )
        return existing
    default = Path(environ.get("HOME") or Path.home()) / DEFAULT_KUBECONFIG
    if not default.exists():
        raise KubeconfigError(
            f"no kubeconfig: KUBECONFIG is unset and {default} does not exist; pass --kubeconfig PATH or set KUBECONFIG"
        )
    return [default]


@dataclass(frozen=True)
class _Section:
    """One mapping of a kubeconfig (a cluster, user or context entry's body), with the file it came from."""

    path: Path
    where: str  # e.g. "cluster 'c'"
    body: Mapping[str, Any]

    def fail(self, problem: str) -> KubeconfigError:
        return KubeconfigError(f"kubeconfig {self.path}: {self.where} {problem}")

    def text(self, key: str) -> str | None:
        value = self.body.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self.fail(f"{key} is not a string; fix it")
        return value

    def flag(self, key: str) -> bool:
        value = self.body.get(key, False)
        if not isinstance(value, bool):
            raise self.fail(f"{key} is not true or false")
        return value

    def file(self, key: str) -> Path | None:
        """The file named by ``key``, relative to this kubeconfig's folder."""
        name = self.text(key)
        return self.path.parent / name if name is not None else None

    def pem(self, key: str) -> bytes | None:
        """``key-data`` (base64) or the file named by ``key``."""
        data = self.text(f"{key}-data")
        if data is not None:
            try:
                return base64.b64decode(data, validate=True)
            except binascii.Error as error:
                raise self.fail(f"{key}-data is not base64 ({error}); encode the PEM in base64") from error
        file = self.file(key)
        if file is None:
            return None
        try:
            return file.read_bytes()
        except OSError as error:
            raise self.fail(f"{key} {file} cannot be read ({error.strerror}); fix the path") from error

    def reference(self, key: str) -> str:
        name = self.body.get(key)
        if not isinstance(name, str) or not name:
            raise self.fail(f"names no {key}; set its {key}")
        return name


@dataclass(frozen=True)
class _Merged:
    paths: list[Path]
    current_context: str | None
    entries: Mapping[str, Mapping[str, _Section]]  # kind -> name -> the first file's entry

    @classmethod
    def read(cls, paths: list[Path]) -> _Merged:
        import yaml  # here, not at import: the manager and exporter in a pod never read a kubeconfig

        current: str | None = None
        entries: dict[str, dict[str, _Section]] = {kind: {} for kind in ENTRY_KINDS}
        for path in paths:
            try:
                document = yaml.safe_load(path.read_text()) or {}
            except (OSError, yaml.YAMLError) as error:
                raise KubeconfigError(f"kubeconfig {path} cannot be read: {error}") from error
            if not isinstance(document, dict):
                raise KubeconfigError(f"kubeconfig {path} is not a YAML mapping; fix it")
            if current is None and isinstance(document.get("current-context"), str) and document["current-context"]:
                current = document["current-context"]
            for kind in ENTRY_KINDS:
                listed = document.get(f"{kind}s") or []
                if not isinstance(listed, list):
                    raise KubeconfigError(f"kubeconfig {path}: {kind}s is not a list; fix its {kind}s")
                for entry in listed:
                    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                        name = entry["name"]
                        body = entry.get(kind) or {}
                        if not isinstance(body, dict):
                            raise KubeconfigError(f"kubeconfig {path}: {kind} {name!r} is not a mapping; fix it")
                        entries[kind].setdefault(name, _Section(path, f"{kind} {name!r}", body))
        return cls(paths, current, entries)

    @property
    def described(self) -> str:
        return (
            f"kubeconfig {self.paths[0]}"
            if len(self.paths) == 1
            else f"kubeconfigs {os.pathsep.join(map(str, self.paths))}"
        )

    def entry(self, kind: str, name: str, named_by: _Section) -> _Section:
        """The ``kind`` entry ``name`` that context ``named_by`` names."""
        found = self.entries[kind].get(name)
        if found is None:
            raise KubeconfigError(
                f"kubeconfig {named_by.path}: no {kind} named {name!r}; add it, or fix the context's {kind}"
            )
        return found

    def context(self, flag: str | None) -> _Section:
        """Context ``flag`` (--context), else the current-context."""
        name = flag or self.current_context
        if name is None:
            paths = os.pathsep.join(map(str, self.paths))
            raise KubeconfigError(
                f"{self.described} has no current-context; choose one with "
                f"'kubectl --kubeconfig {paths} config use-context NAME' or pass --context NAME"
            )
        found = self.entries["context"].get(name)
        if found is None:
            fix = "pass --context with one of its contexts" if flag else "set current-context to one of its contexts"
            known = ", ".join(sorted(self.entries["context"])) or "it has none"
            raise KubeconfigError(f"{self.described}: no context named {name!r}; {fix} ({known})")
        return found

    def access(self, context_name: str | None) -> ApiServerAccess:
        context = self.context(context_name)
        cluster = self.entry("cluster", context.reference("cluster"), context)
        user = self.entry("user", context.reference("user"), context)
        server = cluster.text("server")
        if server is None or not server.startswith(("https://", "http://")):
            raise cluster.fail(f"server is {server!r}; set it to the API server's https:// URL")
        tls = _ClusterTls(cluster)
        context_tls = tls.context()
        certificate, key = user.pem("client-certificate"), user.pem("client-key")
        if (certificate is None) != (key is None):
            raise user.fail("has a client certificate or a client key but not both; give both")
        if certificate is not None and key is not None:
            load_client_pair(context_tls, certificate, key, f"kubeconfig {user.path}: {user.where}")
        for unsupported, what in _UNSUPPORTED_USER_KEYS.items():
            if user.body.get(unsupported):
                raise user.fail(
                    f"authenticates with {what} ({unsupported}), which kuota does not support; give it a token, "
                    "tokenFile, client certificate or exec plugin instead (e.g. a ServiceAccount token from "
                    "'kubectl create token')"
                )
        # An inline token wins over a token file, and either or a certificate over an exec plugin, as in client-go.
        token = user.text("token")
        token_file = None if token is not None else user.file("tokenFile")
        if token is None and token_file is not None:
            token = read_token(
                token_file, f"kubeconfig {user.path}: {user.where} tokenFile {token_file}", "fix the path"
            )
        plugin = None
        if token is None and certificate is None and user.body.get("exec") is not None:
            config = ExecConfig.parse(
                user.body["exec"], f"kubeconfig {user.path}: {user.where}", user.path.parent, tls.exec_info(server)
            )
            plugin = ExecPlugin(config, tls.with_client_pair)
        proxy, proxy_headers = _proxy(cluster)
        return ApiServerAccess(
            server=server.rstrip("/"),
            ssl_context=context_tls,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            token_file=token_file,
            tls_server_name=cluster.text("tls-server-name"),
            proxy=proxy,
            proxy_headers=proxy_headers,
            exec_plugin=plugin,
        )


class _ClusterTls:
    """A cluster entry's server verification: its CA (replacing the system's roots, as with kubectl) or none."""

    def __init__(self, cluster: _Section) -> None:
        self._cluster = cluster
        self._ca = cluster.pem("certificate-authority")
        self._insecure = cluster.flag("insecure-skip-tls-verify")

    def context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cadata=self._ca.decode(errors="replace") if self._ca else None)
        except ssl.SSLError as error:
            raise self._cluster.fail(f"certificate-authority is not a PEM certificate ({error}); fix it") from error
        if self._insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def with_client_pair(self, certificate: bytes, key: bytes, where: str) -> ssl.SSLContext:
        context = self.context()
        load_client_pair(context, certificate, key, where)
        return context

    def exec_info(self, server: str) -> dict[str, Any]:
        """The cluster as an exec plugin with provideClusterInfo is told of it (spec.cluster)."""
        cluster = self._cluster
        info: dict[str, Any] = {"server": server}
        for key in ("tls-server-name", "proxy-url"):
            if cluster.text(key) is not None:
                info[key] = cluster.text(key)
        for key in ("insecure-skip-tls-verify", "disable-compression"):
            if cluster.flag(key):
                info[key] = True
        if self._ca:
            info["certificate-authority-data"] = base64.b64encode(self._ca).decode()
        extensions = cluster.body.get("extensions") or []
        for extension in extensions if isinstance(extensions, list) else []:
            if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
                info["config"] = extension.get("extension")
        return info


def _proxy(cluster: _Section) -> tuple[str | None, dict[str, str]]:
    """``proxy-url`` as aiohttp takes it: the URL without its user and password, which go in Proxy-Authorization."""
    url = cluster.text("proxy-url")
    if url is None:
        return None, {}
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        raise cluster.fail(
            f"proxy-url is a {scheme}:// proxy, which kuota does not support; "
            "use an http:// or https:// proxy, or reach the API server directly"
        )
    try:
        valid = scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:  # a port that is not a number
        valid = False
    if not valid:
        # The URL is not quoted back: it may hold the proxy's password.
        raise cluster.fail("proxy-url is not an http:// or https:// URL with a host; fix it")
    headers = {}
    if parts.username is not None:
        secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Proxy-Authorization"] = f"Basic {base64.b64encode(secret).decode()}"
    return f"{scheme}://{parts.netloc.rpartition('@')[2]}", headers
