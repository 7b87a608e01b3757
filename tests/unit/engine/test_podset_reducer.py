"""Partial admission of several pod sets, as Kueue's order-based reducer searches (``podset_reducer.go``, main):
the cases of Kueue's ``podset_reducer_test.go``, the probes it makes in its order, and the counts the engine
admits for multi-pod-set workloads with minCount."""

from __future__ import annotations

from collections.abc import Callable

from kuota.engine.flavor_assignment import reduce_counts
from kuota.engine.model import PodSet
from kuota.engine.quota_engine import Admission, Decision

from .builders import cluster_queue, engine_with, flavor, quota, workload

INT32_MAX = 2**31 - 1


def _pod_sets(*sizes: tuple[int, int | None]) -> tuple[PodSet, ...]:
    return tuple(PodSet(f"ps{i}", count, {"nvidia.com/gpu": 1}, low) for i, (count, low) in enumerate(sizes))


# KEP-420's example: ps0 cannot shrink, ps1 may go from 4 to 2, ps2 from 20 to 10 (25 pods requested).
KEP = _pod_sets((1, None), (4, 2), (20, 10))


def _reduce(pod_sets: tuple[PodSet, ...], ok: Callable[[tuple[int, ...]], bool]) -> tuple[int, ...] | None:
    return reduce_counts(pod_sets, lambda counts: counts if ok(counts) else None)


def test_the_last_pod_set_drains_to_its_minimum_before_the_previous_one_is_cut() -> None:
    """Kueue ``TestOrderedReduce``: "last podset drains to its minimum before the previous one is touched"."""
    assert _reduce(_pod_sets((10, 6), (10, 8)), lambda c: sum(c) <= 16) == (8, 8)


def test_kep_scenario_a_only_the_last_pod_set_is_cut_and_only_as_far_as_needed() -> None:
    """Kueue ``TestOrderedReduce``: "KEP scenario A" (one pool of 19 for the 25 requested)."""
    assert _reduce(KEP, lambda c: sum(c) <= 19) == (1, 4, 14)


def test_kep_scenario_b_the_cut_spills_into_the_previous_pod_set() -> None:
    """Kueue ``TestOrderedReduce``: "KEP scenario B" (one pool of 13)."""
    assert _reduce(KEP, lambda c: sum(c) <= 13) == (1, 2, 10)


def test_kep_scenario_c_a_pod_set_without_min_count_blocks_the_search() -> None:
    """Kueue ``TestOrderedReduce``: "KEP scenario C" (one pool of 10: even every minimum is 13)."""
    assert _reduce(KEP, lambda c: sum(c) <= 10) is None


def test_kep_scenario_d_a_pod_set_drained_for_anothers_sake_is_restored_in_full() -> None:
    """Kueue ``TestOrderedReduce``: "KEP scenario D" (ps1 capped at 2, ps2 has room for its full 20)."""
    assert _reduce(KEP, lambda c: c[1] <= 2 and c[2] <= 20) == (1, 2, 20)


def test_a_pod_set_whose_own_room_is_partly_taken_is_given_back_only_as_far_as_it_fits() -> None:
    """Kueue ``TestOrderedReduce``: "a podset whose own capacity is partly exhausted is given back only as far
    as it fits"."""
    assert _reduce(KEP, lambda c: c[1] <= 2 and c[2] <= 15) == (1, 2, 15)


def test_nothing_is_found_when_no_pod_set_may_shrink() -> None:
    """Kueue ``TestOrderedReduce``: "no podset has room to shrink"."""
    assert _reduce(_pod_sets((5, None)), lambda c: True) is None


def test_a_budget_past_int32_is_searched_whole() -> None:
    """Kueue ``TestReduceTotalDeltaLarge``: two pod sets of 2^31-1 and one of 1, all down to 0, room for 1."""
    pod_sets = _pod_sets((INT32_MAX, 0), (INT32_MAX, 0), (1, 0))
    assert _reduce(pod_sets, lambda c: sum(c) <= 1) == (1, 0, 0)


def test_the_probes_are_kueues_in_its_order_shrink_then_give_back() -> None:
    """The counts Kueue probes for KEP scenario D: ``sort.Search`` over budgets 0..12, then the give-back
    (ps1 to 4, then to 3; ps2 to 20 at once); the result is the last admissible probe's."""
    probes: list[tuple[int, ...]] = []

    def admissible(counts: tuple[int, ...]) -> tuple[int, ...] | None:
        probes.append(counts)
        return counts if counts[1] <= 2 else None

    assert reduce_counts(KEP, admissible) == (1, 2, 20)
    assert probes == [(1, 4, 14), (1, 4, 10), (1, 2, 10), (1, 3, 10), (1, 4, 10), (1, 3, 10), (1, 2, 20)]


def test_one_cut_pod_set_is_not_given_back() -> None:
    """Kueue ``TestGiveBack``: "one reduced podset: the pass is skipped" (only the search probes)."""
    probes: list[tuple[int, ...]] = []

    def admissible(counts: tuple[int, ...]) -> tuple[int, ...] | None:
        probes.append(counts)
        return counts if counts[0] <= 3 else None

    assert reduce_counts(_pod_sets((10, 1)), admissible) == (3,)
    assert probes == [(5,), (2,), (3,), (4,)]


def _admitted_counts(decisions: list[Decision]) -> dict[str, tuple[tuple[int, str], ...]]:
    return {
        d.workload: tuple((p.count, p.flavors["nvidia.com/gpu"]) for p in d.pod_sets)
        for d in decisions
        if isinstance(d, Admission)
    }


def test_a_multi_pod_set_workload_is_cut_from_its_last_pod_set_as_in_kueue() -> None:
    """KEP-420 scenario A through the engine: 19 GPUs for 25 one-GPU pods; Kueue cuts ps2 alone, to 14 (a
    common step over every pod set's slack would give 1, 3, 15)."""
    engine = engine_with(cluster_queue("team", {"gpu": [quota("nvidia.com/gpu", 19)]}))
    engine.submit(workload("team", "ray", pod_sets=KEP))
    assert _admitted_counts(engine.schedule(0.0)) == {"team/ray": ((1, "gpu"), (4, "gpu"), (14, "gpu"))}


def test_a_pod_set_cut_for_another_flavors_sake_gets_its_full_count_back() -> None:
    """KEP-420 scenario D through the engine: ps1's flavor has room for 2 of its 4 pods, ps2's for all 20. The
    search drains ps2 to 10 before it cuts ps1; the give-back restores ps2 to 20."""
    engine = engine_with(
        flavor("reserved", {"pool": "reserved"}),
        flavor("spot", {"pool": "spot"}),
        cluster_queue(
            "team", {"reserved": [quota("nvidia.com/gpu", 3)], "spot": [quota("nvidia.com/gpu", 20)]}, cohort=None
        ),
    )
    pod_sets = (
        PodSet("head", 1, {"nvidia.com/gpu": 1}),
        PodSet("reserved", 4, {"nvidia.com/gpu": 1}, 2, {"pool": "reserved"}),
        PodSet("spot", 20, {"nvidia.com/gpu": 1}, 10, {"pool": "spot"}),
    )
    engine.submit(workload("team", "ray", pod_sets=pod_sets))
    assert _admitted_counts(engine.schedule(0.0)) == {"team/ray": ((1, "reserved"), (2, "reserved"), (20, "spot"))}
