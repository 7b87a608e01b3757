"""Plain Pods and pod groups (framework ``pod``), as Kueue's pod integration manages them (pure).

A pod cannot be suspended, so a managed pod is created *gated*: the webhook adds the scheduling gate
``kueue.x-k8s.io/admission`` (the scheduler leaves it alone until the gate is gone), the label
``kueue.x-k8s.io/managed: "true"`` and the finalizer ``kueue.x-k8s.io/managed`` (so kuota sees how it ended).

- A single pod (a notebook) is one Workload, ``pod-<name>-<hash>`` (:func:`~kuota.webhook.jobs.adapter.workload_name`),
  owned by the pod, with one pod set ``main`` of count 1.
- A pod group (label ``kueue.x-k8s.io/pod-group-name``, annotation ``kueue.x-k8s.io/pod-group-total-count``) is one
  Workload named after the group, owned by each of its pods (none of them its controller), created once all
  ``total-count`` pods exist, with one pod set per *role*: pods of the same shape (containers' requests and
  ports, nodeSelector, affinity, tolerations, priority...) share a role, named as Kueue v0.17 names it, by the
  first 8 hex digits of a sha256 of that shape as Go's encoding/json writes it (:func:`role_hash`, or the
  ``kueue.x-k8s.io/role-hash`` annotation when set). The group is admitted as one gang: all its pods, or none.

A StatefulSet's pods are a *serving* group (annotation ``kueue.x-k8s.io/pod-group-serving``): its Workload is the
StatefulSet's, sized by it and never finished (:mod:`~kuota.webhook.jobs.pod_parents`); a Deployment's pods are
single pods whose Workloads are marked serving for the report.

Admission removes the gate and adds the flavors' nodeSelector and tolerations (allowed on a gated pod);
eviction stops the running pods by deleting them, as Kueue does; a finished pod (Succeeded or Failed) finishes a
single pod's Workload, and a group's once every pod has finished. A deleted pod's Workload is deleted.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kuota.simulator.lines import SERVING_ANNOTATION as SERVING_WORKLOAD_ANNOTATION
from kuota.webhook.jobs.adapter import (
    JOB_UID_LABEL,
    KUEUE_API,
    MAX_EXEC_TIME_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    RESOURCE_IN_USE_FINALIZER,
    Finished,
    GroupVersionKind,
    PodSetPlacement,
    owner_reference,
    placed_template,
    workload_name,
)
from kuota.webhook.jobs.topology import TOPOLOGY_GATE, topology_request

POD_KIND = GroupVersionKind("", "v1", "Pod")
ADMISSION_GATE = "kueue.x-k8s.io/admission"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
MANAGED_FINALIZER = "kueue.x-k8s.io/managed"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"  # a StatefulSet's group: sized by its parent, never done
SUSPENDING_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"  # gated for its parent (pod_parents)
SINGLE_POD_SET = "main"
# The pod spec's fields in Kueue's role shape (its GenerateRoleHash): pods equal in these, and in their
# containers' requests and ports, are one role of a group.
_ROLE_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
    "priority",
    "topologySpreadConstraints",
    "overhead",
    "resourceClaims",
)
# What Go's encoding/json escapes beyond what Python's json module does (HTML-safe output, JS line separators).
_GO_JSON_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                  "\u2029": "\\u2029"})  # fmt: skip
_TERMINAL = ("Succeeded", "Failed")


def group_name(pod: Mapping[str, Any]) -> str | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(GROUP_NAME_LABEL)
    return str(value) if value else None


def is_serving(pod: Mapping[str, Any]) -> bool:
    """A serving group's pod (Kueue's ``isServing``): the group's Workload is its parent's, sized by the parent."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return group_name(pod) is not None and annotations.get(SERVING_ANNOTATION) == "true"


def total_count_problem(pod: Mapping[str, Any]) -> str | None:
    """Why a grouped pod's total-count annotation is unusable (one line), or None."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_TOTAL_COUNT_ANNOTATION)
    if raw is None:
        return f"a pod with label {GROUP_NAME_LABEL} needs annotation {GROUP_TOTAL_COUNT_ANNOTATION}: the group's size"
    if not (isinstance(raw, str) and raw.isdigit() and int(raw) >= 1):
        return f"annotation {GROUP_TOTAL_COUNT_ANNOTATION}={raw!r} must be a whole number of pods, at least 1"
    return None


def total_count(pod: Mapping[str, Any]) -> int:
    """The group's size; call :func:`total_count_problem` first (the webhook refuses a bad one)."""
    return int(pod["metadata"]["annotations"][GROUP_TOTAL_COUNT_ANNOTATION])


def is_managed(pod: Mapping[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(MANAGED_LABEL) == "true"


def is_gated(pod: Mapping[str, Any]) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(gate, Mapping) and gate.get("name") == ADMISSION_GATE for gate in gates)


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in _TERMINAL


def is_deleting(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def has_finalizer(pod: Mapping[str, Any]) -> bool:
    return MANAGED_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])


def _container_shape(containers: Any) -> list[dict[str, Any]] | None:
    """Kueue's ContainersShape: each container's requests and ports (null for no containers, as Go's nil)."""
    shapes = [
        {"ports": c.get("ports"), "resources": {"requests": _go_map((c.get("resources") or {}).get("requests"))}}
        for c in containers or []
        if isinstance(c, Mapping)
    ]
    return shapes or None


def _go_map(value: Any) -> dict[str, Any] | None:
    """A map as Go writes one: keys sorted; null when absent."""
    return dict(sorted(value.items())) if isinstance(value, Mapping) else None


def role_hash(pod: Mapping[str, Any]) -> str:
    """The pod's role in its group: the ``kueue.x-k8s.io/role-hash`` annotation, else Kueue's role hash: 8 hex
    digits of the sha256 of ``{"spec": shape}`` as Go's encoding/json writes it. The shape's own maps go out
    with their keys sorted, as Go writes maps; the pod's fields go out as the API server wrote them, which is
    Go's encoding of the same structs (struct fields in declaration order, map keys sorted, empty fields left
    out), so a pod as read from the API server hashes as Kueue hashes it."""
    annotated = ((pod.get("metadata") or {}).get("annotations") or {}).get(ROLE_HASH_ANNOTATION)
    if annotated:
        return str(annotated)
    spec = pod.get("spec") or {}
    shape = {
        "containers": _container_shape(spec.get("containers")),
        "initContainers": _container_shape(spec.get("initContainers")),
        **{name: spec.get(name) for name in _ROLE_FIELDS},
        "nodeSelector": _go_map(spec.get("nodeSelector")),
        "overhead": _go_map(spec.get("overhead")),
    }
    encoded = json.dumps({"spec": dict(sorted(shape.items()))}, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.translate(_GO_JSON_ESCAPES).encode()).hexdigest()[:8]


def pod_template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A pod as a Workload's pod template: its labels and spec, without the gate and what the cluster assigned."""
    metadata = pod.get("metadata") or {}
    spec = {
        key: copy.deepcopy(value)
        for key, value in (pod.get("spec") or {}).items()
        if key not in ("schedulingGates", "nodeName")
    }
    template: dict[str, Any] = {"spec": spec}
    if metadata.get("labels"):
        template["metadata"] = {"labels": dict(metadata["labels"])}
    return template


_KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels", "finalizers",
                  "ownerReferences", "deletionTimestamp")  # fmt: skip
_KEPT_CONTAINER = ("name", "image", "resources", "ports")
_KEPT_SPEC = frozenset({"containers", "initContainers", "schedulingGates", "restartPolicy", "priorityClassName",
                        "preemptionPolicy", *_ROLE_FIELDS})  # fmt: skip


def essence(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What the controller keeps of a managed pod: the metadata it reads, Kueue's annotations, the spec's fields
    that admission reads (containers with their names, images, requests and ports; the scheduling fields; the
    gates), and the phase. A Workload's pod template is built from this, so it holds what scheduling reads.
    Thousands of queued notebooks cost a kilobyte or two each instead of tens."""
    metadata = pod.get("metadata") or {}
    kept: dict[str, Any] = {key: metadata[key] for key in _KEPT_METADATA if key in metadata}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k.startswith("kueue.x-k8s.io/")}
    if annotations:
        kept["annotations"] = annotations
    spec = {key: value for key, value in (pod.get("spec") or {}).items() if key in _KEPT_SPEC}
    for field in ("containers", "initContainers"):
        if field in spec:
            spec[field] = [
                {key: c[key] for key in _KEPT_CONTAINER if key in c} for c in spec[field] if isinstance(c, Mapping)
            ]
    status = pod.get("status") or {}
    kept_status = {key: status[key] for key in ("phase", "message") if key in status}
    if is_ready(pod):  # waitForPodsReady reads it, and its change is news
        kept_status["conditions"] = [{"type": "Ready", "status": "True"}]
    return {"metadata": kept, "spec": spec, "status": kept_status}


def is_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's ``Ready`` condition is True (Kueue's ``hasPodReadyTrue``)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, Mapping))


def pods_ready(pods: Sequence[Mapping[str, Any]], size: int) -> bool:
    """A single pod's or a group's readiness, as Kueue's pod integration says it: at least ``size`` pods (the
    group's total count; 1 for a single pod), every one of them ``Ready``."""
    return len(pods) >= size and all(is_ready(pod) for pod in pods)


def single_workload_name(pod: Mapping[str, Any]) -> str:
    return workload_name(pod["metadata"]["name"], pod["metadata"]["uid"], POD_KIND)


def _pod_set(name: str, count: int, pod: Mapping[str, Any]) -> dict[str, Any]:
    """A pod set of ``count`` pods shaped like ``pod``, with the topology its annotations ask for."""
    entry: dict[str, Any] = {"name": name, "count": count, "template": pod_template(pod)}
    request = topology_request((pod.get("metadata") or {}).get("annotations") or {})
    if request is not None:
        entry["topologyRequest"] = request
    return entry


def _workload_spec(pod: Mapping[str, Any], pod_sets: list[dict[str, Any]]) -> dict[str, Any]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    spec: dict[str, Any] = {"queueName": labels.get(QUEUE_LABEL, ""), "podSets": pod_sets}
    if labels.get(PRIORITY_CLASS_LABEL):
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_CLASS_LABEL],
        }
    if labels.get(MAX_EXEC_TIME_LABEL):
        spec["maximumExecutionTimeSeconds"] = int(labels[MAX_EXEC_TIME_LABEL])
    return spec


def single_workload(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A single pod's Workload: owned (controller) by the pod, one pod set ``main`` of one pod; a Deployment's pod's
    is marked serving (``kuota.dev/serving``: the report counts it so)."""
    metadata = pod["metadata"]
    pod_sets = [_pod_set(SINGLE_POD_SET, 1, pod)]
    serving = (metadata.get("annotations") or {}).get(SUSPENDING_PARENT_ANNOTATION)
    extra = {"annotations": {SERVING_WORKLOAD_ANNOTATION: "true"}} if serving else {}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            **extra,
            "name": single_workload_name(pod),
            "namespace": metadata["namespace"],
            "labels": {JOB_UID_LABEL: metadata["uid"]},
            "finalizers": [RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [owner_reference(pod, POD_KIND)],
        },
        "spec": _workload_spec(pod, pod_sets),
    }


def roles(pods: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The group's pods by role, roles in order of their names (the Workload's pod-set order)."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        grouped.setdefault(role_hash(pod), []).append(pod)
    return dict(sorted(grouped.items()))


def group_workload(group: str, pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A pod group's Workload: named after the group, owned by every pod, a pod set per role."""
    first = min(pods, key=lambda p: str(p["metadata"]["name"]))
    pod_sets = [_pod_set(role, len(members), members[0]) for role, members in roles(pods).items()]
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": group,
            "namespace": first["metadata"]["namespace"],
            "finalizers": [RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [owner_reference(pod, POD_KIND, controller=False) for pod in pods],
        },
        "spec": _workload_spec(first, pod_sets),
    }


def ungate_patch(pod: Mapping[str, Any], placement: PodSetPlacement | None) -> dict[str, Any]:
    """The merge patch that lets an admitted pod be scheduled: the admission gate removed (the topology gate too,
    unless its pod set was placed by topology), the flavors' nodeSelector and tolerations added, with the
    AdmissionChecks' ``podSetUpdates`` (labels and annotations too; a pod's scheduling fields may only be added
    to while it is gated, so all go in one write). Raises JobConflictError when the pod's own selector or labels
    contradict a flavor's or a check's."""
    metadata = pod["metadata"]
    # Every managed pod was created with the topology gate too (the pod webhook); it stays for the topology
    # ungater only when the pod's pod set was placed by topology, as Kueue's pod reconciler leaves it.
    lifted = {ADMISSION_GATE}
    if placement is None or TOPOLOGY_GATE not in placement.scheduling_gates:
        lifted.add(TOPOLOGY_GATE)
    gates = [g for g in (pod.get("spec") or {}).get("schedulingGates") or [] if g.get("name") not in lifted]
    placed = placed_template(f"Pod {metadata['namespace']}/{metadata['name']}", pod, placement)
    # A pod's gates can only be removed: none is added here.
    placed["spec"].pop("schedulingGates", None)
    return {**placed, "spec": {"schedulingGates": gates or None, **placed["spec"]}}


def without_finalizer_patch(pod: Mapping[str, Any]) -> dict[str, Any]:
    remaining = [f for f in pod["metadata"].get("finalizers") or [] if f != MANAGED_FINALIZER]
    return {"metadata": {"finalizers": remaining or None}}


def single_finished(pod: Mapping[str, Any]) -> Finished | None:
    phase = (pod.get("status") or {}).get("phase")
    if phase not in _TERMINAL:
        return None
    message = str((pod.get("status") or {}).get("message") or f"Pod {phase.lower()}")
    return Finished(phase == "Succeeded", message)


def members(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods that count toward a group's total: all but the Failed (a failed pod's replacement counts)."""
    return [pod for pod in pods if (pod.get("status") or {}).get("phase") != "Failed"]


def excess_pods(pods: Sequence[Mapping[str, Any]], size: int) -> list[Mapping[str, Any]]:
    """The members of a group beyond its ``size`` that Kueue deletes: the ones created last, keeping first the
    pods kuota's finalizer guards and those already ungated."""
    active = members(pods)
    if len(active) <= size:
        return []
    kept_first = sorted(
        active,
        key=lambda pod: (
            not has_finalizer(pod),
            is_gated(pod),
            str(pod["metadata"].get("creationTimestamp") or ""),
            str(pod["metadata"]["name"]),
        ),
    )
    return kept_first[size:]


def group_finished(pods: Sequence[Mapping[str, Any]], size: int) -> Finished | None:
    """A group is over once ``size`` of its pods have finished and none still runs; it succeeded when all did."""
    done = [pod for pod in pods if is_terminal(pod)]
    if len(done) < size or len(done) < len(pods):
        return None
    failed = sum(1 for pod in done if pod["status"]["phase"] == "Failed")
    if failed:
        return Finished(False, f"{failed} of the group's {len(done)} pods failed")
    return Finished(True, f"all {len(done)} pods of the group succeeded")
