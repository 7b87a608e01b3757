"""waitForPodsReady, live: the PodsReady condition (Kueue's generatePodsReadyCondition) and its clocks."""

from __future__ import annotations

from typing import Any

from kuota.engine import Admission, Eviction, EvictionReason
from kuota.engine.decisions import WorkloadState
from kuota.engine.decoding import parse_object
from kuota.engine.model import Configuration, WaitForPodsReady
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.pods_ready import (
    PodsReadyClock,
    backing_off_until,
    backoff_finished_patch,
    pods_ready_condition,
    pods_ready_patch,
    ready_waits,
    timeout_deadline,
)
from kuota.webhook.controller.state import ControllerState
from kuota.webhook.controller.workload_status import (
    admission_patch,
    counted_as,
    eviction_patch,
    requeue_state,
    requeuing_eviction,
    rfc3339,
)

from ...engine.builders import flavor, gpu_queue, local_queue, workload

T0 = 1_800_000_000.0
WAIT = WaitForPodsReady(timeout_seconds=300, recovery_timeout_seconds=60, backoff_base_seconds=10)


def _condition(kind: str, status: bool, reason: str, at: float = T0) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": "",
        "lastTransitionTime": rfc3339(at),
    }


def _workload(*conditions: dict[str, Any], active: bool = True, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "a", "resourceVersion": "7"},
        "spec": {"active": active},
        "status": {"conditions": list(conditions), **status},
    }


ADMITTED = _condition("Admitted", True, "Admitted")


def test_the_condition_follows_kueues_generate_pods_ready_condition() -> None:
    assert pods_ready_condition(_workload(), True) == (False, "WaitForStart", "Not all pods are ready or succeeded")
    assert pods_ready_condition(_workload(ADMITTED), False)[:2] == (False, "WaitForStart")
    assert pods_ready_condition(_workload(ADMITTED), True) == (
        True,
        "Started",
        "All pods reached readiness and the workload is running",
    )
    started = _condition("PodsReady", True, "Started")
    assert pods_ready_condition(_workload(ADMITTED, started), False) == (
        False,
        "WaitForRecovery",
        "At least one pod has failed, waiting for recovery",
    )
    recovering = _condition("PodsReady", False, "WaitForRecovery")
    assert pods_ready_condition(_workload(ADMITTED, recovering), False)[:2] == (False, "WaitForRecovery")
    assert pods_ready_condition(_workload(ADMITTED, recovering), True)[:2] == (True, "Recovered")
    recovered = _condition("PodsReady", True, "Recovered")
    assert pods_ready_condition(_workload(ADMITTED, recovered), True)[:2] == (True, "Recovered")
    waiting = _condition("PodsReady", False, "WaitForStart")
    assert pods_ready_condition(_workload(ADMITTED, waiting), False)[:2] == (False, "WaitForStart")


def test_the_condition_is_written_only_when_it_changes_with_the_resource_version() -> None:
    assert pods_ready_patch(_workload(), False, T0) is None  # never admitted: nothing to say yet
    patch = pods_ready_patch(_workload(ADMITTED), False, T0 + 5)
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "7"}
    [_, written] = patch["status"]["conditions"]
    assert (written["type"], written["status"], written["reason"]) == ("PodsReady", "False", "WaitForStart")
    assert written["lastTransitionTime"] == rfc3339(T0 + 5)
    assert pods_ready_patch(_workload(ADMITTED, _condition("PodsReady", False, "WaitForStart")), False, T0) is None
    assert pods_ready_patch(_workload(ADMITTED, _condition("PodsReady", True, "Started")), True, T0) is None
    evicted = _workload(_condition("Admitted", False, "NoReservation"), _condition("PodsReady", True, "Started"))
    patch = pods_ready_patch(evicted, False, T0)
    assert patch is not None and patch["status"]["conditions"][1]["reason"] == "WaitForStart"


def test_the_start_clock_runs_from_admission_and_the_recovery_clock_from_the_lost_readiness() -> None:
    assert timeout_deadline(_workload(ADMITTED), WAIT) == T0 + 300
    assert timeout_deadline(_workload(ADMITTED, _condition("PodsReady", False, "WaitForStart", T0 + 9)), WAIT) == (
        T0 + 300
    )
    recovering = _condition("PodsReady", False, "WaitForRecovery", T0 + 1000)
    assert timeout_deadline(_workload(ADMITTED, recovering), WAIT) == T0 + 1060
    untimed = WaitForPodsReady(timeout_seconds=300, recovery_timeout_seconds=None)
    assert timeout_deadline(_workload(ADMITTED, recovering), untimed) is None
    assert timeout_deadline(_workload(ADMITTED, _condition("PodsReady", True, "Started")), WAIT) is None
    assert timeout_deadline(_workload(), WAIT) is None  # not admitted
    assert timeout_deadline(_workload(ADMITTED, active=False), WAIT) is None
    assert timeout_deadline(_workload(ADMITTED, _condition("Evicted", True, "PodsReadyTimeout")), WAIT) is None


def test_a_timeout_eviction_is_not_requeued_until_its_backoff_ends_and_the_count_outlives_readmission() -> None:
    eviction = Eviction("a/w", "q", EvictionReason.PODS_READY_TIMEOUT, T0, requeue_at=T0 + 10)
    patch = eviction_patch(_workload(ADMITTED, requeueState={"count": 1}), eviction)
    requeued = next(c for c in patch["status"]["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "False",
        "PodsReadyTimeout",
        "Exceeded the PodsReady timeout a/w",
    )
    assert patch["status"]["requeueState"] == {"count": 2, "requeueAt": rfc3339(T0 + 10)}
    evicted = _workload(*patch["status"]["conditions"], requeueState=patch["status"]["requeueState"])
    assert backing_off_until(evicted) == T0 + 10
    assert requeue_state(evicted) == (2, T0 + 10)
    finished = backoff_finished_patch(evicted, T0 + 10)
    requeued = next(c for c in finished["status"]["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "True",
        "BackoffFinished",
        "The workload backoff was finished",
    )
    assert finished["status"]["requeueState"] == {"requeueAt": None}  # a merge patch: the count stays
    readmitted = admission_patch(evicted, Admission("a/w", "q", (), False, T0 + 20))
    assert "requeueState" not in readmitted["status"]


def _controller_state(wait: WaitForPodsReady) -> ControllerState:
    state = ControllerState(Configuration(wait_for_pods_ready=wait), clock=lambda: T0)
    for obj in (flavor("gpu"), gpu_queue("q", 2, cohort=None), local_queue("a", "q")):
        state.engine.apply(parse_object(obj))
    return state


def _admitted_in(state: ControllerState) -> dict[str, Any]:
    state.engine.submit(workload("a", "w", 2))
    [admission] = state.engine.schedule(T0)
    assert isinstance(admission, Admission)
    obj = _workload(ADMITTED)
    state.workloads.wrote({**obj, "metadata": {**obj["metadata"], "uid": "u"}})
    return obj


def test_the_clock_evicts_at_the_deadline_then_says_when_the_backoff_ended() -> None:
    state = _controller_state(WAIT)
    clock = PodsReadyClock(state, WAIT)
    obj = _admitted_in(state)
    clock.track("a/w", obj)
    assert clock.next_wakeup() == T0 + 300
    assert clock.timed_out(T0 + 299) == []
    [eviction] = clock.timed_out(T0 + 300)
    assert (eviction.reason, eviction.requeue_at, eviction.deactivated) == (
        EvictionReason.PODS_READY_TIMEOUT,
        T0 + 310,
        False,
    )
    assert clock.next_wakeup() is None
    patch = eviction_patch(obj, eviction)
    evicted = _workload(*patch["status"]["conditions"], requeueState=patch["status"]["requeueState"])
    state.workloads.wrote({**evicted, "metadata": {**evicted["metadata"], "resourceVersion": "8"}})
    clock.track("a/w", evicted)
    assert clock.next_wakeup() == T0 + 310
    assert clock.backoffs_ended(T0 + 309) == []
    assert clock.backoffs_ended(T0 + 310) == ["a/w"]  # said before the engine admits it again
    assert state.engine.status("a/w").state is WorkloadState.BACKOFF
    assert clock.next_wakeup() is None


def test_a_workload_whose_pods_got_ready_in_time_is_not_evicted() -> None:
    state = _controller_state(WAIT)
    clock = PodsReadyClock(state, WAIT)
    obj = _admitted_in(state)
    clock.track("a/w", obj)
    ready = _workload(ADMITTED, _condition("PodsReady", True, "Started", T0 + 100))
    state.workloads.wrote({**ready, "metadata": {**ready["metadata"], "resourceVersion": "8"}})
    clock.track("a/w", ready)
    assert clock.next_wakeup() is None
    assert clock.timed_out(T0 + 1000) == []
    assert state.engine.status("a/w").state is WorkloadState.ADMITTED


def test_under_block_admission_each_copy_tracked_tells_the_engine_whether_its_pods_are_ready() -> None:
    blocking = WaitForPodsReady(timeout_seconds=300, block_admission=True)
    state = _controller_state(blocking)
    clock = PodsReadyClock(state, blocking)
    obj = _admitted_in(state)
    state.engine.submit(workload("a", "next", 0, at=1))

    def held() -> bool:
        held_back = state.engine.schedule(T0 + 1) == []
        assert held_back == state.engine.status("a/next").waiting_for_pods_ready
        return held_back

    clock.track("a/w", obj)
    assert held()
    clock.track("a/w", _workload(ADMITTED, _condition("PodsReady", False, "WaitForRecovery")))
    assert held()
    clock.track("a/w", _workload(ADMITTED, _condition("PodsReady", True, "Started")))
    assert not held()


def test_the_eviction_a_workload_was_requeued_after_is_read_back_from_its_evicted_condition() -> None:
    """What a restarted controller gives the engine to order a pending Workload by (Kueue's
    GetQueueOrderTimestamp reads the same condition): a PodsReady timeout's or an AdmissionCheck's eviction while
    its Evicted condition is True; not a preemption, nor once admitted again."""
    running = _workload(ADMITTED, _condition("QuotaReserved", True, "QuotaReserved"))

    def after(patch: dict[str, Any], obj: dict[str, Any] = running) -> dict[str, Any]:
        return {**obj, "status": {**obj["status"], **patch["status"]}}

    timeout = Eviction("a/w", "a", EvictionReason.PODS_READY_TIMEOUT, T0 + 5, requeue_at=T0 + 15)
    requeued = after(eviction_patch(running, timeout))
    assert requeuing_eviction(requeued) == (EvictionReason.PODS_READY_TIMEOUT, T0 + 5)
    check = Eviction("a/w", "a", EvictionReason.ADMISSION_CHECK, T0 + 7)
    assert requeuing_eviction(after(eviction_patch(running, check, cause=("AdmissionCheck", "retry")))) == (
        EvictionReason.ADMISSION_CHECK,
        T0 + 7,
    )
    preempted = Eviction("a/w", "a", EvictionReason.PREEMPTED, T0 + 5)
    assert requeuing_eviction(after(eviction_patch(running, preempted))) is None
    again = Admission("a/w", "a", (), False, T0 + 20)
    assert requeuing_eviction(after(admission_patch(requeued, again), requeued)) is None


def test_each_eviction_is_counted_in_scheduling_stats_by_reason_and_underlying_cause() -> None:
    waiting = _condition("PodsReady", False, "WaitForStart")
    timeout = Eviction("a/w", "q", EvictionReason.PODS_READY_TIMEOUT, T0, requeue_at=T0 + 10)
    first = eviction_patch(_workload(ADMITTED, waiting), timeout)["status"]["schedulingStats"]
    assert first == {"evictions": [{"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}]}
    recovering = _condition("PodsReady", False, "WaitForRecovery")
    again = eviction_patch(_workload(ADMITTED, recovering, schedulingStats=first), timeout)["status"]["schedulingStats"]
    assert again["evictions"] == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1},
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForRecovery", "count": 1},
    ]
    limit = Eviction("a/w", "q", EvictionReason.PODS_READY_TIMEOUT, T0, deactivated=True)
    final = eviction_patch(_workload(ADMITTED, waiting, schedulingStats=again), limit)["status"]["schedulingStats"]
    assert final["evictions"][-1] == {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1}
    preempted = Eviction("a/w", "q", EvictionReason.PREEMPTED, T0)
    twice = _workload(
        ADMITTED, schedulingStats={"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    )
    assert eviction_patch(twice, preempted)["status"]["schedulingStats"] == {
        "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 2}]
    }


def test_an_eviction_is_labelled_as_its_scheduling_stats_count_it() -> None:
    waiting = _workload(ADMITTED, _condition("PodsReady", False, "WaitForStart"))
    recovering = _workload(ADMITTED, _condition("PodsReady", False, "WaitForRecovery"))
    assert counted_as(waiting, "PodsReadyTimeout") == ("PodsReadyTimeout", "WaitForStart")
    assert counted_as(recovering, "PodsReadyTimeout") == ("PodsReadyTimeout", "WaitForRecovery")
    assert counted_as(waiting, "DeactivatedDueToRequeuingLimitExceeded") == ("Deactivated", "RequeuingLimitExceeded")
    assert counted_as(waiting, "DeactivatedDueToAdmissionCheck") == ("Deactivated", "AdmissionCheck")
    assert counted_as(waiting, "Deactivated") == ("Deactivated", "")
    assert counted_as(waiting, "Preempted") == ("Preempted", "")
    assert counted_as(waiting, "AdmissionCheck") == ("AdmissionCheck", "")


def test_the_ready_waits_are_taken_when_the_pods_first_start_not_when_they_recover() -> None:
    created = {"creationTimestamp": rfc3339(T0 - 60)}
    admitted = _condition("Admitted", True, "Admitted", T0)
    started = _workload(admitted, _condition("PodsReady", True, "Started", T0 + 15))
    started["metadata"].update(created)
    assert ready_waits(started) == (75.0, 15.0)
    recovered = _workload(admitted, _condition("PodsReady", True, "Recovered", T0 + 15))
    recovered["metadata"].update(created)
    assert ready_waits(recovered) is None
    assert ready_waits(_workload(admitted, _condition("PodsReady", False, "WaitForStart"))) is None


def _sample(metrics: ControllerMetrics, series: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(series, {"replica_role": "standalone", **labels})


def test_the_pods_ready_metrics_carry_kueues_labels() -> None:
    metrics = ControllerMetrics()
    obj = {**_workload(ADMITTED), "spec": {"queueName": "lq", "priorityClassRef": {"name": "high"}}}
    metrics.record_pods_ready(obj, "q", 75.0, 15.0)
    queue = {"cluster_queue": "q", "priority_class": "high"}
    local = {"name": "lq", "namespace": "a", "priority_class": "high"}
    assert _sample(metrics, "kueue_ready_wait_time_seconds_sum", **queue) == 75.0
    assert _sample(metrics, "kueue_admitted_until_ready_wait_time_seconds_sum", **queue) == 15.0
    assert _sample(metrics, "kueue_local_queue_ready_wait_time_seconds_sum", **local) == 75.0
    assert _sample(metrics, "kueue_local_queue_admitted_until_ready_wait_time_seconds_sum", **local) == 15.0
    cause = {"reason": "PodsReadyTimeout", "underlying_cause": "WaitForRecovery"}
    metrics.record_eviction(obj, "q", *cause.values(), first=True, since_pods_ready=None)
    metrics.record_eviction(obj, "q", *cause.values(), first=False, since_pods_ready=None)
    assert _sample(metrics, "kueue_evicted_workloads_total", **queue, **cause) == 2
    assert _sample(metrics, "kueue_evicted_workloads_once_total", **queue, **cause) == 1
    assert _sample(metrics, "kueue_pods_ready_to_evicted_time_seconds_count", cluster_queue="q", **cause) is None
    preempted = {"reason": "Preempted", "underlying_cause": ""}
    metrics.record_eviction(obj, "q", *preempted.values(), first=True, since_pods_ready=600.0)
    assert _sample(metrics, "kueue_pods_ready_to_evicted_time_seconds_sum", cluster_queue="q", **preempted) == 600.0
