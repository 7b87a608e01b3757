"""The rules for Deployment and StatefulSet (:mod:`~kuota.webhook.jobs.pod_parents`), at Kueue's paths
(``/mutate-apps-v1-deployment``, ``/validate-apps-v1-statefulset``, ...).

Defaulting (CREATE and UPDATE, as Kueue's): the default LocalQueue and WorkloadPriorityClass labels as for a Job;
a managed object (queue label, or ``manageJobsWithoutQueueName`` in a selected namespace) gets its pod template
marked, so the Pod webhook gates its pods; a Deployment's template also gets its queue, priority-class and
managed labels.

Validation (CREATE and UPDATE): the queue-name label must be a valid name; it may change only while no replica is
ready, and may not be removed; a managed StatefulSet's ``replicas`` changes only to or from zero, and the pods'
shape (requests, ports, scheduling fields) of a managed StatefulSet or LeaderWorkerSet not at all (Kueue v0.20: each
group's Workload was sized from it; a LeaderWorkerSet's ``replicas`` may change, each group having its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kuota.webhook.admission import json_patch
from kuota.webhook.admission.cluster_facts import ClusterFacts
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.job_policy import (
    DEFAULT_NAME,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    JobFacts,
    JobPolicy,
    queue_name_problem,
    queued_by_kuota,
)
from kuota.webhook.admission.reviews import AdmissionRequest, Verdict
from kuota.webhook.jobs import leaderworkerset, pod_parents
from kuota.webhook.jobs.pod_parents import DEPLOYMENT, LEADERWORKERSET, STATEFULSET, PodParent
from kuota.webhook.jobs.topology import annotation_errors, pod_set_errors


def _read(obj: Mapping[str, Any] | None, request: AdmissionRequest, parent: PodParent, where: str) -> JobFacts:
    if obj is None:
        raise MalformedObjectError(f"{where} is required for {request.operation} of a {parent.kind.kind}")
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        raise MalformedObjectError(f"{where}.metadata must be an object")
    labels = metadata.get("labels")
    if labels is not None and (not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values())):
        raise MalformedObjectError(f"{where}.metadata.labels must be an object of strings")
    reference = f"{parent.kind.kind} {request.namespace}/{metadata.get('name') or metadata.get('generateName') or ''}"
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise MalformedObjectError(f"{where}.spec must be an object ({reference})")
    for index, path in enumerate(parent.templates):
        field = ".".join(path)
        template = pod_parents.template_at(obj, path)
        if template is None and index > 0:
            continue  # only the first template is required (a LeaderWorkerSet's leaderTemplate is optional)
        if not isinstance(template, dict):
            raise MalformedObjectError(f"{where}.{field} must be an object ({reference})")
        template_metadata = template.get("metadata")
        if template_metadata is not None and not isinstance(template_metadata, dict):
            raise MalformedObjectError(f"{where}.{field}.metadata must be an object ({reference})")
        for part in ("labels", "annotations"):
            value = (template_metadata or {}).get(part)
            if value is not None and not isinstance(value, dict):
                raise MalformedObjectError(f"{where}.{field}.metadata.{part} must be an object ({reference})")
    status = obj.get("status")
    for field, value in (
        ("spec.replicas", spec.get("replicas")),
        ("status.readyReplicas", status.get("readyReplicas") if isinstance(status, dict) else None),
    ):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise MalformedObjectError(f"{where}.{field} must be a whole number ({reference})")
    return JobFacts(reference, str(metadata.get("uid", "")), labels or {}, labels is not None, False)


def _require_kind(request: AdmissionRequest, parent: PodParent) -> None:
    if request.kind != parent.kind:
        raise MalformedObjectError(f"this endpoint reviews {parent.kind}, got {request.kind}; fix the webhook's rules")


def default_parent(request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts, parent: PodParent) -> Verdict:
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict.allow()
    _require_kind(request, parent)
    job = _read(request.object, request, parent, "request.object")
    assert request.object is not None  # _read refused a missing one
    added: dict[str, str] = {}
    if job.queue_name is None and facts.local_queue_exists(request.namespace, DEFAULT_NAME):
        added[QUEUE_NAME_LABEL] = DEFAULT_NAME
    if PRIORITY_CLASS_LABEL not in job.labels and facts.priority_class_exists(DEFAULT_NAME):
        added[PRIORITY_CLASS_LABEL] = DEFAULT_NAME
    patch: list[json_patch.PatchOperation] = []
    if added and not job.has_labels:
        patch.append(json_patch.add(added, "metadata", "labels"))
    else:
        patch += [json_patch.add(value, "metadata", "labels", key) for key, value in added.items()]
    defaulted = JobFacts(job.reference, job.uid, {**job.labels, **added}, True, False)
    if queued_by_kuota(defaulted, request.namespace, policy, facts):
        metadata = {**request.object["metadata"], "labels": dict(defaulted.labels)}
        patch += pod_parents.template_patch(parent, {**request.object, "metadata": metadata})
    return Verdict.allow(patch)


def validate_parent(request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts, parent: PodParent) -> Verdict:
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict.allow()
    _require_kind(request, parent)
    job = _read(request.object, request, parent, "request.object")
    problem = queue_name_problem(job)
    if problem is not None:
        return Verdict.deny(problem, code=422)
    assert request.object is not None  # _read refused a missing one
    queued = queued_by_kuota(job, request.namespace, policy, facts)
    if queued:
        topology_errors = _topology_errors(parent, request.object)
        if topology_errors:
            return Verdict.deny(f"{job.reference}: {'; '.join(topology_errors)}", code=422)
    if request.operation == "CREATE":
        return Verdict.allow()
    old = _read(request.old_object, request, parent, "request.oldObject")
    assert request.old_object is not None  # _read refused a missing one
    if old.queue_name != job.queue_name and (job.queue_name is None or pod_parents.ready_replicas(request.old_object)):
        return Verdict.deny(
            f"{job.reference}: label {QUEUE_NAME_LABEL} cannot change from {old.queue_name!r} to "
            f"{job.queue_name!r} while a replica is ready, nor be removed; scale it to 0 first",
            code=422,
        )
    if parent != DEPLOYMENT and queued:
        problems = [pod_parents.template_shape_problem(parent, request.old_object, request.object)]
        if parent == STATEFULSET:
            problems.append(pod_parents.replicas_change_problem(request.old_object, request.object))
        for problem in problems:
            if problem is not None:
                return Verdict.deny(f"{job.reference}: {problem}", code=422)
    return Verdict.allow()


def _topology_errors(parent: PodParent, obj: Mapping[str, Any]) -> list[str]:
    """Kueue's checks of the pod templates' topology annotations, and of a LeaderWorkerSet's leader and workers
    as one pod set group (``ValidateTASPodSetRequest``, ``ValidatePodSetGroupingTopology``)."""
    annotated: list[tuple[str, int, Mapping[str, str]]] = []
    for path in parent.templates:
        if pod_parents.template_at(obj, path) is None:
            continue
        annotations = pod_parents.template_metadata(obj, path).get("annotations") or {}
        annotated.append((".".join(path) + ".metadata", _pod_count(parent, obj, path), annotations))
    errors = [error for where, _, annotations in annotated for error in annotation_errors(annotations, where)]
    return errors or pod_set_errors(annotated)


def _pod_count(parent: PodParent, obj: Mapping[str, Any], path: tuple[str, ...]) -> int:
    """The pods of the pod set a template makes: a LeaderWorkerSet's leader is 1, its workers the rest of a group
    (the API server has checked the sizes are integers)."""
    if parent != LEADERWORKERSET:
        return pod_parents.replicas(obj)
    if path == parent.templates[1]:
        return 1
    size = leaderworkerset.group_size(obj)
    return size if pod_parents.template_at(obj, parent.templates[1]) is None else size - 1
