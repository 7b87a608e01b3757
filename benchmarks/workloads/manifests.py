"""Builders for the ``kueue.x-k8s.io/v1beta2`` objects a generated config is made of, as plain dicts.

The dicts are exactly what ``yaml.safe_load`` gives for the equivalent YAML, so the same objects feed the
simulator's CONFIG, a YAML file, or a live cluster (``kubectl apply`` / a Kubernetes client). Only the
fields the generators here need are offered; validation is the engine's job, not ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kuota.simulator.errors import SourceSpecError
from kuota.simulator.lines import PodSetLine, WorkloadLine
from kuota.simulator.queue_mapping import QueueTarget

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# Pods must set limits equal to requests for extended resources such as nvidia.com/gpu.
_LIMITLESS_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})

Manifest = dict[str, Any]
"""One API object, as decoded YAML."""

Quantity = int | str


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource of one flavor in a ClusterQueue; None leaves a limit unset."""

    name: str
    nominal: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


@dataclass(frozen=True, slots=True)
class QueueingConfig:
    """A generated simulate CONFIG: its objects in apply order, and the LocalQueues workloads go to."""

    objects: tuple[Manifest, ...]
    queues: tuple[QueueTarget, ...]

    def to_yaml(self) -> str:
        """The objects as one multi-document YAML text (a valid ``--config`` file)."""
        return render_yaml(self.objects)


def render_yaml(objects: Iterable[Manifest]) -> str:
    return yaml.safe_dump_all(list(objects), sort_keys=False, default_flow_style=False)


def namespace(name: str, labels: Mapping[str, str] | None = None) -> Manifest:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def resource_flavor(
    name: str,
    node_labels: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
) -> Manifest:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if tolerations:
        spec["tolerations"] = [dict(toleration) for toleration in tolerations]
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cohort(
    name: str, *, parent: str | None = None, flavor: str | None = None, quotas: Sequence[ResourceQuota] = ()
) -> Manifest:
    """A Cohort, under ``parent`` if given, owning ``quotas`` of ``flavor`` if given."""
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if quotas:
        if flavor is None:
            raise SourceSpecError(f"Cohort {name}: quotas need a flavor")
        spec["resourceGroups"] = [
            {
                "coveredResources": [quota.name for quota in quotas],
                "flavors": [{"name": flavor, "resources": [_quota(quota) for quota in quotas]}],
            }
        ]
    return {"apiVersion": KUEUE_API_VERSION, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _quota(quota: ResourceQuota) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": quota.name, "nominalQuota": quota.nominal}
    if quota.borrowing_limit is not None:
        resource["borrowingLimit"] = quota.borrowing_limit
    if quota.lending_limit is not None:
        resource["lendingLimit"] = quota.lending_limit
    return resource


def cluster_queue(
    name: str,
    *,
    cohort_name: str | None,
    flavor: str,
    quotas: Sequence[ResourceQuota],
    namespace_selector: Mapping[str, Any],
    reclaim_within_cohort: str = "Never",
    within_cluster_queue: str = "Never",
) -> Manifest:
    """A ClusterQueue with one resource group of one flavor covering exactly ``quotas``."""
    if not quotas:
        raise SourceSpecError(f"ClusterQueue {name}: give at least one resource quota")
    resources = [_quota(quota) for quota in quotas]
    spec: dict[str, Any] = {}
    if cohort_name is not None:
        spec["cohortName"] = cohort_name
    spec["namespaceSelector"] = dict(namespace_selector)
    spec["preemption"] = {
        "reclaimWithinCohort": reclaim_within_cohort,
        "withinClusterQueue": within_cluster_queue,
    }
    spec["resourceGroups"] = [
        {
            "coveredResources": [quota.name for quota in quotas],
            "flavors": [{"name": flavor, "resources": resources}],
        }
    ]
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(target: QueueTarget, cluster_queue_name: str) -> Manifest:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"namespace": target.namespace, "name": target.queue},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def workload_priority_class(name: str, value: int, description: str) -> Manifest:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": description,
    }


def workload_manifest(
    workload: WorkloadLine,
    *,
    priority_values: Mapping[str, int],
    labels: Mapping[str, str] | None = None,
    image: str = PAUSE_IMAGE,
) -> Manifest:
    """The standalone Workload object a live driver creates for one simulate record.

    ``priority_values`` maps WorkloadPriorityClass names to values: the API requires ``spec.priority``
    whenever ``spec.priorityClassRef`` is set. ``submitAt`` and ``duration`` are the driver's to honour;
    they have no field in the object.
    """
    spec: dict[str, Any] = {
        "queueName": workload["queue"],
        "podSets": [_pod_set(pod_set, image) for pod_set in workload["podSets"]],
    }
    priority_class = workload["priorityClass"]
    if priority_class is not None:
        if priority_class not in priority_values:
            raise SourceSpecError(
                f"Workload {workload['namespace']}/{workload['name']}: priorityClass {priority_class!r} has "
                f"no value; pass it in priority_values (known: {sorted(priority_values)})"
            )
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": priority_class,
        }
        spec["priority"] = priority_values[priority_class]
    if workload["maxExecutionSeconds"] is not None:
        spec["maximumExecutionTimeSeconds"] = workload["maxExecutionSeconds"]
    metadata: dict[str, Any] = {"name": workload["name"], "namespace": workload["namespace"]}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": KUEUE_API_VERSION, "kind": "Workload", "metadata": metadata, "spec": spec}


def _pod_set(pod_set: PodSetLine, image: str) -> dict[str, Any]:
    requests: dict[str, str] = dict(pod_set["requests"])
    resources: dict[str, Any] = {"requests": requests}
    limits = {name: value for name, value in requests.items() if name not in _LIMITLESS_RESOURCES}
    if limits:
        resources["limits"] = limits
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": image, "resources": resources}],
    }
    if pod_set["nodeSelector"]:
        pod_spec["nodeSelector"] = dict(pod_set["nodeSelector"])
    if pod_set["tolerations"]:
        pod_spec["tolerations"] = [dict(toleration) for toleration in pod_set["tolerations"]]
    return {"name": pod_set["name"], "count": pod_set["count"], "template": {"spec": pod_spec}}
