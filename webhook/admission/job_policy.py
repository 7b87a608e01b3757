"""The batch/v1 Job rules: what kuota defaults on create, and which updates it refuses.

Defaulting (``/mutate-batch-v1-job``, CREATE only):

- no ``kueue.x-k8s.io/queue-name`` label and a LocalQueue ``default`` in the namespace: set the label;
- no ``kueue.x-k8s.io/priority-class`` label and a WorkloadPriorityClass ``default``: set the label;
- a managed Job (queue-name label, or ``manageJobsWithoutQueueName`` and a selected namespace) gets
  ``spec.suspend: true`` so no pod starts before kuota admits it.

The patch only adds what is missing, so applying the webhook to its own output changes nothing.

Validation (``/validate-batch-v1-job``):

- the queue-name label must be a valid object name;
- on UPDATE, the queue-name label cannot change while the Job's Workload is admitted or the Job runs;
- a managed Job cannot go from suspended to running unless kuota itself makes the change (recognised by
  the request's username or groups, :class:`KuotaIdentity`). On CREATE, a managed Job must be suspended.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kuota.engine.model import LabelSelector
from kuota.webhook.admission import json_patch
from kuota.webhook.admission.cluster_facts import ClusterFacts
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.reviews import AdmissionRequest, GroupVersionKind, UserInfo, Verdict

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_NAME = "default"
JOB_KIND = GroupVersionKind("batch", "v1", "Job")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAX_NAME = 253


@dataclass(frozen=True)
class KuotaIdentity:
    """How kuota's own API writes are recognised in a review's userInfo."""

    usernames: frozenset[str]
    groups: frozenset[str] = frozenset()

    def made(self, user: UserInfo) -> bool:
        return user.username in self.usernames or not self.groups.isdisjoint(user.groups)


@dataclass(frozen=True)
class JobPolicy:
    manage_jobs_without_queue_name: bool
    managed_jobs_namespace_selector: LabelSelector
    kuota: KuotaIdentity


@dataclass(frozen=True)
class JobFacts:
    """The few fields of a Job the rules read, type-checked once."""

    reference: str
    uid: str
    labels: Mapping[str, str]
    has_labels: bool
    suspend: bool

    @property
    def queue_name(self) -> str | None:
        return self.labels.get(QUEUE_NAME_LABEL)


def read_job(job: Mapping[str, Any], namespace: str, where: str) -> JobFacts:
    metadata = job.get("metadata")
    if not isinstance(metadata, dict):
        raise MalformedObjectError(f"{where}.metadata must be an object")
    name = metadata.get("name") or metadata.get("generateName") or ""
    if not isinstance(name, str):
        raise MalformedObjectError(f"{where}.metadata.name must be a string")
    uid = metadata.get("uid", "")
    if not isinstance(uid, str):
        raise MalformedObjectError(f"{where}.metadata.uid must be a string")
    labels = metadata.get("labels")
    if labels is not None and (
        not isinstance(labels, dict) or not all(isinstance(value, str) for value in labels.values())
    ):
        raise MalformedObjectError(f"{where}.metadata.labels must be an object of strings")
    spec = job.get("spec")
    if not isinstance(spec, dict):
        raise MalformedObjectError(f"{where}.spec must be an object (Job {namespace}/{name})")
    suspend = spec.get("suspend", False)
    if suspend is None:
        suspend = False
    if not isinstance(suspend, bool):
        raise MalformedObjectError(f"{where}.spec.suspend must be a boolean (Job {namespace}/{name})")
    return JobFacts(
        reference=f"Job {namespace}/{name}",
        uid=uid,
        labels=labels or {},
        has_labels=labels is not None,
        suspend=suspend,
    )


def _require_job(request: AdmissionRequest) -> Mapping[str, Any]:
    if request.kind != JOB_KIND:
        raise MalformedObjectError(f"this endpoint reviews {JOB_KIND}, got {request.kind}; fix the webhook's rules")
    if request.object is None:
        raise MalformedObjectError(f"request.object is required for {request.operation} of a Job")
    return request.object


def _managed(job: JobFacts, namespace: str, policy: JobPolicy, facts: ClusterFacts) -> bool:
    if job.queue_name is not None:
        return True
    return policy.manage_jobs_without_queue_name and policy.managed_jobs_namespace_selector.matches(
        facts.namespace_labels(namespace)
    )


def default_job(request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts) -> Verdict:
    if request.operation != "CREATE":
        return Verdict.allow()
    job = read_job(_require_job(request), request.namespace, "request.object")
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
    defaulted = JobFacts(job.reference, job.uid, {**job.labels, **added}, True, job.suspend)
    managed = _managed(defaulted, request.namespace, policy, facts)
    if not job.suspend and managed:
        patch.append(json_patch.add(True, "spec", "suspend"))
    warnings = []
    if not managed and _requests_gpus(request.object):
        # The guide's most common first-run mistake: the Job runs outside every quota without a word.
        warnings.append(
            f"{job.reference} requests GPUs but has no {QUEUE_NAME_LABEL} label (and the namespace has no "
            f"LocalQueue named {DEFAULT_NAME}): kuota does not queue it and it counts against no quota"
        )
    return Verdict.allow(patch, warnings)


def _requests_gpus(job: Mapping[str, Any] | None) -> bool:
    """Whether any container of the Job's pod template asks for a GPU (nvidia.com/gpu or a MIG slice)."""
    template = ((job or {}).get("spec") or {}).get("template") or {}
    pod_spec = template.get("spec") or {}
    containers = [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]
    for container in containers:
        resources = container.get("resources") if isinstance(container, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        for amounts in (resources.get("requests"), resources.get("limits")):
            if isinstance(amounts, Mapping) and any(str(name).startswith("nvidia.com/") for name in amounts):
                return True
    return False


def _queue_name_problem(job: JobFacts) -> str | None:
    name = job.queue_name
    if name is None or (len(name) <= _MAX_NAME and _NAME.match(name)):
        return None
    return (
        f"{job.reference}: label {QUEUE_NAME_LABEL}={name!r} is not a valid LocalQueue name "
        "(lower-case letters, digits, '-' and '.', at most 253 characters)"
    )


def validate_job(request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts) -> Verdict:
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict.allow()
    job = read_job(_require_job(request), request.namespace, "request.object")
    problem = _queue_name_problem(job)
    if problem is not None:
        return Verdict.deny(problem, code=422)
    by_kuota = policy.kuota.made(request.user)
    managed = _managed(job, request.namespace, policy, facts)
    if request.operation == "CREATE":
        if managed and not job.suspend and not by_kuota:
            return Verdict.deny(
                f"{job.reference} is managed by kuota but was not suspended at creation: create it with "
                "spec.suspend: true (the kuota mutating webhook does this when it is registered)"
            )
        return Verdict.allow()
    if request.old_object is None:
        raise MalformedObjectError("request.oldObject is required for UPDATE of a Job")
    old = read_job(request.old_object, request.namespace, "request.oldObject")
    if old.queue_name != job.queue_name and not by_kuota:
        if facts.job_workload_admitted(request.namespace, old.uid or job.uid):
            return Verdict.deny(
                f"{job.reference}: label {QUEUE_NAME_LABEL} cannot change from {old.queue_name!r} to "
                f"{job.queue_name!r} while its Workload is admitted; suspend the Job and wait for the "
                "Workload to be evicted, or delete and recreate the Job"
            )
        if not old.suspend:
            return Verdict.deny(f"{job.reference}: label {QUEUE_NAME_LABEL} can change only while the Job is suspended")
    if old.suspend and not job.suspend and managed and not by_kuota:
        return Verdict.deny(
            f"{job.reference} is queued in kuota (queue {job.queue_name or '(namespace default)'}): only kuota "
            "unsuspends it, once its Workload is admitted; keep spec.suspend: true and see "
            "'kubectl describe workload' in the namespace for why it waits"
        )
    return Verdict.allow()
