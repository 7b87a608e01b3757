"""When a node of an admitted TAS Workload has failed for it, as Kueue's node controller decides under v0.20's
default gates (pkg/controller/tas/node_controller_test.go's cases, each cited), and the eviction that follows
when no replacement exists."""

from __future__ import annotations

from typing import Any

from kuota.engine import Eviction, EvictionReason, TaintEffect, Toleration
from kuota.engine.field_reader import FieldReader
from kuota.engine.kubernetes_fields import read_tolerations
from kuota.webhook.controller.node_failures import has_failed, multiple_failures
from kuota.webhook.controller.workload_status import eviction_patch

GPU_TOLERATION = (Toleration("nvidia.com/gpu", "Exists", "", None),)


def node(ready: str | None = "True", *taints: tuple[str, str]) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {
        "metadata": {"name": "x1", "labels": {}},
        "spec": {"taints": [{"key": key, "effect": effect} for key, effect in taints]},
        "status": {"allocatable": {}, "conditions": conditions},
    }


RUNNING = {"metadata": {"name": "p"}, "status": {"phase": "Running"}}
DELETING = {"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}}
FAILED = {"metadata": {"name": "p"}, "status": {"phase": "Failed"}}


def test_a_ready_node_without_scheduling_taints_has_not_failed() -> None:
    # "Node Found and Healthy - not marked as unavailable"
    assert not has_failed(node(), [()], [])


def test_a_deleted_node_or_one_without_a_ready_condition_has_failed_at_once() -> None:
    # "Node Deleted - marked as unavailable"; a Node without a Ready condition is marked at once too
    assert has_failed(None, [()], [RUNNING])
    assert has_failed(node(None), [()], [RUNNING])


def test_a_not_ready_node_fails_once_the_workloads_pods_there_are_gone_or_ending() -> None:
    # "Node NotReady, pod running, not marked as unavailable, requeued", "Node NotReady, pod terminating, marked as
    # unavailable", "Node NotReady, pod failed, marked as unavailable", "Node NotReady, pod pending (gated by
    # TopologySchedulingGate) -> Unhealthy (immediate)" (a gated pod is on no node)
    assert not has_failed(node("False"), [()], [RUNNING])
    assert has_failed(node("False"), [()], [DELETING])
    assert has_failed(node("Unknown"), [()], [FAILED])
    assert has_failed(node("False"), [()], [])


def test_an_untolerated_noexecute_or_noschedule_taint_fails_the_node_once_its_pods_are_gone() -> None:
    # "Node has untolerated NoExecute taint, ReplaceNodeOnPodTermination on, pod terminating -> Unhealthy", "...,
    # pod running -> Healthy (wait)", "Node has untolerated NoSchedule taint, workload has no pods at all ->
    # Unhealthy"
    tainted = node("True", ("broken", "NoExecute"))
    assert has_failed(tainted, [()], [DELETING])
    assert not has_failed(tainted, [()], [RUNNING])
    assert has_failed(node("True", ("cordoned", "NoSchedule")), [()], [])


def test_a_taint_every_pod_set_tolerates_or_that_keeps_no_pod_off_fails_nothing() -> None:
    # "Node has NoSchedule taint tolerated by assigned ResourceFlavor -> Healthy"; PreferNoSchedule keeps no pod off
    assert not has_failed(node("True", ("nvidia.com/gpu", "NoSchedule")), [GPU_TOLERATION], [])
    assert not has_failed(node("True", ("soft", "PreferNoSchedule")), [()], [])
    # one pod set placed there that does not tolerate it is enough
    assert has_failed(node("True", ("nvidia.com/gpu", "NoSchedule")), [GPU_TOLERATION, ()], [])


def test_no_replacement_evicts_with_reason_node_failures_naming_the_nodes_and_clears_them() -> None:
    # Kueue's "workload with unhealthyNode annotation; second pass; preferred; no fit; FailFast"
    workload = {
        "metadata": {"name": "w", "namespace": "r", "resourceVersion": "3"},
        "status": {"unhealthyNodes": [{"name": "x0"}], "conditions": []},
    }
    patch = eviction_patch(workload, Eviction("r/w", "q", EvictionReason.NODE_FAILURES, 100.0))
    evicted = next(c for c in patch["status"]["conditions"] if c["type"] == "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "NodeFailures",
        "Workload was evicted as there was no replacement for unhealthy node(s): x0",
    )
    assert patch["status"]["unhealthyNodes"] is None
    assert patch["status"]["admission"] is None


def test_a_node_failing_while_another_is_unreplaced_evicts_naming_both() -> None:
    # Kueue's "Two Nodes Unhealthy (NotReady), delay passed - workload evicted": the second node's failure finds the
    # first in unhealthyNodes and evicts, "Workload eviction triggered due to multiple TAS assigned node failures,
    # including: <first>, <second>"
    assert multiple_failures([], ["x1"]) == []
    assert multiple_failures(["x1"], ["x1"]) == []  # the recorded node itself, not yet replaced: replaced
    assert multiple_failures(["x1"], ["x2"]) == ["x1", "x2"]
    assert multiple_failures([], ["x1", "x2"]) == ["x1", "x2"]
    workload = {
        "metadata": {"name": "w", "namespace": "r", "resourceVersion": "3"},
        "status": {"unhealthyNodes": [{"name": "x1"}, {"name": "x2"}], "conditions": []},
    }
    patch = eviction_patch(workload, Eviction("r/w", "q", EvictionReason.NODE_FAILURES, 100.0))
    evicted = next(c for c in patch["status"]["conditions"] if c["type"] == "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "NodeFailures",
        "Workload eviction triggered due to multiple TAS assigned node failures, including: x1, x2",
    )


def test_a_taint_tolerated_only_for_toleration_seconds_fails_the_node_once_its_pods_are_gone() -> None:
    # "Node has NoExecute taint with TolerationSeconds -> Healthy (wait for eviction)", "Node has NoExecute taint
    # with TolerationSeconds, pod terminating -> Unhealthy"; a toleration without seconds beside it tolerates for ever
    tainted = node("True", ("maintenance", "NoExecute"))
    for_a_while = (Toleration("maintenance", "Exists", "", TaintEffect.NO_EXECUTE, 300),)
    assert not has_failed(tainted, [for_a_while], [RUNNING])
    assert has_failed(tainted, [for_a_while], [DELETING])
    for_ever = (*for_a_while, Toleration("maintenance", "Exists", "", TaintEffect.NO_EXECUTE))
    assert not has_failed(tainted, [for_ever], [DELETING])


def test_toleration_seconds_are_read_into_the_toleration() -> None:
    toleration = {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    assert read_tolerations(FieldReader(), [toleration], "tolerations", None) == (
        Toleration("maintenance", "Exists", "", TaintEffect.NO_EXECUTE, 300),
    )
