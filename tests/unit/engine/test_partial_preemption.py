"""Partial admission (minCount) that preempts, as Kueue's reducer: a smaller count may be admitted once
victims the policy allows are gone, when the full count can be admitted neither now nor by preempting."""

from __future__ import annotations

from kuota.engine.quota_engine import Admission, Eviction

from .builders import admitted, engine_with, evicted, gpu_queue, workload

LOWER = {"withinClusterQueue": "LowerPriority"}


def _counts(decisions: list[Admission | Eviction]) -> dict[str, int]:
    return {d.workload: sum(p.count for p in d.pod_sets) for d in decisions if isinstance(d, Admission)}


def test_a_smaller_count_is_admitted_by_preempting_a_lower_priority_workload_in_its_queue() -> None:
    engine = engine_with(gpu_queue("team", 4, cohort=None, preemption=LOWER))
    engine.submit(workload("team", "low", 2, priority=0))
    engine.submit(workload("team", "high", 2, priority=5, at=1.0))
    assert sorted(admitted(engine.schedule(1.0))) == ["team/high", "team/low"]
    # 4 pods of 1 GPU: all 4 would need "high" gone too, which outranks it; 3 do not fit either; 2 do once
    # "low" is preempted.
    engine.submit(workload("team", "elastic", 1, priority=3, count=4, min_count=2, at=2.0))
    decisions = engine.schedule(2.0)
    assert evicted(decisions) == ["team/low"]
    assert _counts(decisions) == {"team/elastic": 2}
    assert [d.preempted for d in decisions if isinstance(d, Admission)] == [("team/low",)]


def test_the_full_count_is_preferred_when_preempting_admits_it() -> None:
    engine = engine_with(gpu_queue("team", 4, cohort=None, preemption=LOWER))
    engine.submit(workload("team", "low", 4, priority=0))
    assert admitted(engine.schedule(0.0)) == ["team/low"]
    engine.submit(workload("team", "elastic", 1, priority=3, count=4, min_count=1, at=1.0))
    decisions = engine.schedule(1.0)
    assert evicted(decisions) == ["team/low"]
    assert _counts(decisions) == {"team/elastic": 4}


def test_a_smaller_count_within_nominal_quota_reclaims_what_a_borrower_took() -> None:
    reclaim = {"reclaimWithinCohort": "Any"}
    engine = engine_with(gpu_queue("lender", 4, preemption=reclaim), gpu_queue("borrower", 4))
    engine.submit(workload("lender", "own", 2))
    engine.submit(workload("borrower", "big", 6, at=1.0))
    assert admitted(engine.schedule(1.0)) == ["lender/own", "borrower/big"]
    # All 4 pods would put "lender" past its nominal 4, where it may not reclaim; 2 pods stay within it.
    engine.submit(workload("lender", "elastic", 1, count=4, min_count=2, at=2.0))
    decisions = engine.schedule(2.0)
    assert evicted(decisions) == ["borrower/big"]
    assert _counts(decisions) == {"lender/elastic": 2}


def test_no_count_is_admitted_when_no_victim_set_frees_enough_even_for_min_count() -> None:
    engine = engine_with(gpu_queue("team", 4, cohort=None, preemption=LOWER))
    engine.submit(workload("team", "high", 4, priority=5))
    assert admitted(engine.schedule(0.0)) == ["team/high"]
    engine.submit(workload("team", "elastic", 1, priority=3, count=4, min_count=2, at=1.0))
    assert engine.schedule(1.0) == []
    assert engine.status("team/elastic").reason == (
        "needs 4 nvidia.com/gpu in flavor gpu, the most team can ever use is 4 and 4 are in use; "
        "preempting what the ClusterQueue's preemption policy allows would not free enough"
    )


def test_the_smaller_count_preempts_only_the_victims_it_needs() -> None:
    engine = engine_with(gpu_queue("team", 6, cohort=None, preemption=LOWER))
    engine.submit(workload("team", "high", 3, priority=5))
    engine.submit(workload("team", "lowest", 1, priority=0))
    engine.submit(workload("team", "low", 2, priority=1))
    assert len(admitted(engine.schedule(0.0))) == 3
    # Pods of 2 GPUs: 3 or 2 pods need more than the 3 GPUs that may be freed; 1 pod needs 2. The search takes
    # "lowest" then "low", then drops "lowest" as freeing it is not needed once "low" is gone.
    engine.submit(workload("team", "elastic", 2, priority=3, count=3, min_count=1, at=1.0))
    decisions = engine.schedule(1.0)
    assert evicted(decisions) == ["team/low"]
    assert _counts(decisions) == {"team/elastic": 1}
