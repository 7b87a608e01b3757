"""The one way kuota talks to the Kubernetes API server: credentials from a kubeconfig or the pod's service
account, and :class:`KubeApi`, a plain-REST client owning one aiohttp connection pool.

Plain aiohttp rather than kubernetes_asyncio: that client package imports every model (~50 MiB resident),
opens its session with ``trust_env=True`` (a thread hop to read ``~/.netrc`` on every request) and sanitizes
every call's arguments; kuota sends and receives raw JSON and parses it once, at its own edges.

Supported credentials: bearer ``token`` or ``tokenFile`` (re-read while running, as client-go does, because a
projected service-account token rotates), client certificate and key (inline ``-data`` or files), a CA
(inline or file) or ``insecure-skip-tls-verify``, and ``tls-server-name``. Exec plugins, auth-provider
plugins, basic auth and proxies are refused with an error naming the kubeconfig entry, never ignored.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import yaml

from kuota import __version__
from kuota.kube.errors import (
    ApiResponseError,
    ApiUnreachableError,
    KubeconfigError,
    MalformedResponseError,
    error_for_status,
)

log = logging.getLogger(__name__)

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# client-go re-reads a token file once a minute; the kubelet rotates projected tokens well before expiry.
TOKEN_REFRESH_SECONDS = 60.0
# Idle connections are kept this long: long enough to span the gaps in a stream of writes, short enough that
# a burst's extra connections close soon after it (asyncio keeps a 256 KiB read buffer per TLS connection).
KEEPALIVE_SECONDS = 15.0

Query = Mapping[str, str] | Sequence[tuple[str, str]]


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
    token = _read_token(account / "token", f"the service account token {account / 'token'}", hint)
    server_host = f"[{host}]" if ":" in host else host
    return ApiServerAccess(
        f"https://{server_host}:{port}",
        context,
        {"Authorization": f"Bearer {token}"},
        token_file=account / "token",
    )


def from_kubeconfig(path: Path) -> ApiServerAccess:
    """The current context of the kubeconfig at ``path``: its cluster's server and TLS, its user's credentials."""
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise KubeconfigError(f"kubeconfig {path} cannot be read: {error}") from error
    kubeconfig = _Kubeconfig(path, _mapping(document, f"kubeconfig {path}", "a YAML mapping"))
    current = kubeconfig.document.get("current-context")
    if not isinstance(current, str) or not current:
        raise KubeconfigError(
            f"kubeconfig {path} has no current-context; choose one with "
            f"'kubectl --kubeconfig {path} config use-context NAME'"
        )
    context = kubeconfig.entry("context", current)
    cluster_name, user_name = (kubeconfig.reference(context, current, key) for key in ("cluster", "user"))
    cluster = kubeconfig.entry("cluster", cluster_name)
    user = kubeconfig.entry("user", user_name)
    return ApiServerAccess(
        server=kubeconfig.server(cluster, cluster_name),
        ssl_context=kubeconfig.tls(cluster, cluster_name, user, user_name),
        headers=kubeconfig.auth_headers(user, user_name),
        token_file=kubeconfig.token_file(user, user_name),
        tls_server_name=kubeconfig.text(cluster, "tls-server-name", f"cluster {cluster_name!r}"),
    )


_UNSUPPORTED_USER_KEYS = {
    "exec": "an exec plugin",
    "auth-provider": "an auth-provider plugin",
    "username": "basic auth",
    "password": "basic auth",
}


@dataclass(frozen=True)
class _Kubeconfig:
    path: Path
    document: Mapping[str, Any]

    def entry(self, kind: str, name: str) -> Mapping[str, Any]:
        """``clusters``/``users``/``contexts`` entry ``name``'s body (its ``cluster``/``user``/``context``)."""
        entries = self.document.get(f"{kind}s") or []
        if not isinstance(entries, list):
            raise KubeconfigError(f"kubeconfig {self.path}: {kind}s is not a list; fix its {kind}s")
        for entry in entries:
            if isinstance(entry, dict) and entry.get("name") == name:
                return _mapping(entry.get(kind) or {}, f"kubeconfig {self.path}: {kind} {name!r}", "a mapping")
        fix = (
            "set current-context to one of its contexts"
            if kind == "context"
            else f"add it, or fix the context's {kind}"
        )
        raise KubeconfigError(f"kubeconfig {self.path}: no {kind} named {name!r}; {fix}")

    def reference(self, context: Mapping[str, Any], context_name: str, key: str) -> str:
        name = context.get(key)
        if not isinstance(name, str) or not name:
            raise KubeconfigError(f"kubeconfig {self.path}: context {context_name!r} names no {key}; set its {key}")
        return name

    def text(self, section: Mapping[str, Any], key: str, where: str) -> str | None:
        value = section.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise KubeconfigError(f"kubeconfig {self.path}: {where} {key} is not a string; fix it")
        return value

    def server(self, cluster: Mapping[str, Any], name: str) -> str:
        where = f"cluster {name!r}"
        server = self.text(cluster, "server", where)
        if server is None or not server.startswith(("https://", "http://")):
            raise KubeconfigError(
                f"kubeconfig {self.path}: {where} server is {server!r}; set it to the API server's https:// URL"
            )
        if self.text(cluster, "proxy-url", where) is not None:
            raise KubeconfigError(
                f"kubeconfig {self.path}: {where} uses proxy-url, which kuota does not support; "
                "reach the API server directly or remove proxy-url"
            )
        return server.rstrip("/")

    def pem(self, section: Mapping[str, Any], key: str, where: str) -> bytes | None:
        """``key-data`` (base64) or the file named by ``key``, relative to the kubeconfig's folder."""
        data = self.text(section, f"{key}-data", where)
        if data is not None:
            try:
                return base64.b64decode(data, validate=True)
            except binascii.Error as error:
                raise KubeconfigError(
                    f"kubeconfig {self.path}: {where} {key}-data is not base64 ({error}); encode the PEM in base64"
                ) from error
        file_name = self.text(section, key, where)
        if file_name is None:
            return None
        file = self.path.parent / file_name
        try:
            return file.read_bytes()
        except OSError as error:
            raise KubeconfigError(
                f"kubeconfig {self.path}: {where} {key} {file} cannot be read ({error.strerror}); fix the path"
            ) from error

    def tls(
        self, cluster: Mapping[str, Any], cluster_name: str, user: Mapping[str, Any], user_name: str
    ) -> ssl.SSLContext:
        where = f"cluster {cluster_name!r}"
        ca = self.pem(cluster, "certificate-authority", where)
        try:
            # A CA given replaces the system's roots, as with kubectl.
            context = ssl.create_default_context(cadata=ca.decode(errors="replace") if ca else None)
        except ssl.SSLError as error:
            raise KubeconfigError(
                f"kubeconfig {self.path}: {where} certificate-authority is not a PEM certificate ({error}); fix it"
            ) from error
        insecure = cluster.get("insecure-skip-tls-verify", False)
        if not isinstance(insecure, bool):
            raise KubeconfigError(f"kubeconfig {self.path}: {where} insecure-skip-tls-verify is not true or false")
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        where = f"user {user_name!r}"
        certificate, key = self.pem(user, "client-certificate", where), self.pem(user, "client-key", where)
        if (certificate is None) != (key is None):
            raise KubeconfigError(
                f"kubeconfig {self.path}: {where} has a client certificate or a client key but not both; give both"
            )
        if certificate is not None and key is not None:
            _load_client_pair(context, certificate, key, f"kubeconfig {self.path}: {where}")
        return context

    def auth_headers(self, user: Mapping[str, Any], user_name: str) -> dict[str, str]:
        where = f"user {user_name!r}"
        for key, what in _UNSUPPORTED_USER_KEYS.items():
            if user.get(key):
                raise KubeconfigError(
                    f"kubeconfig {self.path}: {where} authenticates with {what} ({key}), which kuota does not "
                    "support; give it a token, tokenFile or client certificate instead (e.g. a ServiceAccount "
                    "token from 'kubectl create token')"
                )
        token = self.text(user, "token", where)
        token_file = self.token_file(user, user_name)
        if token is None and token_file is not None:
            token = _read_token(token_file, f"kubeconfig {self.path}: {where} tokenFile {token_file}", "fix the path")
        return {"Authorization": f"Bearer {token}"} if token else {}

    def token_file(self, user: Mapping[str, Any], user_name: str) -> Path | None:
        # An inline token wins over a token file, as in client-go.
        if user.get("token"):
            return None
        name = self.text(user, "tokenFile", f"user {user_name!r}")
        return self.path.parent / name if name is not None else None


def _mapping(value: Any, where: str, expected: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise KubeconfigError(f"{where} is not {expected}; fix it")
    return value


def _read_token(path: Path, what: str, hint: str) -> str:
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise KubeconfigError(f"{what} cannot be read ({error.strerror}); {hint}") from error
    if not token:
        raise KubeconfigError(f"{what} is empty; {hint}")
    return token


def _load_client_pair(context: ssl.SSLContext, certificate: bytes, key: bytes, where: str) -> None:
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


@dataclass(frozen=True)
class ApiResponse:
    """A complete answer: the request it answers, its HTTP status and its raw body."""

    method: str
    path: str
    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def _status(self) -> tuple[str, str]:
        """The ``message`` of a Kubernetes Status body (else the start of the body as text) and its ``reason``."""
        try:
            document = json.loads(self.body)
        except ValueError:
            document = None  # not a Status object: the raw text is the best message there is
        fields = document if isinstance(document, dict) else {}
        message, reason = fields.get("message"), fields.get("reason")
        return (
            message if isinstance(message, str) and message else self.body[:300].decode(errors="replace"),
            reason if isinstance(reason, str) else "",
        )

    def message(self) -> str:
        """The ``message`` of a Kubernetes Status body, else the start of the body as text."""
        return self._status()[0]

    def error(self) -> ApiResponseError:
        """The typed error this answer stands for (:mod:`kuota.kube.errors`), e.g. ``NotFoundError`` for 404."""
        detail, reason = self._status()
        return error_for_status(self.status, reason, f"{self.method} {self.path}: HTTP {self.status}: {detail}", detail)

    def raise_for_status(self) -> None:
        if not self.ok:
            raise self.error()

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as error:
            raise MalformedResponseError(
                f"{self.method} {self.path}: HTTP {self.status} with a body that is not JSON ({error}): "
                f"{self.body[:200].decode(errors='replace')!r}",
                self.status,
                f"a body that is not JSON: {self.body[:200].decode(errors='replace')!r}",
            ) from error

    def object(self) -> dict[str, Any]:
        """The JSON object of a successful answer; any other answer raises :class:`ApiResponseError`."""
        self.raise_for_status()
        document = self.json()
        if not isinstance(document, dict):
            raise MalformedResponseError(
                f"{self.method} {self.path}: HTTP {self.status} with a JSON {type(document).__name__}, not an object",
                self.status,
                f"a JSON {type(document).__name__}, not an object",
            )
        return document


class ApiStream:
    """An answer being received, for watches: its status at once, its body line by line as it arrives."""

    def __init__(self, api: KubeApi, method: str, path: str, response: aiohttp.ClientResponse) -> None:
        self._api = api
        self._method = method
        self._path = path
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status

    async def read(self) -> ApiResponse:
        """The rest of the body at once (for an error answer, whose Status says why)."""
        try:
            body = await self._response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self._api.unreachable(self._method, self._path, error) from error
        return ApiResponse(self._method, self._path, self.status, body)

    async def lines(self) -> AsyncIterator[bytes]:
        """Non-empty lines of a JSON-lines body, of any length (one watch event may exceed aiohttp's line limit)."""
        pending = b""
        try:
            async for chunk in self._response.content.iter_any():
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    if line.strip():
                        yield line
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self._api.unreachable(self._method, self._path, error) from error
        if pending.strip():
            yield pending


class KubeApi:
    """Requests to one API server over one pool of keep-alive connections; use as ``async with``.

    Every request has a timeout (the client's default, or the call's own). A request that gets no answer
    raises :class:`~kuota.kube.errors.ApiUnreachableError`; any answer, whatever its status, is returned.
    """

    def __init__(
        self,
        access: ApiServerAccess,
        *,
        connections: int = 100,
        request_timeout: float = 30.0,
        user_agent: str = f"kuota/{__version__}",
    ) -> None:
        self.access = access
        self._connections = connections
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        self._session: aiohttp.ClientSession | None = None
        # The User-Agent names kuota in audit logs and, as the default field manager, in managedFields.
        self._headers = {"Accept": "application/json", "User-Agent": user_agent, **access.headers}
        self._token_read_at = time.monotonic()

    def with_own_pool(self, connections: int) -> KubeApi:
        """The same server and credentials over a pool of its own, to be closed by its user.

        aiohttp reuses the oldest idle connection first, so a steady trickle of requests keeps every idle
        connection of its pool open; a burst's connections close after it only if the trickle uses another pool.
        """
        return KubeApi(
            self.access,
            connections=connections,
            request_timeout=self._timeout.total or 0.0,
            user_agent=self._headers["User-Agent"],
        )

    @classmethod
    def from_kubeconfig(cls, path: Path, **options: Any) -> KubeApi:
        return cls(from_kubeconfig(path), **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeApi:
        return cls(in_cluster(), **options)

    @property
    def server(self) -> str:
        return self.access.server

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> ApiResponse:
        """Send ``body`` (JSON-encoded, unless it is bytes already) and return the whole answer."""
        response = await self._send(
            method, path, query=query, body=body, content_type=content_type, client_timeout=client_timeout
        )
        try:
            payload = await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self.unreachable(method, path, error) from error
        finally:
            response.release()
        return ApiResponse(method, path, response.status, payload)

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        client_timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> AsyncIterator[ApiStream]:
        """An answer to read as it arrives (a watch); give a ``client_timeout`` without a total for long streams."""
        response = await self._send(method, path, query=query, client_timeout=client_timeout)
        try:
            yield ApiStream(self, method, path, response)
        finally:
            response.release()

    def unreachable(self, method: str, path: str, error: BaseException) -> ApiUnreachableError:
        what = "timed out" if isinstance(error, TimeoutError) else f"{type(error).__name__}: {error}"
        return ApiUnreachableError(f"{method} {path} at {self.server}: no answer ({what})", what)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None,
        client_timeout: aiohttp.ClientTimeout | float | None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> aiohttp.ClientResponse:
        headers = await self._current_headers()
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
            headers = {**headers, "Content-Type": content_type}
        if client_timeout is None:
            timeout = self._timeout
        elif isinstance(client_timeout, aiohttp.ClientTimeout):
            timeout = client_timeout
        else:
            timeout = aiohttp.ClientTimeout(total=client_timeout)
        try:
            return await self._http().request(
                method,
                self.access.server + path,
                params=query,
                data=data,
                headers=headers,
                timeout=timeout,
                server_hostname=self.access.tls_server_name,
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self.unreachable(method, path, error) from error

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use, inside the event loop that will use it.
        if self._session is None:
            connector = aiohttp.TCPConnector(
                ssl=self.access.ssl_context, limit=self._connections, keepalive_timeout=KEEPALIVE_SECONDS
            )
            # trust_env=False: no proxy variables and no ~/.netrc read (in a thread) on every request.
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    async def _current_headers(self) -> Mapping[str, str]:
        token_file = self.access.token_file
        if token_file is None or time.monotonic() - self._token_read_at < TOKEN_REFRESH_SECONDS:
            return self._headers
        self._token_read_at = time.monotonic()  # before the read, so concurrent requests do not all re-read
        try:
            token = await asyncio.to_thread(_read_token, token_file, f"token file {token_file}", "retrying in a minute")
        except KubeconfigError as error:
            # A rotation in progress must not fail requests: the previous token stays valid for a while.
            log.warning("%s; keeping the previous token", error)
            return self._headers
        self._headers = {**self._headers, "Authorization": f"Bearer {token}"}
        return self._headers
