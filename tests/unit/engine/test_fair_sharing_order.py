"""Fair Sharing ranks each queue by its first workload in order, even one set aside earlier."""

from __future__ import annotations

from kuota.engine.model import Configuration, FairSharing

from .builders import admitted, engine_with, gpu_queue, workload


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
