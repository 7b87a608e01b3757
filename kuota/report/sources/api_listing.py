"""Reading the report's job history and queues live from the API server: retained Workloads, and the queueing
objects the what-if replays (ResourceFlavors, ClusterQueues, LocalQueues, Cohorts, WorkloadPriorityClasses,
and Namespaces for namespaceSelectors).

The imperative shell in front of ``workload_history`` and ``queue_config``, which stay pure. kuota's
:class:`~kuota.kube.client.KubeApi` with the credentials it reads (a kubeconfig context's client certificate,
token or exec plugin, or the pod's service account); lists page by page (``limit``/``continue``), every request
under a timeout; every failure a :class:`~kuota.report.errors.KubernetesError` naming the server, the resource
and what to do.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuota.errors import ConfigurationError
from kuota.kube.client import KubeApi
from kuota.kube.credentials import ApiServerAccess, in_cluster
from kuota.kube.errors import (
    ApiResponseError,
    ApiUnreachableError,
    CredentialPluginError,
    ForbiddenError,
    MalformedResponseError,
    NotFoundError,
    UnauthorizedError,
)
from kuota.kube.kubeconfig import from_kubeconfig
from kuota.kube.listing import PAGE_SIZE, list_all
from kuota.report.errors import (
    KubernetesError,
    KubernetesRequestError,
    KubernetesUnreachableError,
    ReportInputError,
)
from kuota.report.sources.queue_config import KUEUE_API, config_object
from kuota.report.sources.workload_history import RetainedWorkloads, read_workloads

REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Resource:
    kind: str
    plural: str
    api_version: str

    @property
    def path(self) -> str:
        core = "/" not in self.api_version  # v1, not group/version
        return f"{'/api' if core else '/apis'}/{self.api_version}/{self.plural}"

    @property
    def described(self) -> str:
        """As kubectl and RBAC rules name it: ``workloads.kueue.x-k8s.io``, ``namespaces``."""
        group = self.api_version.rpartition("/")[0]
        return f"{self.plural}.{group}" if group else self.plural


WORKLOADS = Resource("Workload", "workloads", KUEUE_API)
QUEUE_RESOURCES = (
    Resource("ResourceFlavor", "resourceflavors", KUEUE_API),
    Resource("ClusterQueue", "clusterqueues", KUEUE_API),
    Resource("LocalQueue", "localqueues", KUEUE_API),
    Resource("Cohort", "cohorts", KUEUE_API),
    Resource("WorkloadPriorityClass", "workloadpriorityclasses", KUEUE_API),
    Resource("Namespace", "namespaces", "v1"),
)


@dataclass(frozen=True)
class ApiSource:
    access: ApiServerAccess
    origin: str  # where the credentials came from, for messages: "--kubeconfig PATH", "--in-cluster", ...


def api_source(kubeconfig: Path | None, context: str | None = None, *, pod: bool = False) -> ApiSource:
    """The pod's service account (``pod``), else context ``context`` (default: the current one) of the kubeconfig
    at ``kubeconfig`` or (None) of the files KUBECONFIG lists, else of ~/.kube/config."""
    if not pod:
        listed = os.environ.get("KUBECONFIG")
        origin = f"--kubeconfig {kubeconfig}" if kubeconfig else f"KUBECONFIG {listed}" if listed else "~/.kube/config"
        if context:
            origin += f" --context {context}"
        try:
            return ApiSource(from_kubeconfig(kubeconfig, context), origin)
        except ConfigurationError as error:
            raise ReportInputError(f"{origin} is not a usable kubeconfig: {error}") from error
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise ReportInputError(
            "--in-cluster: not running in a pod (KUBERNETES_SERVICE_HOST is unset); pass --kubeconfig PATH instead"
        )
    try:
        return ApiSource(in_cluster(), "--in-cluster (the pod's service account)")
    except ConfigurationError as error:
        raise ReportInputError(
            f"--in-cluster: the pod's service account credentials cannot be read ({error}); "
            "check that the report's pod mounts its service account token (automountServiceAccountToken)"
        ) from error


@dataclass(frozen=True)
class ClusterObjects:
    workloads: RetainedWorkloads  # read as soon as listed: only the fields the history needs are kept
    config_objects: list[dict[str, Any]] | None  # as queue config files hold them; None when not asked for


async def read_cluster(
    source: ApiSource,
    *,
    with_queues: bool,
    page_size: int = PAGE_SIZE,
    timeout_s: float = REQUEST_TIMEOUT_S,
) -> ClusterObjects:
    """Every Workload, and (``with_queues``) every queueing object, of the cluster, listed concurrently."""
    resources: Sequence[Resource] = (WORKLOADS, *QUEUE_RESOURCES) if with_queues else (WORKLOADS,)
    try:
        async with KubeApi(source.access) as api, asyncio.TaskGroup() as group:
            lister = _Lister(api, source.origin, page_size, timeout_s)
            tasks = [group.create_task(lister.list_all(resource)) for resource in resources]
    except* KubernetesError as failures:
        # the lists fail together when the server is down or the identity is wrong: the first says why
        raise failures.exceptions[0] from None
    listed = [task.result() for task in tasks]
    config = None
    if with_queues:
        config = [
            config_object(resource.kind, resource.api_version, item)
            for resource, items in zip(QUEUE_RESOURCES, listed[1:], strict=True)
            for item in items
        ]
    return ClusterObjects(read_workloads(listed[0]), config)


class _Lister:
    def __init__(self, api: KubeApi, origin: str, page_size: int, timeout_s: float) -> None:
        self._api = api
        self._origin = origin
        self._page_size = page_size
        self._timeout_s = timeout_s

    async def list_all(self, resource: Resource) -> list[dict[str, Any]]:
        try:
            listing = await list_all(
                self._api, resource.path, page_size=self._page_size, client_timeout=self._timeout_s
            )
        except CredentialPluginError as error:
            raise KubernetesRequestError(
                f"listing {resource.described} at {self._api.server}: no credentials for it ({error})"
            ) from error
        except ApiUnreachableError as error:
            raise KubernetesUnreachableError(
                f"the API server at {self._api.server} did not answer a list of {resource.described} "
                f"({error.reason}); check the server in {self._origin} and that the cluster is up"
            ) from error
        except ApiResponseError as error:
            what = f"listing {resource.described} at {self._api.server}: HTTP {error.status}: {error.detail}"
            raise KubernetesRequestError(f"{what}; {self._hint(resource, error)}") from error
        return listing.items

    def _hint(self, resource: Resource, error: ApiResponseError) -> str:
        origin = self._origin
        if isinstance(error, UnauthorizedError):
            return f"the API server does not accept the credentials of {origin}; refresh them"
        if isinstance(error, ForbiddenError):
            return (
                f"grant the identity of {origin} get and list on {resource.described} cluster-wide "
                "(the chart's kuota-report ClusterRole does)"
            )
        if isinstance(error, NotFoundError):
            return (
                f"this API server does not serve {resource.path}; install kuota's CRDs "
                "(the chart does) or point at the cluster kuota runs in"
            )
        if isinstance(error, MalformedResponseError):
            return "the answer is not a Kubernetes list; check that the server is a Kubernetes API server"
        return "see the API server's log, then run the report again"
