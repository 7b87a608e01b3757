"""Writes to the API server: bounded in number, retried with backoff when the server is unavailable (429, 5xx)
or unreachable, never on 409.

A 409 (or 404) means the object changed under a decision; the caller must re-read and decide again, so it
surfaces as :class:`StaleObjectError`. Every failure is raised from the typed :mod:`kuota.kube.errors` error
that says why. Every write is timed into ``kuota_api_write_duration_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import ApiUnreachableError, ConflictError, KubeApiError, NotFoundError, UnavailableError
from kuota.webhook.controller.errors import ApiWriteError, StaleObjectError
from kuota.webhook.controller.metrics import ControllerMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None:
            prefix += f"/namespaces/{namespace}"
        path = f"{prefix}/{self.plural}"
        if name is not None:
            path += f"/{name}"
        if subresource is not None:
            path += f"/{subresource}"
        return path


JOBS = Resource("batch", "v1", "jobs")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues")
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues")
EVENTS = Resource("", "v1", "events")
LEASES = Resource("coordination.k8s.io", "v1", "leases")
MUTATING_WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
VALIDATING_WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
CUSTOM_RESOURCE_DEFINITIONS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")


class ApiWriter:
    def __init__(
        self,
        api: KubeApi,
        metrics: ControllerMetrics,
        concurrency: int = 32,
        attempts: int = 5,
        request_timeout: float = 15.0,
    ) -> None:
        self._api = api
        self._metrics = metrics
        self._slots = asyncio.Semaphore(concurrency)
        self._attempts = attempts
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)

    async def request(
        self, method: str, resource: Resource, path: str, body: Any = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        failure: KubeApiError
        for attempt in range(self._attempts):
            started = time.perf_counter()
            response: ApiResponse | None = None
            try:
                async with self._slots:
                    response = await self._api.request(
                        method, path, body=body, content_type=content_type, client_timeout=self._timeout
                    )
            except ApiUnreachableError as error:
                failure, message = error, str(error)
            finally:
                status = response.status if response is not None else 0
                self._metrics.observe_write(method, resource.plural, status, time.perf_counter() - started)
            if response is not None:
                if response.ok:
                    return response.object() if response.body else {}
                failure, message = response.error(), response.message()
            if isinstance(failure, NotFoundError | ConflictError):
                raise StaleObjectError(str(failure)) from failure
            if not isinstance(failure, UnavailableError | ApiUnreachableError):
                raise ApiWriteError(str(failure)) from failure
            if attempt + 1 < self._attempts:
                delay = min(5.0, 0.1 * 2**attempt) * random.uniform(0.5, 1.0)
                log.info("%s %s: %s (HTTP %s); retrying in %.2fs", method, path, message, status, delay)
                await asyncio.sleep(delay)
        raise ApiWriteError(f"{method} {path}: gave up after {self._attempts} attempts: {message}") from failure

    async def merge_patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        path = resource.path(namespace, name, subresource)
        return await self.request("PATCH", resource, path, dict(patch), "application/merge-patch+json")

    async def create(self, resource: Resource, namespace: str | None, manifest: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", resource, resource.path(namespace), dict(manifest))

    async def delete(
        self, resource: Resource, namespace: str | None, name: str, resource_version: str
    ) -> dict[str, Any]:
        """Delete, but only the version the decision was made from (a precondition, not a blind delete). The
        answer is the object, marked for deletion while finalizers hold it, or a Status once it is gone."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": resource_version}}
        return await self.request("DELETE", resource, resource.path(namespace, name), body)

    async def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A fresh read (after a conflict); None when the object is gone."""
        try:
            return await self.request("GET", resource, resource.path(namespace, name))
        except StaleObjectError as error:
            if isinstance(error.__cause__, NotFoundError):
                return None
            raise
