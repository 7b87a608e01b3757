"""The visibility API's routes on the manager's TLS server, and who may use them.

- ``GET /apis/visibility.kueue.x-k8s.io`` (APIGroup) and ``GET /apis/visibility.kueue.x-k8s.io/<version>``
  (APIResourceList), for the API server's discovery (``kubectl api-resources``): any user the front proxy
  names, as discovery is for every authenticated user;
- ``GET .../<version>/clusterqueues/<name>/pendingworkloads`` and
  ``GET .../<version>/namespaces/<namespace>/localqueues/<name>/pendingworkloads``: a ``PendingWorkloadsSummary``
  (:mod:`pending`), for users that a SubjectAccessReview allows ``get`` on that subresource (namespaced for a
  LocalQueue), so a user sees only what RBAC lets them see.

Every path here needs the front proxy (:mod:`front_proxy`): 401 otherwise. Refusals and errors are
``metav1.Status`` objects, as an API server answers. Access decisions are cached as for ``/metrics`` (allowed 5
minutes, denied 30 seconds). A replica that does not run the controller (a follower) answers 503: its engine is
empty; the chart's visibility Service routes only to the leader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kuota.engine import QuotaEngine
from kuota.http_serving import Handler, json_response
from kuota.kube.client import KubeApi
from kuota.kube.errors import KubeApiError
from kuota.webhook.access_reviews import DEFAULT_CACHE_TIMES, AccessReviews, CacheTimes
from kuota.webhook.visibility.errors import BadQueryError, Unauthenticated
from kuota.webhook.visibility.front_proxy import FrontProxy, authenticate
from kuota.webhook.visibility.pending import (
    GROUP,
    VERSIONS,
    Extra,
    Metadata,
    cluster_queue_of,
    cluster_queue_order,
    cluster_queue_window,
    local_queue_window,
    parse_window,
    summary,
)

log = logging.getLogger(__name__)

PREFIX = f"/apis/{GROUP}"
# The field kuota adds to each PendingWorkload: when the engine expects to admit it (see docs/architecture.md).
ADMISSION_ESTIMATE = "admissionEstimate"
_SUMMARY_KIND = "PendingWorkloadsSummary"


@dataclass(frozen=True)
class VisibleState:
    """What a replica answers from: the engine as of now, the Workloads' metadata by key, extra item fields."""

    engine: QuotaEngine
    metadata: Metadata
    extra: Extra


StateSource = Callable[[], VisibleState | None]  # None: this replica has no engine to answer from


def visibility_service_name(webhook_service: str) -> str:
    """The Service the APIServices name, beside the webhook's (the serving certificate names both)."""
    return f"{webhook_service}-visibility"


def status(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return json_response(body, status=code)


def _not_found(kind: str, name: str) -> web.Response:
    details = {"name": name, "group": GROUP, "kind": kind}
    return status(404, "NotFound", f'{kind}.{GROUP} "{name}" not found', details)


def api_group() -> dict[str, Any]:
    versions = [{"groupVersion": f"{GROUP}/{version}", "version": version} for version in VERSIONS]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def api_resources(version: str) -> dict[str, Any]:
    resources = []
    for plural, singular, namespaced in (("clusterqueues", "clusterqueue", False), ("localqueues", "localqueue", True)):
        common = {"namespaced": namespaced, "kind": _SUMMARY_KIND}
        resources.append({"name": plural, "singularName": singular, **common, "verbs": []})
        resources.append({"name": f"{plural}/pendingworkloads", "singularName": "", **common, "verbs": ["get"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{version}", "resources": resources}


class VisibilityAccess:
    """The middleware in front of every visibility path: the front proxy's user, then RBAC for the resource."""

    def __init__(
        self,
        api: KubeApi,
        front_proxy: FrontProxy,
        times: CacheTimes = DEFAULT_CACHE_TIMES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._front_proxy = front_proxy
        self._reviews = AccessReviews(api, times, clock)

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != PREFIX and not request.path.startswith(PREFIX + "/"):
            return await handler(request)
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        peer = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        try:
            user = authenticate(self._front_proxy.config, peer, request.headers)
        except Unauthenticated as refusal:
            return status(401, "Unauthorized", f"Unauthorized: {refusal}")
        attributes = _resource_attributes(request)
        if attributes is None:
            return await handler(request)
        try:
            allowed = await self._reviews.allows(user, "resourceAttributes", attributes)
        except KubeApiError as error:
            log.warning("could not check a visibility caller with the API server: %s", error)
            return status(503, "ServiceUnavailable", "the API server could not be asked what the caller may see; retry")
        if not allowed:
            where = f' in the namespace "{attributes["namespace"]}"' if attributes.get("namespace") else ""
            message = (
                f'{attributes["resource"]}.{GROUP} "{attributes["name"]}" is forbidden: User "{user.name}" cannot '
                f'get resource "{attributes["resource"]}/pendingworkloads" in API group "{GROUP}"{where}'
            )
            return status(403, "Forbidden", message, {"name": attributes["name"], "group": GROUP})
        return await handler(request)


def _resource_attributes(request: web.Request) -> dict[str, str] | None:
    """The SubjectAccessReview attributes of a pendingworkloads request; None for discovery."""
    match = request.match_info
    if "name" not in match or request.match_info.http_exception is not None:
        return None
    attributes = {
        "verb": "get",
        "group": GROUP,
        "version": match["version"],
        "resource": "localqueues" if "namespace" in match else "clusterqueues",
        "subresource": "pendingworkloads",
        "name": match["name"],
    }
    if "namespace" in match:
        attributes["namespace"] = match["namespace"]
    return attributes


def add_visibility_routes(app: web.Application, state: StateSource, access: VisibilityAccess) -> None:
    """Serve the visibility API on ``app`` (the manager's TLS application), behind ``access``."""
    app.middlewares.append(access.guard)

    def version_of(request: web.Request) -> str | None:
        version = request.match_info["version"]
        return version if version in VERSIONS else None

    async def group(request: web.Request) -> web.Response:
        del request
        return json_response(api_group())

    async def resources(request: web.Request) -> web.Response:
        version = version_of(request)
        if version is None:
            return status(404, "NotFound", f"the server could not find the requested resource ({request.path})")
        return json_response(api_resources(version))

    def current(request: web.Request) -> tuple[str, VisibleState] | web.Response:
        version = version_of(request)
        if version is None:
            return status(404, "NotFound", f"the server could not find the requested resource ({request.path})")
        found = state()
        if found is None:
            return status(503, "ServiceUnavailable", "this kuota replica does not run the controller (not the leader)")
        return version, found

    async def cluster_queue(request: web.Request) -> web.Response:
        answer = current(request)
        if isinstance(answer, web.Response):
            return answer
        version, visible = answer
        name = request.match_info["name"]
        try:
            window = parse_window(request.query)
        except BadQueryError as error:
            return status(400, "BadRequest", str(error))
        order = cluster_queue_order(visible.engine, name)
        if order is None:
            return _not_found("clusterqueue", name)
        listed = cluster_queue_window(order, window)
        return json_response(summary(version, listed, visible.metadata, visible.extra))

    async def local_queue(request: web.Request) -> web.Response:
        answer = current(request)
        if isinstance(answer, web.Response):
            return answer
        version, visible = answer
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        try:
            window = parse_window(request.query)
        except BadQueryError as error:
            return status(400, "BadRequest", str(error))
        queue = cluster_queue_of(visible.engine, namespace, name)
        order = cluster_queue_order(visible.engine, queue) if queue is not None else None
        if order is None:
            return _not_found("localqueue", name)
        listed = local_queue_window(order, namespace, name, window)
        return json_response(summary(version, listed, visible.metadata, visible.extra))

    app.router.add_get(PREFIX, group)
    app.router.add_get(PREFIX + "/{version}", resources)
    app.router.add_get(PREFIX + "/{version}/clusterqueues/{name}/pendingworkloads", cluster_queue)
    app.router.add_get(PREFIX + "/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads", local_queue)
