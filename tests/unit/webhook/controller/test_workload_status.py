"""Workload status written from the engine's decisions: optimistic, condition-merging, readable."""

from __future__ import annotations

from typing import Any

from kuota.engine.errors import InvalidObjectError
from kuota.engine.flavor_assignment import PodSetAssignment
from kuota.engine.preemption import PreemptionReason
from kuota.engine.quota_engine import Admission, Eviction, EvictionReason
from kuota.webhook.controller.workload_status import (
    admission_patch,
    admitted_pod_sets,
    eviction_patch,
    pending_patch,
    preemption_message,
    reactivated_patch,
    set_conditions,
    was_deactivated,
)

T0 = 1_800_000_000.0
POD_SET = PodSetAssignment(
    name="main",
    flavors={"cpu": "h100-ondemand", "nvidia.com/gpu": "h100-ondemand"},
    count=2,
    usage={"cpu": 32_000, "nvidia.com/gpu": 8},
)


def _workload(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "w", "namespace": "research", "resourceVersion": "41"}, "status": status}


def test_every_status_write_carries_the_resource_version_it_was_decided_from() -> None:
    patch = pending_patch(_workload(), "waiting", T0)
    assert patch["metadata"] == {"resourceVersion": "41"}


def test_admission_records_queue_flavors_usage_and_both_conditions_and_reads_back_the_same() -> None:
    admission = Admission("research/w", "research", (POD_SET,), borrowing=False, at=T0)
    patch = admission_patch(_workload(), admission)
    status = patch["status"]
    assert status["admission"] == {
        "clusterQueue": "research",
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"cpu": "h100-ondemand", "nvidia.com/gpu": "h100-ondemand"},
                "resourceUsage": {"cpu": "32", "nvidia.com/gpu": "8"},
                "count": 2,
            }
        ],
    }
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("QuotaReserved", "True"), ("Admitted", "True")]
    assert admitted_pod_sets({"status": status}) == (POD_SET,)


def test_preemption_releases_quota_requeues_and_says_who_preempted_and_why() -> None:
    admitted = admission_patch(_workload(), Admission("research/w", "research", (POD_SET,), False, T0))["status"]
    eviction = Eviction(
        "research/w",
        "research",
        EvictionReason.PREEMPTED,
        T0 + 60,
        preempted_by="applied-ml/finetune",
        preemption_reason=PreemptionReason.IN_COHORT_RECLAMATION,
    )
    preemptor = {"metadata": {"uid": "uid-9", "labels": {"kueue.x-k8s.io/job-uid": "job-7"}}}
    message = preemption_message(preemptor, "InCohortReclamation", "/gpu-pool/applied-ml", "/gpu-pool/research")
    status = eviction_patch(_workload(**admitted), eviction, message)["status"]
    assert status["admission"] is None
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Evicted"]["reason"] == "Preempted"
    assert conditions["Preempted"]["reason"] == "InCohortReclamation"
    assert conditions["Preempted"]["message"] == (  # Kueue's words
        "Preempted to accommodate a workload (UID: uid-9, JobUID: job-7) due to reclamation within the cohort; "
        "preemptor path: /gpu-pool/applied-ml; preemptee path: /gpu-pool/research"
    )
    assert conditions["QuotaReserved"]["status"] == "False"
    assert conditions["Requeued"]["status"] == "True"
    assert admitted_pod_sets({"status": status}) is None


def test_readmission_turns_the_earlier_eviction_conditions_off() -> None:
    evicted = set_conditions([], [("Evicted", True, "Preempted", "m"), ("Requeued", True, "Preempted", "m")], T0)
    status = admission_patch(_workload(conditions=evicted), Admission("research/w", "research", (POD_SET,), False, T0))
    conditions = {c["type"]: c["status"] for c in status["status"]["conditions"]}
    assert conditions == {"Evicted": "False", "Requeued": "False", "QuotaReserved": "True", "Admitted": "True"}


def test_a_condition_keeps_its_transition_time_unless_its_status_flips() -> None:
    first = set_conditions([], [("QuotaReserved", False, "Pending", "a")], T0)
    same = set_conditions(first, [("QuotaReserved", False, "Pending", "b")], T0 + 10)
    flipped = set_conditions(same, [("QuotaReserved", True, "QuotaReserved", "c")], T0 + 20)
    assert same[0]["lastTransitionTime"] == first[0]["lastTransitionTime"]
    assert same[0]["message"] == "b"
    assert flipped[0]["lastTransitionTime"] != first[0]["lastTransitionTime"]


def _conditions(patch: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in patch["status"]["conditions"]}


def test_max_execution_time_deactivates_instead_of_requeueing_and_names_the_cause() -> None:
    eviction = Eviction("research/w", "research", EvictionReason.DEACTIVATED, T0, deactivated=True)
    patch = eviction_patch(_workload(requeueState={"count": 2}), eviction)
    assert patch["spec"] == {"active": False}
    assert patch["status"]["requeueState"] is None
    reason = "DeactivatedDueToMaximumExecutionTimeExceeded"
    message = "The workload is deactivated due to exceeding the maximum execution time"
    assert _conditions(patch)["Evicted"] == ("True", reason, message)
    assert _conditions(patch)["Requeued"] == ("False", reason, message)


def test_spec_active_false_deactivates_in_kueues_words_and_reactivation_requeues() -> None:
    workload = {**_workload(), "spec": {"active": False}}
    eviction = Eviction("research/w", "research", EvictionReason.DEACTIVATED, T0, deactivated=True)
    patch = eviction_patch(workload, eviction)
    assert _conditions(patch)["Evicted"] == ("True", "Deactivated", "The workload is deactivated")
    deactivated = {**workload, "status": patch["status"]}
    assert was_deactivated(deactivated)
    reactivated = reactivated_patch(deactivated, T0 + 5)
    assert _conditions(reactivated)["Requeued"] == ("True", "Reactivated", "The workload was reactivated")
    assert not was_deactivated({**workload, "status": reactivated["status"]})


def test_stopped_queues_and_the_requeuing_limit_evict_with_kueues_reasons_and_messages() -> None:
    cases = [
        (
            Eviction("r/w", "q", EvictionReason.CLUSTER_QUEUE_STOPPED, T0),
            "ClusterQueueStopped",
            "The ClusterQueue is stopped",
        ),
        (
            Eviction("r/w", "q", EvictionReason.LOCAL_QUEUE_STOPPED, T0),
            "LocalQueueStopped",
            "The LocalQueue is stopped",
        ),
        (
            Eviction("r/w", "q", EvictionReason.PODS_READY_TIMEOUT, T0, requeue_at=T0 + 60),
            "PodsReadyTimeout",
            "Exceeded the PodsReady timeout r/w",
        ),
        (
            Eviction("r/w", "q", EvictionReason.PODS_READY_TIMEOUT, T0, deactivated=True),
            "DeactivatedDueToRequeuingLimitExceeded",
            "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
        ),
    ]
    for eviction, reason, message in cases:
        assert _conditions(eviction_patch(_workload(), eviction))["Evicted"] == ("True", reason, message)


def test_an_admission_status_kuota_could_not_have_written_is_refused_naming_the_field() -> None:
    """Status is writable by whoever may update workloads/status; a restart must not die on what it reads."""
    reserved = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}]
    for entry in (
        {"count": 1},
        {"name": "main", "resourceUsage": {"cpu": "1e999999"}},
        {"name": "main", "flavors": ["h100"]},
    ):
        workload = _workload(admission={"clusterQueue": "research", "podSetAssignments": [entry]}, conditions=reserved)
        try:
            admitted_pod_sets(workload)
        except InvalidObjectError as error:
            assert error.errors[0].path == "status.admission.podSetAssignments[0]"
        else:
            raise AssertionError(f"{entry} was read as an admission")
