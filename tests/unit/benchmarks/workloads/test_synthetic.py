from __future__ import annotations

import itertools
import random
import tracemalloc
from collections import Counter

import pytest

from benchmarks.workloads.synthetic import (
    MAX_QUEUE_DEMAND,
    MEAN_BURST,
    SyntheticSpec,
    queue_shares,
    synthetic_config,
    synthetic_workloads,
)
from kuota.simulator.errors import SourceSpecError
from kuota.simulator.lines import WorkloadLine
from tests.unit.benchmarks.workloads.simulate_contract import reference_problems, stream_problems

SMALL = SyntheticSpec(workloads=3000, cluster_queues=50, cohorts=5, seed=11)


def gpus(workload: WorkloadLine) -> int:
    [pod_set] = workload["podSets"]
    return pod_set["count"] * int(pod_set["requests"]["nvidia.com/gpu"])


def test_a_stream_has_exactly_the_asked_number_of_valid_workloads() -> None:
    workloads = list(synthetic_workloads(SMALL))
    assert len(workloads) == 3000
    assert stream_problems(workloads) == []
    assert reference_problems(synthetic_config(SMALL).objects, workloads) == []


def test_the_same_seed_gives_the_same_stream_and_another_seed_another() -> None:
    again = SyntheticSpec(workloads=3000, cluster_queues=50, cohorts=5, seed=11)
    other = SyntheticSpec(workloads=3000, cluster_queues=50, cohorts=5, seed=12)
    assert list(synthetic_workloads(SMALL)) == list(synthetic_workloads(again))
    assert list(synthetic_workloads(SMALL)) != list(synthetic_workloads(other))


def test_config_spreads_queues_evenly_over_the_cohorts() -> None:
    spec = SyntheticSpec(workloads=0)
    config = synthetic_config(spec)
    cluster_queues = [obj for obj in config.objects if obj["kind"] == "ClusterQueue"]
    assert len(cluster_queues) == 1000 == len(config.queues)
    assert Counter(cq["spec"]["cohortName"] for cq in cluster_queues) == {f"cohort-{c:03d}": 10 for c in range(100)}


def test_offered_load_is_close_to_the_asked_share_of_all_gpus() -> None:
    spec = SyntheticSpec(workloads=20_000, cluster_queues=100, cohorts=10, seed=3, offered_load=0.9)
    workloads = list(synthetic_workloads(spec))
    gpu_seconds = sum(gpus(w) * w["duration"] for w in workloads)
    load = gpu_seconds / workloads[-1]["submitAt"] / (100 * 8)
    assert 0.8 < load < 1.0


def test_every_cohort_is_offered_its_share_and_no_queue_more_than_it_can_hold() -> None:
    spec = SyntheticSpec(workloads=0, cluster_queues=100, cohorts=10, seed=5)
    shares = queue_shares(spec, random.Random(spec.seed))
    nominal = 1 / spec.cluster_queues
    for cohort in range(spec.cohorts):
        members = shares[cohort :: spec.cohorts]
        assert sum(members) == pytest.approx(len(members) * nominal)
        assert max(members) <= MAX_QUEUE_DEMAND * nominal * (1 + 1e-9)
        assert min(members) < nominal < max(members)  # some queues borrow, others lend
    assert MAX_QUEUE_DEMAND * spec.offered_load < 2  # under nominal + borrowingLimit


def test_a_cohort_over_its_cap_gives_the_excess_to_the_other_queues() -> None:
    spec = SyntheticSpec(workloads=0, cluster_queues=10, cohorts=1, seed=0)

    class Skewed(random.Random):
        """The cohort's first queue draws a weight far above the others'."""

        draws = 0

        def lognormvariate(self, mu: float, sigma: float) -> float:
            self.draws += 1
            return 100.0 if self.draws == 1 else 1.0

    shares = queue_shares(spec, Skewed())
    assert shares[0] == pytest.approx(MAX_QUEUE_DEMAND / 10)
    assert shares[1:] == pytest.approx([(1 - MAX_QUEUE_DEMAND / 10) / 9] * 9)


def test_arrivals_come_in_bursts_of_one_queue_shape_and_priority() -> None:
    workloads = list(synthetic_workloads(SMALL))
    bursts = [list(burst) for _, burst in itertools.groupby(workloads, key=lambda w: (w["submitAt"], w["namespace"]))]
    for burst in bursts:
        assert len({(w["priorityClass"], gpus(w)) for w in burst}) == 1
    assert any(len({w["duration"] for w in burst}) > 1 for burst in bursts)
    assert 0.8 * MEAN_BURST < len(workloads) / len(bursts) < 1.2 * MEAN_BURST


def test_priorities_shapes_and_durations_follow_the_documented_mix() -> None:
    workloads = list(synthetic_workloads(SMALL))
    priorities = Counter(w["priorityClass"] for w in workloads)
    assert priorities["low"] > priorities["normal"] > priorities["high"] > 0
    assert {gpus(w) for w in workloads} == {1, 2, 4, 8}
    assert min(w["duration"] for w in workloads) >= 60
    assert all(isinstance(w["duration"], int) for w in workloads)


def test_a_million_workload_stream_is_generated_lazily() -> None:
    tracemalloc.start()
    try:
        for _ in itertools.islice(synthetic_workloads(SyntheticSpec(workloads=1_000_000)), 5_000):
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024  # one workload at a time, not a million


def test_more_cohorts_than_queues_is_refused() -> None:
    with pytest.raises(SourceSpecError, match="cohorts <= cluster_queues"):
        SyntheticSpec(workloads=10, cluster_queues=5, cohorts=6)


def test_an_offered_load_at_or_over_capacity_is_refused() -> None:
    with pytest.raises(SourceSpecError, match="offered_load must be above 0 and below 1"):
        SyntheticSpec(workloads=10, offered_load=1.0)
