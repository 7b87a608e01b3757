"""RayJob (``ray.io/v1``, framework ``ray.io/rayjob``) behind the job adapter interface.

As Kueue has it: the pod sets of its ``rayClusterSpec`` (``head``, then the worker groups: see
:mod:`~kuota.webhook.jobs.raycluster`), and in ``K8sJobMode`` (KubeRay's default) a ``submitter`` pod set of one
pod, from ``spec.submitterPodTemplate`` or, without one, KubeRay's default submitter (the head's first image,
500m CPU and 200Mi requested). ``spec.suspend`` holds it back: KubeRay creates no RayCluster while it is set,
and deletes the cluster and the submitter Job when it is set again. Finished when the deployment status is
``Complete`` or ``Failed``; succeeded when the Ray job's status is ``SUCCEEDED``.
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
from kuota.webhook.jobs.raycluster import READY_STATE, cluster_pod_sets, cluster_restore_patch, cluster_run_patch

SUBMITTER_POD_SET = "submitter"
K8S_JOB_MODE = "K8sJobMode"
# Deployment statuses in which KubeRay holds no cluster or submitter for the RayJob.
_IDLE_STATUSES = frozenset({"", "New", "Suspended"})
_FINISHED_STATUSES = frozenset({"Complete", "Failed"})


def _default_submitter(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    """KubeRay's default submitter pod, which Kueue counts when the RayJob names no template."""
    head = ((rayjob["spec"].get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
    containers = (head.get("spec") or {}).get("containers") or [{}]
    return {
        "spec": {
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": containers[0].get("image", ""),
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                    },
                }
            ],
            "restartPolicy": "Never",
        }
    }


def _has_submitter(rayjob: Mapping[str, Any]) -> bool:
    mode = (rayjob.get("spec") or {}).get("submissionMode", K8S_JOB_MODE)
    return bool(mode == K8S_JOB_MODE)


class RayJobAdapter(SuspendFieldAdapter):
    framework = "ray.io/rayjob"
    kind = GroupVersionKind("ray.io", "v1", "RayJob")
    plural = "rayjobs"

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        spec = job.get("spec") or {}
        pod_sets = cluster_pod_sets(spec.get("rayClusterSpec") or {})
        if _has_submitter(job):
            pod_sets.append(PodSet(SUBMITTER_POD_SET, 1, spec.get("submitterPodTemplate") or _default_submitter(job)))
        return pod_sets

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        where = f"RayJob {metadata['namespace']}/{metadata['name']}"
        spec = job.get("spec") or {}
        patch: dict[str, Any] = {
            "suspend": False,
            "rayClusterSpec": cluster_run_patch(where, spec.get("rayClusterSpec") or {}, placements, originals),
        }
        # As Kueue does, the submitter is placed only through a template of the RayJob's own.
        submitter = spec.get("submitterPodTemplate")
        if _has_submitter(job) and submitter is not None:
            original = {pod_set.name: pod_set.template for pod_set in originals}.get(SUBMITTER_POD_SET, submitter)
            patch["submitterPodTemplate"] = placed_template(
                f"{where} (submitter)", original, by_name(placements).get(SUBMITTER_POD_SET)
            )
        return {"spec": patch}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        spec = job.get("spec") or {}
        patch: dict[str, Any] = {}
        cluster = cluster_restore_patch(spec.get("rayClusterSpec") or {}, originals)
        if cluster is not None:
            patch["rayClusterSpec"] = cluster
        submitter = spec.get("submitterPodTemplate")
        original = {pod_set.name: pod_set.template for pod_set in originals}.get(SUBMITTER_POD_SET)
        restored = None if submitter is None or original is None else restored_template(submitter, original)
        if restored is not None:
            patch["submitterPodTemplate"] = restored
        return {"spec": patch} if patch else None

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        return (job.get("status") or {}).get("jobDeploymentStatus", "") not in _IDLE_STATUSES

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        status = job.get("status") or {}
        if status.get("jobDeploymentStatus") not in _FINISHED_STATUSES:
            return None
        message = str(status.get("message") or status.get("reason") or status.get("jobDeploymentStatus"))
        return Finished(status.get("jobStatus") == "SUCCEEDED", message)

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        return ((job.get("status") or {}).get("rayClusterStatus") or {}).get("state") == READY_STATE


ADAPTER = RayJobAdapter()
