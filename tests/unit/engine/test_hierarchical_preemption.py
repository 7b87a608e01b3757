"""Classic preemption in nested cohorts, as Kueue v0.20 decides it (pkg/scheduler/preemption/classical).

The trees are those of Kueue's TestHierarchicalPreemptions
(pkg/scheduler/preemption/preemption_hierarchical_test.go), on GPUs instead of cpu and with dashes for Kueue's
underscores in names: a Cohort r at the root, a sub-cohort c that owns 2 GPUs, the preemptor's ClusterQueue q
in c with no quota of its own, and borrowers elsewhere in r.
"""

from __future__ import annotations

from typing import Any

from kuota.engine.preemption import PreemptionReason
from kuota.engine.quota_engine import Admission, Eviction, QuotaEngine

from .builders import API, admitted, engine_with, evicted, gpu_queue, workload

GPU = "nvidia.com/gpu"
ANY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def cohort(name: str, parent: str | None = None, gpus: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if gpus is not None:
        spec["resourceGroups"] = [
            {
                "coveredResources": [GPU],
                "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}],
            }
        ]
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _reclaim(engine: QuotaEngine, gpus: int = 2, priority: int = 0) -> list[Eviction | Admission]:
    engine.submit(workload("q", "in", gpus, at=10, priority=priority))
    return [d for d in engine.schedule(10) if isinstance(d, Admission | Eviction)]


def test_a_queue_without_quota_reclaims_its_sub_cohorts_quota_from_a_borrower_elsewhere() -> None:
    """Kueue's case "preempt with hierarchical advantage": q's request fits c's quota, so q has the advantage
    over q-borrowing, which borrows c's 2 GPUs through r; it is reclaimed though q owns nothing itself."""
    engine = engine_with(
        cohort("r"),
        cohort("c", "r", 2),
        gpu_queue("q", 0, cohort="c", preemption=ANY),
        gpu_queue("q-borrowing", 0, cohort="r", preemption=ANY),
    )
    engine.submit(workload("q-borrowing", "admitted2", 2))
    assert admitted(engine.schedule(0)) == ["q-borrowing/admitted2"]
    decisions = _reclaim(engine)
    assert [(type(d).__name__, d.workload) for d in decisions] == [
        ("Eviction", "q-borrowing/admitted2"),
        ("Admission", "q/in"),
    ]
    eviction = decisions[0]
    assert isinstance(eviction, Eviction)
    assert eviction.preemption_reason is PreemptionReason.IN_COHORT_RECLAMATION


def test_reclaim_in_the_hierarchy_takes_borrowers_of_any_priority_under_reclaim_any() -> None:
    """Kueue's case "preempt multiple with hierarchical advantage": both borrowers outrank the preemptor
    (priorities 1 and 2 against 0); with ``reclaimWithinCohort: Any`` the advantage takes both."""
    engine = engine_with(
        cohort("r"),
        cohort("c", "r", 2),
        gpu_queue("q", 0, cohort="c", preemption=ANY),
        gpu_queue("q-borrowing", 0, cohort="r", preemption=ANY),
    )
    engine.submit(workload("q-borrowing", "admitted1", 1, priority=1))
    engine.submit(workload("q-borrowing", "admitted2", 1, priority=2, at=1))
    assert sorted(admitted(engine.schedule(1))) == ["q-borrowing/admitted1", "q-borrowing/admitted2"]
    assert sorted(evicted(_reclaim(engine))) == ["q-borrowing/admitted1", "q-borrowing/admitted2"]


def test_a_queue_within_its_quota_is_never_a_victim_of_hierarchical_reclaim() -> None:
    """Kueue's case "avoid queues within nominal quota": q-nominal runs a lower-priority job inside its own
    quota, q-borrowing borrows; only the borrower is reclaimed (collectCandidatesInSubtree skips the rest)."""
    engine = engine_with(
        cohort("r"),
        cohort("c", "r", 2),
        gpu_queue("q-nominal", 2, cohort="r", preemption=ANY),
        gpu_queue("q", 0, cohort="c", preemption=ANY),
        gpu_queue("q-borrowing", 0, cohort="r", preemption=ANY),
    )
    engine.submit(workload("q-nominal", "admitted1", 2, priority=-10))
    engine.submit(workload("q-borrowing", "admitted2", 2, at=1))
    assert sorted(admitted(engine.schedule(1))) == ["q-borrowing/admitted2", "q-nominal/admitted1"]
    assert evicted(_reclaim(engine)) == ["q-borrowing/admitted2"]


def test_a_borrower_inside_a_sub_cohort_within_its_quota_is_pruned() -> None:
    """collectCandidatesInSubtree descends only into sub-cohorts that use more than their quota: d1 borrows
    from its sibling d2, but d as a whole stays within its 4 GPUs, so d1 is nobody's to reclaim from outside
    d, while q-borrowing, over its quota under r, is."""
    engine = engine_with(
        cohort("r"),
        cohort("c", "r", 2),
        cohort("d", "r"),
        gpu_queue("q", 0, cohort="c", preemption=ANY),
        gpu_queue("d1", 2, cohort="d", preemption=ANY),
        gpu_queue("d2", 2, cohort="d", preemption=ANY),
        gpu_queue("q-borrowing", 0, cohort="r", preemption=ANY),
    )
    engine.submit(workload("d1", "inside-d", 3))
    engine.submit(workload("q-borrowing", "outside", 2, at=1))
    assert sorted(admitted(engine.schedule(1))) == ["d1/inside-d", "q-borrowing/outside"]
    # 5 of 6 in use: q needs 2, so one GPU must be reclaimed; d1's job would do, but only q-borrowing's may go.
    assert evicted(_reclaim(engine)) == ["q-borrowing/outside"]


def test_a_queue_that_may_not_preempt_its_own_still_may_reclaim_in_the_hierarchy() -> None:
    """The flavor assigner's mayReclaimInHierarchy (fitsResourceQuota in pkg/scheduler/flavorassigner): a
    request past q's nominal quota of 0 needs preemption, not no fit, because c's quota covers it."""
    reclaim_only = {"reclaimWithinCohort": "Any"}
    engine = engine_with(
        cohort("r"),
        cohort("c", "r", 2),
        gpu_queue("q", 0, cohort="c", preemption=reclaim_only),
        gpu_queue("q-borrowing", 0, cohort="r", preemption=reclaim_only),
    )
    engine.submit(workload("q-borrowing", "admitted2", 2))
    engine.schedule(0)
    assert evicted(_reclaim(engine)) == ["q-borrowing/admitted2"]


def test_without_the_advantage_a_borrower_of_higher_priority_is_spared() -> None:
    """Where no subtree below the root covers the request (c owns nothing), q has no advantage: it may
    reclaim only within its nominal quota, which it is not, and borrowWithinCohort is off."""
    engine = engine_with(
        cohort("r"),
        cohort("c", "r"),
        gpu_queue("q", 0, cohort="c", preemption=ANY),
        gpu_queue("lender", 2, cohort="r"),
        gpu_queue("q-borrowing", 0, cohort="r", preemption=ANY),
    )
    engine.submit(workload("q-borrowing", "admitted2", 2, priority=5))
    engine.schedule(0)
    assert _reclaim(engine) == []


def test_a_preemptor_back_within_its_nominal_quota_once_its_victims_are_gone_is_not_borrowing() -> None:
    """The borrowing flag is Kueue's FindHeightOfLowestSubtreeThatFits after the victims' removal
    (SimulatePreemption in pkg/scheduler/preemption/preemption_oracle.go): a's 4 GPUs hold a low job, b runs
    its own 4; a's high job needs 4, which fits a's quota once the low one is preempted."""
    engine = engine_with(gpu_queue("a", 4, preemption=ANY), gpu_queue("b", 4, preemption=ANY))
    engine.submit(workload("a", "low", 4, priority=0))
    engine.submit(workload("b", "own", 4))
    engine.schedule(0)
    engine.submit(workload("a", "high", 4, at=1, priority=5))
    decisions = engine.schedule(1)
    assert evicted(decisions) == ["a/low"]
    admission = next(d for d in decisions if isinstance(d, Admission))
    assert admission.workload == "a/high" and admission.borrowing is False
