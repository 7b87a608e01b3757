"""RayCluster (``ray.io/v1``, framework ``ray.io/raycluster``) behind the job adapter interface, and the Ray
cluster spec's pod sets that :mod:`~kuota.webhook.jobs.rayjob` shares.

As Kueue has it: pod set ``head`` (one pod) first, then one per worker group, named after the group
(lower-case), whose count is ``replicas`` (default 1) times ``numOfHosts`` when above 1; ``spec.suspend`` holds it
back (KubeRay deletes every pod, then reports the state ``suspended``). A RayCluster never finishes: deleting
it gives its quota back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kuota.webhook.jobs.adapter import (
    Finished,
    GroupVersionKind,
    PodSet,
    PodSetPlacement,
    SuspendFieldAdapter,
    by_name,
    placed_template,
    restored_template,
)
from kuota.webhook.jobs.pod_templates import patched_template

HEAD_POD_SET = "head"
READY_STATE = "ready"
SUSPENDED_STATE = "suspended"


def _worker_groups(cluster_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(cluster_spec.get("workerGroupSpecs") or [])


def _head_template(cluster_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return (cluster_spec.get("headGroupSpec") or {}).get("template") or {}


def _group_pod_set_name(group: Mapping[str, Any]) -> str:
    return str(group.get("groupName", "")).lower()


def _worker_count(group: Mapping[str, Any]) -> int:
    replicas = group.get("replicas")
    count = 1 if replicas is None else int(replicas)
    hosts = int(group.get("numOfHosts") or 1)
    return count * hosts if hosts > 1 else count


def cluster_pod_sets(cluster_spec: Mapping[str, Any]) -> list[PodSet]:
    """``head``, then the worker groups, in the spec's order."""
    head = PodSet(HEAD_POD_SET, 1, _head_template(cluster_spec))
    workers = [
        PodSet(_group_pod_set_name(group), _worker_count(group), group.get("template") or {})
        for group in _worker_groups(cluster_spec)
    ]
    return [head, *workers]


def cluster_run_patch(
    where: str, cluster_spec: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
) -> dict[str, Any]:
    """The merge patch of a cluster spec that places each group's template (the head as an object, the worker
    groups as their whole list, built from the current spec)."""
    placed = by_name(placements)
    original = {pod_set.name: pod_set.template for pod_set in originals}
    head = placed_template(
        f"{where} (head group)", original.get(HEAD_POD_SET, _head_template(cluster_spec)), placed.get(HEAD_POD_SET)
    )
    workers = []
    for group in _worker_groups(cluster_spec):
        name = _group_pod_set_name(group)
        template = group.get("template") or {}
        placed_group = placed_template(f"{where} (worker group {name})", original.get(name, template), placed.get(name))
        workers.append({**group, "template": patched_template(template, placed_group)})
    patch: dict[str, Any] = {"headGroupSpec": {"template": head}}
    if workers:
        patch["workerGroupSpecs"] = workers
    return patch


def cluster_restore_patch(cluster_spec: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
    """The merge patch of a cluster spec that puts every group's template back; None when all already are."""
    original = {pod_set.name: pod_set.template for pod_set in originals}
    head_original = original.get(HEAD_POD_SET)
    head = None if head_original is None else restored_template(_head_template(cluster_spec), head_original)
    groups = _worker_groups(cluster_spec)
    wanted = [original.get(_group_pod_set_name(group)) for group in groups]
    workers = [
        None if w is None else restored_template(group.get("template") or {}, w)
        for group, w in zip(groups, wanted, strict=True)
    ]
    patch: dict[str, Any] = {}
    if head is not None:
        patch["headGroupSpec"] = {"template": head}
    if any(worker is not None for worker in workers):
        patch["workerGroupSpecs"] = [
            dict(group) if w is None else {**group, "template": patched_template(group.get("template") or {}, w)}
            for group, w in zip(groups, workers, strict=True)
        ]
    return patch or None


class RayClusterAdapter(SuspendFieldAdapter):
    framework = "ray.io/raycluster"
    kind = GroupVersionKind("ray.io", "v1", "RayCluster")
    plural = "rayclusters"

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        return cluster_pod_sets(job.get("spec") or {})

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        where = f"RayCluster {metadata['namespace']}/{metadata['name']}"
        spec = cluster_run_patch(where, job.get("spec") or {}, placements, originals)
        return {"spec": {"suspend": False, **spec}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        spec = cluster_restore_patch(job.get("spec") or {}, originals)
        return None if spec is None else {"spec": spec}

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        """KubeRay reports ``suspended`` only once every pod is gone; a cluster it never reconciled has no state."""
        state = (job.get("status") or {}).get("state")
        return bool(state) and state != SUSPENDED_STATE

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        return None

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        return (job.get("status") or {}).get("state") == READY_STATE


ADAPTER = RayClusterAdapter()
