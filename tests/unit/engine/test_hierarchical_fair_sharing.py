"""Hierarchical Fair Sharing: each cohort compares its children by their own share, as Kueue's tournament does.

Tree for the two-level scenarios (GPUs): org (no quota) holds cohorts left (a1: 2, a2: 2) and right
(b: 2, b2: 2); 8 in all. a2 runs 2 of its own, so 6 are free when a1 asks for 4 and b for 6.
  a1 with its head: borrows 2 of a lendable 8 -> 250; left borrows 2 of 8 -> 250 / left's weight.
  b with its head: borrows 4 of 8 -> 500; right borrows 2 of 8 -> 250 / right's weight.
Comparing ClusterQueues alone, a1 (250) goes before b (500); at org, the cohorts' shares decide.
"""

from __future__ import annotations

from typing import Any

from kuota.engine.model import Configuration, FairSharing
from kuota.engine.quota_engine import QuotaEngine

from .builders import API, admitted, engine_with, gpu_queue, workload

FAIR = Configuration(fair_sharing=FairSharing())


def cohort(name: str, parent: str | None = None, weight: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def two_level(left_weight: str | None, right_weight: str | None) -> QuotaEngine:
    engine = engine_with(
        cohort("org"),
        cohort("left", "org", left_weight),
        cohort("right", "org", right_weight),
        gpu_queue("a1", 2, cohort="left"),
        gpu_queue("a2", 2, cohort="left"),
        gpu_queue("b", 2, cohort="right"),
        gpu_queue("b2", 2, cohort="right"),
        configuration=FAIR,
    )
    engine.submit(workload("a2", "own", 2))
    assert admitted(engine.schedule(0.0)) == ["a2/own"]
    # a1's head is older, so it wins every tie; only 6 GPUs are free, so just one of the two fits.
    engine.submit(workload("a1", "w", 4, at=1.0))
    engine.submit(workload("b", "big", 6, at=2.0))
    return engine


def test_the_cohort_level_share_decides_before_the_cluster_queue_level_one() -> None:
    # right, weighted 3, shares 250 / 3 = 83 at org against left's 250: b goes first though its own share is
    # twice a1's, and then a1's 4 no longer fit.
    engine = two_level(None, "3")
    assert admitted(engine.schedule(3.0)) == ["b/big"]


def test_equal_cohort_shares_fall_back_to_the_order_of_the_heads() -> None:
    # Both cohorts at 250: the tie goes to the older head, a1's, and then b's 6 no longer fit.
    engine = two_level(None, None)
    assert admitted(engine.schedule(3.0)) == ["a1/w"]


def test_a_borrowing_cohort_of_weight_zero_goes_last() -> None:
    engine = two_level("0", None)
    assert admitted(engine.schedule(3.0)) == ["b/big"]


def test_a_flat_cohort_ranks_cluster_queues_by_their_own_weighted_share() -> None:
    # One cohort level: the tournament is the ClusterQueue ranking. q0 (weight 1) and q1 (weight 2) hold 4 GPUs
    # each, idle 3; both run 5, so 1 is free. With 1 more, q0 borrows 2 of 11 -> 181, q1 181 / 2 = 90: q1
    # goes first though its head is newer, and q0's head no longer fits.
    engine = engine_with(
        gpu_queue("q0", 4),
        gpu_queue("q1", 4, fairSharing={"weight": "2"}),
        gpu_queue("idle", 3),
        configuration=FAIR,
    )
    engine.submit(workload("q0", "a", 5))
    engine.submit(workload("q1", "b", 5, at=0.5))
    assert sorted(admitted(engine.schedule(0.0))) == ["q0/a", "q1/b"]
    engine.submit(workload("q0", "c", 1, at=1.0))
    engine.submit(workload("q1", "d", 1, at=2.0))
    assert admitted(engine.schedule(3.0)) == ["q1/d"]
