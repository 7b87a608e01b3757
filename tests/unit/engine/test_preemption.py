"""Classic and fair-sharing preemption, each on a small hand-checked scenario."""

from kuota.engine.model import Configuration, FairSharing, FairSharingStrategy
from kuota.engine.preemption import PreemptionReason
from kuota.engine.quota_engine import Admission, Eviction, QuotaEngine

from .builders import admitted, cluster_queue, engine_with, evicted, gpu_queue, quota, workload

ANY = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def _guide_cohort() -> QuotaEngine:
    return engine_with(
        gpu_queue("research", 8, borrowing=12, preemption=ANY),
        gpu_queue("applied", 8, preemption=ANY),
        gpu_queue("inference", 8, lending=4, preemption=ANY),
    )


def test_reclaim_any_preempts_the_most_recently_admitted_borrowers() -> None:
    engine = _guide_cohort()
    for i in range(5):
        engine.submit(workload("research", f"sweep-{i}", 4, at=i))
        engine.schedule(i)  # admitted one after another
    engine.submit(workload("applied", "finetune", 8, at=100, priority=0))
    decisions = engine.schedule(100)
    assert [(type(d).__name__, d.workload) for d in decisions] == [
        ("Eviction", "research/sweep-4"),
        ("Eviction", "research/sweep-3"),
        ("Admission", "applied/finetune"),
    ]
    eviction = decisions[0]
    assert isinstance(eviction, Eviction)
    assert eviction.preempted_by == "applied/finetune"
    assert eviction.preemption_reason is PreemptionReason.IN_COHORT_RECLAMATION
    assert engine.status("research/sweep-4").reason is not None  # requeued, pending again


def test_reclaim_never_leaves_borrowers_alone() -> None:
    engine = engine_with(gpu_queue("a", 4), gpu_queue("b", 4))
    engine.submit(workload("a", "borrower", 8))
    engine.schedule(0)
    engine.submit(workload("b", "owner", 4, at=1, priority=100))
    assert engine.schedule(1) == []


def test_reclaim_lower_priority_spares_borrowers_of_equal_priority() -> None:
    policy = {"reclaimWithinCohort": "LowerPriority"}
    engine = engine_with(gpu_queue("a", 4, preemption=policy), gpu_queue("b", 4, preemption=policy))
    engine.submit(workload("a", "equal", 4, priority=5))
    engine.submit(workload("a", "lower", 4, priority=1, at=1))
    engine.schedule(0)
    engine.submit(workload("b", "owner", 4, at=2, priority=5))
    assert evicted(engine.schedule(2)) == ["a/lower"]


def test_reclaim_needs_the_preemptor_to_fit_its_nominal_quota() -> None:
    engine = engine_with(gpu_queue("a", 4, preemption=ANY), gpu_queue("b", 4, preemption=ANY))
    engine.submit(workload("a", "borrower", 6))
    engine.schedule(0)
    engine.submit(workload("b", "greedy", 6, at=1, priority=100))  # would borrow itself
    assert engine.schedule(1) == []


def test_within_cluster_queue_lower_priority_evicts_only_lower_priority() -> None:
    engine = engine_with(gpu_queue("a", 4, cohort=None, preemption={"withinClusterQueue": "LowerPriority"}))
    engine.submit(workload("a", "low", 2, priority=1))
    engine.submit(workload("a", "same", 2, priority=5, at=1))
    engine.schedule(0)
    engine.submit(workload("a", "high", 4, priority=5, at=2))
    assert engine.schedule(2) == []  # would need "same" too, which it may not evict
    engine.submit(workload("a", "higher", 2, priority=9, at=3))
    decisions = engine.schedule(3)
    assert evicted(decisions) == ["a/low"]
    assert decisions[0].preemption_reason is PreemptionReason.IN_CLUSTER_QUEUE  # type: ignore[union-attr]


def test_lower_or_newer_equal_priority_evicts_newer_workloads_of_equal_priority() -> None:
    policy = {"withinClusterQueue": "LowerOrNewerEqualPriority"}
    engine = engine_with(gpu_queue("a", 2, cohort=None, preemption=policy))
    engine.submit(workload("a", "newer", 2, priority=5, at=10))
    engine.schedule(10)
    engine.submit(workload("a", "older", 2, priority=5, at=1))  # created earlier, seen later
    assert evicted(engine.schedule(11)) == ["a/newer"]
    # and the newer one cannot take it back: no cycle
    assert engine.schedule(12) == []


def test_victims_are_minimal_unneeded_ones_are_given_back() -> None:
    engine = engine_with(gpu_queue("a", 8, cohort=None, preemption={"withinClusterQueue": "LowerPriority"}))
    engine.submit(workload("a", "small-low", 2, priority=1, at=0))
    engine.submit(workload("a", "big-mid", 6, priority=2, at=1))
    engine.schedule(1)
    engine.submit(workload("a", "urgent", 6, priority=9, at=2))
    # order tries small-low first (lowest priority), then big-mid; big-mid alone suffices, so small-low stays
    assert evicted(engine.schedule(2)) == ["a/big-mid"]


def test_other_queues_are_preempted_before_the_own() -> None:
    engine = engine_with(gpu_queue("a", 4, preemption=ANY), gpu_queue("b", 4, preemption=ANY))
    engine.submit(workload("a", "own-low", 2, priority=1))
    engine.schedule(0)
    engine.submit(workload("b", "borrower", 6, priority=1, at=1))
    engine.schedule(1)
    engine.submit(workload("a", "urgent", 2, priority=9, at=2))
    decisions = engine.schedule(2)
    assert evicted(decisions) == ["b/borrower"]
    assert admitted(decisions) == ["a/urgent"]


def _borrow_within(priority_of_borrower: int) -> QuotaEngine:
    policy = {
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10},
    }
    engine = engine_with(gpu_queue("a", 4, preemption=policy), gpu_queue("b", 4), gpu_queue("c", 4))
    engine.submit(workload("a", "own", 4, priority=100))
    engine.submit(workload("b", "base", 4, priority=priority_of_borrower, at=1))
    engine.submit(workload("b", "borrowed", 2, priority=priority_of_borrower, at=2))
    engine.submit(workload("c", "small", 2, priority=50, at=3))
    assert len(admitted(engine.schedule(3))) == 4  # all 12 GPUs in use, b borrows 2
    engine.submit(workload("a", "extra", 2, priority=100, at=4))  # a would borrow 2 itself
    return engine


def test_borrow_within_cohort_preempts_low_priority_borrowers_while_borrowing() -> None:
    engine = _borrow_within(priority_of_borrower=10)
    decisions = engine.schedule(4)
    assert evicted(decisions) == ["b/borrowed"]
    assert decisions[0].preemption_reason is PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING  # type: ignore
    assert admitted(decisions) == ["a/extra"]


def test_borrow_within_cohort_respects_the_priority_threshold() -> None:
    engine = _borrow_within(priority_of_borrower=11)
    assert engine.schedule(4) == []


def test_preemption_never_evicts_higher_priority_in_the_own_queue() -> None:
    engine = engine_with(gpu_queue("a", 2, cohort=None, preemption={"withinClusterQueue": "LowerPriority"}))
    engine.submit(workload("a", "vip", 2, priority=9))
    engine.schedule(0)
    engine.submit(workload("a", "pleb", 2, priority=1, at=1))
    assert engine.schedule(1) == []


def _fair_engine(strategy: FairSharingStrategy) -> QuotaEngine:
    config = Configuration(fair_sharing=FairSharing((strategy,)))
    policy = {"reclaimWithinCohort": "Any"}
    return engine_with(
        gpu_queue("a", 4, preemption=policy),
        gpu_queue("b", 4, preemption=policy),
        gpu_queue("c", 4, preemption=policy),
        configuration=config,
    )


def test_fair_sharing_admits_the_lowest_share_first() -> None:
    engine = _fair_engine(FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE)
    engine.submit(workload("a", "a1", 8))
    engine.schedule(0)  # a borrows 4
    engine.submit(workload("a", "a2", 2, at=1))
    engine.submit(workload("b", "b1", 4, at=2))
    # b within nominal has share 0, a would borrow 6: b goes first although a's workload is older; then
    # the cohort is full
    assert admitted(engine.schedule(2)) == ["b/b1"]


def test_fair_sharing_preempts_from_the_queue_with_the_highest_share() -> None:
    engine = _fair_engine(FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE)
    engine.submit(workload("a", "a1", 4))
    engine.submit(workload("a", "a2", 2, at=1))
    engine.submit(workload("a", "a3", 2, at=2))
    engine.schedule(2)  # a uses 8 of 12: borrows 4, share 333
    engine.submit(workload("b", "b1", 4, at=3))
    engine.schedule(3)  # b at nominal, 12 in use
    engine.submit(workload("b", "b2", 2, at=4))  # b would borrow 2: share 166 <= a's 166 after losing a3
    decisions = engine.schedule(4)
    assert evicted(decisions) == ["a/a3"]
    assert decisions[0].preemption_reason is PreemptionReason.IN_COHORT_FAIR_SHARING  # type: ignore[union-attr]
    assert admitted(decisions) == ["b/b2"]


def test_fair_sharing_gives_back_the_victims_it_did_not_need() -> None:
    # Kueue's fairPreemptions ends with fillBackWorkloads, as classic preemption does: small-low, taken first
    # (lowest priority), is not needed once big-mid is gone.
    config = Configuration(fair_sharing=FairSharing())
    engine = engine_with(
        gpu_queue("a", 8, preemption={"withinClusterQueue": "LowerPriority"}),
        gpu_queue("b", 4),
        configuration=config,
    )
    engine.submit(workload("a", "small-low", 2, priority=1, at=0))
    engine.submit(workload("a", "big-mid", 6, priority=2, at=1))
    engine.submit(workload("b", "b1", 4, at=1))
    engine.schedule(1)
    engine.submit(workload("a", "urgent", 6, priority=9, at=2))
    decisions = engine.schedule(2)
    assert evicted(decisions) == ["a/big-mid"]
    assert decisions[0].preemption_reason is PreemptionReason.IN_CLUSTER_QUEUE  # type: ignore[union-attr]


def test_less_than_initial_share_refuses_to_equalize_past_the_target() -> None:
    engine = _fair_engine(FairSharingStrategy.LESS_THAN_INITIAL_SHARE)
    engine.submit(workload("a", "a1", 8))
    engine.schedule(0)  # a borrows 4 (its whole extra)
    engine.submit(workload("c", "c1", 4, at=1))
    engine.schedule(1)
    engine.submit(workload("b", "b1", 8, at=2))  # b would borrow 4 too: share equal to a's, not less
    assert engine.schedule(2) == []


def test_admissions_and_decisions_are_returned_in_order() -> None:
    engine = _guide_cohort()
    engine.submit(workload("research", "x", 4))
    decisions = engine.schedule(0)
    assert all(isinstance(d, Admission | Eviction) for d in decisions)


def test_a_head_kept_from_preempting_by_a_request_past_nominal_may_preempt_once_that_request_fits() -> None:
    # a may not preempt past its nominal quota (withinClusterQueue Never, no borrowWithinCohort): its job's
    # 3 cpu (nominal 1) make the flavor NO_FIT while b uses the cohort's cpu, so it cannot even try to
    # reclaim the GPU b borrows. Once b's cpu job finishes, it reclaims that GPU.
    engine = engine_with(
        cluster_queue(
            "a",
            {"gpu": [quota("nvidia.com/gpu", 2), quota("cpu", 1)]},
            cohort="c",
            preemption={"reclaimWithinCohort": "Any"},
        ),
        cluster_queue("b", {"gpu": [quota("nvidia.com/gpu", 2), quota("cpu", 4)]}, cohort="c"),
    )
    engine.submit(workload("b", "cpu-job", requests={"cpu": "3"}))
    engine.submit(workload("b", "gpu-job", 3))
    assert admitted(engine.schedule(0)) == ["b/cpu-job", "b/gpu-job"]
    engine.submit(workload("a", "job", at=1, requests={"nvidia.com/gpu": "2", "cpu": "3"}))
    assert engine.schedule(1) == []
    engine.finish("b/cpu-job")
    decisions = engine.schedule(2)
    assert [(type(d).__name__, d.workload) for d in decisions] == [
        ("Eviction", "b/gpu-job"),
        ("Admission", "a/job"),
    ]


def test_a_head_waiting_for_its_own_usage_to_drop_reclaims_after_other_quota_came_and_went() -> None:
    # a's job (4) is over a's nominal while a runs a1 (2), so it may not reclaim yet; its borrowingLimit 0 also
    # keeps it from using what b frees at t2 (which b takes back at once). When a1 finishes, a is back within
    # its nominal quota and reclaims from b, which borrows.
    engine = engine_with(
        gpu_queue("a", 4, borrowing=0, preemption={"reclaimWithinCohort": "Any"}),
        gpu_queue("b", 4),
    )
    engine.submit(workload("a", "a1", 2))
    engine.submit(workload("b", "b1", 2))
    engine.submit(workload("b", "b2", 4))
    assert admitted(engine.schedule(0)) == ["a/a1", "b/b1", "b/b2"]
    engine.submit(workload("a", "job", 4, at=1))
    assert engine.schedule(1) == []
    engine.finish("b/b2")
    engine.submit(workload("b", "b3", 4, at=2))
    assert admitted(engine.schedule(2)) == ["b/b3"]
    engine.finish("a/a1")
    decisions = engine.schedule(3)
    assert [(type(d).__name__, d.workload) for d in decisions] == [("Eviction", "b/b3"), ("Admission", "a/job")]


def test_a_head_waiting_for_cpu_reclaims_gpus_a_borrower_took_while_it_waited() -> None:
    # b's job waits for cpu (b's nominal 0; a's 2 cpu are all borrowed by b's hog). When the hog finishes, a's
    # older borrower takes all 4 GPUs first (b's nominal); the cpu is then there, and b's job, within b's
    # nominal for GPUs, reclaims them from the borrower, as one-at-a-time scheduling does.
    def queue(name: str, gpus: int, cpu: int, preemption: dict[str, str]) -> dict[str, object]:
        return cluster_queue(
            name, {"gpu": [quota("nvidia.com/gpu", gpus), quota("cpu", cpu)]}, cohort="c", preemption=preemption
        )

    engine = engine_with(
        queue("a", 0, 2, {}),
        queue("b", 4, 0, {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}),
    )
    engine.submit(workload("b", "hog", requests={"nvidia.com/gpu": "1", "cpu": "2"}))
    assert admitted(engine.schedule(0)) == ["b/hog"]
    engine.submit(workload("a", "borrower", 4, at=1))
    engine.submit(workload("b", "job", at=2, requests={"nvidia.com/gpu": "1", "cpu": "1"}))
    assert engine.schedule(2) == []
    engine.finish("b/hog")
    decisions = engine.schedule(3)
    assert [(type(d).__name__, d.workload) for d in decisions] == [
        ("Admission", "a/borrower"),
        ("Eviction", "a/borrower"),
        ("Admission", "b/job"),
    ]
    eviction = decisions[1]
    assert isinstance(eviction, Eviction)
    assert eviction.preempted_by == "b/job"
    assert eviction.preemption_reason is PreemptionReason.IN_COHORT_RECLAMATION
