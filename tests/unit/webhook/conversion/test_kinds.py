"""v1beta1 <-> v1beta2 conversion of every kind, round trip both ways, modelled on Kueue's own conversion tests
(``apis/kueue/v1beta1/{clusterqueue,localqueue,workload,cohort}_conversion_test.go``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuota.webhook.conversion.errors import UnconvertibleObjectError
from kuota.webhook.conversion.kinds import PRIORITY_CLASS_REF_ANNOTATION, V1BETA1, V1BETA2, convert

GROUP_FLAVORS = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4}]}]
RESOURCE_GROUPS = [{"coveredResources": ["nvidia.com/gpu"], "flavors": GROUP_FLAVORS}]
USAGE = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}]
POD_SET = {"name": "main", "count": 4, "minCount": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}
ADMISSION = {
    "clusterQueue": "research",
    "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "h100"}, "count": 2}],
}


def converted(obj: dict[str, Any], desired_api_version: str) -> dict[str, Any]:
    """``convert`` changes its argument in place: each case converts a copy, so it can compare with the original."""
    return convert(copy.deepcopy(obj), desired_api_version)


def _object(api_version: str, kind: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "x", "uid": "1234", "resourceVersion": "7", "labels": {"team": "a"}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


# (v1beta1 object, the same object in v1beta2): each pair differs exactly where Kueue's versions differ.
PAIRS = {
    "Workload topologyAssignment lists domains in v1beta1, slices in v1beta2 (TestWorkloadConvertTo)": (
        _object(
            V1BETA1,
            "Workload",
            {
                "status": {
                    "admission": {
                        "clusterQueue": "cq",
                        "podSetAssignments": [
                            {
                                "name": "main",
                                "topologyAssignment": {
                                    "levels": ["kubernetes.io/hostname"],
                                    "domains": [{"values": ["node-1"], "count": 1}, {"values": ["node-2"], "count": 1}],
                                },
                            }
                        ],
                    }
                }
            },
            "ns",
        ),
        _object(
            V1BETA2,
            "Workload",
            {
                "status": {
                    "admission": {
                        "clusterQueue": "cq",
                        "podSetAssignments": [
                            {
                                "name": "main",
                                "topologyAssignment": {
                                    "levels": ["kubernetes.io/hostname"],
                                    "slices": [
                                        {
                                            "domainCount": 2,
                                            "valuesPerLevel": [
                                                {"individual": {"prefix": "node-", "roots": ["1", "2"]}}
                                            ],
                                            "podCounts": {"universal": 1},
                                        }
                                    ],
                                },
                            }
                        ],
                    }
                }
            },
            "ns",
        ),
    ),
    "Topology only changes apiVersion": (
        _object(V1BETA1, "Topology", {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
        _object(V1BETA2, "Topology", {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
    ),
    "ClusterQueue spec.cohort is spec.cohortName (TestClusterQueueConvertTo)": (
        _object(V1BETA1, "ClusterQueue", {"spec": {"cohort": "gpu-pool", "resourceGroups": RESOURCE_GROUPS}}),
        _object(V1BETA2, "ClusterQueue", {"spec": {"cohortName": "gpu-pool", "resourceGroups": RESOURCE_GROUPS}}),
    ),
    "LocalQueue status.flavorUsage is status.flavorsUsage (TestLocalQueueConvertTo)": (
        _object(
            V1BETA1,
            "LocalQueue",
            {"spec": {"clusterQueue": "research"}, "status": {"flavorUsage": USAGE, "flavorsReservation": USAGE}},
            "research",
        ),
        _object(
            V1BETA2,
            "LocalQueue",
            {"spec": {"clusterQueue": "research"}, "status": {"flavorsUsage": USAGE, "flavorsReservation": USAGE}},
            "research",
        ),
    ),
    "Workload accumulatedPastExexcutionTimeSeconds spelling (TestWorkloadConversion_RoundTrip)": (
        _object(
            V1BETA1,
            "Workload",
            {
                "spec": {"podSets": [POD_SET], "queueName": "q"},
                "status": {"accumulatedPastExexcutionTimeSeconds": 5400, "admission": ADMISSION},
            },
            "research",
        ),
        _object(
            V1BETA2,
            "Workload",
            {
                "spec": {"podSets": [POD_SET], "queueName": "q"},
                "status": {"accumulatedPastExecutionTimeSeconds": 5400, "admission": ADMISSION},
            },
            "research",
        ),
    ),
    "Workload zero accumulated time is kept, not dropped": (
        _object(V1BETA1, "Workload", {"status": {"accumulatedPastExexcutionTimeSeconds": 0}}, "research"),
        _object(V1BETA2, "Workload", {"status": {"accumulatedPastExecutionTimeSeconds": 0}}, "research"),
    ),
    "Workload WorkloadPriorityClass source is a kueue.x-k8s.io priorityClassRef": (
        _object(
            V1BETA1,
            "Workload",
            {
                "spec": {
                    "priorityClassName": "production-finetune",
                    "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
                    "priority": 10000,
                }
            },
            "research",
        ),
        _object(
            V1BETA2,
            "Workload",
            {
                "spec": {
                    "priorityClassRef": {
                        "group": "kueue.x-k8s.io",
                        "kind": "WorkloadPriorityClass",
                        "name": "production-finetune",
                    },
                    "priority": 10000,
                }
            },
            "research",
        ),
    ),
    "Workload pod PriorityClass source is a scheduling.k8s.io priorityClassRef": (
        _object(
            V1BETA1,
            "Workload",
            {"spec": {"priorityClassName": "high", "priorityClassSource": "scheduling.k8s.io/priorityclass"}},
            "research",
        ),
        _object(
            V1BETA2,
            "Workload",
            {"spec": {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"}}},
            "research",
        ),
    ),
    "Workload priorityClassName without a source keeps the name (Kueue drops it)": (
        _object(V1BETA1, "Workload", {"spec": {"priorityClassName": "high"}}, "research"),
        _object(V1BETA2, "Workload", {"spec": {"priorityClassRef": {"name": "high"}}}, "research"),
    ),
    "Cohort spec.parentName is the same in both (TestCohortConvertFrom)": (
        _object(V1BETA1, "Cohort", {"spec": {"parentName": "org", "resourceGroups": RESOURCE_GROUPS}}),
        _object(V1BETA2, "Cohort", {"spec": {"parentName": "org", "resourceGroups": RESOURCE_GROUPS}}),
    ),
    "ResourceFlavor is the same in both": (
        _object(V1BETA1, "ResourceFlavor", {"spec": {"nodeLabels": {"gpu": "h100"}}}),
        _object(V1BETA2, "ResourceFlavor", {"spec": {"nodeLabels": {"gpu": "h100"}}}),
    ),
    "AdmissionCheck is the same in both": (
        _object(V1BETA1, "AdmissionCheck", {"spec": {"controllerName": "example.com/budget"}}),
        _object(V1BETA2, "AdmissionCheck", {"spec": {"controllerName": "example.com/budget"}}),
    ),
    "Workload status.admissionChecks is the same in both": (
        _object(V1BETA1, "Workload", {"status": {"admissionChecks": [{"name": "budget", "state": "Ready"}]}}, "r"),
        _object(V1BETA2, "Workload", {"status": {"admissionChecks": [{"name": "budget", "state": "Ready"}]}}, "r"),
    ),
    "WorkloadPriorityClass is the same in both": (
        _object(V1BETA1, "WorkloadPriorityClass", {"value": 10000, "description": "fine-tuning"}),
        _object(V1BETA2, "WorkloadPriorityClass", {"value": 10000, "description": "fine-tuning"}),
    ),
}


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_v1beta1_converts_to_its_v1beta2_twin_and_back(case: str) -> None:
    v1beta1, v1beta2 = PAIRS[case]
    sent = copy.deepcopy(v1beta1)
    up = converted(v1beta1, V1BETA2)
    assert up == v1beta2
    assert converted(up, V1BETA1) == v1beta1
    assert v1beta1 == sent, "the input must not be modified"


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_v1beta2_converts_to_its_v1beta1_twin_and_back(case: str) -> None:
    v1beta1, v1beta2 = PAIRS[case]
    down = converted(v1beta2, V1BETA1)
    assert down == v1beta1
    assert converted(down, V1BETA2) == v1beta2


@pytest.mark.parametrize(("field", "alias"), [("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")])
def test_kueues_deprecated_fungibility_names_are_stored_as_may_stop_search(field: str, alias: str) -> None:
    """TestClusterQueueConvertTo's "FlavorFungibility Borrow/Preempt to MayStopSearch"; TryNextFlavor is kept."""
    other = "whenCanPreempt" if field == "whenCanBorrow" else "whenCanBorrow"
    queue = _object(V1BETA1, "ClusterQueue", {"spec": {"flavorFungibility": {field: alias, other: "TryNextFlavor"}}})
    up = converted(queue, V1BETA2)
    assert up["spec"]["flavorFungibility"] == {field: "MayStopSearch", other: "TryNextFlavor"}
    assert converted(up, V1BETA1)["spec"]["flavorFungibility"] == {field: "MayStopSearch", other: "TryNextFlavor"}


def test_v1beta1_admission_checks_are_stored_as_a_strategy_for_every_flavor() -> None:
    """TestClusterQueueConvertTo's "AdmissionChecks to AdmissionChecksStrategy"; the strategy stays one in v1beta1."""
    queue = _object(V1BETA1, "ClusterQueue", {"spec": {"admissionChecks": ["budget", "capacity"]}})
    up = converted(queue, V1BETA2)
    strategy = {"admissionChecks": [{"name": "budget"}, {"name": "capacity"}]}
    assert up["spec"] == {"admissionChecksStrategy": strategy}
    assert converted(up, V1BETA1)["spec"] == {"admissionChecksStrategy": strategy}


def test_an_object_already_in_the_desired_version_comes_back_unchanged() -> None:
    _, queue = PAIRS["ClusterQueue spec.cohort is spec.cohortName (TestClusterQueueConvertTo)"]
    assert converted(queue, V1BETA2) == queue


@pytest.mark.parametrize(
    "reference",
    [
        {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "high"},
        {"group": "scheduling.k8s.io", "name": "high"},
        {"kind": "WorkloadPriorityClass", "name": "high"},
    ],
)
def test_a_priority_class_ref_v1beta1_cannot_express_round_trips_through_an_annotation(
    reference: dict[str, str],
) -> None:
    workload = _object(V1BETA2, "Workload", {"spec": {"priorityClassRef": reference}}, "research")
    down = converted(workload, V1BETA1)
    assert down["spec"] == {"priorityClassName": "high"}
    assert PRIORITY_CLASS_REF_ANNOTATION in down["metadata"]["annotations"]
    assert converted(down, V1BETA2) == workload


def test_a_stashed_reference_is_dropped_once_v1beta1_names_another_class() -> None:
    workload = _object(
        V1BETA2,
        "Workload",
        {"spec": {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "high"}}},
        "research",
    )
    edited = converted(workload, V1BETA1)
    edited["spec"]["priorityClassName"] = "low"
    up = converted(edited, V1BETA2)
    assert up["spec"] == {"priorityClassRef": {"name": "low"}}
    assert "annotations" not in up["metadata"]


@pytest.mark.parametrize(
    "stashed",
    [
        '{"group": "evil.example.com", "kind": "PriorityClass", "name": "high"}',
        '{"kind": "Pod", "name": "high"}',
        '{"name": "high", "extra": 1}',
        "not json",
    ],
)
def test_an_annotation_v1beta2_would_refuse_is_not_restored(stashed: str) -> None:
    workload = _object(V1BETA1, "Workload", {"spec": {"priorityClassName": "high"}}, "research")
    workload["metadata"]["annotations"] = {PRIORITY_CLASS_REF_ANNOTATION: stashed}
    up = converted(workload, V1BETA2)
    assert up["spec"] == {"priorityClassRef": {"name": "high"}}
    assert "annotations" not in up["metadata"]


def test_other_annotations_are_kept_when_the_stash_is_removed() -> None:
    reference = {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "high"}
    workload = _object(V1BETA2, "Workload", {"spec": {"priorityClassRef": reference}}, "research")
    workload["metadata"]["annotations"] = {"owner": "ml-platform"}
    down = converted(workload, V1BETA1)
    assert set(down["metadata"]["annotations"]) == {"owner", PRIORITY_CLASS_REF_ANNOTATION}
    assert converted(down, V1BETA2) == workload


@pytest.mark.parametrize(
    ("obj", "desired", "message"),
    [
        (
            _object(V1BETA1, "ClusterQueue", {}),
            "kueue.x-k8s.io/v1alpha1",
            "desiredAPIVersion 'kueue.x-k8s.io/v1alpha1'",
        ),
        (_object("kueue.x-k8s.io/v1alpha1", "Cohort", {}), V1BETA2, "object apiVersion 'kueue.x-k8s.io/v1alpha1'"),
        (_object(V1BETA1, "MultiKueueCluster", {}), V1BETA2, "object kind 'MultiKueueCluster'"),
        (
            _object(
                V1BETA1,
                "ClusterQueue",
                {"spec": {"admissionChecks": ["a"], "admissionChecksStrategy": {"admissionChecks": [{"name": "b"}]}}},
            ),
            V1BETA2,
            "both spec.admissionChecks and spec.admissionChecksStrategy",
        ),
        (_object(V1BETA1, "ClusterQueue", {"spec": []}), V1BETA2, "ClusterQueue spec must be an object"),
        (
            _object(V1BETA1, "ClusterQueue", {"spec": {"cohort": "a", "cohortName": "b"}}),
            V1BETA2,
            "both spec.cohort and spec.cohortName",
        ),
        (
            _object(V1BETA1, "Workload", {"spec": {"priorityClassSource": "scheduling.k8s.io/priorityclass"}}),
            V1BETA2,
            "spec.priorityClassName is empty",
        ),
        (
            _object(V1BETA1, "Workload", {"spec": {"priorityClassName": "a", "priorityClassSource": "x/y"}}),
            V1BETA2,
            "spec.priorityClassSource must be one of",
        ),
        (_object(V1BETA2, "Workload", {"spec": {"priorityClassRef": "a"}}), V1BETA1, "must be an object"),
    ],
)
def test_what_cannot_be_converted_is_named(obj: dict[str, Any], desired: str, message: str) -> None:
    with pytest.raises(UnconvertibleObjectError) as raised:
        converted(obj, desired)
    assert message in raised.value.message
