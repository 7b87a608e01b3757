from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

import pytest

from benchmarks.workloads.kueue_harness import HarnessSpec, harness_arrivals, harness_config, harness_workloads
from benchmarks.workloads.manifests import workload_manifest
from kuota.simulator.errors import SourceSpecError
from tests.unit.benchmarks.workloads.simulate_contract import reference_problems, stream_problems

TWO_QUEUES = HarnessSpec(cohorts=1, queues_per_cohort=2)
CLASSES = {"small": (350, 0.1, 0.2, 50, "1"), "medium": (100, 0.5, 0.5, 100, "5"), "large": (50, 1.2, 1.0, 200, "20")}


def test_the_baseline_is_15000_workloads_500_per_queue() -> None:
    arrivals = list(harness_arrivals())
    assert len(arrivals) == 15_000 == HarnessSpec().total_workloads
    per_queue = Counter((a.workload["namespace"], a.workload_class) for a in arrivals)
    assert len({namespace for namespace, _ in per_queue}) == 30
    assert all(count == CLASSES[workload_class][0] for (_, workload_class), count in per_queue.items())


def test_each_class_arrives_every_interval_starting_one_interval_in() -> None:
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for arrival in harness_arrivals():
        times[(arrival.workload["namespace"], arrival.workload_class)].append(arrival.submit_at)
    for (_, workload_class), seen in times.items():
        count, interval, _, _, _ = CLASSES[workload_class]
        assert seen == pytest.approx([(i + 1) * interval for i in range(count)], abs=1e-9)


def test_classes_carry_kueues_runtime_cpu_and_priority() -> None:
    config = harness_config()
    priorities = {
        obj["metadata"]["name"]: obj["value"] for obj in config.objects if obj["kind"] == "WorkloadPriorityClass"
    }
    for arrival in harness_arrivals():
        _, _, runtime, priority, cpu = CLASSES[arrival.workload_class]
        workload = arrival.workload
        assert workload["duration"] == runtime
        assert workload["podSets"][0]["count"] == 1
        assert workload["podSets"][0]["requests"] == {"cpu": cpu}
        assert priorities[str(workload["priorityClass"])] == priority
        assert workload["submitAt"] == arrival.submit_at


def test_config_is_5_cohorts_of_6_queues_with_kueues_quota_and_preemption() -> None:
    config = harness_config()
    cluster_queues = [obj for obj in config.objects if obj["kind"] == "ClusterQueue"]
    assert Counter(cq["spec"]["cohortName"] for cq in cluster_queues) == {f"cohort-{c}": 6 for c in range(5)}
    for cq in cluster_queues:
        assert cq["spec"]["namespaceSelector"] == {}
        assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
        assert cq["spec"]["resourceGroups"] == [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 20, "borrowingLimit": 100}]}],
            }
        ]
    assert len(config.queues) == 30


def test_every_harness_line_satisfies_the_contract_and_names_config_objects() -> None:
    workloads = list(harness_workloads())
    assert stream_problems(workloads) == []
    assert reference_problems(harness_config().objects, workloads) == []


def test_without_jitter_the_seed_changes_nothing() -> None:
    one, two = replace(TWO_QUEUES, seed=1), replace(TWO_QUEUES, seed=2)
    assert list(harness_arrivals(one)) == list(harness_arrivals(two))


def test_jitter_is_reproducible_per_seed_and_bounded() -> None:
    first = list(harness_arrivals(replace(TWO_QUEUES, seed=7, jitter_ms=50)))
    assert first == list(harness_arrivals(replace(TWO_QUEUES, seed=7, jitter_ms=50)))
    assert first != list(harness_arrivals(replace(TWO_QUEUES, seed=8, jitter_ms=50)))
    assert stream_problems(arrival.workload for arrival in first) == []
    exact = {(a.workload["namespace"], a.workload["name"]): a.submit_at for a in harness_arrivals(TWO_QUEUES)}
    delays = [a.submit_at - exact[(a.workload["namespace"], a.workload["name"])] for a in first]
    assert min(delays) >= 0
    assert max(delays) <= 0.05 + 1e-9


def test_a_harness_workload_renders_as_a_live_workload_object() -> None:
    arrival = next(a for a in harness_arrivals() if a.workload_class == "large")
    manifest = workload_manifest(arrival.workload, priority_values={"large": 200})
    assert manifest["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert manifest["metadata"] == {"name": "large-2-0-0", "namespace": "cq-0-0-cohort-0"}
    assert manifest["spec"]["queueName"] == "cq-0-0-cohort-0"
    assert manifest["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "large",
    }
    assert manifest["spec"]["priority"] == 200
    [pod_set] = manifest["spec"]["podSets"]
    assert pod_set["count"] == 1
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "20"}}


def test_a_live_workload_needs_the_value_of_its_priority_class() -> None:
    workload = next(harness_workloads())
    with pytest.raises(SourceSpecError, match="priorityClass 'small' has no value"):
        workload_manifest(workload, priority_values={})


def test_an_empty_harness_is_refused() -> None:
    with pytest.raises(SourceSpecError, match="cohorts must be at least 1"):
        HarnessSpec(cohorts=0)
