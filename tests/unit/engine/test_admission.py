"""Admission rules, each on a small hand-checked scenario."""

from kuota.engine.decoding import parse_object
from kuota.engine.model import Configuration, PodSet, Toleration, WaitForPodsReady
from kuota.engine.quota_engine import Admission, EvictionReason, WorkloadState

from .builders import admitted, cluster_queue, engine_with, evicted, flavor, gpu_queue, local_queue, quota, workload


def test_a_workload_within_nominal_quota_is_admitted_without_borrowing() -> None:
    engine = engine_with(gpu_queue("a", 8, cohort=None))
    engine.submit(workload("a", "w", 8))
    [decision] = engine.schedule(0)
    assert isinstance(decision, Admission)
    assert (decision.workload, decision.cluster_queue, decision.borrowing) == ("a/w", "a", False)
    assert decision.pod_sets[0].flavors == {"nvidia.com/gpu": "gpu"}


def test_one_snapshot_admits_many_workloads_until_quota_is_used() -> None:
    engine = engine_with(gpu_queue("a", 8, cohort=None))
    for i in range(5):
        engine.submit(workload("a", f"w{i}", 2, at=i))
    assert admitted(engine.schedule(0)) == ["a/w0", "a/w1", "a/w2", "a/w3"]
    status = engine.status("a/w4")
    assert status.state is WorkloadState.PENDING
    assert status.reason == "needs 2 nvidia.com/gpu in flavor gpu, the most a can ever use is 8 and 8 are in use"


def test_borrowing_is_capped_by_borrowing_limit() -> None:
    engine = engine_with(gpu_queue("research", 8, borrowing=12), gpu_queue("applied", 8), gpu_queue("inference", 8))
    for i in range(6):
        engine.submit(workload("research", f"s{i}", 4, at=i))
    decisions = engine.schedule(0)
    assert admitted(decisions) == [f"research/s{i}" for i in range(5)]  # 20 = 8 nominal + 12 borrowed
    assert [d.borrowing for d in decisions if isinstance(d, Admission)] == [False, False, True, True, True]
    assert engine.status("research/s5").reason == (
        "needs 4 nvidia.com/gpu in flavor gpu, the most research can ever use is 20 and 20 are in use"
    )


def test_lending_limit_keeps_the_rest_of_a_queues_quota_for_itself() -> None:
    engine = engine_with(gpu_queue("research", 8), gpu_queue("inference", 8, lending=4))
    for i in range(4):
        engine.submit(workload("research", f"s{i}", 4, at=i))
    assert admitted(engine.schedule(0)) == ["research/s0", "research/s1", "research/s2"]  # 8 + 4 lent
    engine.submit(workload("inference", "i", 4, at=9))
    assert admitted(engine.schedule(1)) == ["inference/i"]  # the 4 it never lends


def test_a_queue_without_cohort_cannot_borrow() -> None:
    engine = engine_with(gpu_queue("a", 4, cohort=None), gpu_queue("b", 4, cohort=None))
    engine.submit(workload("a", "big", 6))
    assert engine.schedule(0) == []
    status = engine.status("a/big")
    assert status.inadmissible
    assert status.reason == (
        "needs 6 nvidia.com/gpu in flavor gpu, more than ClusterQueue a can ever use (4): lower "
        "the request or raise the quota"
    )


def test_cohort_owned_quota_is_lent_to_its_queues() -> None:
    cohort = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "pool"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "gpu", "resources": [quota("nvidia.com/gpu", 6)]}],
                }
            ]
        },
    }
    engine = engine_with(cohort, gpu_queue("a", 2), gpu_queue("b", 0))
    engine.submit(workload("a", "w", 8))
    engine.submit(workload("b", "x", 1, at=1))
    assert admitted(engine.schedule(0)) == ["a/w"]
    assert engine.status("b/x").reason is not None


def test_cohort_hierarchy_lends_across_subtrees_within_parent_limits() -> None:
    parent = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}}
    left = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "left"},
        "spec": {"parentName": "org"},
    }
    right = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "right"},
        "spec": {"parentName": "org"},
    }
    engine = engine_with(parent, left, right, gpu_queue("a", 4, cohort="left"), gpu_queue("b", 4, cohort="right"))
    engine.submit(workload("a", "w", 8))
    assert admitted(engine.schedule(0)) == ["a/w"]  # borrows b's 4 through org


def test_a_parent_cycle_makes_queues_inactive_with_a_reason() -> None:
    one = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "one"},
        "spec": {"parentName": "two"},
    }
    two = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "two"},
        "spec": {"parentName": "one"},
    }
    engine = engine_with(one, two, gpu_queue("a", 4, cohort="one"))
    engine.submit(workload("a", "w", 1))
    assert engine.schedule(0) == []
    assert engine.status("a/w").reason == (
        "ClusterQueue a is inactive: its Cohort one is in a parentName cycle: break the cycle"
    )


def test_missing_flavor_makes_the_queue_inactive() -> None:
    engine = engine_with(flavor("other"), gpu_queue("a", 4, cohort=None))
    engine.submit(workload("a", "w", 1))
    assert engine.schedule(0) == []
    assert engine.cluster_queue_status("a").inactive_reason == (
        "ClusterQueue a is inactive: ResourceFlavor gpu does not exist (FlavorNotFound): create it"
    )


def test_reasons_for_workloads_that_cannot_reach_a_queue() -> None:
    selective = gpu_queue(
        "research", 4, cohort=None, namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    )
    engine = engine_with(
        selective,
        local_queue("research", "research"),
        local_queue("rogue", "research"),
        local_queue("lost", "nowhere"),
        flavor("gpu"),
    )
    engine.submit(workload("rogue", "w", 1))
    engine.submit(workload("research", "x", 1, queue="research-queue"))
    engine.submit(workload("lost", "y", 1))
    engine.submit(workload("research", "z", 1, queue=""))
    assert engine.schedule(0) == []
    assert engine.status("rogue/w").reason is not None
    assert (engine.status("rogue/w").reason or "").startswith(
        "namespace rogue is not selected by ClusterQueue research"
    )
    assert (engine.status("research/x").reason or "").startswith(
        "LocalQueue research-queue does not exist in namespace research"
    )
    assert (engine.status("lost/y").reason or "").startswith(
        "ClusterQueue nowhere (of LocalQueue lost/q) does not exist"
    )
    assert (engine.status("research/z").reason or "").startswith("the workload names no LocalQueue")
    assert all(engine.status(k).inadmissible for k in ("rogue/w", "research/x", "lost/y", "research/z"))


def test_unset_namespace_selector_selects_no_namespace() -> None:
    cq = gpu_queue("a", 4, cohort=None)
    del cq["spec"]["namespaceSelector"]
    engine = engine_with(cq)
    engine.submit(workload("a", "w", 1))
    assert engine.schedule(0) == []
    assert (engine.status("a/w").reason or "").startswith("namespace a is not selected by ClusterQueue a")


def test_uncovered_resource_makes_the_workload_inadmissible() -> None:
    engine = engine_with(gpu_queue("research", 8, cohort=None))
    engine.submit(workload("research", "w", requests={"nvidia.com/gpu": "1", "cpu": "4"}))
    assert engine.schedule(0) == []
    assert engine.status("research/w").reason == (
        "ClusterQueue research does not cover resource cpu: add it to a resourceGroup's coveredResources or drop the "
        "request"
    )


def test_higher_priority_goes_first_then_older() -> None:
    engine = engine_with(gpu_queue("a", 2, cohort=None))
    engine.submit(workload("a", "old-low", 2, at=0, priority=1))
    engine.submit(workload("a", "new-high", 2, at=5, priority=10))
    engine.submit(workload("a", "old-high", 2, at=3, priority=10))
    assert admitted(engine.schedule(10)) == ["a/old-high"]


def test_a_workload_within_its_nominal_quota_goes_before_an_older_borrower() -> None:
    # Kueue's cycle takes entries that do not borrow first: the older borrower, admitted first, would only be
    # reclaimed by the owner at the same instant.
    reclaim = {"reclaimWithinCohort": "Any"}
    engine = engine_with(gpu_queue("a", 4, preemption=reclaim), gpu_queue("b", 4, preemption=reclaim))
    engine.submit(workload("a", "own", 4, at=0))
    engine.schedule(0)
    engine.submit(workload("a", "borrower", 4, at=1, priority=5))
    engine.submit(workload("b", "owner", 4, at=2))
    decisions = engine.schedule(2)
    assert admitted(decisions) == ["b/owner"]
    assert evicted(decisions) == []


def test_a_queue_whose_head_cannot_be_admitted_offers_the_next_within_its_nominal_quota() -> None:
    reclaim = {"reclaimWithinCohort": "Any"}
    engine = engine_with(gpu_queue("a", 4, preemption=reclaim), gpu_queue("b", 4, preemption=reclaim))
    engine.submit(workload("a", "own", 4, at=0))
    engine.schedule(0)
    engine.submit(workload("a", "borrower", 4, at=1))
    engine.submit(workload("b", "huge", 8, at=2))  # borrows and cannot fit: set aside on the way
    engine.submit(workload("b", "owner", 4, at=3))
    decisions = engine.schedule(3)
    assert admitted(decisions) == ["b/owner"]
    assert evicted(decisions) == []


def test_a_workload_within_its_nominal_quota_once_its_own_victims_are_gone_keeps_its_priority_order() -> None:
    # Kueue's preemption oracle decides borrowing with the victims gone: the preemptor does not borrow, so it
    # goes first by priority, before the lender that reclaims from the borrowing queue.
    policy = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    engine = engine_with(*(gpu_queue(name, 4, preemption=policy) for name in ("a", "c", "d")))
    engine.submit(workload("a", "low", 4, at=0))
    engine.submit(workload("d", "first", 4, at=0))
    engine.submit(workload("d", "second", 4, at=0.5))  # borrows c's quota
    engine.schedule(0.5)
    engine.submit(workload("a", "high", 4, at=1, priority=10))
    engine.submit(workload("c", "lender", 4, at=1))
    decisions = engine.schedule(1)
    assert [(type(d).__name__, d.workload) for d in decisions] == [
        ("Eviction", "a/low"),
        ("Admission", "a/high"),
        ("Eviction", "d/second"),
        ("Admission", "c/lender"),
    ]


def test_best_effort_fifo_lets_smaller_workloads_pass_a_head_that_does_not_fit() -> None:
    engine = engine_with(gpu_queue("a", 4, cohort=None))
    engine.submit(workload("a", "running", 3, at=0))
    engine.schedule(0)
    engine.submit(workload("a", "big", 4, at=1))
    engine.submit(workload("a", "small", 1, at=2))
    assert admitted(engine.schedule(2)) == ["a/small"]


def test_strict_fifo_head_that_does_not_fit_blocks_the_queue() -> None:
    engine = engine_with(gpu_queue("a", 4, cohort=None, queueingStrategy="StrictFIFO"))
    engine.submit(workload("a", "running", 3, at=0))
    engine.schedule(0)
    engine.submit(workload("a", "big", 4, at=1))
    engine.submit(workload("a", "small", 1, at=2))
    assert engine.schedule(2) == []
    assert engine.status("a/small").reason is not None
    assert "StrictFIFO" in (engine.status("a/small").reason or "")
    engine.finish("a/running")
    assert admitted(engine.schedule(3)) == ["a/big"]


def test_all_pod_sets_are_admitted_together_or_not_at_all() -> None:
    engine = engine_with(gpu_queue("a", 8, cohort=None))
    pod_sets = (PodSet("driver", 1, {"nvidia.com/gpu": 4}), PodSet("workers", 2, {"nvidia.com/gpu": 4}))
    engine.submit(workload("a", "gang", pod_sets=pod_sets))
    assert engine.schedule(0) == []  # 12 > 8 though the driver alone would fit
    engine.submit(workload("a", "pair", pod_sets=(pod_sets[0], PodSet("w", 1, {"nvidia.com/gpu": 4})), at=1))
    [decision] = engine.schedule(1)
    assert isinstance(decision, Admission)
    assert [p.name for p in decision.pod_sets] == ["driver", "w"]


def test_min_count_admits_as_many_pods_as_fit() -> None:
    engine = engine_with(gpu_queue("a", 8, cohort=None))
    engine.submit(workload("a", "running", 3))
    engine.schedule(0)
    engine.submit(workload("a", "elastic", 1, count=8, min_count=2, at=1))
    [decision] = engine.schedule(1)
    assert isinstance(decision, Admission)
    assert decision.pod_sets[0].count == 5


def test_flavors_are_tried_in_order_and_the_first_fit_wins() -> None:
    cq = cluster_queue("a", {"on-demand": [quota("nvidia.com/gpu", 2)], "spot": [quota("nvidia.com/gpu", 8)]})
    engine = engine_with(flavor("on-demand"), flavor("spot"), cq, local_queue("a", "a"))
    engine.submit(workload("a", "w1", 2))
    engine.submit(workload("a", "w2", 2, at=1))
    decisions = engine.schedule(0)
    assert [d.pod_sets[0].flavors["nvidia.com/gpu"] for d in decisions if isinstance(d, Admission)] == [
        "on-demand",
        "spot",
    ]


def _fungible_engine(when_can_borrow: str) -> list[str]:
    own = cluster_queue(
        "a",
        {"on-demand": [quota("nvidia.com/gpu", 2)], "spot": [quota("nvidia.com/gpu", 4)]},
        cohort="pool",
        flavorFungibility={"whenCanBorrow": when_can_borrow},
    )
    lender = cluster_queue(
        "b", {"on-demand": [quota("nvidia.com/gpu", 4)], "spot": [quota("nvidia.com/gpu", 0)]}, cohort="pool"
    )
    engine = engine_with(flavor("on-demand"), flavor("spot"), own, lender, local_queue("a", "a"))
    engine.submit(workload("a", "w", 4))
    return [d.pod_sets[0].flavors["nvidia.com/gpu"] for d in engine.schedule(0) if isinstance(d, Admission)]


def test_when_can_borrow_may_stop_search_takes_the_first_flavor_by_borrowing() -> None:
    assert _fungible_engine("MayStopSearch") == ["on-demand"]


def test_when_can_borrow_try_next_flavor_prefers_a_later_flavor_without_borrowing() -> None:
    assert _fungible_engine("TryNextFlavor") == ["spot"]


def _preempt_or_next(when_can_preempt: str) -> list[str]:
    cq = cluster_queue(
        "a",
        {"on-demand": [quota("nvidia.com/gpu", 4)], "spot": [quota("nvidia.com/gpu", 4)]},
        preemption={"withinClusterQueue": "LowerPriority"},
        flavorFungibility={"whenCanPreempt": when_can_preempt},
    )
    engine = engine_with(flavor("on-demand"), flavor("spot"), cq, local_queue("a", "a"))
    engine.submit(workload("a", "low", 4, priority=0))
    engine.schedule(0)
    engine.submit(workload("a", "high", 4, priority=5, at=1))
    decisions = engine.schedule(1)
    return [
        f"{d.workload}@{d.pod_sets[0].flavors['nvidia.com/gpu']}" if isinstance(d, Admission) else f"evict {d.workload}"
        for d in decisions
    ]


def test_when_can_preempt_try_next_flavor_uses_a_free_flavor_instead_of_preempting() -> None:
    assert _preempt_or_next("TryNextFlavor") == ["a/high@spot"]


def test_when_can_preempt_may_stop_search_preempts_in_the_first_flavor() -> None:
    assert _preempt_or_next("MayStopSearch") == ["evict a/low", "a/high@on-demand"]


def test_may_stop_search_moves_past_a_flavor_with_nobody_to_preempt_to_a_later_flavor_that_fits() -> None:
    """Kueue's shouldTryNextFlavor (pkg/scheduler/flavorassigner/flavorassigner.go): a flavor whose preemption
    simulation finds no victims (noPreemptionCandidates, kubernetes-sigs/kueue#5698) never stops the walk, even
    under ``whenCanPreempt: MayStopSearch``. b may not preempt: on-demand's GPU fits by borrowing but its cpu is
    taken (within b's nominal quota, so it needs preemption, and there is nobody b may preempt), so the walk
    goes on to spot, where everything fits by borrowing: b is admitted there at once."""
    stop = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    a = cluster_queue(
        "a",
        {
            "on-demand": [quota("nvidia.com/gpu", 2), quota("cpu", 0)],
            "spot": [quota("nvidia.com/gpu", 1), quota("cpu", 1)],
        },
        cohort="pool",
        flavorFungibility=stop,
    )
    b = cluster_queue(
        "b",
        {
            "on-demand": [quota("nvidia.com/gpu", 0), quota("cpu", 1)],
            "spot": [quota("nvidia.com/gpu", 0), quota("cpu", 0)],
        },
        cohort="pool",
        flavorFungibility=stop,
    )
    engine = engine_with(flavor("on-demand"), flavor("spot"), a, b, local_queue("a", "a"), local_queue("b", "b"))
    both = {"nvidia.com/gpu": "1", "cpu": "1"}
    engine.submit(workload("a", "first", requests=both))
    assert admitted(engine.schedule(0)) == ["a/first"]
    engine.submit(workload("b", "job", at=1, requests=both))
    decisions = engine.schedule(1)
    placed = [(d.workload, d.pod_sets[0].flavors["cpu"], d.borrowing) for d in decisions if isinstance(d, Admission)]
    assert placed == [("b/job", "spot", True)]


def test_may_stop_search_stops_at_a_flavor_with_someone_to_preempt() -> None:
    """The same walk with a victim b may preempt at on-demand: the walk stops there and b preempts its own
    lower-priority job rather than moving to spot."""
    stop = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    b = cluster_queue(
        "b",
        {"on-demand": [quota("nvidia.com/gpu", 1)], "spot": [quota("nvidia.com/gpu", 1)]},
        flavorFungibility=stop,
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    engine = engine_with(flavor("on-demand"), flavor("spot"), b, local_queue("b", "b"))
    engine.submit(workload("b", "low", 1, priority=0))
    assert admitted(engine.schedule(0)) == ["b/low"]
    engine.submit(workload("b", "high", 1, at=1, priority=5))
    decisions = engine.schedule(1)
    assert [(d.workload, d.pod_sets[0].flavors["nvidia.com/gpu"]) for d in decisions if isinstance(d, Admission)] == [
        ("b/high", "on-demand")
    ]


def test_taints_must_be_tolerated_and_node_labels_must_agree() -> None:
    tainted = flavor(
        "tainted",
        labels={"gpu-type": "h100"},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )
    cq = cluster_queue("a", {"tainted": [quota("nvidia.com/gpu", 4)]})
    engine = engine_with(tainted, cq, local_queue("a", "a"))
    engine.submit(workload("a", "intolerant", 1))
    engine.submit(
        workload(
            "a",
            "elsewhere",
            1,
            at=1,
            selector={"gpu-type": "a100"},
            tolerations=(Toleration("nvidia.com/gpu", "Exists", "", None),),
        )
    )
    engine.submit(workload("a", "fine", 1, at=2, tolerations=(Toleration("nvidia.com/gpu", "Exists", "", None),)))
    assert admitted(engine.schedule(0)) == ["a/fine"]
    assert "taint nvidia.com/gpu=present:NoSchedule" in (engine.status("a/intolerant").reason or "")
    assert "nodeSelector gpu-type=a100 contradicts flavor tainted's node label gpu-type=h100" in (
        engine.status("a/elsewhere").reason or ""
    )


def test_flavor_tolerations_count_as_the_pod_sets_own() -> None:
    tainted = flavor(
        "f",
        taints=[{"key": "gpu", "effect": "NoSchedule"}],
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    engine = engine_with(tainted, cluster_queue("a", {"f": [quota("nvidia.com/gpu", 1)]}), local_queue("a", "a"))
    engine.submit(workload("a", "w", 1))
    assert admitted(engine.schedule(0)) == ["a/w"]


def test_stop_policy_hold_admits_nothing_new_and_hold_and_drain_evicts() -> None:
    engine = engine_with(gpu_queue("a", 4, cohort=None))
    engine.submit(workload("a", "running", 2))
    engine.schedule(0)
    engine.apply(parse_object(gpu_queue("a", 4, cohort=None, stopPolicy="Hold")))
    engine.submit(workload("a", "new", 1, at=1))
    assert engine.schedule(1) == []
    assert engine.status("a/new").reason == "ClusterQueue a is stopped (stopPolicy Hold)"
    assert engine.status("a/running").state is WorkloadState.ADMITTED
    engine.apply(parse_object(gpu_queue("a", 4, cohort=None, stopPolicy="HoldAndDrain")))
    decisions = engine.schedule(2)
    assert evicted(decisions) == ["a/running"]
    assert decisions[0].reason is EvictionReason.CLUSTER_QUEUE_STOPPED  # type: ignore[union-attr]
    engine.apply(parse_object(gpu_queue("a", 4, cohort=None)))
    assert sorted(admitted(engine.schedule(3))) == ["a/new", "a/running"]


def test_maximum_execution_time_deactivates_counting_earlier_runs() -> None:
    engine = engine_with(gpu_queue("a", 2, cohort=None, preemption={"withinClusterQueue": "LowerPriority"}))
    engine.submit(workload("a", "capped", 2, max_seconds=100))
    engine.schedule(0)
    assert engine.next_wakeup() == 100
    engine.submit(workload("a", "urgent", 2, at=1, priority=9))
    assert evicted(engine.schedule(40)) == ["a/capped"]  # ran 40 s
    engine.finish("a/urgent")
    assert admitted(engine.schedule(50)) == ["a/capped"]
    assert engine.next_wakeup() == 110  # 60 s left
    [decision] = engine.schedule(110)
    assert evicted([decision]) == ["a/capped"]
    assert decision.reason is EvictionReason.DEACTIVATED  # type: ignore[union-attr]
    assert engine.status("a/capped").state is WorkloadState.DEACTIVATED


def test_pods_ready_timeout_requeues_with_exponential_backoff() -> None:
    config = Configuration(
        wait_for_pods_ready=WaitForPodsReady(backoff_base_seconds=60, backoff_max_seconds=100, backoff_limit_count=2)
    )
    engine = engine_with(gpu_queue("a", 2, cohort=None), configuration=config)
    engine.submit(workload("a", "w", 2))
    engine.schedule(0)
    assert engine.evict("a/w", EvictionReason.PODS_READY_TIMEOUT, 10).requeue_at == 70
    assert engine.schedule(69) == []
    assert engine.status("a/w").state is WorkloadState.BACKOFF
    assert admitted(engine.schedule(70)) == ["a/w"]
    assert engine.evict("a/w", EvictionReason.PODS_READY_TIMEOUT, 80).requeue_at == 180  # 120 capped at 100
    engine.schedule(180)
    eviction = engine.evict("a/w", EvictionReason.PODS_READY_TIMEOUT, 200)
    assert eviction.deactivated  # a third timeout exceeds backoffLimitCount 2


def test_finishing_frees_quota_for_the_next_workload() -> None:
    engine = engine_with(gpu_queue("a", 2, cohort=None))
    engine.submit(workload("a", "first", 2))
    engine.submit(workload("a", "second", 2, at=1))
    assert admitted(engine.schedule(0)) == ["a/first"]
    engine.finish("a/first")
    assert admitted(engine.schedule(5)) == ["a/second"]


def test_restored_admissions_count_against_quota() -> None:
    engine = engine_with(gpu_queue("a", 2, cohort=None))
    engine.submit(workload("a", "probe", 2))
    [decision] = engine.schedule(0)
    assert isinstance(decision, Admission)
    fresh = engine_with(gpu_queue("a", 2, cohort=None))
    fresh.restore_admitted(workload("a", "probe", 2), "a", decision.pod_sets, 0)
    fresh.submit(workload("a", "next", 1, at=1))
    assert fresh.schedule(1) == []


def test_a_pods_ready_backoff_read_back_from_the_api_keeps_its_count_and_its_wait() -> None:
    """A restarted controller restores requeueState: the workload waits out its backoff, and its count goes on."""
    config = Configuration(wait_for_pods_ready=WaitForPodsReady(backoff_base_seconds=60, backoff_limit_count=2))
    engine = engine_with(gpu_queue("a", 2, cohort=None), configuration=config)
    engine.submit(workload("a", "w", 2))
    engine.restore_requeue_state("a/w", 2, 100.0)
    assert engine.status("a/w").state is WorkloadState.BACKOFF
    assert engine.next_wakeup() == 100.0
    assert engine.schedule(99) == []
    assert admitted(engine.schedule(100)) == ["a/w"]
    assert engine.evict("a/w", EvictionReason.PODS_READY_TIMEOUT, 110).deactivated  # the third timeout
