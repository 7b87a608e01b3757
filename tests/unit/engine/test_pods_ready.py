"""waitForPodsReady in the engine: blockAdmission's hold on the next admission while an admitted workload's pods
are not ready (Kueue's ``Scheduler.waitForPodsReadyIfNeeded``, pkg/scheduler/scheduler.go), and
``requeuingStrategy.timestamp`` in the queue order (Kueue's ``Ordering.GetQueueOrderTimestamp``,
pkg/workload/workload.go, its cases in pkg/workload/workload_test.go ``TestGetQueueOrderTimestamp`` and
pkg/scheduler/scheduler_test.go ``TestEntryOrdering``)."""

from __future__ import annotations

import pytest

from kuota.engine.model import Configuration, WaitForPodsReady
from kuota.engine.quota_engine import Admission, EvictionReason, WorkloadState
from tests.unit.engine.builders import admitted, engine_with, evicted, gpu_queue, workload

BLOCKING = Configuration(wait_for_pods_ready=WaitForPodsReady(block_admission=True))
KUEUE_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"


def test_block_admission_holds_the_next_head_until_the_admitted_workloads_pods_are_ready() -> None:
    engine = engine_with(gpu_queue("a", 4, cohort=None), configuration=BLOCKING)
    for index, name in enumerate(("first", "second", "third")):
        engine.submit(workload("a", name, 1, at=index))
    assert admitted(engine.schedule(0)) == ["a/first"]
    held = engine.status("a/second")
    assert held.state is WorkloadState.PENDING and held.waiting_for_pods_ready and held.reason == KUEUE_MESSAGE
    assert not engine.status("a/third").waiting_for_pods_ready  # Kueue's scheduler stops at the first it holds
    assert engine.schedule(1) == []  # nothing reported: still held
    engine.pods_ready("a/first", True)
    assert admitted(engine.schedule(2)) == ["a/second"]  # one at a time: "second" is not ready either
    assert engine.status("a/third").waiting_for_pods_ready
    engine.pods_ready("a/second", True)
    assert admitted(engine.schedule(3)) == ["a/third"]


def test_a_workload_whose_pods_are_no_longer_ready_blocks_again() -> None:
    engine = engine_with(gpu_queue("a", 4, cohort=None), configuration=BLOCKING)
    engine.submit(workload("a", "first", 1))
    engine.schedule(0)
    engine.pods_ready("a/first", True)
    engine.pods_ready("a/first", False)  # WaitForRecovery: Kueue's cache counts it not ready again
    engine.submit(workload("a", "second", 1, at=1))
    assert engine.schedule(1) == []
    assert engine.status("a/second").waiting_for_pods_ready


def test_a_head_that_does_not_fit_keeps_its_own_reason() -> None:
    """Kueue holds only an entry that passed every check; one that does not fit is told why, as ever."""
    engine = engine_with(gpu_queue("a", 1, cohort=None), configuration=BLOCKING)
    engine.submit(workload("a", "first", 1))
    engine.schedule(0)
    engine.submit(workload("a", "big", 2, at=1))
    assert engine.schedule(1) == []
    status = engine.status("a/big")
    assert not status.waiting_for_pods_ready and status.reason != KUEUE_MESSAGE


def test_evicting_or_finishing_the_not_ready_workload_lifts_the_hold() -> None:
    config = Configuration(wait_for_pods_ready=WaitForPodsReady(block_admission=True, backoff_base_seconds=600))
    engine = engine_with(gpu_queue("a", 4, cohort=None), configuration=config)
    engine.submit(workload("a", "stuck", 1))
    engine.submit(workload("a", "next", 1, at=1))
    engine.submit(workload("a", "last", 1, at=2))
    assert admitted(engine.schedule(0)) == ["a/stuck"]
    engine.evict("a/stuck", EvictionReason.PODS_READY_TIMEOUT, 10)
    assert admitted(engine.schedule(10)) == ["a/next"]
    engine.finish("a/next")
    assert admitted(engine.schedule(11)) == ["a/last"]


def test_a_preemption_waits_with_its_admission() -> None:
    """The engine decides a preemption with the admission it makes room for: both wait for the pods."""
    engine = engine_with(
        gpu_queue("a", 1, cohort=None, preemption={"withinClusterQueue": "LowerPriority"}), configuration=BLOCKING
    )
    engine.submit(workload("a", "low", 1))
    engine.schedule(0)
    engine.submit(workload("a", "high", 1, at=1, priority=5))
    assert engine.schedule(1) == []
    assert engine.status("a/high").waiting_for_pods_ready
    assert engine.status("a/low").state is WorkloadState.ADMITTED
    engine.pods_ready("a/low", True)
    decisions = engine.schedule(2)
    assert evicted(decisions) == ["a/low"] and admitted(decisions) == ["a/high"]


def test_restored_admissions_count_as_not_ready_until_reported() -> None:
    """A restarted shell restores admissions, then reports each one's readiness, as Kueue's cache counts every
    admitted Workload without PodsReady True."""
    engine = engine_with(gpu_queue("a", 4, cohort=None))
    engine.submit(workload("a", "running", 1))
    [decision] = engine.schedule(0)
    assert isinstance(decision, Admission)
    fresh = engine_with(gpu_queue("a", 4, cohort=None), configuration=BLOCKING)
    fresh.restore_admitted(workload("a", "running", 1), "a", decision.pod_sets, 0)
    fresh.submit(workload("a", "next", 1, at=1))
    assert fresh.schedule(1) == []
    fresh.pods_ready("a/running", True)
    assert admitted(fresh.schedule(2)) == ["a/next"]


def test_without_block_admission_readiness_changes_nothing() -> None:
    engine = engine_with(
        gpu_queue("a", 4, cohort=None), configuration=Configuration(wait_for_pods_ready=WaitForPodsReady())
    )
    engine.submit(workload("a", "first", 1))
    engine.submit(workload("a", "second", 1, at=1))
    assert admitted(engine.schedule(0)) == ["a/first", "a/second"]
    engine.pods_ready("a/first", False)
    engine.submit(workload("a", "third", 1, at=2))
    assert admitted(engine.schedule(1)) == ["a/third"]


def _admission_order(timestamp: str) -> list[str]:
    """Kueue's TestEntryOrdering's "old", "recently_evicted" and "new": created at 1, 0 and 3, the second evicted
    by a PodsReady timeout at 2. One GPU, one at a time."""
    wait = WaitForPodsReady(backoff_base_seconds=0, timestamp=timestamp)
    engine = engine_with(gpu_queue("a", 1, cohort=None), configuration=Configuration(wait_for_pods_ready=wait))
    engine.submit(workload("a", "recently_evicted", 1, at=0))
    engine.schedule(0)
    engine.submit(workload("a", "old", 1, at=1))
    engine.schedule(1)
    engine.evict("a/recently_evicted", EvictionReason.PODS_READY_TIMEOUT, 2)
    order = admitted(engine.schedule(2))
    engine.submit(workload("a", "new", 1, at=3))
    for now in (4, 5):
        engine.finish(order[-1])
        order += admitted(engine.schedule(now))
    return order


def test_requeued_after_a_pods_ready_timeout_it_queues_from_the_eviction() -> None:
    assert _admission_order("Eviction") == ["a/old", "a/recently_evicted", "a/new"]


def test_with_timestamp_creation_it_keeps_its_place() -> None:
    assert _admission_order("Creation") == ["a/recently_evicted", "a/old", "a/new"]


@pytest.mark.parametrize(
    ("reason", "timestamp", "first"),
    [
        # TestGetQueueOrderTimestamp: "evicted by PodsReady timeout", "evicted by preemption"
        (EvictionReason.PODS_READY_TIMEOUT, "Eviction", "a/old"),
        (EvictionReason.PODS_READY_TIMEOUT, "Creation", "a/evicted"),
        (EvictionReason.PREEMPTED, "Eviction", "a/evicted"),
        # IsEvictedByAdmissionCheck: the eviction orders it whatever the PodsReady timestamp
        (EvictionReason.ADMISSION_CHECK, "Creation", "a/old"),
    ],
)
def test_an_eviction_read_back_orders_a_resubmitted_workload(
    reason: EvictionReason, timestamp: str, first: str
) -> None:
    """A restarted controller submits a pending Workload with its Evicted condition's reason and time."""
    config = Configuration(wait_for_pods_ready=WaitForPodsReady(timestamp=timestamp))
    engine = engine_with(gpu_queue("a", 1, cohort=None), configuration=config)
    engine.submit(workload("a", "evicted", 1, at=0), evicted=(reason, 2.0))
    engine.submit(workload("a", "old", 1, at=1))
    assert admitted(engine.schedule(3)) == [first]


@pytest.mark.parametrize(("timestamp", "preempts"), [("Eviction", False), ("Creation", True)])
def test_lower_or_newer_equal_priority_compares_the_preemptors_queue_order_time(timestamp: str, preempts: bool) -> None:
    """Kueue's SatisfiesPreemptionPolicy: the preemptor's GetQueueOrderTimestamp before the candidate's. Created
    at 0 but requeued after a timeout at 10, it is newer than one created at 5."""
    config = Configuration(wait_for_pods_ready=WaitForPodsReady(timestamp=timestamp))
    queue = gpu_queue("a", 1, cohort=None, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"})
    engine = engine_with(queue, configuration=config)
    engine.submit(workload("a", "running", 1, at=5))
    engine.schedule(5)
    engine.submit(workload("a", "requeued", 1, at=0), evicted=(EvictionReason.PODS_READY_TIMEOUT, 10.0))
    decisions = engine.schedule(11)
    assert evicted(decisions) == (["a/running"] if preempts else [])
