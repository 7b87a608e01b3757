"""AdmissionChecks in the engine: a ClusterQueue is active only while every check it names exists and is
``Active``, and the evictions a check's state asks for (Retry requeues at a time, Rejected deactivates)."""

from typing import Any

import pytest

from kuota.engine import InvalidObjectError, parse_object
from kuota.engine.model import AdmissionCheckRule
from kuota.engine.quota_engine import EvictionReason, WorkloadState

from .builders import API, admitted, engine_with, gpu_queue, workload


def admission_check(name: str, *, active: bool) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/budget"},
        "status": {"conditions": [{"type": "Active", "status": "True" if active else "False"}]},
    }


def checked_queue(*checks: dict[str, Any]) -> dict[str, Any]:
    return gpu_queue("a", 4, cohort=None, admissionChecksStrategy={"admissionChecks": list(checks)})


def test_the_strategy_is_read_with_each_checks_flavors() -> None:
    queue = parse_object(checked_queue({"name": "budget"}, {"name": "capacity", "onFlavors": ["spot", "gpu"]}))
    assert queue.admission_checks == (  # type: ignore[union-attr]
        AdmissionCheckRule("budget", ()),
        AdmissionCheckRule("capacity", ("gpu", "spot")),
    )


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        ({}, "spec.admissionChecksStrategy.admissionChecks: Required value"),
        ({"admissionChecks": [{"name": "a"}, {"name": "a"}]}, "Duplicate value"),
        ({"admissionChecks": [{"name": "a", "onFlavor": ["x"]}]}, "onFlavor: unknown field"),
    ],
)
def test_a_bad_strategy_is_refused_with_the_field_named(strategy: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObjectError, match=message):
        parse_object(gpu_queue("a", 4, cohort=None, admissionChecksStrategy=strategy))


def test_a_check_is_active_only_when_its_controller_says_so() -> None:
    assert parse_object(admission_check("budget", active=True)).active  # type: ignore[union-attr]
    assert not parse_object(admission_check("budget", active=False)).active  # type: ignore[union-attr]
    unsaid = admission_check("budget", active=True)
    del unsaid["status"]
    assert not parse_object(unsaid).active  # type: ignore[union-attr]


def test_a_queue_naming_a_missing_check_admits_nothing_with_kueues_reason() -> None:
    engine = engine_with(checked_queue({"name": "budget"}, {"name": "capacity"}))
    engine.submit(workload("a", "w", 1))
    assert engine.schedule(0) == []
    status = engine.cluster_queue_status("a")
    assert not status.active
    assert status.inactive_condition == (
        "AdmissionCheckNotFound",
        "Can't admit new workloads: references missing AdmissionCheck(s): budget,capacity.",
    )
    assert engine.status("a/w").reason == (
        "ClusterQueue a is inactive: AdmissionCheck budget, capacity does not exist (AdmissionCheckNotFound): create it"
    )


def test_a_queue_naming_an_inactive_check_admits_once_it_is_active() -> None:
    engine = engine_with(admission_check("budget", active=False), checked_queue({"name": "budget"}))
    engine.submit(workload("a", "w", 1))
    assert engine.schedule(0) == []
    assert engine.cluster_queue_status("a").inactive_condition == (
        "AdmissionCheckInactive",
        "Can't admit new workloads: references inactive AdmissionCheck(s): budget.",
    )
    engine.apply(parse_object(admission_check("budget", active=True)))
    assert admitted(engine.schedule(1)) == ["a/w"]
    assert engine.cluster_queue_status("a").inactive_condition is None


def test_a_deleted_check_makes_its_queue_inactive_again() -> None:
    engine = engine_with(admission_check("budget", active=True), checked_queue({"name": "budget"}))
    engine.delete_object("AdmissionCheck", "budget")
    assert engine.cluster_queue_status("a").inactive_condition == (
        "AdmissionCheckNotFound",
        "Can't admit new workloads: references missing AdmissionCheck(s): budget.",
    )


def test_a_retry_frees_the_quota_and_requeues_the_workload_at_the_time_asked() -> None:
    engine = engine_with(admission_check("budget", active=True), checked_queue({"name": "budget"}))
    engine.submit(workload("a", "w", 4))
    engine.submit(workload("a", "later", 4, at=1))
    assert admitted(engine.schedule(0)) == ["a/w"]
    eviction = engine.evict("a/w", EvictionReason.ADMISSION_CHECK, 10, requeue_at=70)
    assert (eviction.requeue_at, eviction.deactivated) == (70, False)
    assert engine.status("a/w").state is WorkloadState.BACKOFF
    assert engine.status("a/w").reason == "an AdmissionCheck asked to retry; requeued at 70"
    assert admitted(engine.schedule(10)) == ["a/later"], "its quota is free at once"
    assert engine.next_wakeup() == 70
    engine.finish("a/later")
    assert admitted(engine.schedule(69)) == []
    assert admitted(engine.schedule(70)) == ["a/w"]


def test_a_retry_without_a_delay_requeues_at_once() -> None:
    engine = engine_with(admission_check("budget", active=True), checked_queue({"name": "budget"}))
    engine.submit(workload("a", "w", 4))
    engine.schedule(0)
    engine.evict("a/w", EvictionReason.ADMISSION_CHECK, 10)
    assert engine.status("a/w").state is WorkloadState.PENDING
    assert admitted(engine.schedule(10)) == ["a/w"]


def test_a_rejection_deactivates_the_workload() -> None:
    engine = engine_with(admission_check("budget", active=True), checked_queue({"name": "budget"}))
    engine.submit(workload("a", "w", 4))
    engine.schedule(0)
    eviction = engine.evict("a/w", EvictionReason.ADMISSION_CHECK, 10, deactivate=True)
    assert eviction.deactivated and eviction.requeue_at is None
    assert engine.status("a/w").state is WorkloadState.DEACTIVATED
    assert admitted(engine.schedule(20)) == []
