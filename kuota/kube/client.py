"""The one way kuota talks to the Kubernetes API server: :class:`KubeApi`, a plain-REST client owning one
aiohttp connection pool, with the credentials of :mod:`kuota.kube.credentials` (the pod's service account) or
:mod:`kuota.kube.kubeconfig` (a kubeconfig's context).

Plain aiohttp rather than kubernetes_asyncio: that client package imports every model (~50 MiB resident),
opens its session with ``trust_env=True`` (a thread hop to read ``~/.netrc`` on every request) and sanitizes
every call's arguments; kuota sends and receives raw JSON and parses it once, at its own edges.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from kuota import __version__, strict_json
from kuota.kube.credentials import ApiServerAccess, in_cluster, read_token
from kuota.kube.errors import (
    ApiResponseError,
    ApiUnreachableError,
    KubeconfigError,
    MalformedResponseError,
    error_for_status,
)
from kuota.kube.exec_plugin import ExecCredential
from kuota.kube.kubeconfig import from_kubeconfig

log = logging.getLogger(__name__)

# client-go re-reads a token file once a minute; the kubelet rotates projected tokens well before expiry.
TOKEN_REFRESH_SECONDS = 60.0
# Idle connections are kept this long: long enough to span the gaps in a stream of writes, short enough that
# a burst's extra connections close soon after it (each TLS connection keeps a read buffer of up to 256 KiB).
KEEPALIVE_SECONDS = 15.0

Query = Mapping[str, str] | Sequence[tuple[str, str]]


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
            document = strict_json.loads(self.body)
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
            return strict_json.loads(self.body)
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
    def from_kubeconfig(cls, path: Path | None, context: str | None = None, **options: Any) -> KubeApi:
        """Context ``context`` (default: the current one) of ``path``, or (None) of KUBECONFIG or ~/.kube/config."""
        return cls(from_kubeconfig(path, context), **options)

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
        data: bytes | None = None
        extra: dict[str, str] = {}
        if body is not None:
            data = body if isinstance(body, bytes) else strict_json.dumps(body)
            extra["Content-Type"] = content_type
        if client_timeout is None:
            timeout = self._timeout
        elif isinstance(client_timeout, aiohttp.ClientTimeout):
            timeout = client_timeout
        else:
            timeout = aiohttp.ClientTimeout(total=client_timeout)

        async def send(credential: ExecCredential | None) -> aiohttp.ClientResponse:
            headers = {**await self._current_headers(), **extra}
            tls = self.access.ssl_context
            if credential is not None:
                if credential.token is not None:
                    headers["Authorization"] = f"Bearer {credential.token}"
                if credential.tls is not None:
                    tls = credential.tls  # connections are pooled per context: a new certificate gets new ones
            try:
                return await self._http().request(
                    method,
                    self.access.server + path,
                    params=query,
                    data=data,
                    headers=headers,
                    timeout=timeout,
                    ssl=tls,
                    server_hostname=self.access.tls_server_name,
                    proxy=self.access.proxy,
                    proxy_headers=self.access.proxy_headers or None,
                )
            except (aiohttp.ClientError, TimeoutError) as error:
                raise self.unreachable(method, path, error) from error

        plugin = self.access.exec_plugin
        if plugin is None:
            return await send(None)
        credential = await plugin.credential()
        response = await send(credential)
        if response.status == 401:
            # As client-go: a refused plugin credential is replaced at once; this request is sent once more with it.
            response.release()
            response = await send(await plugin.refused(credential))
        return response

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
            token = await asyncio.to_thread(read_token, token_file, f"token file {token_file}", "retrying in a minute")
        except KubeconfigError as error:
            # A rotation in progress must not fail requests: the previous token stays valid for a while.
            log.warning("%s; keeping the previous token", error)
            return self._headers
        self._headers = {**self._headers, "Authorization": f"Bearer {token}"}
        return self._headers
