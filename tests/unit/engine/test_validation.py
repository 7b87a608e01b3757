"""Validation: API-server-style field paths, defaults, and unknown fields as errors."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota.engine.decoding import (
    parse_cluster_queue,
    parse_configuration,
    parse_namespace,
    parse_object,
    parse_workload,
    validate_cluster_queue,
    validate_cohort,
    validate_local_queue,
    validate_resource_flavor,
    validate_workload,
)
from kuota.engine.errors import InvalidObjectError
from kuota.engine.model import (
    ClusterQueue,
    Configuration,
    QueueingStrategy,
    ReclaimPolicy,
    StopPolicy,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
)

from .builders import cluster_queue, flavor, gpu_queue, quota

SEED = Path(__file__).resolve().parents[3] / "kuota" / "simulator" / "seed"
# The guide's manager configuration, verbatim.
GUIDE_CONFIGURATION = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
"""


def _messages(errors: list[Any]) -> list[str]:
    return [str(error) for error in errors]


@pytest.mark.parametrize(
    "name",
    [
        "resourceflavor-h100-ondemand.yaml",
        "clusterqueue-research.yaml",
        "localqueue-research.yaml",
        "workloadpriorityclass-production-finetune.yaml",
    ],
)
def test_the_guide_objects_parse_unchanged(name: str) -> None:
    parse_object(yaml.safe_load((SEED / name).read_text()))


def test_the_guide_configuration_enables_fair_sharing_with_both_strategies() -> None:
    config = parse_object(yaml.safe_load(GUIDE_CONFIGURATION))
    assert isinstance(config, Configuration) and config.fair_sharing is not None
    assert [s.value for s in config.fair_sharing.preemption_strategies] == [
        "LessThanOrEqualToFinalShare",
        "LessThanInitialShare",
    ]


def test_research_queue_parses_with_exact_quota_and_defaults() -> None:
    cq = parse_cluster_queue(
        cluster_queue(
            "research",
            {"h100": [quota("cpu", 180), quota("memory", "1800Gi"), quota("nvidia.com/gpu", 8, borrowing=12)]},
            cohort="gpu-pool",
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        )
    )
    assert isinstance(cq, ClusterQueue)
    gpu = cq.resource_groups[0].flavors[0].resources[2]
    assert (gpu.nominal, gpu.borrowing_limit, gpu.lending_limit) == (8, 12, None)
    assert cq.resource_groups[0].flavors[0].resources[1].nominal == 1800 * 2**30
    assert cq.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert cq.stop_policy is StopPolicy.NONE
    assert cq.flavor_fungibility.when_can_borrow is WhenCanBorrow.MAY_STOP_SEARCH
    assert cq.flavor_fungibility.when_can_preempt is WhenCanPreempt.TRY_NEXT_FLAVOR
    assert cq.preemption.reclaim_within_cohort is ReclaimPolicy.ANY
    assert cq.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_PRIORITY


def test_borrowing_limit_without_cohort_names_the_field() -> None:
    obj = cluster_queue("solo", {"a": [quota("cpu", 1)], "b": [quota("cpu", 1, borrowing=2)]})
    assert _messages(validate_cluster_queue(obj)) == [
        "spec.resourceGroups[0].flavors[1].resources[0].borrowingLimit: must be unset when cohortName is empty"
    ]


def test_lending_limit_above_nominal_is_invalid() -> None:
    errors = _messages(validate_cluster_queue(gpu_queue("a", 4, lending=5)))
    assert errors == [
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: 5: must be less "
        "than or equal to nominalQuota"
    ]


def test_unknown_fields_are_errors_not_dropped() -> None:
    obj = gpu_queue("a", 4)
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borowingLimit"] = 3
    obj["spec"]["queueingStrategy"] = "Fastest"
    errors = _messages(validate_cluster_queue(obj))
    assert (
        "spec.resourceGroups[0].flavors[0].resources[0].borowingLimit: unknown field: remove it, or check its "
        "spelling and indentation" in errors
    )
    assert (
        'spec.queueingStrategy: Unsupported value: "Fastest": supported values: "BestEffortFIFO", "StrictFIFO"'
        in errors
    )


def test_flavor_resources_must_match_covered_resources_in_order() -> None:
    obj = cluster_queue("a", {"f": [quota("memory", 1), quota("cpu", 1)]})
    obj["spec"]["resourceGroups"][0]["coveredResources"] = ["cpu", "memory"]
    errors = _messages(validate_cluster_queue(obj))
    assert errors == [
        "spec.resourceGroups[0].flavors[0].resources: Invalid value: ['memory', 'cpu']: must list the "
        "covered resources ['cpu', 'memory'], in the same order"
    ]


def test_a_flavor_or_resource_in_two_groups_is_a_duplicate() -> None:
    obj = cluster_queue("a", {"f": [quota("cpu", 1)]})
    obj["spec"]["resourceGroups"].append(
        {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [quota("cpu", 1)]}]}
    )
    errors = _messages(validate_cluster_queue(obj))
    assert any(e.startswith('spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"') for e in errors)
    assert any(e.startswith('spec.resourceGroups[1].flavors[0].name: Duplicate value: "f"') for e in errors)


def test_negative_and_malformed_quotas_are_invalid() -> None:
    errors = _messages(validate_cluster_queue(cluster_queue("a", {"f": [quota("cpu", "-1"), quota("mem", "lots")]})))
    assert (
        errors[0] == 'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": must be '
        "greater than or equal to 0"
    )
    assert errors[1].startswith('spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: Invalid value: "lots"')


def test_borrow_within_cohort_needs_reclaim_within_cohort() -> None:
    obj = gpu_queue("a", 4, preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})
    assert _messages(validate_cluster_queue(obj))[0].startswith(
        'spec.preemption: Invalid value: "object": reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never'
    )


def test_parse_raises_with_every_error_and_the_object_name() -> None:
    obj = gpu_queue("bad", 4, cohort=None, borrowing=1, stopPolicy="Pause")
    with pytest.raises(InvalidObjectError) as caught:
        parse_cluster_queue(obj)
    assert caught.value.name == "bad"
    assert len(caught.value.errors) == 2


def test_resource_flavor_limits_and_taint_effects() -> None:
    obj = flavor("f", labels={f"k{i}": "v" for i in range(9)}, taints=[{"key": "x", "effect": "Sometimes"}])
    errors = _messages(validate_resource_flavor(obj))
    assert "spec.nodeLabels: Too many: 9: must have at most 8 items" in errors
    assert any(e.startswith('spec.nodeTaints[0].effect: Unsupported value: "Sometimes"') for e in errors)


def test_namespaced_and_cluster_scoped_metadata() -> None:
    local = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q"},
        "spec": {"clusterQueue": "a"},
    }
    assert _messages(validate_local_queue(local)) == ["metadata.namespace: Required value"]
    cohort = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "c", "namespace": "x"},
        "spec": {"parentName": "c"},
    }
    errors = _messages(validate_cohort(cohort))
    assert "metadata.namespace: Forbidden: not allowed on this type: the object is cluster-scoped" in errors
    assert 'spec.parentName: Invalid value: "c": a Cohort cannot be its own parent' in errors


def test_names_must_be_dns_subdomains() -> None:
    errors = _messages(validate_cluster_queue(gpu_queue("Research_Team", 1)))
    assert errors[0].startswith('metadata.name: Invalid value: "Research_Team": a lowercase DNS-1123 subdomain')


def test_namespaces_always_carry_their_name_label() -> None:
    namespace = parse_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research", "labels": {"team": "r"}}}
    )
    assert namespace.labels == {"team": "r", "kubernetes.io/metadata.name": "research"}


def test_configuration_defaults_and_fair_sharing_presence() -> None:
    config = parse_configuration(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "waitForPodsReady": {"timeout": "10m", "requeuingStrategy": {"backoffLimitCount": 3}},
        }
    )
    assert config.fair_sharing is None
    assert config.wait_for_pods_ready is not None
    assert (
        config.wait_for_pods_ready.timeout_seconds,
        config.wait_for_pods_ready.backoff_base_seconds,
        config.wait_for_pods_ready.backoff_max_seconds,
        config.wait_for_pods_ready.backoff_limit_count,
    ) == (600, 60, 3600, 3)


def _workload_object(**spec: Any) -> dict[str, Any]:
    body = {
        "queueName": "research-queue",
        "podSets": [
            {
                "name": "main",
                "count": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "a",
                                "resources": {
                                    "requests": {"cpu": "16", "memory": "128Gi"},
                                    "limits": {"nvidia.com/gpu": "4"},
                                },
                            },
                            {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
                        ],
                        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "20"}}}],
                    }
                },
            }
        ],
    }
    body.update(spec)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-x-1a2b3", "namespace": "research", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": body,
    }


def test_workload_pod_requests_follow_kubernetes_rules() -> None:
    workload = parse_workload(
        _workload_object(priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "hi"}),
        {"hi": 10000},
    )
    pod_set = workload.pod_sets[0]
    # cpu: max(16 + 0.5 of the containers, 20 of the init container); GPU from the limit alone.
    assert pod_set.requests == {"cpu": 20000, "memory": 128 * 2**30, "nvidia.com/gpu": 4}
    assert (pod_set.count, workload.priority, workload.priority_class) == (2, 10000, "hi")
    assert workload.created == 1767225600.0


def test_workload_min_count_cannot_exceed_count() -> None:
    obj = _workload_object()
    obj["spec"]["podSets"][0]["minCount"] = 3
    assert _messages(validate_workload(obj)) == [
        "spec.podSets[0].minCount: Invalid value: 3: must be less than or equal to count"
    ]


def _wait_config(wait: dict[str, Any]) -> Any:
    return parse_configuration(
        {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "waitForPodsReady": wait}
    ).wait_for_pods_ready


def test_wait_for_pods_ready_recovery_defaults_to_the_timeout_and_0s_turns_it_off() -> None:
    defaults = _wait_config({})
    assert (defaults.timeout_seconds, defaults.recovery_timeout_seconds) == (1800, 1800)
    assert (defaults.block_admission, defaults.timestamp) == (False, "Eviction")
    assert _wait_config({"timeout": "5m"}).recovery_timeout_seconds == 300
    assert _wait_config({"timeout": "5m", "recoveryTimeout": "0s"}).recovery_timeout_seconds is None
    chosen = _wait_config(
        {"recoveryTimeout": "1m", "blockAdmission": True, "requeuingStrategy": {"timestamp": "Creation"}}
    )
    assert (chosen.recovery_timeout_seconds, chosen.block_admission, chosen.timestamp) == (60, True, "Creation")


def test_wait_for_pods_ready_refuses_a_negative_timeout_and_an_unknown_timestamp_one_line_each() -> None:
    with pytest.raises(InvalidObjectError) as caught:
        _wait_config({"timeout": "-5s", "recoveryTimeout": "-1m", "requeuingStrategy": {"timestamp": "Admission"}})
    assert [str(error) for error in caught.value.errors] == [
        'waitForPodsReady.timeout: Invalid value: "-5s": must not be negative',
        'waitForPodsReady.recoveryTimeout: Invalid value: "-1m": must not be negative',
        'waitForPodsReady.requeuingStrategy.timestamp: Invalid value: "Admission": must be "Eviction" or "Creation"',
    ]
