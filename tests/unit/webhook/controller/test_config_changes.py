"""Which changes of a configuration object reach the engine: re-applying one re-routes every pending workload,
so the controller's own queue status writes, echoed by the watch, must not count as changes."""

from __future__ import annotations

import copy
from typing import Any

from kuota.webhook.controller.quota_controller import _what_the_engine_reads

CLUSTER_QUEUE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "research", "resourceVersion": "10", "generation": 1, "labels": {"team": "research"}},
    "spec": {"cohortName": "gpu-pool", "resourceGroups": []},
    "status": {"pendingWorkloads": 3},
}


def test_status_and_bookkeeping_metadata_are_not_changes() -> None:
    echoed = copy.deepcopy(CLUSTER_QUEUE)
    echoed["status"] = {"pendingWorkloads": 4, "admittedWorkloads": 2}
    echoed["metadata"].update(resourceVersion="11", managedFields=[{"manager": "kuota"}])
    assert _what_the_engine_reads("ClusterQueue", echoed) == _what_the_engine_reads("ClusterQueue", CLUSTER_QUEUE)


def test_spec_labels_priority_values_and_deletion_are_changes() -> None:
    respec = copy.deepcopy(CLUSTER_QUEUE)
    respec["spec"]["cohortName"] = "other"
    relabelled = copy.deepcopy(CLUSTER_QUEUE)
    relabelled["metadata"]["labels"] = {"team": "applied-ml"}
    deleting = copy.deepcopy(CLUSTER_QUEUE)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T09:00:00Z"
    for changed in (respec, relabelled, deleting):
        assert _what_the_engine_reads("ClusterQueue", changed) != _what_the_engine_reads("ClusterQueue", CLUSTER_QUEUE)
    priority = {"kind": "WorkloadPriorityClass", "metadata": {"name": "sweep"}, "value": 100}
    assert _what_the_engine_reads("WorkloadPriorityClass", {**priority, "value": 200}) != _what_the_engine_reads(
        "WorkloadPriorityClass", priority
    )


def test_an_admission_checks_active_condition_is_a_change() -> None:
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "budget", "resourceVersion": "3"},
        "spec": {"controllerName": "example.com/budget"},
    }
    active = copy.deepcopy(check)
    active["status"] = {"conditions": [{"type": "Active", "status": "True"}]}
    assert _what_the_engine_reads("AdmissionCheck", active) != _what_the_engine_reads("AdmissionCheck", check)
