"""Which label ranks a TAS pod set's pods when the ungater sends them to their domains: the pod set's
``podIndexLabel``, else its job kind's, ranked after a group's leader, as Kueue's topology ungater
(pkg/controller/tas/topology_ungater.go)."""

from __future__ import annotations

from typing import Any

from kuota.webhook.controller.topology_ungater import pod_index_labels
from kuota.webhook.jobs.leaderworkerset import WORKER_INDEX_LABEL
from kuota.webhook.jobs.topology import JOB_INDEX_LABEL, TOPOLOGY_GATE, ungating_plan

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
LEVELS = (BLOCK, RACK)
WORKER_DOMAINS = ((("b1", "r1"), 1), (("b1", "r2"), 1), (("b2", "r1"), 2))


def _workload(pod_sets: list[dict[str, Any]], owner_kind: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "unit-test", "namespace": "ns"}
    if owner_kind is not None:
        api_version, kind = owner_kind.rsplit(" ", 1)
        metadata["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "j", "controller": True}]
    return {"metadata": metadata, "spec": {"podSets": pod_sets}}


def _pod_set(name: str, count: int, request: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "count": count, "topologyRequest": request}


def _gated(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"schedulingGates": [{"name": TOPOLOGY_GATE}]}}


def _workers_sent(workload: dict[str, Any], worker_pod_set: str) -> dict[str, str]:
    label, offset = pod_index_labels(workload)[worker_pod_set]
    workers = [
        _gated(name, {WORKER_INDEX_LABEL: index})
        for name, index in (("p1", "2"), ("p2", "1"), ("p3", "3"), ("p4", "4"))
    ]
    plan = ungating_plan(LEVELS, WORKER_DOMAINS, workers, label, offset)
    return {pod["metadata"]["name"]: selector[RACK] + "/" + selector[BLOCK] for pod, selector in plan}


def test_leaderworkerset_workers_go_by_worker_index_after_the_leader() -> None:
    # Kueue: "ranks: ungate pods according to their ranks for LeaderWorkerSet - for all Pods"
    # (topology_ungater_test.go); worker-index 1 is the first worker, rank 0.
    grouped = {"podIndexLabel": WORKER_INDEX_LABEL, "podSetGroupName": "lws-group"}
    workload = _workload([_pod_set("workers", 4, grouped), _pod_set("leader", 1, grouped)])
    assert pod_index_labels(workload) == {"workers": (WORKER_INDEX_LABEL, 1), "leader": (WORKER_INDEX_LABEL, 0)}
    assert _workers_sent(workload, "workers") == {"p2": "r1/b1", "p1": "r2/b1", "p3": "r1/b2", "p4": "r1/b2"}


def test_a_workload_naming_no_index_label_ranks_by_its_kinds() -> None:
    # kuota's LeaderWorkerSet Workload names no podIndexLabel: the kind's label ranks the workers, and the leader
    # has none (Kueue's LeaderWorkerSet integration gives only the workers one).
    grouped = {"required": RACK, "podSetGroupName": "g"}
    lws = "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet"
    workload = _workload([_pod_set("leader", 1, grouped), _pod_set("worker", 4, grouped)], lws)
    assert pod_index_labels(workload) == {"leader": (None, 0), "worker": (WORKER_INDEX_LABEL, 1)}
    assert _workers_sent(workload, "worker") == {"p2": "r1/b1", "p1": "r2/b1", "p3": "r1/b2", "p4": "r1/b2"}
    job = _workload([_pod_set("main", 4, {"required": RACK})], "batch/v1 Job")
    assert pod_index_labels(job) == {"main": (JOB_INDEX_LABEL, 0)}
    pytorch = _workload([{"name": "worker", "count": 2}], "kubeflow.org/v1 PyTorchJob")
    assert pod_index_labels(pytorch) == {"worker": ("training.kubeflow.org/replica-index", 0)}
