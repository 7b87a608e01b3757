"""What a batch/v1 Job means to the queue, as pure functions over the Job's JSON.

One Workload per managed Job (docs/architecture.md, "A job's life"): its name is Kueue's (``job-<name>-<hash>``) so
tools that look a Workload up by its Job keep working; its single pod set ``main`` carries the Job's pod
template *as submitted*, which is also what an eviction restores.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.simulator.runtimes import EXPECTED_RUNTIME_ANNOTATION
from kuota.webhook.controller.errors import JobConflictError

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
POD_SET_NAME = "main"

_HASH_LENGTH = 5
_MAX_PREFIX = 252 - _HASH_LENGTH


def workload_name(job_name: str, job_uid: str) -> str:
    """Kueue's name for a Job's Workload: a readable prefix and 5 hex digits of sha1(kind, group, name, uid)."""
    digest = hashlib.sha1(f"Job\nbatch\n{job_name}\n{job_uid}".encode(), usedforsecurity=False).hexdigest()
    return f"job-{job_name}"[:_MAX_PREFIX] + "-" + digest[:_HASH_LENGTH]


def queue_name(job: Mapping[str, Any]) -> str | None:
    labels = job.get("metadata", {}).get("labels") or {}
    value = labels.get(QUEUE_LABEL)
    return str(value) if value else None


def pod_count(job: Mapping[str, Any]) -> int:
    """Pods the Job runs at once: parallelism (default 1), capped by completions when set."""
    spec = job.get("spec", {})
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


def is_suspended(job: Mapping[str, Any]) -> bool:
    return bool(job.get("spec", {}).get("suspend"))


def finished_condition(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(type, message)`` of the Job's Complete or Failed condition, if it has finished."""
    for condition in job.get("status", {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"]), str(condition.get("message") or condition.get("reason") or "")
    return None


def has_active_pods(job: Mapping[str, Any]) -> bool:
    status = job.get("status", {})
    return bool(status.get("active")) or bool(status.get("terminating"))


def workload_manifest(job: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload kuota creates for ``job`` (owned by it, so deleting the Job deletes the Workload)."""
    metadata = job["metadata"]
    name, uid, namespace = metadata["name"], metadata["uid"], metadata["namespace"]
    labels = metadata.get("labels") or {}
    template = copy.deepcopy(job["spec"]["template"])
    spec: dict[str, Any] = {
        "queueName": labels.get(QUEUE_LABEL, ""),
        "podSets": [{"name": POD_SET_NAME, "count": pod_count(job), "template": template}],
    }
    if labels.get(PRIORITY_CLASS_LABEL):
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_CLASS_LABEL],
        }
    if labels.get(MAX_EXEC_TIME_LABEL):
        spec["maximumExecutionTimeSeconds"] = int(labels[MAX_EXEC_TIME_LABEL])
    # The user's runtime estimate for the admission ETAs goes with the Workload (controller/etas.py).
    expected = (metadata.get("annotations") or {}).get(EXPECTED_RUNTIME_ANNOTATION)
    extra = {"annotations": {EXPECTED_RUNTIME_ANNOTATION: expected}} if expected is not None else {}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            **extra,
            "name": workload_name(name, uid),
            "namespace": namespace,
            "labels": {JOB_UID_LABEL: uid},
            "finalizers": [RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


@dataclass(frozen=True)
class FlavorPlacement:
    """What an admitted flavor adds to the pod template."""

    node_labels: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]


def admitted_template_patch(
    job: Mapping[str, Any], placements: Sequence[FlavorPlacement], original: Mapping[str, Any]
) -> dict[str, Any]:
    """The merge patch that starts an admitted Job: flavor node labels and tolerations merged into the
    *original* template's, and ``suspend: false``. A Job selector that names a flavor label with another value
    can never run on that flavor: that is a :class:`JobConflictError`, not a silent override."""
    original_spec = original.get("spec", {})
    node_selector = dict(original_spec.get("nodeSelector") or {})
    tolerations = list(original_spec.get("tolerations") or [])
    for placement in placements:
        for key, value in placement.node_labels.items():
            if key in node_selector and node_selector[key] != value:
                raise JobConflictError(
                    f"Job {job['metadata']['namespace']}/{job['metadata']['name']} has nodeSelector "
                    f"{key}={node_selector[key]} but its admitted flavor needs {key}={value}; remove the "
                    "Job's own selector for that key or list a matching flavor first in the ClusterQueue"
                )
            node_selector[key] = value
        for toleration in placement.tolerations:
            if toleration not in tolerations:
                tolerations.append(dict(toleration))
    return {
        "spec": {
            "suspend": False,
            "template": {"spec": {"nodeSelector": node_selector or None, "tolerations": tolerations or None}},
        }
    }


def restore_template_patch(original: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that puts an evicted (already suspended) Job's template back as it was submitted."""
    original_spec = original.get("spec", {})
    return {
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": original_spec.get("nodeSelector") or None,
                    "tolerations": original_spec.get("tolerations") or None,
                }
            }
        }
    }


def template_matches(job: Mapping[str, Any], original: Mapping[str, Any]) -> bool:
    """Whether the Job's scheduling directives are those of its original template."""
    current = job.get("spec", {}).get("template", {}).get("spec", {})
    wanted = original.get("spec", {})
    return (current.get("nodeSelector") or {}) == (wanted.get("nodeSelector") or {}) and (
        current.get("tolerations") or []
    ) == (wanted.get("tolerations") or [])
