"""Keeps a :mod:`kuota.exporter.pod_directory` of this node's pods current: list, then watch, then list again.

Scoped to ``spec.nodeName`` so a node's exporter only ever holds its own pods (dozens, not the cluster's
thousands). Every request has a timeout; a failed list or watch is counted and retried with a capped backoff.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

import aiohttp

from kuota.exporter.errors import ExporterConfigurationError, PodWatchError
from kuota.exporter.pod_directory import PodInfo, apply_event, pod_info
from kuota.kube.client import KubeApi
from kuota.kube.errors import ApiResponseError, KubeApiError, KubeconfigError
from kuota.kube.listing import list_all

log = logging.getLogger(__name__)

WATCH_SECONDS = 300
REQUEST_TIMEOUT = 30.0
MAX_BACKOFF = 30.0
PODS = "/api/v1/pods"


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
        async with self._api() as api:
            backoff = 1.0
            while True:
                try:
                    version = await self._list(api)
                    backoff = 1.0
                    await self._watch(api, version)
                except (KubeApiError, PodWatchError, ValueError) as error:
                    log.warning("pod watch on node %s failed: %s; retrying in %.0fs", self._node_name, error, backoff)
                    self._on_error(error)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF)

    def _api(self) -> KubeApi:
        if self._kubeconfig is not None:
            try:
                return KubeApi.from_kubeconfig(self._kubeconfig)
            except KubeconfigError as error:
                raise ExporterConfigurationError(str(error)) from error
        try:
            return KubeApi.in_cluster()
        except KubeconfigError as error:
            raise ExporterConfigurationError(f"{error}, or --no-pod-watch") from error

    async def _list(self, api: KubeApi) -> str:
        query = [("fieldSelector", f"spec.nodeName={self._node_name}")]
        try:
            listing = await list_all(api, PODS, query=query, client_timeout=REQUEST_TIMEOUT)
        except ApiResponseError as error:
            raise PodWatchError(f"listing pods on node {self._node_name}: {error}") from error
        pods = [pod_info(item) for item in listing.items]
        self._pods = {info.uid: info for info in pods if info.uid}
        self._on_change(dict(self._pods))
        return listing.resource_version

    async def _watch(self, api: KubeApi, version: str) -> None:
        """Follow changes until the server ends the watch; an error event (e.g. 410 Gone) raises to re-list."""
        query = {
            "fieldSelector": f"spec.nodeName={self._node_name}",
            "watch": "1",
            "resourceVersion": version,
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        timeout = aiohttp.ClientTimeout(total=WATCH_SECONDS + REQUEST_TIMEOUT, sock_connect=REQUEST_TIMEOUT)
        async with api.stream("GET", PODS, query=query, client_timeout=timeout) as stream:
            if stream.status != 200:
                answer = await stream.read()
                raise PodWatchError(
                    f"watching pods on node {self._node_name}: HTTP {answer.status}: {answer.message()}"
                )
            async for line in stream.lines():
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise PodWatchError(f"pod watch error event: {event['object']}")
                if event["type"] == "BOOKMARK":
                    continue
                self._pods = apply_event(self._pods, event["type"], event["object"])
                self._on_change(dict(self._pods))
