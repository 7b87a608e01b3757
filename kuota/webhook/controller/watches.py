"""What the quota controller watches, one reflector a kind: Kueue's configuration kinds and Namespaces, Workloads,
each managed job kind, the pods kuota's webhook marked managed, the StatefulSets (when that integration is on), the
Nodes, the pods bound to them and the pods started gated by topology (topology-aware scheduling), the
ProvisioningRequestConfigs and the ProvisioningRequests kuota made (:mod:`provisioning_controller`), the objects
a kind's pod sets are made from (a TrainJob's runtimes: only their names, to know when one comes or changes), and
the CRDs' names (for the kinds whose CRD is not installed yet).

Kinds served by the API server itself are watched from the start; a custom resource's kind once its CRD is
there (the CRDs are watched: installing one later is enough). Each reflector keeps the controller's compact
copy of its objects (:mod:`kuota.webhook.controller.state`). Who hears of their events is the controller's
business: it subscribes its handlers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kuota.kube.client import KubeApi
from kuota.kube.reflector import Reflector, ReflectorSet, ResourceType
from kuota.webhook.controller.pod_reconciler import POD, STATEFULSET, compact_pod
from kuota.webhook.controller.state import CompactCopy, NewestCopies, compact_config, compact_job, group_kind
from kuota.webhook.controller.topology_nodes import BOUND_PODS_SELECTOR, bound_pod_essence, node_essence
from kuota.webhook.controller.topology_ungater import tas_pod_essence
from kuota.webhook.jobs import pod as pods
from kuota.webhook.jobs import pod_parents
from kuota.webhook.jobs.adapter import JobAdapter, ReferencingAdapter
from kuota.webhook.jobs.pod_parents import PodParent
from kuota.webhook.jobs.registry import BUILT_IN_GROUPS, Registry
from kuota.webhook.jobs.topology import POD_SET_LABEL

KUEUE = ("kueue.x-k8s.io", "v1beta2")
_CONFIG_RESOURCES = {
    "ResourceFlavor": ResourceType(*KUEUE, "resourceflavors", namespaced=False),
    "ClusterQueue": ResourceType(*KUEUE, "clusterqueues", namespaced=False),
    "LocalQueue": ResourceType(*KUEUE, "localqueues", namespaced=True),
    "Cohort": ResourceType(*KUEUE, "cohorts", namespaced=False),
    "WorkloadPriorityClass": ResourceType(*KUEUE, "workloadpriorityclasses", namespaced=False),
    "AdmissionCheck": ResourceType(*KUEUE, "admissionchecks", namespaced=False),
    "Topology": ResourceType(*KUEUE, "topologies", namespaced=False),
    "Namespace": ResourceType("", "v1", "namespaces", namespaced=False),
}
_WORKLOADS = ResourceType(*KUEUE, "workloads", namespaced=True)
_PROVISIONING_CONFIGS = ResourceType(*KUEUE, "provisioningrequestconfigs", namespaced=False)
PROVISIONING_REQUESTS_CRD = "provisioningrequests.autoscaling.x-k8s.io"
_PROVISIONING_REQUESTS = ResourceType(
    "autoscaling.x-k8s.io", "v1", "provisioningrequests", namespaced=True, label_selector="kueue.x-k8s.io/managed=true"
)
_CRDS = ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)
_NODES = ResourceType("", "v1", "nodes", namespaced=False)
_TAS_PODS = ResourceType("", "v1", "pods", namespaced=True, label_selector=POD_SET_LABEL)
_BOUND_PODS = ResourceType("", "v1", "pods", namespaced=True, field_selector=BOUND_PODS_SELECTOR)


class Watches:
    """The controller's reflectors, by what they watch, and :attr:`all` of those started with the controller."""

    def __init__(self, api: KubeApi, registry: Registry, workloads: NewestCopies) -> None:
        """``workloads``: the controller's newest Workload copies, which the Workload watch reuses on an echo."""
        self._api = api
        self.config = {kind: Reflector(api, resource, compact_config) for kind, resource in _CONFIG_RESOURCES.items()}
        self.workloads: Reflector[CompactCopy] = Reflector(api, _WORKLOADS, workloads.compact_watched)
        self.jobs: dict[str, Reflector[CompactCopy]] = {}  # per job kind (the first part of a JobKey)
        # The kinds whose CRD is not installed yet, by CRD name (``plural.group``).
        self.waiting_for_crds: dict[str, JobAdapter | PodParent] = {}
        # The objects jobs name (a TrainJob's runtimes) whose CRD is not watched yet, by CRD name, with the kind
        # of the jobs that name them.
        self.waiting_for_referenced: dict[str, tuple[ReferencingAdapter, ResourceType]] = {}
        for adapter in registry.adapters:
            if adapter.kind.group in BUILT_IN_GROUPS:
                self.jobs[job_kind(adapter)] = self._job_reflector(adapter)
            else:
                self.waiting_for_crds[f"{adapter.plural}.{adapter.kind.group}"] = adapter
            if isinstance(adapter, ReferencingAdapter):
                for plural in adapter.reads:
                    # Listed across namespaces: the path is the same for a namespaced kind and a cluster one.
                    resource = ResourceType(adapter.kind.group, adapter.kind.version, plural, namespaced=False)
                    self.waiting_for_referenced[f"{plural}.{adapter.kind.group}"] = (adapter, resource)
        if registry.gates_pods:  # only the pods kuota's webhook marked managed
            managed = ResourceType("", "v1", "pods", namespaced=True, label_selector=f"{pods.MANAGED_LABEL}=true")
            self.jobs[POD] = Reflector(api, managed, compact_pod)
        if pod_parents.STATEFULSET in registry.pod_parents:
            self.jobs[STATEFULSET] = Reflector(api, ResourceType("apps", "v1", "statefulsets", True), compact_job)
        if pod_parents.LEADERWORKERSET in registry.pod_parents:  # served through a CRD, maybe installed later
            lws = pod_parents.LEADERWORKERSET
            self.waiting_for_crds[f"{lws.plural}.{lws.kind.group}"] = lws
        self.provisioning_configs = Reflector(api, _PROVISIONING_CONFIGS, compact_config)
        self.provisioning_requests: Reflector[dict[str, Any]] | None = None  # once its CRD is installed
        self.crds: Reflector[dict[str, Any]] = Reflector(api, _CRDS, _identity)
        # Topology-aware scheduling: the nodes' capacity, the pods bound to them, and the pods started gated by
        # topology.
        self.nodes: Reflector[dict[str, Any]] = Reflector(api, _NODES, node_essence)
        self.bound_pods: Reflector[dict[str, Any]] = Reflector(api, _BOUND_PODS, bound_pod_essence)
        self.tas_pods: Reflector[dict[str, Any]] = Reflector(api, _TAS_PODS, tas_pod_essence)
        self.all = ReflectorSet(
            [
                *self.config.values(),
                self.workloads,
                *self.jobs.values(),
                self.provisioning_configs,
                self.crds,
                self.nodes,
                self.bound_pods,
                self.tas_pods,
            ]
        )

    def crd_installed(self, crd: str) -> tuple[JobAdapter | PodParent, Reflector[CompactCopy]] | None:
        """The kind whose CRD ``crd`` is, now installed, and its new reflector (not started: not in :attr:`all`);
        None if no kind waits for that CRD."""
        adapter = self.waiting_for_crds.pop(crd, None)
        if adapter is None:
            return None
        reflector = self._job_reflector(adapter)
        self.jobs[job_kind(adapter)] = reflector
        return adapter, reflector

    def referenced_installed(self, crd: str) -> tuple[ReferencingAdapter, Reflector[dict[str, Any]]] | None:
        """The kind of the jobs that name objects of ``crd``, now installed, and those objects' new reflector (not
        started: not in :attr:`all`); None if no job names that CRD's kind."""
        waiting = self.waiting_for_referenced.pop(crd, None)
        if waiting is None:
            return None
        adapter, resource = waiting
        return adapter, Reflector(self._api, resource, _identity)

    def provisioning_requests_installed(self, crd: str) -> Reflector[dict[str, Any]] | None:
        """The ProvisioningRequests' new reflector (not started: not in :attr:`all`) when ``crd`` is their CRD, seen
        for the first time; None otherwise."""
        if crd != PROVISIONING_REQUESTS_CRD or self.provisioning_requests is not None:
            return None
        self.provisioning_requests = Reflector(self._api, _PROVISIONING_REQUESTS, compact_config)
        return self.provisioning_requests

    def _job_reflector(self, adapter: JobAdapter | PodParent) -> Reflector[CompactCopy]:
        kind = adapter.kind
        return Reflector(
            self._api, ResourceType(kind.group, kind.version, adapter.plural, namespaced=True), compact_job
        )


def job_kind(adapter: JobAdapter | PodParent) -> str:
    """The kind part of the :data:`~kuota.webhook.controller.state.JobKey` of ``adapter``'s jobs."""
    return group_kind(adapter.kind.api_version, adapter.kind.kind)


def _identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object's name (and namespace) is all the controller reads of a CRD (the schemas are large) or of a runtime
    a job names (read whole, when a Workload is made from it)."""
    metadata = obj["metadata"]
    kept = {key: metadata[key] for key in ("name", "namespace", "resourceVersion") if key in metadata}
    return {"metadata": kept}
