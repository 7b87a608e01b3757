"""The interface every managed kind implements, and what it is made of (pure).

An adapter speaks for one GroupVersionKind (a *job*: the object a user creates, e.g. a batch/v1 Job or a JobSet).
For every managed job the controller keeps one Workload, named by :func:`workload_name` (Kueue's
``GetWorkloadNameForOwnerWithGVK``: ``<kind lower-case>-<name>-<5 hex of sha1(kind, group, name, uid)>``), owned by
the job (:func:`owner_reference`), with the job's pod sets (:meth:`JobAdapter.pod_sets`). Its life
(docs/architecture.md, "A job's life"):

1. webhook, CREATE: :meth:`JobAdapter.suspend_on_create` keeps a managed job from starting pods;
   :meth:`JobAdapter.is_suspended` is what the validating webhook checks (only kuota unsuspends);
2. controller: a Workload is created from :meth:`JobAdapter.pod_sets`; a job found running without an admission
   gets :meth:`JobAdapter.suspend_patch`;
3. admission: :meth:`JobAdapter.run_patch` unsuspends it with the admitted flavors' nodeSelector and
   tolerations, and its AdmissionChecks' ``podSetUpdates``, injected into each pod set's template
   (:class:`PodSetPlacement`, one per pod set, by name), each template through :func:`placed_template`;
4. eviction: :meth:`JobAdapter.suspend_patch`, then, once :meth:`JobAdapter.has_active_pods` is False,
   :meth:`JobAdapter.restore_patch` puts each template's nodeSelector, tolerations, labels and annotations back
   as the Workload's pod sets hold them (as submitted), each through :func:`restored_template`;
5. finish: :meth:`JobAdapter.finished` (success or failure, with a message) finishes the Workload.

Every patch is a JSON *merge* patch (RFC 7386) on the job; the controller adds the resourceVersion it decided
from, so a list in a patch (e.g. a JobSet's ``replicatedJobs``) may be sent whole, built from the current object.

A pod owned (``controller: true``) by an object of an enabled kind is that job's business and is never gated on
its own; a job whose controller owner is of an enabled kind (a JobSet's Jobs) is not managed on its own either:
:func:`controller_owner` and :meth:`~kuota.webhook.jobs.registry.Registry.managed_owner`.

Adapters hold no state: one module-level instance per kind, listed in :mod:`~kuota.webhook.jobs.registry`.
:class:`SuspendFieldAdapter` is the base for kinds whose pods are stopped by a ``suspend`` boolean (Job, JobSet,
RayJob, RayCluster, RayService, Kubeflow jobs, TrainJob); pods and pod groups are stopped by other means
(:mod:`~kuota.webhook.jobs.pod`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kuota.simulator.lines import SERVING_ANNOTATION
from kuota.simulator.runtimes import EXPECTED_RUNTIME_ANNOTATION
from kuota.webhook.admission import json_patch
from kuota.webhook.admission.json_patch import PatchOperation
from kuota.webhook.controller.errors import JobConflictError
from kuota.webhook.jobs.topology import topology_request

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
PROVISIONING_PARAMETER_PREFIX = "provreq.kueue.x-k8s.io/"  # a job annotation that is a ProvisioningRequest parameter
KUEUE_API = "kueue.x-k8s.io/v1beta2"

_HASH_LENGTH = 5
_MAX_PREFIX = 252 - _HASH_LENGTH


@dataclass(frozen=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class PodSet:
    """One pod set of a job's Workload: ``template`` is the pod template as submitted (``metadata`` and
    ``spec``), which is also what an eviction restores; ``min_count`` only where the kind has partial admission."""

    name: str
    count: int
    template: Mapping[str, Any]
    min_count: int | None = None

    def manifest(self) -> dict[str, Any]:
        """The Workload's ``spec.podSets[]`` entry."""
        entry: dict[str, Any] = {"name": self.name, "count": self.count, "template": dict(self.template)}
        if self.min_count is not None:
            entry["minCount"] = self.min_count
        request = topology_request((self.template.get("metadata") or {}).get("annotations") or {})
        if request is not None:
            entry["topologyRequest"] = request
        return entry


@dataclass(frozen=True)
class PodSetPlacement:
    """What an admission gives one pod set: the flavors' ``nodeLabels`` (as a nodeSelector) and
    ``tolerations``, the admitted pod count (less than asked under partial admission), and the labels and
    annotations its AdmissionChecks' ``podSetUpdates`` add to its pods (with their nodeSelector and tolerations,
    already in the first two)."""

    name: str
    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]] = field(default=())
    count: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    # Topology-aware scheduling: the pods start gated until kuota sends each to its domain.
    scheduling_gates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finished:
    succeeded: bool
    message: str


class JobAdapter(Protocol):
    """One managed kind. Every method is pure and takes the job's JSON as the API server returns it."""

    @property
    def framework(self) -> str:
        """Kueue's name in ``integrations.frameworks``: ``batch/job``, ``jobset.x-k8s.io/jobset``, ..."""

    @property
    def kind(self) -> GroupVersionKind:
        """The job's GroupVersionKind, the registry's key (reviews and owner references are matched on it)."""

    @property
    def plural(self) -> str:
        """The resource's plural (``jobs``, ``jobsets``): API paths, webhook rules, RBAC rules, the CRD's name."""

    @property
    def serving(self) -> bool:
        """Whether the job serves and never finishes (a RayService): its Workload is marked ``kuota.dev/serving``."""

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        """The pod sets the job's Workload is made of, in a fixed order, with Kueue's pod-set names."""

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        """Whether the job holds its pods back (so it may wait in a queue)."""

    def suspend_on_create(self, job: Mapping[str, Any]) -> list[PatchOperation]:
        """The JSON patch the mutating webhook adds on CREATE of a managed job that is not suspended yet."""

    def suspend_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """The merge patch that stops a running job (no admission, or evicted)."""

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        """The merge patch that starts an admitted job: each pod set's template gets its *original* nodeSelector
        and tolerations (``originals``: the Workload's pod sets) plus its placement's. A job selector that names
        a flavor label with another value raises :class:`~kuota.webhook.controller.errors.JobConflictError`."""

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        """The merge patch that puts a stopped job's templates back as ``originals``; None when they already are."""

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        """Whether any pod of the job is still running or terminating (templates are restored only after)."""

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        """Success or failure once the job is over for good; None while it may still run."""

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        """Whether all the pods the admission counts are ready (Kueue's PodsReady)."""


@dataclass(frozen=True)
class ObjectReference:
    """An object a job's pod sets are made from (a TrainJob's runtime); ``namespace`` None for a cluster-scoped one."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str


@runtime_checkable
class ReferencingAdapter(JobAdapter, Protocol):
    """A kind whose pod sets come from another object as well as the job: the controller reads
    :meth:`reference` and calls :meth:`~JobAdapter.pod_sets` on :meth:`with_referenced`'s copy of the job."""

    @property
    def reads(self) -> tuple[str, ...]:
        """The plurals, in the kind's own group and version, that :meth:`reference` may name: the manager gets one
        as it makes a job's Workload, and watches them all, so a job naming one is reconciled as it is created or
        changed."""

    def reference(self, job: Mapping[str, Any]) -> ObjectReference:
        """The object the job's pod sets are made from."""

    def with_referenced(self, job: Mapping[str, Any], referenced: Mapping[str, Any] | None) -> dict[str, Any]:
        """The job with that object as read (None: it does not exist), for :meth:`~JobAdapter.pod_sets`."""


def workload_name(owner_name: str, owner_uid: str, kind: GroupVersionKind) -> str:
    """Kueue's Workload name for an owner: ``<kind lower-case>-<name>`` cut to 247 characters, ``-``, and the first
    5 hex digits of sha1 of ``kind``, ``group``, ``name`` and ``uid`` joined by newlines."""
    digest = hashlib.sha1(
        f"{kind.kind}\n{kind.group}\n{owner_name}\n{owner_uid}".encode(), usedforsecurity=False
    ).hexdigest()
    return f"{kind.kind.lower()}-{owner_name}"[:_MAX_PREFIX] + "-" + digest[:_HASH_LENGTH]


def owner_reference(job: Mapping[str, Any], kind: GroupVersionKind, controller: bool = True) -> dict[str, Any]:
    """The ownerReference a Workload carries to its job (so deleting the job deletes the Workload)."""
    metadata = job["metadata"]
    reference: dict[str, Any] = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "name": metadata["name"],
        "uid": metadata["uid"],
    }
    if controller:
        reference.update(controller=True, blockOwnerDeletion=True)
    return reference


def controller_owner(obj: Mapping[str, Any]) -> GroupVersionKind | None:
    """The GroupVersionKind of the object's controller owner, if it has one."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            group, _, version = str(owner.get("apiVersion", "")).rpartition("/")
            return GroupVersionKind(group, version, str(owner.get("kind", "")))
    return None


def queue_name(job: Mapping[str, Any]) -> str | None:
    labels = (job.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_LABEL)
    return str(value) if value else None


def workload_manifest(job: Mapping[str, Any], adapter: JobAdapter) -> dict[str, Any]:
    """The Workload kuota creates for ``job``: Kueue's name, the job-uid label, the resource-in-use finalizer, a
    controller reference to the job, the queue, priority class and maximum execution time from its labels, its
    expected-runtime and ``provreq.kueue.x-k8s.io/`` annotations, and ``kuota.dev/serving`` for a serving kind."""
    metadata = job["metadata"]
    labels = metadata.get("labels") or {}
    spec: dict[str, Any] = {
        "queueName": labels.get(QUEUE_LABEL, ""),
        "podSets": [pod_set.manifest() for pod_set in adapter.pod_sets(job)],
    }
    if labels.get(PRIORITY_CLASS_LABEL):
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_CLASS_LABEL],
        }
    if labels.get(MAX_EXEC_TIME_LABEL):
        spec["maximumExecutionTimeSeconds"] = int(labels[MAX_EXEC_TIME_LABEL])
    # The user's runtime estimate for the admission ETAs goes with the Workload (controller/etas.py), and, as in
    # Kueue, the ProvisioningRequest parameters (controller/provisioning.py).
    annotations = {
        key: value
        for key, value in (metadata.get("annotations") or {}).items()
        if key == EXPECTED_RUNTIME_ANNOTATION or key.startswith(PROVISIONING_PARAMETER_PREFIX)
    }
    if adapter.serving:
        annotations[SERVING_ANNOTATION] = "true"
    extra = {"annotations": annotations} if annotations else {}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            **extra,
            "name": workload_name(metadata["name"], metadata["uid"], adapter.kind),
            "namespace": metadata["namespace"],
            "labels": {JOB_UID_LABEL: metadata["uid"]},
            "finalizers": [RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [owner_reference(job, adapter.kind)],
        },
        "spec": spec,
    }


def _requested(template: Mapping[str, Any]) -> tuple[Any, ...]:
    """What admission reads of a pod template: each container's and init container's name and resources, and the
    pod overhead (what the controller keeps of a Workload's templates besides their scheduling fields)."""
    spec = template.get("spec") or {}
    containers = tuple(
        tuple((c.get("name"), c.get("resources") or {}) for c in spec.get(field) or [] if isinstance(c, Mapping))
        for field in ("containers", "initContainers")
    )
    return containers, spec.get("overhead") or {}


def matches_workload(pod_sets: Sequence[PodSet], workload: Mapping[str, Any]) -> bool:
    """Whether a job's pod sets are still its Workload's, as Kueue's equivalence check has it, in what quota
    counts: the same pod sets in order, of the same counts, each template asking the same resources. The
    scheduling fields an admission injects into a running job's templates are not compared."""
    theirs = workload_pod_sets(workload)
    return len(pod_sets) == len(theirs) and all(
        (ours.name, ours.count, ours.min_count, _requested(ours.template))
        == (other.name, other.count, other.min_count, _requested(other.template))
        for ours, other in zip(pod_sets, theirs, strict=True)
    )


def workload_pod_sets(workload: Mapping[str, Any]) -> list[PodSet]:
    """A Workload's pod sets, as the job's originals (what run and restore patches start from)."""
    return [
        PodSet(
            name=str(entry.get("name", "")),
            count=int(entry.get("count", 1)),
            template=entry.get("template") or {},
            min_count=entry.get("minCount"),
        )
        for entry in (workload.get("spec") or {}).get("podSets") or []
    ]


def placed_pod_spec(where: str, original: Mapping[str, Any], placement: PodSetPlacement | None) -> dict[str, Any]:
    """``nodeSelector`` and ``tolerations`` of an admitted pod template: the original template's plus the
    placement's (``None`` for a field left empty, which a merge patch deletes), and ``schedulingGates`` when the
    placement adds some (without a placement, the original's). ``where`` names the job and pod
    set in the :class:`JobConflictError` raised when the template's own selector contradicts a flavor label."""
    original_spec = original.get("spec") or {}
    node_selector = dict(original_spec.get("nodeSelector") or {})
    tolerations = list(original_spec.get("tolerations") or [])
    gates = list(original_spec.get("schedulingGates") or [])
    if placement is None:
        # Restored as submitted: the gates an admission added go too.
        return {
            "nodeSelector": node_selector or None,
            "tolerations": tolerations or None,
            "schedulingGates": gates or None,
        }
    for key, value in placement.node_selector.items():
        if key in node_selector and node_selector[key] != value:
            raise JobConflictError(
                f"{where} has nodeSelector {key}={node_selector[key]} but its admitted flavor needs "
                f"{key}={value}; remove the job's own selector for that key or list a matching flavor first "
                "in the ClusterQueue"
            )
        node_selector[key] = value
    for toleration in placement.tolerations:
        if toleration not in tolerations:
            tolerations.append(dict(toleration))
    placed: dict[str, Any] = {"nodeSelector": node_selector or None, "tolerations": tolerations or None}
    if placement.scheduling_gates:
        names = {gate.get("name") for gate in gates}
        placed["schedulingGates"] = gates + [{"name": name} for name in placement.scheduling_gates if name not in names]
    return placed


def placed_template(where: str, original: Mapping[str, Any], placement: PodSetPlacement | None) -> dict[str, Any]:
    """The merge patch of an admitted pod template, as Kueue's ``RunWithPodSetsInfo`` places one: in ``spec`` the
    original's nodeSelector and tolerations plus the placement's (:func:`placed_pod_spec`), in ``metadata`` its
    labels and annotations plus what the AdmissionChecks' ``podSetUpdates`` add (left out when they add nothing).
    Every adapter places each of its templates through this, so each kind gets every field. A pod is shaped as a
    template (``metadata`` and ``spec``): its own patch is the same. A key the original has with another value
    raises JobConflictError, as Kueue refuses such an update."""
    template: dict[str, Any] = {"spec": placed_pod_spec(where, original, placement)}
    original_metadata = original.get("metadata") or {}
    metadata: dict[str, Any] = {}
    for field_name, added in (
        ("labels", placement.labels if placement else {}),
        ("annotations", placement.annotations if placement else {}),
    ):
        values: dict[str, Any] = dict(original_metadata.get(field_name) or {})
        for key, value in added.items():
            if values.get(key, value) != value:
                raise JobConflictError(
                    f"{where} has {field_name[:-1]} {key}={values[key]} but an AdmissionCheck sets {key}={value}"
                )
            values[key] = value
        if added:
            metadata[field_name] = values
    if metadata:
        template["metadata"] = metadata
    return template


def restored_template(template: Mapping[str, Any], original: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that puts a stopped job's pod template back as ``original`` (the Workload's pod set) has
    it: nodeSelector, tolerations and scheduling gates, and labels and annotations (what AdmissionChecks and a
    topology placement added is deleted); None
    when it already is (Kueue's ``RestorePodSetsInfo``)."""
    current_spec, wanted_spec = template.get("spec") or {}, original.get("spec") or {}
    restored: dict[str, Any] = {}
    if any(
        (current_spec.get(name) or None) != (wanted_spec.get(name) or None)
        for name in ("nodeSelector", "tolerations", "schedulingGates")
    ):
        spec = placed_pod_spec("", original, None)
        if spec["nodeSelector"] is not None:  # a merge patch merges maps: the flavors' keys are deleted by name
            spec["nodeSelector"] = {**dict.fromkeys(current_spec.get("nodeSelector") or {}), **spec["nodeSelector"]}
        restored["spec"] = spec
    current, wanted = template.get("metadata") or {}, original.get("metadata") or {}
    metadata: dict[str, Any] = {}
    for field_name in ("labels", "annotations"):
        have, want = dict(current.get(field_name) or {}), dict(wanted.get(field_name) or {})
        if have != want:
            metadata[field_name] = {**dict.fromkeys(have), **want} if want else None
    if metadata:
        restored["metadata"] = metadata
    return restored or None


def merged_patches(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """One merge patch doing what ``first`` then ``second`` do (objects merged key by key, ``second`` winning
    elsewhere), for a change that must reach the job in one write."""
    merged = dict(first)
    for key, value in second.items():
        earlier = merged.get(key)
        merged[key] = (
            merged_patches(earlier, value) if isinstance(earlier, Mapping) and isinstance(value, Mapping) else value
        )
    return merged


def by_name(placements: Sequence[PodSetPlacement]) -> dict[str, PodSetPlacement]:
    return {placement.name: placement for placement in placements}


class SuspendFieldAdapter:
    """Shared by every kind stopped by a ``suspend`` boolean at ``suspend_path`` (``("spec", "suspend")`` unless
    a kind says otherwise, e.g. Kubeflow's ``("spec", "runPolicy", "suspend")``). Subclasses set ``framework``,
    ``kind`` and ``plural`` and implement the rest of :class:`JobAdapter`."""

    suspend_path: tuple[str, ...] = ("spec", "suspend")
    serving: bool = False

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        value: Any = job
        for token in self.suspend_path:
            value = value.get(token) if isinstance(value, Mapping) else None
        return value is True

    def suspend_on_create(self, job: Mapping[str, Any]) -> list[PatchOperation]:
        """``add`` at the first missing level of ``suspend_path`` (``add`` needs its parent to exist)."""
        value: Any = job
        for depth, token in enumerate(self.suspend_path[:-1]):
            value = value.get(token) if isinstance(value, Mapping) else None
            if not isinstance(value, Mapping):
                return [json_patch.add(_nested(self.suspend_path[depth + 1 :], True), *self.suspend_path[: depth + 1])]
        return [json_patch.add(True, *self.suspend_path)]

    def suspend_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        patch: dict[str, Any] = _nested(self.suspend_path, True)
        return patch

    def resume_patch(self) -> dict[str, Any]:
        """``suspend: false`` at ``suspend_path``, for a subclass's :meth:`JobAdapter.run_patch` to merge into."""
        patch: dict[str, Any] = _nested(self.suspend_path, False)
        return patch


def _nested(path: Sequence[str], value: Any) -> Any:
    patch: Any = value
    for token in reversed(path):
        patch = {token: patch}
    return patch
