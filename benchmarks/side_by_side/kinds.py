"""The job kinds of the agreement scenario beside standalone Workloads: a JobSet, a RayJob and a pod group, each
asking cpu only, shaped as a few one-cpu pods and one pair of pods with the rest (pure).

The controllers make each one's Workload from the object alone (no JobSet or KubeRay controller runs), with the
pod sets listed by :func:`pod_sets` (tests/integration/job_kinds/test_same_workloads_as_kueue.py checks kuota
makes the Workload Kueue makes; Kueue names a pod group's pod sets by a hash of each role's shape, not by these
names); the floor replays the same pod sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.side_by_side.errors import MeasureError
from kuota.webhook.jobs.adapter import PRIORITY_CLASS_LABEL, QUEUE_LABEL
from kuota.webhook.jobs.pod import GROUP_NAME_LABEL, GROUP_TOTAL_COUNT_ANNOTATION
from tests.cluster import GPU_RESOURCE

WORKLOAD = "Workload"
JOB = "Job"
JOBSET = "JobSet"
RAYJOB = "RayJob"
POD_GROUP = "PodGroup"
# A node label no fake node has: a pod selecting it stays Pending, never ready.
NO_NODE_SELECTOR = {"kuota.test/no-such-node": "true"}
# Kueue's integrations for the kinds (its Configuration's names), enabled on both controllers.
FRAMEWORKS = ("batch/job", "pod", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "ray.io/raycluster")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
_RAY_VERSION = "2.41.0"


@dataclass(frozen=True, slots=True)
class PodSetShape:
    name: str
    count: int
    cpu: int  # per pod


def pod_sets(kind: str, cpu: int) -> list[PodSetShape]:
    """The pod sets of a ``kind`` asking ``cpu`` in all, in the order Kueue lists them: one pod per one-cpu set
    (a JobSet's driver; a RayJob's head and submitter; a pod group's driver), and a pair of pods with the rest."""
    if kind in (WORKLOAD, JOB):
        return [PodSetShape("main", 1, cpu)]
    rest = cpu - (2 if kind == RAYJOB else 1)
    if rest <= 0 or rest % 2:
        raise MeasureError(f"scenario: a {kind} of {cpu} cpu cannot be shaped; give it an odd cpu (even for a RayJob)")
    if kind == JOBSET:
        return [PodSetShape("driver", 1, 1), PodSetShape("workers", 2, rest // 2)]
    if kind == RAYJOB:
        return [PodSetShape("head", 1, 1), PodSetShape("workers", 2, rest // 2), PodSetShape("submitter", 1, 1)]
    if kind == POD_GROUP:
        return [PodSetShape("driver", 1, 1), PodSetShape("workers", 2, rest // 2)]
    raise MeasureError(
        f"scenario: unknown kind {kind!r}; use one of {WORKLOAD}, {JOB}, {JOBSET}, {RAYJOB}, {POD_GROUP}"
    )


def _pod_spec(cpu: int, restart_policy: str) -> dict[str, Any]:
    return {
        "restartPolicy": restart_policy,
        "containers": [{"name": "main", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": str(cpu)}}}],
    }


def _metadata(name: str, namespace: str, queue: str, priority_class: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {QUEUE_LABEL: queue, PRIORITY_CLASS_LABEL: priority_class},
    }


def job(name: str, namespace: str, queue: str, priority_class: str, cpu: int, *, schedulable: bool) -> dict[str, Any]:
    """A batch/v1 Job of one pod, which tolerates the fake nodes' GPU taint (as the jobs mode's Jobs do) so it
    runs and gets ready; not ``schedulable``: its pod also selects a node label no node has, so it stays Pending
    and the Job's Workload never gets ``PodsReady``."""
    spec = _pod_spec(cpu, "Never")
    spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    if not schedulable:
        spec["nodeSelector"] = dict(NO_NODE_SELECTOR)
    return {
        "apiVersion": "batch/v1",
        "kind": JOB,
        "metadata": _metadata(name, namespace, queue, priority_class),
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "suspend": True, "template": {"spec": spec}},
    }


def jobset(name: str, namespace: str, queue: str, priority_class: str, cpu: int) -> dict[str, Any]:
    """One driver Job of one pod and one workers Job of two, the fields JobSet's webhook defaults written out."""

    def replicated(shape: PodSetShape) -> dict[str, Any]:
        job = {
            "parallelism": shape.count,
            "completions": shape.count,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": {"spec": _pod_spec(shape.cpu, "Never")},
        }
        return {"name": shape.name, "replicas": 1, "template": {"spec": job}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": JOBSET,
        "metadata": _metadata(name, namespace, queue, priority_class),
        "spec": {
            "successPolicy": {"operator": "All"},
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "network": {"enableDNSHostnames": False},
            "replicatedJobs": [replicated(shape) for shape in pod_sets(JOBSET, cpu)],
        },
    }


def rayjob(name: str, namespace: str, queue: str, priority_class: str, cpu: int) -> dict[str, Any]:
    """A RayJob in K8sJobMode with a head, one worker group of two and a submitter template of its own."""
    head, workers, submitter = pod_sets(RAYJOB, cpu)
    return {
        "apiVersion": "ray.io/v1",
        "kind": RAYJOB,
        "metadata": _metadata(name, namespace, queue, priority_class),
        "spec": {
            "entrypoint": "python tune.py",
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "submitterConfig": {"backoffLimit": 0},
            "submitterPodTemplate": {"spec": _pod_spec(submitter.cpu, "Never")},
            "rayClusterSpec": {
                "rayVersion": _RAY_VERSION,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": _pod_spec(head.cpu, "Always")}},
                "workerGroupSpecs": [
                    {
                        "groupName": workers.name,
                        "replicas": workers.count,
                        "minReplicas": workers.count,
                        "maxReplicas": workers.count,
                        "rayStartParams": {},
                        "template": {"spec": _pod_spec(workers.cpu, "Always")},
                    }
                ],
            },
        },
    }


def pod_group(name: str, namespace: str, queue: str, priority_class: str, cpu: int) -> list[dict[str, Any]]:
    """The pods of group ``name``: each labelled with the group and annotated with its size, one role per shape."""
    shapes = pod_sets(POD_GROUP, cpu)
    size = sum(shape.count for shape in shapes)
    pods = []
    for shape in shapes:
        for index in range(shape.count):
            metadata = _metadata(f"{name}-{shape.name}-{index}", namespace, queue, priority_class)
            metadata["labels"][GROUP_NAME_LABEL] = name
            metadata["annotations"] = {GROUP_TOTAL_COUNT_ANNOTATION: str(size)}
            spec = _pod_spec(shape.cpu, "Never")
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    return pods
