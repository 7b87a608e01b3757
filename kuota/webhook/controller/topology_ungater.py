"""Sends each pod of a TAS-admitted Workload to its domain: Kueue's topology ungater.

A pod set admitted with a ``topologyAssignment`` starts its pods gated by ``kueue.x-k8s.io/topology``, labelled
with their pod set and annotated with their Workload (``job_reconciler.placements_of``). Once the Workload is
Admitted, each gated pod gets the level labels of its domain in its nodeSelector and loses the gate, in one
patch, so kube-scheduler places it where the admission said (``jobs.topology.ungating_plan`` picks the domain:
by the pod's rank in its pod set's index label, Kueue's podIndexLabel, where each has one, else filling each
domain in order). The pods are watched by the
pod-set label; a pod's or its Workload's change marks the Workload for another pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kuota.kube.reflector import Event, EventType, Reflector
from kuota.webhook import topology_assignment
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import ApiWriter, Resource
from kuota.webhook.controller.errors import ApiWriteError
from kuota.webhook.controller.state import ControllerState, owner_job
from kuota.webhook.jobs import kubeflow, leaderworkerset
from kuota.webhook.jobs.topology import (
    JOB_INDEX_LABEL,
    POD_SET_LABEL,
    WORKLOAD_ANNOTATION,
    ungate_patch,
    ungating_plan,
)

log = logging.getLogger(__name__)

PODS = Resource("", "v1", "pods")

_KUBEFLOW_INDEX_LABEL = "training.kubeflow.org/replica-index"
# Per job kind (``Kind.group``), the podIndexLabel Kueue's integration writes in its pod sets' topologyRequest,
# for a Workload that names none.
_POD_INDEX_LABELS: dict[str, str] = {
    "Job.batch": JOB_INDEX_LABEL,
    "JobSet.jobset.x-k8s.io": JOB_INDEX_LABEL,
    "StatefulSet.apps": "apps.kubernetes.io/pod-index",
    "LeaderWorkerSet.leaderworkerset.x-k8s.io": leaderworkerset.WORKER_INDEX_LABEL,
    **{
        f"{adapter.kind.kind}.{adapter.kind.group}": _KUBEFLOW_INDEX_LABEL
        for adapter in (
            kubeflow.PYTORCHJOB,
            kubeflow.TFJOB,
            kubeflow.XGBOOSTJOB,
            kubeflow.PADDLEJOB,
            kubeflow.JAXJOB,
            kubeflow.MPIJOB,
        )
    },
}


def pod_index_labels(workload: Mapping[str, Any]) -> dict[str, tuple[str | None, int]]:
    """Per pod set of ``workload``: the label ranking its pods and the rank its first pod has (Kueue's
    ``podIndexLabel`` and rank offset). The label is the pod set's ``topologyRequest.podIndexLabel``, else its
    job kind's (none for a LeaderWorkerSet's leader, as Kueue's). In a group of two pod sets the smaller (the
    leader) ranks first, so the larger's pods rank from its size."""
    owner = owner_job(workload)
    kind_label = None if owner is None else _POD_INDEX_LABELS.get(owner[0])
    pod_sets = (workload.get("spec") or {}).get("podSets") or []
    found: dict[str, tuple[str | None, int]] = {}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for pod_set in pod_sets:
        request = pod_set.get("topologyRequest") or {}
        label = request.get("podIndexLabel")
        if label is None and not (
            kind_label == leaderworkerset.WORKER_INDEX_LABEL and pod_set["name"] == leaderworkerset.LEADER_POD_SET
        ):
            label = kind_label
        found[pod_set["name"]] = (label, 0)
        group = request.get("podSetGroupName")
        if group is not None:
            groups.setdefault(group, []).append(pod_set)
    for members in groups.values():
        if len(members) == 2:
            smaller, larger = sorted(members, key=lambda pod_set: int(pod_set.get("count", 1)))
            found[larger["name"]] = (found[larger["name"]][0], int(smaller.get("count", 1)))
    return found


def pods_by_workload(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The watched TAS pods by their Workload's key (``namespace/name``, from the Workload annotation): one pass
    over the watch for all the Workloads a pass looks at, not one per Workload."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        metadata = pod["metadata"]
        workload = (metadata.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
        if workload:
            found.setdefault(f"{metadata.get('namespace')}/{workload}", []).append(pod)
    return found


def tas_pod_essence(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What the ungater reads of a TAS pod (its names, labels and annotations, gates and nodeSelector), and
    ``node_failures`` (its node, phase and whether it is being deleted)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return {
        "metadata": {
            key: metadata.get(key)
            for key in ("name", "namespace", "labels", "annotations", "resourceVersion", "deletionTimestamp")
        },
        "spec": {
            "schedulingGates": spec.get("schedulingGates") or [],
            "nodeSelector": spec.get("nodeSelector") or {},
            "nodeName": spec.get("nodeName") or "",
        },
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


class TopologyUngater:
    def __init__(self, state: ControllerState, writer: ApiWriter, pods: Reflector[dict[str, Any]]) -> None:
        self._state = state
        self._writer = writer
        self._pods = pods
        self.dirty: set[str] = set()  # Workload keys to look at again

    def on_pod(self, event: Event[dict[str, Any]]) -> None:
        if event.type is EventType.DELETED:
            return
        metadata = event.value.get("metadata") or {}
        workload = (metadata.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
        if workload:
            self.dirty.add(f"{metadata.get('namespace')}/{workload}")
            self._state.wake.set()

    def on_workload(self, key: str) -> None:
        self.dirty.add(key)

    async def ungate(self) -> None:
        keys, self.dirty = self.dirty, set()
        by_workload: dict[str, list[Mapping[str, Any]]] | None = None
        for key in sorted(keys):
            workload = self._state.workloads.get(key)
            if workload is None or not status.is_true(workload, "Admitted"):
                continue
            if by_workload is None:
                by_workload = pods_by_workload(self._pods.values())
            admission = (workload.get("status") or {}).get("admission") or {}
            index_labels = pod_index_labels(workload)
            for assigned in admission.get("podSetAssignments") or []:
                raw = assigned.get("topologyAssignment")
                if raw is None:
                    continue
                assignment = topology_assignment.decode(raw)
                index_label, offset = index_labels.get(assigned.get("name"), (None, 0))
                pods = [
                    pod
                    for pod in by_workload.get(key, ())
                    if (pod["metadata"].get("labels") or {}).get(POD_SET_LABEL) == assigned.get("name")
                ]
                for pod, node_labels in ungating_plan(assignment.levels, assignment.domains, pods, index_label, offset):
                    await self._send(pod, node_labels, key)

    async def _send(self, pod: Mapping[str, Any], node_labels: Mapping[str, str], key: str) -> None:
        metadata = pod["metadata"]
        try:
            await self._writer.merge_patch(
                PODS, metadata["namespace"], metadata["name"], ungate_patch(pod, node_labels)
            )
        except ApiWriteError as error:
            log.warning("pod %s/%s not ungated: %s", metadata["namespace"], metadata["name"], error)
            self.dirty.add(key)
