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

from collections.abc import Mapping
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
from kuota.webhook.jobs.pod import MANAGED_LABEL, SINGLE_POD_SET, SUSPENDING_PARENT_ANNOTATION, role_hash


@dataclass(frozen=True)
class PodParent:
    """A kind whose pods kuota gates on its behalf. ``labels_in_template``: the parent's queue, priority class and
    managed labels go into its pod template (Deployment), so each pod is queued on its own."""

    framework: str
    kind: GroupVersionKind
    plural: str
    labels_in_template: bool


DEPLOYMENT = PodParent("deployment", GroupVersionKind("apps", "v1", "Deployment"), "deployments", True)
STATEFULSET = PodParent("statefulset", GroupVersionKind("apps", "v1", "StatefulSet"), "statefulsets", False)
PARENTS: tuple[PodParent, ...] = (DEPLOYMENT, STATEFULSET)


def template_metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}


def template_patch(parent: PodParent, obj: Mapping[str, Any]) -> list[PatchOperation]:
    """The JSON patch that marks a managed parent's pod template (and, for a Deployment, gives it the parent's
    queue and priority-class labels); empty when the template already says all of it."""
    metadata = template_metadata(obj)
    wanted: dict[str, dict[str, str]] = {"annotations": {SUSPENDING_PARENT_ANNOTATION: parent.framework}}
    if parent.labels_in_template:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        wanted["labels"] = {MANAGED_LABEL: "true"}
        for key in (QUEUE_LABEL, PRIORITY_CLASS_LABEL):
            if labels.get(key):
                wanted["labels"][key] = labels[key]
    patch: list[PatchOperation] = []
    if "metadata" not in obj["spec"]["template"]:
        patch.append(json_patch.add({}, "spec", "template", "metadata"))
    for field, values in wanted.items():
        have = metadata.get(field)
        if have is None:
            patch.append(json_patch.add(values, "spec", "template", "metadata", field))
            continue
        patch += [
            json_patch.add(value, "spec", "template", "metadata", field, key)
            for key, value in values.items()
            if have.get(key) != value
        ]
    return patch


def is_marked(parent: PodParent, obj: Mapping[str, Any]) -> bool:
    """Whether the parent's pod template carries kuota's mark (its pods are gated)."""
    return (template_metadata(obj).get("annotations") or {}).get(SUSPENDING_PARENT_ANNOTATION) == parent.framework


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
    only the spec), owned by the StatefulSet (a plain owner reference, not a controller one, as Kueue's), marked
    serving (``kuota.dev/serving``)."""
    metadata = sts["metadata"]
    labels = metadata.get("labels") or {}
    template_spec = dict((sts["spec"].get("template") or {}).get("spec") or {})
    spec: dict[str, Any] = {
        "queueName": labels.get(QUEUE_LABEL, ""),
        "podSets": [{"name": SINGLE_POD_SET, "count": replicas(sts), "template": {"spec": template_spec}}],
    }
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
            "name": statefulset_workload_name(sts),
            "namespace": metadata["namespace"],
            "labels": {JOB_UID_LABEL: metadata["uid"]},
            "finalizers": [RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [owner_reference(sts, STATEFULSET.kind, controller=False)],  # plain, as Kueue's
        },
        "spec": spec,
    }


def template_shape_problem(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a managed StatefulSet's pod template change is refused (Kueue v0.20: the pods' shape, what a pod
    group's role is hashed from, is immutable while queued: its Workload was sized from it), or None."""
    shapes = [role_hash({"spec": (obj["spec"].get("template") or {}).get("spec") or {}}) for obj in (old, new)]
    if shapes[0] == shapes[1]:
        return None
    return (
        "spec.template.spec's requests, ports and scheduling fields are fixed while the StatefulSet is queued in "
        "kuota: scale it to 0, change them, and scale it up again"
    )


def replicas_change_problem(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a managed StatefulSet's ``replicas`` change is refused (Kueue v0.20: only to or from zero), or None."""
    before, after = replicas(old), replicas(new)
    if 0 in (before, after) or before == after:
        return None
    return (
        f"spec.replicas of a StatefulSet queued in kuota changes only to or from 0 (asked {before} -> {after}): "
        "scale it to 0, then to the new size, to queue it again at that size"
    )
