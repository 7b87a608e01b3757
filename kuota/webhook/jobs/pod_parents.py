"""Deployment and StatefulSet (frameworks ``deployment`` and ``statefulset``), Kueue's pod-based integrations (pure).

Neither kind can be suspended, so, as in Kueue v0.20, it is its *pods* that are gated: the parent's webhook marks
the pod template with the annotation ``kueue.x-k8s.io/pod-suspending-parent: <framework>``, and the Pod webhook
gates every pod created with that mark (:mod:`~kuota.webhook.jobs.pod`), whether or not ``pod`` itself is enabled
(Kueue enables it implicitly, for the marked pods only). A marked pod gets no ``kueue.x-k8s.io/managed``
finalizer: its parent, not kuota, decides when it goes.

- Deployment: each pod is a plain Pod Workload (``pod-<pod name>-<hash>``, pod set ``main``). The webhook also
  copies the Deployment's queue and priority-class labels, and ``kueue.x-k8s.io/managed: "true"``, into the
  template, so every pod the ReplicaSet makes is queued as a single pod. A Deployment never finishes: each pod
  holds its quota until it is deleted (scaled down, rolled, or preempted: Kueue stops a pod by deleting it and
  the ReplicaSet makes a gated replacement).
- StatefulSet: one pod group, whose Workload kuota makes from the StatefulSet itself (Kueue's prebuilt
  Workload): ``statefulset-<name>-<hash>`` (:func:`~kuota.webhook.jobs.adapter.workload_name` of the StatefulSet),
  owned by it, one pod set ``main`` of ``replicas`` pods from its template. The group is serving (it never
  finishes) and admitted before its pods exist (Kueue's fast admission: an ``OrderedReady`` StatefulSet makes
  its next pod only once the previous one is ready); each pod is ungated once the Workload is admitted. As in
  Kueue v0.20, ``replicas`` changes only to or from zero while managed: scaled to zero, the Workload is deleted
  and its quota freed; scaled up again, a new Workload queues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.simulator.lines import SERVING_ANNOTATION as SERVING_WORKLOAD_ANNOTATION
from kuota.webhook.admission import json_patch
from kuota.webhook.admission.json_patch import PatchOperation
from kuota.webhook.jobs.adapter import (
    JOB_UID_LABEL,
    KUEUE_API,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    RESOURCE_IN_USE_FINALIZER,
    GroupVersionKind,
    owner_reference,
    workload_name,
)
from kuota.webhook.jobs.pod import (
    MANAGED_LABEL,
    SERVING_ANNOTATION,
    SINGLE_POD_SET,
    SUSPENDING_PARENT_ANNOTATION,
    role_hash,
)
from kuota.webhook.jobs.topology import topology_request


@dataclass(frozen=True)
class PodParent:
    """A kind whose pods kuota gates on its behalf. ``labels_in_template``: the parent's queue and priority class
    labels go into its pod templates (and, for a Deployment, whose pods are queued one by one, the managed label).
    ``templates``: where its pod templates are, the first one required. ``serving_group``: its templates are
    marked ``kueue.x-k8s.io/pod-group-serving`` (a LeaderWorkerSet's: its pods are put in their groups later)."""

    framework: str
    kind: GroupVersionKind
    plural: str
    labels_in_template: bool
    templates: tuple[tuple[str, ...], ...] = (("spec", "template"),)
    serving_group: bool = False


DEPLOYMENT = PodParent("deployment", GroupVersionKind("apps", "v1", "Deployment"), "deployments", True)
STATEFULSET = PodParent("statefulset", GroupVersionKind("apps", "v1", "StatefulSet"), "statefulsets", False)
LEADERWORKERSET = PodParent(
    "leaderworkerset.x-k8s.io/leaderworkerset",
    GroupVersionKind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
    "leaderworkersets",
    True,
    (("spec", "leaderWorkerTemplate", "workerTemplate"), ("spec", "leaderWorkerTemplate", "leaderTemplate")),
    serving_group=True,
)
PARENTS: tuple[PodParent, ...] = (DEPLOYMENT, STATEFULSET, LEADERWORKERSET)


def template_at(obj: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path`` in ``obj`` (None where a step is missing or not an object)."""
    value: Any = obj
    for step in path:
        value = value.get(step) if isinstance(value, Mapping) else None
    return value


def template_metadata(obj: Mapping[str, Any], path: Sequence[str] = ("spec", "template")) -> Mapping[str, Any]:
    template = template_at(obj, path)
    return (template.get("metadata") if isinstance(template, Mapping) else None) or {}


def template_patch(parent: PodParent, obj: Mapping[str, Any]) -> list[PatchOperation]:
    """The JSON patch that marks a managed parent's pod templates (and, for a Deployment and a LeaderWorkerSet,
    gives them the parent's queue and priority-class labels); empty when the templates already say all of it."""
    wanted: dict[str, dict[str, str]] = {"annotations": {SUSPENDING_PARENT_ANNOTATION: parent.framework}}
    if parent.serving_group:
        wanted["annotations"][SERVING_ANNOTATION] = "true"
    if parent.labels_in_template:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        wanted["labels"] = {} if parent.serving_group else {MANAGED_LABEL: "true"}
        for key in (QUEUE_LABEL, PRIORITY_CLASS_LABEL):
            if labels.get(key):
                wanted["labels"][key] = labels[key]
    patch: list[PatchOperation] = []
    for path in parent.templates:
        template = template_at(obj, path)
        if not isinstance(template, Mapping):
            continue  # an optional template left out (a LeaderWorkerSet's leaderTemplate)
        if "metadata" not in template:
            patch.append(json_patch.add({}, *path, "metadata"))
        metadata = template.get("metadata") or {}
        for field, values in wanted.items():
            have = metadata.get(field)
            if have is None:
                if values:
                    patch.append(json_patch.add(values, *path, "metadata", field))
                continue
            patch += [
                json_patch.add(value, *path, "metadata", field, key)
                for key, value in values.items()
                if have.get(key) != value
            ]
    return patch


def is_marked(parent: PodParent, obj: Mapping[str, Any]) -> bool:
    """Whether the parent's (first) pod template carries kuota's mark (its pods are gated)."""
    annotations = template_metadata(obj, parent.templates[0]).get("annotations") or {}
    return annotations.get(SUSPENDING_PARENT_ANNOTATION) == parent.framework


def suspending_parent(pod: Mapping[str, Any]) -> str | None:
    """The framework a pod was marked by (its parent's template annotation), or None."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(SUSPENDING_PARENT_ANNOTATION)
    return str(value) if value else None


def replicas(obj: Mapping[str, Any]) -> int:
    """``spec.replicas``, 1 when absent (as the API server defaults it)."""
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def ready_replicas(obj: Mapping[str, Any]) -> int:
    return int((obj.get("status") or {}).get("readyReplicas") or 0)


def statefulset_workload_name(sts: Mapping[str, Any]) -> str:
    metadata = sts["metadata"]
    return workload_name(metadata["name"], metadata["uid"], STATEFULSET.kind)


def statefulset_group(pod: Mapping[str, Any]) -> str | None:
    """The Workload name of the StatefulSet that controls a marked pod (its group), from the pod's controller
    reference; None for a pod no StatefulSet controls."""
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if (
            isinstance(owner, Mapping)
            and owner.get("controller") is True
            and owner.get("apiVersion") == STATEFULSET.kind.api_version
            and owner.get("kind") == STATEFULSET.kind.kind
        ):
            return workload_name(str(owner.get("name", "")), str(owner.get("uid", "")), STATEFULSET.kind)
    return None


def statefulset_workload(sts: Mapping[str, Any]) -> dict[str, Any]:
    """The StatefulSet's Workload: one pod set ``main`` of ``replicas`` pods, its template's spec (as Kueue keeps
    only the spec), with the topology its template's annotations ask for."""
    template = sts["spec"].get("template") or {}
    pod_set: dict[str, Any] = {
        "name": SINGLE_POD_SET,
        "count": replicas(sts),
        "template": {"spec": dict(template.get("spec") or {})},
    }
    request = topology_request((template.get("metadata") or {}).get("annotations") or {})
    if request is not None:
        pod_set["topologyRequest"] = request
    return serving_workload(sts, STATEFULSET, statefulset_workload_name(sts), [pod_set])


def serving_workload(
    parent: Mapping[str, Any], kind: PodParent, name: str, pod_sets: list[dict[str, Any]]
) -> dict[str, Any]:
    """A Workload ``name`` made from a pod parent (a StatefulSet, a LeaderWorkerSet's group): its queue and
    priority class from the parent's labels, owned by the parent (a plain owner reference, not a controller one,
    as Kueue's), marked serving (``kuota.dev/serving``)."""
    metadata = parent["metadata"]
    labels = metadata.get("labels") or {}
    spec: dict[str, Any] = {"queueName": labels.get(QUEUE_LABEL, ""), "podSets": pod_sets}
    if labels.get(PRIORITY_CLASS_LABEL):
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_CLASS_LABEL],
        }
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "annotations": {SERVING_WORKLOAD_ANNOTATION: "true"},
            "name": name,
            "namespace": metadata["namespace"],
            "labels": {JOB_UID_LABEL: metadata["uid"]},
            "finalizers": [RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [owner_reference(parent, kind.kind, controller=False)],
        },
        "spec": spec,
    }


def template_shape_problem(parent: PodParent, old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a managed StatefulSet's or LeaderWorkerSet's pod template change is refused (Kueue v0.20: the pods'
    shape, what a pod group's role is hashed from, is immutable while queued: its Workload was sized from it), or
    None. A template added or removed (a LeaderWorkerSet's leaderTemplate) changes the shape too."""
    for path in parent.templates:
        shapes = [
            None if template_at(obj, path) is None else role_hash({"spec": template_at(obj, (*path, "spec")) or {}})
            for obj in (old, new)
        ]
        if shapes[0] != shapes[1]:
            field = ".".join(path)
            return (
                f"{field}.spec's requests, ports and scheduling fields are fixed while the {parent.kind.kind} is "
                "queued in kuota: scale it to 0, change them, and scale it up again"
            )
    return None


def replicas_change_problem(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a managed StatefulSet's ``replicas`` change is refused (Kueue v0.20: only to or from zero), or None."""
    before, after = replicas(old), replicas(new)
    if 0 in (before, after) or before == after:
        return None
    return (
        f"spec.replicas of a StatefulSet queued in kuota changes only to or from 0 (asked {before} -> {after}): "
        "scale it to 0, then to the new size, to queue it again at that size"
    )
