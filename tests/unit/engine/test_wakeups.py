"""When a set-aside head is tried again: never later than the one-at-a-time rules would admit it."""

from kuota.engine.model import ClusterQueue, Cohort, FlavorQuotas, ResourceGroup, ResourceQuota
from kuota.engine.quota_engine import WorkloadState
from kuota.engine.quota_tree import QuotaTree

from .builders import admitted, cluster_queue, engine_with, evicted, gpu_queue, quota, workload

GPU = ("gpu", "nvidia.com/gpu")


def _queue(name: str, nominal: int, borrowing: int | None = None, lending: int | None = None) -> ClusterQueue:
    quota = ResourceQuota("nvidia.com/gpu", nominal, borrowing, lending)
    return ClusterQueue(name, (ResourceGroup(("nvidia.com/gpu",), (FlavorQuotas("gpu", (quota,)),)),), "pool")


def test_ceiling_is_what_a_queue_could_have_available_if_the_rest_of_the_tree_used_nothing() -> None:
    tree = QuotaTree(
        {
            "capped": _queue("capped", 4, borrowing=2),
            "lender": _queue("lender", 8, lending=6),
            "free": _queue("free", 4),
        },
        {"pool": Cohort("pool")},
    )
    capped, lender, free = (tree.cluster_queues[name] for name in ("capped", "lender", "free"))
    tree.add_usage("free", {GPU: 4}, 1)
    tree.add_usage("capped", {GPU: 5}, 1)
    # The others' usage limits what is available now, not the ceiling: 4 + 2 borrowable - 5 in use.
    assert (tree.available(capped, GPU), tree.ceiling(capped, GPU)) == (1, 1)
    tree.add_usage("free", {GPU: 4}, -1)
    assert tree.available(capped, GPU) == 1
    # Without a borrowingLimit only the tree's quota bounds it: the guaranteed 2 plus all the pool lends.
    assert tree.ceiling(lender, GPU) == 2 + 4 + 6 + 4
    assert tree.ceiling(free, GPU) == tree.potential_available(free, GPU)
    # Its usage past the guaranteed part is not taken off what the pool could lend: a bound, not the amount.
    tree.add_usage("lender", {GPU: 3}, 1)
    assert (tree.available(lender, GPU), tree.ceiling(lender, GPU)) == (14 - 5 - 1, 14)
    for node in (capped, lender, free):
        assert tree.available(node, GPU) <= tree.ceiling(node, GPU)


def test_a_head_held_by_its_own_borrowing_limit_waits_through_frees_elsewhere_and_goes_when_its_queue_frees() -> None:
    engine = engine_with(gpu_queue("research", 4, borrowing=4), gpu_queue("applied", 8), gpu_queue("inference", 8))
    engine.submit(workload("applied", "a0", 8))
    engine.submit(workload("research", "r0", 4, at=1))
    engine.submit(workload("research", "r1", 4, at=2))
    engine.submit(workload("research", "r2", 4, at=3))
    assert admitted(engine.schedule(0)) == ["applied/a0", "research/r0", "research/r1"]
    assert engine.status("research/r2").state is WorkloadState.PENDING
    # 12 GPUs of the pool are free after this, but research may hold at most 8.
    engine.finish("applied/a0")
    assert admitted(engine.schedule(10)) == []
    engine.submit(workload("inference", "i0", 8, at=11))
    assert admitted(engine.schedule(11)) == ["inference/i0"]
    engine.finish("inference/i0")
    assert admitted(engine.schedule(12)) == []
    engine.finish("research/r0")
    assert admitted(engine.schedule(13)) == ["research/r2"]


def test_a_held_head_still_goes_when_its_queue_frees_before_the_rest_of_the_tree_does() -> None:
    engine = engine_with(gpu_queue("research", 4, borrowing=4), gpu_queue("applied", 4))
    engine.submit(workload("research", "r0", 4))
    engine.submit(workload("research", "r1", 4, at=1))
    engine.submit(workload("research", "r2", 2, at=2))
    assert admitted(engine.schedule(0)) == ["research/r0", "research/r1"]
    engine.finish("research/r0")
    assert admitted(engine.schedule(5)) == ["research/r2"]


def test_a_head_whose_other_shortage_ends_reclaims_what_it_is_short_of_within_nominal_quota() -> None:
    preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    engine = engine_with(
        cluster_queue("cpus", {"gpu": [quota("nvidia.com/gpu", 0), quota("cpu", 2)]}, cohort="pool"),
        cluster_queue(
            "gpus", {"gpu": [quota("nvidia.com/gpu", 2), quota("cpu", 0)]}, cohort="pool", preemption=preemption
        ),
    )
    engine.submit(workload("cpus", "c", requests={"cpu": "2"}))
    engine.submit(workload("cpus", "g", requests={"nvidia.com/gpu": "2"}, at=1))
    assert admitted(engine.schedule(0)) == ["cpus/c", "cpus/g"]  # g borrows all of gpus' GPUs
    # Short of cpu past its nominal quota (0) as well, it may not reclaim yet.
    engine.submit(workload("gpus", "w", requests={"nvidia.com/gpu": "1", "cpu": "2"}, at=2))
    assert engine.schedule(2) == []
    # Once the cpu is free, only the GPU is short, within its nominal quota: it reclaims it from the borrower.
    engine.finish("cpus/c")
    decisions = engine.schedule(3)
    assert (evicted(decisions), admitted(decisions)) == (["cpus/g"], ["gpus/w"])


def test_a_head_is_woken_when_a_resource_it_may_not_reclaim_frees_and_leaves_one_it_may() -> None:
    preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    engine = engine_with(
        cluster_queue(
            "cpus", {"gpu": [quota("nvidia.com/gpu", 0), quota("cpu", 2)]}, cohort="pool", preemption=preemption
        ),
        cluster_queue("gpus", {"gpu": [quota("nvidia.com/gpu", 2), quota("cpu", 0)]}, cohort="pool"),
    )
    engine.submit(workload("gpus", "a", requests={"nvidia.com/gpu": "2"}))
    engine.submit(workload("gpus", "b", requests={"cpu": "2"}, at=1))
    assert admitted(engine.schedule(0)) == ["gpus/a", "gpus/b"]  # b borrows all of cpus' cpu
    # Short of GPUs past its nominal quota (0), it may not reclaim its cpu yet.
    engine.submit(workload("cpus", "w", requests={"nvidia.com/gpu": "1", "cpu": "1"}, at=2))
    assert engine.schedule(2) == []
    # The GPUs free: it may borrow one, and only its cpu, within nominal quota, is short: it reclaims it.
    engine.finish("gpus/a")
    decisions = engine.schedule(3)
    assert (evicted(decisions), admitted(decisions)) == (["gpus/b"], ["cpus/w"])


def test_a_borrower_gives_way_to_a_set_aside_head_of_the_queue_whose_own_borrower_could_not_go() -> None:
    # The scheduler rule (architecture.md): a workload that would borrow gives way to another queue's first
    # workload that can be admitted within its nominal quota. b's borrower hb was passed over for a's la and then
    # no longer fits; c's borrower hc must then give way to b's sb, set aside behind hb, which fits b's quota.
    engine = engine_with(gpu_queue("a", 8), gpu_queue("b", 8), gpu_queue("c", 0))
    engine.submit(workload("a", "a1", 8, priority=5))
    engine.submit(workload("b", "b1", 8, priority=5))
    assert admitted(engine.schedule(0)) == ["a/a1", "b/b1"]
    engine.submit(workload("b", "hb", 16, at=1, priority=3))
    engine.submit(workload("a", "la", 8, at=1))
    engine.submit(workload("b", "sb", 8, at=1))
    engine.submit(workload("c", "hc", 8, at=1, priority=2))
    assert admitted(engine.schedule(1)) == []
    engine.finish("a/a1")
    engine.finish("b/b1")
    assert admitted(engine.schedule(2)) == ["a/la", "b/sb"]
