"""Fair Sharing ranks each queue by its first workload in order, even one set aside earlier."""

from __future__ import annotations

from kuota.engine.decoding import parse_object
from kuota.engine.model import Configuration, FairSharing

from .builders import admitted, engine_with, flavor, gpu_queue, workload
from .reference import ReferenceScheduler

FAIR = Configuration(fair_sharing=FairSharing())


def test_a_set_aside_head_ranks_its_queue_by_its_own_share_at_the_next_instant() -> None:
    fair = Configuration(fair_sharing=FairSharing())
    engine = engine_with(gpu_queue("q0", 4), gpu_queue("q1", 4), configuration=fair)
    for index in range(4):
        engine.submit(workload("q0", f"a{index}"))
    for index in range(3):
        engine.submit(workload("q1", f"b{index}"))
    assert len(admitted(engine.schedule(0.0))) == 7
    # 4 GPUs for q1 when 1 is free: set aside.
    engine.submit(workload("q1", "big", 4, at=1.0))
    assert admitted(engine.schedule(1.0)) == []
    # With its request, q0 would borrow 1 GPU and q1 (ranked by big, its first in order) 3: q0 goes first and
    # takes the last GPU. Ranking q1 by small (borrowing nothing) would have admitted small instead.
    engine.submit(workload("q0", "x", at=2.0))
    engine.submit(workload("q1", "small", at=2.0))
    assert admitted(engine.schedule(2.0)) == ["q0/x"]


def test_a_set_aside_groups_next_member_holds_its_queues_place_while_it_wins_ties_in_share() -> None:
    """Kueue offers each ClusterQueue's workloads in order (``fair_sharing_iterator.go``: lowest share, then
    priority, then queue-order time), so after "big1" fails, "big2" of the same shape still ranks q0: it ties
    with q1's "other" in share and is older, so it goes first (and fails); then "other", older than "small",
    wins the tie and takes the free GPU. Skipping big1's whole group would rank q0 by "small" (share 0), which
    would take the GPU first. Once "other" borrows it, "small", within q0's nominal quota, reclaims it."""
    queues = (gpu_queue("q0", 1, preemption={"reclaimWithinCohort": "Any"}), gpu_queue("q1", 1))
    engine = engine_with(*queues, configuration=FAIR)
    reference = ReferenceScheduler(
        {"gpu": parse_object(flavor("gpu"))},
        {q["metadata"]["name"]: parse_object(q) for q in queues},
        {},
        FAIR,
        {("q0", "q"): "q0", ("q1", "q"): "q1"},
    )
    pending = [
        workload("q0", "big1", 2, at=1.0),
        workload("q1", "other", at=2.0),
        workload("q0", "big2", 2, at=3.0),
        workload("q0", "small", at=4.0),
    ]
    for scheduler in (engine, reference):
        scheduler.submit(workload("q1", "running"))
        assert admitted(scheduler.schedule(0.0)) == ["q1/running"]
        for item in pending:
            scheduler.submit(item)
        decisions = scheduler.schedule(4.0)
        assert [(type(d).__name__, d.workload) for d in decisions] == [
            ("Admission", "q1/other"),
            ("Eviction", "q1/other"),
            ("Admission", "q0/small"),
        ]
