"""A small JSON client for the API server (aiohttp), for the driver and the executor.

Raw JSON rather than kubernetes_asyncio: the driver shares two cores with both controllers and the control
plane, and decoding tens of thousands of Workload events into models would cost more than the controllers
it measures. Every call has a timeout; watches end after ``timeout_seconds`` and the caller resumes them.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import aiohttp

from benchmarks.side_by_side.errors import ApiError

KUEUE_GROUP_VERSION = "kueue.x-k8s.io/v1beta2"
_REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=60)


def resource_path(
    group_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


class KubeApi:
    def __init__(self, server: str, ssl_context: ssl.SSLContext, connections: int = 64) -> None:
        self.server = server
        self._ssl = ssl_context
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeApi:
        connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._connections)
        self._session = aiohttp.ClientSession(connector=connector, timeout=_REQUEST_TIMEOUT)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise ApiError("KubeApi used outside `async with`: open it first")
        return self._session

    async def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with self.session.request(method, self.server + path, data=data, headers=headers) as reply:
            text = await reply.text()
            if reply.status >= 400:
                raise ApiError(f"{method} {path}: HTTP {reply.status}: {text[:300]}", reply.status)
            return json.loads(text) if text else None

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self._call("POST", path, body)
        return created

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self._call("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return found

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = await self._call("PATCH", path, patch, "application/merge-patch+json")
        return patched

    async def apply_status(self, path: str, body: dict[str, Any], field_manager: str) -> dict[str, Any]:
        """Server-side apply of ``body`` to the status subresource at ``path`` as ``field_manager``, taking over
        the fields it names (as a controller that owns them writes them)."""
        query = f"?fieldManager={field_manager}&force=true"
        reply: dict[str, Any] = await self._call("PATCH", f"{path}{query}", body, "application/apply-patch+yaml")
        return reply

    async def text(self, path: str) -> str:
        async with self.session.get(self.server + path) as reply:
            if reply.status >= 400:
                raise ApiError(f"GET {path}: HTTP {reply.status}", reply.status)
            return await reply.text()

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event type, object) pairs from ``resource_version`` on, until the server ends the watch."""
        query = f"?watch=1&allowWatchBookmarks=true&resourceVersion={resource_version}&timeoutSeconds={timeout_seconds}"
        timeout = aiohttp.ClientTimeout(total=timeout_seconds + 30, sock_read=timeout_seconds + 30)
        async with self.session.get(self.server + path + query, timeout=timeout) as reply:
            if reply.status >= 400:
                raise ApiError(f"watch {path}: HTTP {reply.status}: {(await reply.text())[:300]}", reply.status)
            async for line in reply.content:
                if line.strip():
                    event = json.loads(line)
                    yield event["type"], event["object"]
