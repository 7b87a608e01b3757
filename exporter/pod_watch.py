"""Keeps a :mod:`exporter.pod_directory` of this node's pods current: list, then watch, then list again.

Scoped to ``spec.nodeName`` so a node's exporter only ever holds its own pods (dozens, not the cluster's
thousands). Every request has a timeout; a failed list or watch is counted and retried with a capped backoff.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from exporter.errors import PodWatchError
from exporter.kube_access import ApiServerAccess, from_kubeconfig, in_cluster
from exporter.pod_directory import PodInfo, apply_event, pod_info

log = logging.getLogger(__name__)

WATCH_SECONDS = 300
REQUEST_TIMEOUT = 30.0
MAX_BACKOFF = 30.0


class PodWatch:
    def __init__(
        self,
        node_name: str,
        kubeconfig: Path | None,
        on_change: Callable[[Mapping[str, PodInfo]], None],
        on_error: Callable[[Exception], None],
    ) -> None:
        self._node_name = node_name
        self._kubeconfig = kubeconfig
        self._on_change = on_change
        self._on_error = on_error
        self._pods: dict[str, PodInfo] = {}

    async def run(self) -> None:
        access = from_kubeconfig(self._kubeconfig) if self._kubeconfig else in_cluster()
        backoff = 1.0
        connector = aiohttp.TCPConnector(ssl=access.ssl_context)
        async with aiohttp.ClientSession(connector=connector, headers=dict(access.headers)) as http:
            while True:
                try:
                    version = await self._list(http, access)
                    backoff = 1.0
                    await self._watch(http, access, version)
                except (aiohttp.ClientError, TimeoutError, PodWatchError, ValueError) as error:
                    log.warning("pod watch on node %s failed: %s; retrying in %.0fs", self._node_name, error, backoff)
                    self._on_error(error)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF)

    def _url(self, access: ApiServerAccess) -> str:
        return f"{access.server}/api/v1/pods"

    async def _list(self, http: aiohttp.ClientSession, access: ApiServerAccess) -> str:
        params = {"fieldSelector": f"spec.nodeName={self._node_name}"}
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        async with http.get(self._url(access), params=params, timeout=timeout) as response:
            body: dict[str, Any] = await response.json()
            if response.status != 200:
                raise PodWatchError(f"listing pods on node {self._node_name}: HTTP {response.status}: {body}")
        pods = [pod_info(item) for item in body.get("items", [])]
        self._pods = {info.uid: info for info in pods if info.uid}
        self._on_change(dict(self._pods))
        return str(body["metadata"]["resourceVersion"])

    async def _watch(self, http: aiohttp.ClientSession, access: ApiServerAccess, version: str) -> None:
        """Follow changes until the server ends the watch; an error event (e.g. 410 Gone) raises to re-list."""
        params = {
            "fieldSelector": f"spec.nodeName={self._node_name}",
            "watch": "1",
            "resourceVersion": version,
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        timeout = aiohttp.ClientTimeout(total=WATCH_SECONDS + REQUEST_TIMEOUT, sock_connect=REQUEST_TIMEOUT)
        async with http.get(self._url(access), params=params, timeout=timeout) as response:
            if response.status != 200:
                raise PodWatchError(f"watching pods on node {self._node_name}: HTTP {response.status}")
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise PodWatchError(f"pod watch error event: {event['object']}")
                if event["type"] == "BOOKMARK":
                    continue
                self._pods = apply_event(self._pods, event["type"], event["object"])
                self._on_change(dict(self._pods))
