"""The rules for every suspendable managed kind (batch/v1 Job first; JobSet, RayJob, ... through their
:class:`~kuota.webhook.jobs.adapter.JobAdapter`): what kuota defaults on create, and which updates it refuses.
Each kind has its own paths (:func:`mutate_path`, :func:`validate_path`; a Job's are ``/mutate-batch-v1-job`` and
``/validate-batch-v1-job``, as Kueue names them).

Defaulting (mutate path, CREATE only):

- no ``kueue.x-k8s.io/queue-name`` label and a LocalQueue ``default`` in the namespace: set the label;
- no ``kueue.x-k8s.io/priority-class`` label and a WorkloadPriorityClass ``default``: set the label;
- a managed Job (queue-name label, or ``manageJobsWithoutQueueName`` and a selected namespace) gets
  ``spec.suspend: true`` (each kind: its adapter's ``suspend_on_create``) so no pod starts before kuota admits it;
- a job whose controller owner is of a managed kind (a JobSet's Jobs) is its owner's business and left alone.

The patch only adds what is missing, so applying the webhook to its own output changes nothing.

Validation (validate path):

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

from kuota.engine import LabelSelector
from kuota.webhook.admission import json_patch
from kuota.webhook.admission.cluster_facts import ClusterFacts
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.reviews import AdmissionRequest, UserInfo, Verdict
from kuota.webhook.controller.errors import InvalidJobError
from kuota.webhook.jobs.adapter import JobAdapter, PodSet, SuspendFieldAdapter
from kuota.webhook.jobs.batch_job import ADAPTER as BATCH_JOB
from kuota.webhook.jobs.pod_parents import PodParent
from kuota.webhook.jobs.registry import DEFAULT_REGISTRY, Registry
from kuota.webhook.jobs.topology import annotation_errors, pod_set_errors

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_NAME = "default"
JOB_KIND = BATCH_JOB.kind
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
    integrations: Registry = DEFAULT_REGISTRY


def _path_part(adapter: JobAdapter | PodParent) -> str:
    kind = adapter.kind
    return f"{kind.group.replace('.', '-')}-{kind.version}-{kind.kind.lower()}"


def mutate_path(adapter: JobAdapter | PodParent) -> str:
    """Kueue's webhook path for a kind: ``/mutate-<group, dots as dashes>-<version>-<kind lower-case>``."""
    return f"/mutate-{_path_part(adapter)}"


def validate_path(adapter: JobAdapter | PodParent) -> str:
    return f"/validate-{_path_part(adapter)}"


@dataclass(frozen=True)
class JobFacts:
    """The few fields of a Job the rules read, type-checked once."""

    reference: str
    uid: str
    labels: Mapping[str, str]
    has_labels: bool
    suspend: bool
    managed_owner: bool = False

    @property
    def queue_name(self) -> str | None:
        return self.labels.get(QUEUE_NAME_LABEL)


def read_job(
    job: Mapping[str, Any],
    namespace: str,
    where: str,
    adapter: JobAdapter = BATCH_JOB,
    integrations: Registry = DEFAULT_REGISTRY,
) -> JobFacts:
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
    reference = f"{adapter.kind.kind} {namespace}/{name}"
    spec = job.get("spec")
    if not isinstance(spec, dict):
        raise MalformedObjectError(f"{where}.spec must be an object ({reference})")
    if isinstance(adapter, SuspendFieldAdapter):
        value: Any = job
        for token in adapter.suspend_path:
            value = value.get(token) if isinstance(value, dict) else None
        if value is not None and not isinstance(value, bool):
            field = ".".join(adapter.suspend_path)
            raise MalformedObjectError(f"{where}.{field} must be a boolean ({reference})")
    return JobFacts(
        reference=reference,
        uid=uid,
        labels=labels or {},
        has_labels=labels is not None,
        suspend=adapter.is_suspended(job),
        managed_owner=integrations.managed_owner(job),
    )


def _require_job(request: AdmissionRequest, adapter: JobAdapter) -> Mapping[str, Any]:
    if request.kind != adapter.kind:
        raise MalformedObjectError(f"this endpoint reviews {adapter.kind}, got {request.kind}; fix the webhook's rules")
    if request.object is None:
        raise MalformedObjectError(f"request.object is required for {request.operation} of a {adapter.kind.kind}")
    return request.object


def queued_by_kuota(job: JobFacts, namespace: str, policy: JobPolicy, facts: ClusterFacts) -> bool:
    if job.managed_owner:
        return False
    if job.queue_name is not None:
        return True
    return policy.manage_jobs_without_queue_name and policy.managed_jobs_namespace_selector.matches(
        facts.namespace_labels(namespace)
    )


def default_job(
    request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts, adapter: JobAdapter = BATCH_JOB
) -> Verdict:
    if request.operation != "CREATE":
        return Verdict.allow()
    obj = _require_job(request, adapter)
    job = read_job(obj, request.namespace, "request.object", adapter, policy.integrations)
    if job.managed_owner:
        return Verdict.allow()
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
    managed = queued_by_kuota(defaulted, request.namespace, policy, facts)
    if not job.suspend and managed:
        patch += adapter.suspend_on_create(obj)
    warnings = []
    if not managed and _requests_gpus([pod_set.template for pod_set in _pod_sets(obj, adapter)]):
        # The guide's most common first-run mistake: the Job runs outside every quota without a word.
        warnings.append(
            f"{job.reference} requests GPUs but has no {QUEUE_NAME_LABEL} label (and the namespace has no "
            f"LocalQueue named {DEFAULT_NAME}): kuota does not queue it and it counts against no quota"
        )
    return Verdict.allow(patch, warnings)


def _pod_sets(obj: Mapping[str, Any], adapter: JobAdapter) -> list[PodSet]:
    """The object's pod sets, or none when they cannot be read from it: malformed (the API server's own validation
    answers that), or made from another object or part it lacks (a TrainJob's runtime, an MPIJob's launcher: the
    controller tells the object why it gets no Workload)."""
    try:
        return adapter.pod_sets(obj)
    except (KeyError, TypeError, ValueError, AttributeError, InvalidJobError):
        return []


def _annotations(pod_set: PodSet) -> Mapping[str, str]:
    annotations: Mapping[str, str] = (pod_set.template.get("metadata") or {}).get("annotations") or {}
    return annotations


def _requests_gpus(templates: list[Mapping[str, Any]]) -> bool:
    """Whether any container of the pod templates asks for a GPU (nvidia.com/gpu or a MIG slice)."""
    return any(_template_requests_gpus(template) for template in templates)


def _template_requests_gpus(template: Mapping[str, Any]) -> bool:
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(pod_spec, Mapping):
        return False
    containers = [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]
    for container in containers:
        resources = container.get("resources") if isinstance(container, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        for amounts in (resources.get("requests"), resources.get("limits")):
            if isinstance(amounts, Mapping) and any(str(name).startswith("nvidia.com/") for name in amounts):
                return True
    return False


def queue_name_problem(job: JobFacts) -> str | None:
    name = job.queue_name
    if name is None or (len(name) <= _MAX_NAME and _NAME.match(name)):
        return None
    return (
        f"{job.reference}: label {QUEUE_NAME_LABEL}={name!r} is not a valid LocalQueue name "
        "(lower-case letters, digits, '-' and '.', at most 253 characters)"
    )


def validate_job(
    request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts, adapter: JobAdapter = BATCH_JOB
) -> Verdict:
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict.allow()
    job = read_job(_require_job(request, adapter), request.namespace, "request.object", adapter, policy.integrations)
    problem = queue_name_problem(job)
    if problem is not None:
        return Verdict.deny(problem, code=422)
    annotated = [
        (f"pod set {pod_set.name}: template.metadata", pod_set.count, _annotations(pod_set))
        for pod_set in _pod_sets(request.object or {}, adapter)
    ]
    topology_errors = [error for path, _, annotations in annotated for error in annotation_errors(annotations, path)]
    if not topology_errors:  # these read the annotations the first ones found sound
        topology_errors = pod_set_errors(annotated)
    if topology_errors:
        return Verdict.deny(f"{job.reference}: {'; '.join(topology_errors)}", code=422)
    by_kuota = policy.kuota.made(request.user)
    managed = queued_by_kuota(job, request.namespace, policy, facts)
    if request.operation == "CREATE":
        if managed and not job.suspend and not by_kuota:
            return Verdict.deny(
                f"{job.reference} is managed by kuota but was not suspended at creation: create it with "
                f"{_suspend_field(adapter)}: true (the kuota mutating webhook does this when it is registered)"
            )
        return Verdict.allow()
    if request.old_object is None:
        raise MalformedObjectError(f"request.oldObject is required for UPDATE of a {adapter.kind.kind}")
    old = read_job(request.old_object, request.namespace, "request.oldObject", adapter, policy.integrations)
    if old.queue_name != job.queue_name and not by_kuota:
        if facts.job_workload_admitted(request.namespace, old.uid or job.uid):
            return Verdict.deny(
                f"{job.reference}: label {QUEUE_NAME_LABEL} cannot change from {old.queue_name!r} to "
                f"{job.queue_name!r} while its Workload is admitted; suspend the Job and wait for the "
                "Workload to be evicted, or delete and recreate the Job"
            )
        if not old.suspend:
            return Verdict.deny(
                f"{job.reference}: label {QUEUE_NAME_LABEL} can change only while the {adapter.kind.kind} is suspended"
            )
    if old.suspend and not job.suspend and managed and not by_kuota:
        return Verdict.deny(
            f"{job.reference} is queued in kuota (queue {job.queue_name or '(namespace default)'}): only kuota "
            f"unsuspends it, once its Workload is admitted; keep {_suspend_field(adapter)}: true and see "
            "'kubectl describe workload' in the namespace for why it waits"
        )
    return Verdict.allow()


def _suspend_field(adapter: JobAdapter) -> str:
    return ".".join(adapter.suspend_path) if isinstance(adapter, SuspendFieldAdapter) else "its suspend field"
