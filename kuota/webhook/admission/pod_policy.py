"""The Pod rules (integration ``pod``): plain pods and pod groups are gated at creation until admitted.

Defaulting (``/mutate--v1-pod``, CREATE only), for a pod that is not its owner's business (a pod whose controller
owner is of a managed kind, a Job's pods for instance, is never gated: its owner is queued instead):

- no ``kueue.x-k8s.io/queue-name`` label and a LocalQueue ``default`` in the namespace: the label is set; likewise
  the ``kueue.x-k8s.io/priority-class`` label for a WorkloadPriorityClass ``default``;
- a pod with a queue name gets the scheduling gates ``kueue.x-k8s.io/admission`` and ``kueue.x-k8s.io/topology``,
  the label ``kueue.x-k8s.io/managed: "true"`` and the finalizer ``kueue.x-k8s.io/managed``.

``manageJobsWithoutQueueName`` does not reach plain pods: it would gate every Deployment's pods.

A pod marked by an enabled pod parent (annotation ``kueue.x-k8s.io/pod-suspending-parent``: a Deployment's or a
StatefulSet's, :mod:`~kuota.webhook.jobs.pod_parents`) is gated (both gates) whether or not ``pod`` is enabled, with no
finalizer (its parent decides when it goes); a StatefulSet's pod also gets the ``managed`` label, its group
(the StatefulSet's Workload name, from its controller reference), the role ``main`` and Kueue's serving mark.
When only pod parents are enabled, every other pod is left alone.

Validation (``/validate--v1-pod``): the queue-name label must be a valid name; a managed pod's topology
annotations must be sound (Kueue's messages); a grouped pod needs a usable
``kueue.x-k8s.io/pod-group-total-count``; on UPDATE only kuota removes the admission gate of a managed pod.
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
)
from kuota.webhook.admission.reviews import AdmissionRequest, Verdict
from kuota.webhook.jobs import leaderworkerset, pod_parents
from kuota.webhook.jobs import pod as pods
from kuota.webhook.jobs.pod_parents import LEADERWORKERSET, STATEFULSET, PodParent
from kuota.webhook.jobs.topology import TOPOLOGY_GATE, annotation_errors

MUTATE_POD_PATH = "/mutate--v1-pod"
VALIDATE_POD_PATH = "/validate--v1-pod"


def _require_pod(request: AdmissionRequest) -> Mapping[str, Any]:
    if request.kind != pods.POD_KIND:
        raise MalformedObjectError(
            f"this endpoint reviews {pods.POD_KIND}, got {request.kind}; fix the webhook's rules"
        )
    if request.object is None:
        raise MalformedObjectError(f"request.object is required for {request.operation} of a Pod")
    return _read_pod(request.object, "request.object")


def _read_pod(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """``obj``, once the few fields the rules read have the types they need."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        raise MalformedObjectError(f"{where}.metadata must be an object")
    for field in ("labels", "annotations"):
        value = metadata.get(field)
        if value is not None and (not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())):
            raise MalformedObjectError(f"{where}.metadata.{field} must be an object of strings")
    if not isinstance(obj.get("spec"), dict):
        raise MalformedObjectError(f"{where}.spec must be an object (Pod)")
    for field in ("finalizers", "ownerReferences"):
        if metadata.get(field) is not None and not isinstance(metadata[field], list):
            raise MalformedObjectError(f"{where}.metadata.{field} must be an array")
    gates = obj["spec"].get("schedulingGates")
    if gates is not None and not (isinstance(gates, list) and all(isinstance(g, dict) for g in gates)):
        raise MalformedObjectError(f"{where}.spec.schedulingGates must be an array of objects")
    return obj


def _reference(request: AdmissionRequest, pod: Mapping[str, Any]) -> str:
    metadata = pod["metadata"]
    return f"Pod {request.namespace}/{metadata.get('name') or metadata.get('generateName') or ''}"


def default_pod(request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts) -> Verdict:
    if request.operation != "CREATE":
        return Verdict.allow()
    pod = _require_pod(request)
    parent = policy.integrations.pod_parent(pod_parents.suspending_parent(pod))
    if parent is not None:
        return Verdict.allow(_parent_pod_patch(pod, parent))
    if not policy.integrations.pods or policy.integrations.managed_owner(pod):
        return Verdict.allow()
    metadata = pod["metadata"]
    labels: dict[str, str] = dict(metadata.get("labels") or {})
    added: dict[str, str] = {}
    if QUEUE_NAME_LABEL not in labels and facts.local_queue_exists(request.namespace, DEFAULT_NAME):
        added[QUEUE_NAME_LABEL] = DEFAULT_NAME
    if QUEUE_NAME_LABEL not in {**labels, **added}:
        return Verdict.allow()
    if PRIORITY_CLASS_LABEL not in labels and facts.priority_class_exists(DEFAULT_NAME):
        added[PRIORITY_CLASS_LABEL] = DEFAULT_NAME
    added[pods.MANAGED_LABEL] = "true"
    patch: list[json_patch.PatchOperation] = []
    if metadata.get("labels") is None:
        patch.append(json_patch.add(added, "metadata", "labels"))
    else:
        patch += [json_patch.add(value, "metadata", "labels", key) for key, value in added.items()]
    finalizers = list(metadata.get("finalizers") or [])
    if pods.MANAGED_FINALIZER not in finalizers:
        patch.append(json_patch.add([*finalizers, pods.MANAGED_FINALIZER], "metadata", "finalizers"))
    return Verdict.allow(patch + _gates_patch(pod))


def _gates_patch(pod: Mapping[str, Any]) -> list[json_patch.PatchOperation]:
    """The admission gate and the topology gate a managed pod starts with, as Kueue's pod webhook gates every pod
    it suspends: a gate can only be removed later, never added, and whether the pod's Workload is placed by
    topology (asked by annotation, or implied by a queue whose every flavor is a TAS flavor) is known only at
    admission. The pod's ungating lifts the topology gate too when its pod set got no topology assignment;
    otherwise the topology ungater lifts it once the pod's domain is known."""
    gates = list(pod["spec"].get("schedulingGates") or [])
    wanted = [{"name": gate} for gate in (pods.ADMISSION_GATE, TOPOLOGY_GATE) if not _has_gate(gates, gate)]
    if not wanted:
        return []
    return [json_patch.add([*gates, *wanted], "spec", "schedulingGates")]


def _has_gate(gates: list[Any], name: str) -> bool:
    return any(gate.get("name") == name for gate in gates)


def _parent_pod_patch(pod: Mapping[str, Any], parent: PodParent) -> list[json_patch.PatchOperation]:
    """The gate, and for a StatefulSet's pod the labels and annotations that put it in its group; a
    LeaderWorkerSet's pod is only marked managed here: the controller puts it in its group from the
    LeaderWorkerSet (its group index is written by the LeaderWorkerSet's own webhook, in no set order with this)."""
    patch: list[json_patch.PatchOperation] = []
    added: dict[str, dict[str, str]] = {}
    if parent == STATEFULSET:
        group = pod_parents.statefulset_group(pod)
        if group is None:
            return []  # marked by hand, no StatefulSet behind it: not kuota's to queue
        added = {
            "labels": {pods.MANAGED_LABEL: "true", pods.GROUP_NAME_LABEL: group},
            "annotations": {
                pods.ROLE_HASH_ANNOTATION: pods.SINGLE_POD_SET,
                pods.SERVING_ANNOTATION: "true",
            },
        }
    elif parent == LEADERWORKERSET:
        if leaderworkerset.set_name(pod) is None:
            return []  # marked by hand, no LeaderWorkerSet behind it: not kuota's to queue
        added = {"labels": {pods.MANAGED_LABEL: "true"}}
    if added:
        metadata = pod["metadata"]
        for field, values in added.items():
            if metadata.get(field) is None:
                patch.append(json_patch.add(values, "metadata", field))
            else:
                patch += [json_patch.add(value, "metadata", field, key) for key, value in values.items()]
    return patch + _gates_patch(pod)


def validate_pod(request: AdmissionRequest, policy: JobPolicy, facts: ClusterFacts) -> Verdict:
    del facts
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict.allow()
    pod = _require_pod(request)
    if not policy.integrations.pods and policy.integrations.pod_parent(pod_parents.suspending_parent(pod)) is None:
        return Verdict.allow()
    labels = pod["metadata"].get("labels") or {}
    reference = _reference(request, pod)
    facts_of_pod = JobFacts(reference, "", labels, True, pods.is_gated(pod))
    problem = queue_name_problem(facts_of_pod)
    if problem is not None:
        return Verdict.deny(problem, code=422)
    if pods.is_managed(pod):  # Kueue's pod webhook checks a managed pod's topology annotations
        topology_errors = annotation_errors(pod["metadata"].get("annotations") or {}, "metadata")
        if topology_errors:
            return Verdict.deny(f"{reference}: {'; '.join(topology_errors)}", code=422)
    if pods.group_name(pod) is not None and pods.is_managed(pod) and not pods.is_serving(pod):
        count_problem = pods.total_count_problem(pod)
        if count_problem is not None:
            return Verdict.deny(f"{reference}: {count_problem}", code=422)
    if request.operation == "UPDATE" and request.old_object is not None:
        old = _read_pod(request.old_object, "request.oldObject")
        if (
            pods.is_managed(old)
            and pods.is_gated(old)
            and not pods.is_gated(pod)
            and not policy.kuota.made(request.user)
        ):
            return Verdict.deny(
                f"{reference} is queued in kuota: only kuota removes its scheduling gate {pods.ADMISSION_GATE}, once "
                "its Workload is admitted; see 'kubectl describe workload' in the namespace for why it waits"
            )
    return Verdict.allow()
