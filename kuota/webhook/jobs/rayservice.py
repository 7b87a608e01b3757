"""RayService (``ray.io/v1``, framework ``ray.io/rayservice``) behind the job adapter interface.

As Kueue has it: the RayService itself is the job (its Workload named for it), its pod sets those of its
``spec.rayClusterConfig`` (``head``, then the worker groups: see :mod:`~kuota.webhook.jobs.raycluster`), held
back by ``spec.rayClusterConfig.suspend`` (KubeRay gives the RayCluster it makes that spec), and the flavors
written into ``rayClusterConfig``'s templates. Pods ready and active both mean the RayService's ``Ready``
condition. It serves and never finishes: its Workload is marked serving and holds its quota until it is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kuota.webhook.jobs.adapter import Finished, GroupVersionKind, PodSet, PodSetPlacement, SuspendFieldAdapter
from kuota.webhook.jobs.raycluster import cluster_pod_sets, cluster_restore_patch, cluster_run_patch

CLUSTER_CONFIG = "rayClusterConfig"
READY_CONDITION = "Ready"


def _cluster_spec(service: Mapping[str, Any]) -> Mapping[str, Any]:
    return (service.get("spec") or {}).get(CLUSTER_CONFIG) or {}


def _ready(service: Mapping[str, Any]) -> bool:
    conditions = (service.get("status") or {}).get("conditions") or []
    return any(c.get("type") == READY_CONDITION and c.get("status") == "True" for c in conditions)


class RayServiceAdapter(SuspendFieldAdapter):
    framework = "ray.io/rayservice"
    kind = GroupVersionKind("ray.io", "v1", "RayService")
    plural = "rayservices"
    suspend_path = ("spec", CLUSTER_CONFIG, "suspend")
    serving = True

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        return cluster_pod_sets(_cluster_spec(job))

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        where = f"RayService {metadata['namespace']}/{metadata['name']}"
        cluster = cluster_run_patch(where, _cluster_spec(job), placements, originals)
        return {"spec": {CLUSTER_CONFIG: {"suspend": False, **cluster}}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        cluster = cluster_restore_patch(_cluster_spec(job), originals)
        return None if cluster is None else {"spec": {CLUSTER_CONFIG: cluster}}

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        """Kueue's ``IsActive`` for a RayService: its ``Ready`` condition."""
        return _ready(job)

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        return None

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        return _ready(job)


ADAPTER = RayServiceAdapter()
