"""The AdmissionCheck rules the controller applies to Workload status, as Kueue's ``pkg/workload/admissionchecks.go``
and ``workload_controller.go`` state them: which checks apply per flavor, the Pending entries, Admitted only once
all are Ready, the eviction's words and the reset, and the podSetUpdates merged."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.engine import Admission, Eviction, EvictionReason, PodSetAssignment, parse_object
from kuota.engine.model import ClusterQueue
from kuota.webhook.controller import admission_checks as checks
from kuota.webhook.controller.decision_writer import _eviction_patch
from kuota.webhook.controller.workload_status import admission_patch, condition, rfc3339

T0 = 1_790_000_000.0


def _queue(*rules: dict[str, Any]) -> ClusterQueue:
    flavors = [
        {"name": name, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]} for name in ("spot", "ondemand")
    ]
    queue = parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "research"},
            "spec": {
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}],
                "admissionChecksStrategy": {"admissionChecks": list(rules)},
            },
        }
    )
    assert isinstance(queue, ClusterQueue)
    return queue


def _workload(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "research", "resourceVersion": "7"},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {}}]},
        "status": status,
    }


def _check(name: str, state: str, at: float = T0, **fields: Any) -> dict[str, Any]:
    return {"name": name, "state": state, "lastTransitionTime": rfc3339(at), "message": "", **fields}


def test_a_check_applies_to_a_workload_admitted_on_one_of_its_flavors_or_on_any_when_it_names_none() -> None:
    queue = _queue({"name": "everywhere"}, {"name": "spot-only", "onFlavors": ["spot"]})
    assert queue.checks_for({"spot"}) == ["everywhere", "spot-only"]
    assert queue.checks_for({"ondemand"}) == ["everywhere"]


def test_missing_checks_are_added_pending_and_checks_no_longer_wanted_are_dropped_by_name() -> None:
    current = [_check("old", "Ready"), _check("kept", "Ready", podSetUpdates=[{"name": "main"}])]
    synced = checks.synced_checks(current, ["kept", "added"], T0 + 5)
    assert synced == [
        {"name": "added", "state": "Pending", "lastTransitionTime": rfc3339(T0 + 5), "message": ""},
        current[1],
    ]


def test_quota_is_reserved_but_not_admitted_until_every_check_is_ready() -> None:
    admission = Admission(
        "research/w",
        "research",
        (PodSetAssignment("main", {"nvidia.com/gpu": "spot"}, 1, {"nvidia.com/gpu": 1}),),
        False,
        T0,
    )
    pending = admission_patch(_workload(), admission, [_check("a", "Pending"), _check("b", "Ready")])["status"]
    assert condition(pending["conditions"], "QuotaReserved")["status"] == "True"  # type: ignore[index]
    assert {
        key: value
        for key, value in (condition(pending["conditions"], "Admitted") or {}).items()
        if key != "lastTransitionTime"
    } == {
        "type": "Admitted",
        "status": "False",
        "reason": "UnsatisfiedAdmissionChecks",
        "message": "The workload has not all checks ready",
    }
    assert [c["name"] for c in pending["admissionChecks"]] == ["a", "b"]
    ready = admission_patch(_workload(), admission, [_check("a", "Ready")])["status"]
    assert condition(ready["conditions"], "Admitted")["status"] == "True"  # type: ignore[index]
    without = admission_patch(_workload(), admission)["status"]
    assert condition(without["conditions"], "Admitted")["status"] == "True"  # type: ignore[index]
    assert "admissionChecks" not in without, "a queue without checks writes none"


def test_kueues_message_names_each_check_in_the_state_with_its_message() -> None:
    failed = [_check("zeta", "Retry"), _check("alpha", "Retry", message="no budget left")]
    assert checks.checks_message(failed, "Retry") == 'AdmissionChecks in Retry state: "alpha" (no budget left); "zeta"'
    assert checks.checks_message(failed[:1], "Retry") == 'AdmissionCheck in Retry state: "zeta"'


def test_the_retry_wait_is_the_latest_transition_plus_its_delay_among_retry_checks() -> None:
    assert (
        checks.retry_until(
            [_check("a", "Retry", T0, requeueAfterSeconds=30), _check("b", "Retry", T0 + 10, requeueAfterSeconds=5)]
        )
        == T0 + 30
    )
    assert checks.retry_until([_check("a", "Retry")]) is None
    assert checks.retry_until([_check("a", "Ready", requeueAfterSeconds=30)]) is None


def test_a_retry_eviction_frees_quota_resets_the_checks_and_waits_without_counting_a_podsready_retry() -> None:
    workload = _workload(
        admission={"clusterQueue": "research", "podSetAssignments": []},
        admissionChecks=[
            _check("a", "Retry", message="later", requeueAfterSeconds=30, retryCount=2),
            _check("b", "Ready", podSetUpdates=[{"name": "main"}]),
        ],
        requeueState={"count": 1},
    )
    eviction = Eviction("research/w", "research", EvictionReason.ADMISSION_CHECK, T0 + 1, requeue_at=T0 + 30)
    status = _eviction_patch(workload, eviction, None)["status"]
    evicted = condition(status["conditions"], "Evicted") or {}
    assert (evicted["reason"], evicted["message"]) == (
        "AdmissionCheck",
        'Evicted due to AdmissionCheck in Retry state: "a" (later)',
    )
    assert (condition(status["conditions"], "Requeued") or {})["status"] == "False"
    assert status["admission"] is None
    assert status["requeueState"] == {"requeueAt": rfc3339(T0 + 30)}, "the PodsReady count is left as it was"
    assert status["admissionChecks"] == [
        {
            "name": "a",
            "state": "Pending",
            "lastTransitionTime": rfc3339(T0 + 1),
            "message": "Reset to Pending after eviction. Previously: Retry",
            "requeueAfterSeconds": 30,
            "retryCount": 3,
        },
        {
            "name": "b",
            "state": "Pending",
            "lastTransitionTime": rfc3339(T0 + 1),
            "message": "Reset to Pending after eviction. Previously: Ready",
        },
    ]


def test_a_rejection_deactivates_in_kueues_words() -> None:
    workload = _workload(admissionChecks=[_check("a", "Rejected", message="over budget")])
    eviction = Eviction("research/w", "research", EvictionReason.ADMISSION_CHECK, T0, deactivated=True)
    patch = _eviction_patch(workload, eviction, None)
    evicted = condition(patch["status"]["conditions"], "Evicted") or {}
    assert (evicted["reason"], evicted["message"]) == (
        "DeactivatedDueToAdmissionCheck",
        'The workload is deactivated due to AdmissionCheck in Rejected state: "a" (over budget)',
    )
    assert patch["spec"] == {"active": False}
    assert checks.rejection(workload) == 'AdmissionCheck in Rejected state: "a" (over budget)'


def test_ready_checks_pod_set_updates_are_merged_and_a_conflict_is_named() -> None:
    toleration = {"key": "reserved", "operator": "Exists"}
    workload = _workload(
        admissionChecks=[
            _check("a", "Ready", podSetUpdates=[{"name": "main", "labels": {"x": "1"}, "tolerations": [toleration]}]),
            _check("b", "Ready", podSetUpdates=[{"name": "main", "nodeSelector": {"zone": "a"}, "labels": {"x": "1"}}]),
            _check("c", "Pending", podSetUpdates=[{"name": "main", "labels": {"ignored": "yes"}}]),
        ]
    )
    assert checks.pod_set_updates(workload) == {
        "main": {"labels": {"x": "1"}, "annotations": {}, "nodeSelector": {"zone": "a"}, "tolerations": [toleration]}
    }
    workload["status"]["admissionChecks"][1]["podSetUpdates"][0]["labels"] = {"x": "2"}
    with pytest.raises(ValueError, match="AdmissionCheck b sets labels x=2 on pod set main"):
        checks.pod_set_updates(workload)
