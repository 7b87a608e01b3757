"""Pod-template topology annotations: the pod set's topologyRequest (after Kueue's ``TestPodSetTopologyRequestBuilder``,
tas_test.go), the webhook's checks with Kueue's messages (``ValidateTASPodSetRequest``, tas_validation.go), and the
ungating of gated pods (topology_ungater_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.webhook.jobs.adapter import PodSet
from kuota.webhook.jobs.topology import (
    GROUP_NAME,
    JOB_INDEX_LABEL,
    PREFERRED,
    REQUIRED,
    SLICE_CONSTRAINTS,
    SLICE_REQUIRED,
    SLICE_SIZE,
    TOPOLOGY_GATE,
    UNCONSTRAINED,
    annotation_errors,
    group_errors,
    pod_set_errors,
    topology_request,
    ungate_patch,
    ungating_plan,
)

RACK = "cloud.com/topology-rack"
HOST = "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("annotations", "wanted"),
    [
        ({}, None),
        ({REQUIRED: RACK}, {"required": RACK}),
        ({PREFERRED: RACK, GROUP_NAME: "g"}, {"preferred": RACK, "podSetGroupName": "g"}),
        ({UNCONSTRAINED: "true"}, {"unconstrained": True}),
        ({SLICE_REQUIRED: HOST, SLICE_SIZE: "4"}, {"podSetSliceRequiredTopology": HOST, "podSetSliceSize": 4}),
        (
            {REQUIRED: RACK, SLICE_REQUIRED: HOST, SLICE_SIZE: "2"},
            {"required": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 2},
        ),
    ],
)
def test_annotations_give_the_pod_sets_topology_request(
    annotations: dict[str, str], wanted: dict[str, Any] | None
) -> None:
    assert annotation_errors(annotations, "spec.template.metadata") == []
    assert topology_request(annotations) == wanted


def test_the_workload_pod_set_carries_the_request() -> None:
    template = {"metadata": {"annotations": {REQUIRED: RACK}}, "spec": {"containers": []}}
    assert PodSet("main", 2, template).manifest()["topologyRequest"] == {"required": RACK}
    assert "topologyRequest" not in PodSet("main", 2, {"spec": {"containers": []}}).manifest()


@pytest.mark.parametrize(
    ("annotations", "wanted"),
    [
        (
            {REQUIRED: RACK, PREFERRED: RACK},
            'm.annotations: Invalid value: must not contain more than one topology annotation: ["'
            + REQUIRED
            + '", "'
            + PREFERRED
            + '", "'
            + UNCONSTRAINED
            + '"]',
        ),
        ({UNCONSTRAINED: "yes"}, f"m.annotations[{UNCONSTRAINED}]: Invalid value: 'yes': must be a boolean value"),
        (
            {SLICE_REQUIRED: HOST},
            f"m.annotations[{SLICE_SIZE}]: Required value: must be set when '{SLICE_REQUIRED}' is specified",
        ),
        (
            {REQUIRED: RACK, SLICE_REQUIRED: HOST, SLICE_SIZE: "0"},
            f"m.annotations[{SLICE_SIZE}]: Invalid value: '0': must be greater than or equal to 1",
        ),
        (
            {UNCONSTRAINED: "true", GROUP_NAME: "g"},
            f"m.annotations[{GROUP_NAME}]: Forbidden: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is "
            "specified",
        ),
        ({REQUIRED: RACK, GROUP_NAME: "12"}, f"m.annotations[{GROUP_NAME}]: Invalid value: '12': must not be a number"),
    ],
)
def test_bad_annotations_are_refused_in_kueues_words(annotations: dict[str, str], wanted: str) -> None:
    assert annotation_errors(annotations, "m") == [wanted]


def _pod(
    name: str, *, gated: bool = True, index: int | None = None, selector: dict[str, str] | None = None
) -> dict[str, Any]:
    labels = {} if index is None else {JOB_INDEX_LABEL: str(index)}
    spec: dict[str, Any] = {"nodeSelector": selector or {}}
    if gated:
        spec["schedulingGates"] = [{"name": TOPOLOGY_GATE}]
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def test_gated_pods_fill_each_domain_in_order_after_those_already_sent() -> None:
    # Kueue's "two pods, one already ungated, second to ungate" (topology_ungater_test.go), over two domains
    levels = (HOST,)
    domains = ((("n1",), 2), (("n2",), 1))
    pods = [_pod("a", gated=False, selector={HOST: "n1"}), _pod("c"), _pod("b")]
    plan = ungating_plan(levels, domains, pods, JOB_INDEX_LABEL)
    assert [(pod["metadata"]["name"], labels) for pod, labels in plan] == [("b", {HOST: "n1"}), ("c", {HOST: "n2"})]


def test_indexed_pods_go_to_the_domain_of_their_rank() -> None:
    # Kueue's "ranks: ungate pods according to their ranks for batch/Job - for all Pods"
    domains = ((("r1", "n1"), 1), (("r1", "n2"), 1))
    pods = [_pod("p0", index=1), _pod("p1", index=0)]
    plan = ungating_plan((RACK, HOST), domains, pods, JOB_INDEX_LABEL)
    assert [(pod["metadata"]["name"], labels[HOST]) for pod, labels in plan] == [("p0", "n2"), ("p1", "n1")]


def test_the_ungate_patch_lifts_only_the_topology_gate_and_adds_the_domain() -> None:
    pod = _pod("p", selector={"gpu-type": "h100"})
    pod["spec"]["schedulingGates"].append({"name": "other"})
    assert ungate_patch(pod, {HOST: "n1"}) == {
        "spec": {"schedulingGates": [{"name": "other"}], "nodeSelector": {"gpu-type": "h100", HOST: "n1"}}
    }


def test_repeated_ranks_fall_back_to_filling_domains_in_order() -> None:
    # Kueue's "ranks: gracefully handle situation with repeated ranks"
    domains = ((("r1", "n1"), 1), (("r1", "n2"), 1))
    pods = [_pod("p0", index=0), _pod("p1", index=0)]
    plan = ungating_plan((RACK, HOST), domains, pods, JOB_INDEX_LABEL)
    assert [(pod["metadata"]["name"], labels[HOST]) for pod, labels in plan] == [("p0", "n1"), ("p1", "n2")]


LEADER = "pod set leader: template.metadata"
WORKERS = "pod set workers: template.metadata"


def test_a_leader_and_workers_asking_the_same_level_make_a_sound_group() -> None:
    # Kueue's ValidatePodSetGroupingTopology (tas_validation.go): "valid group" shapes
    grouped = {REQUIRED: RACK, GROUP_NAME: "g"}
    assert group_errors([(LEADER, 1, grouped), (WORKERS, 4, grouped), ("pod set other: m", 3, {})]) == []


def test_a_group_of_one_pod_set_is_refused_in_kueues_words() -> None:
    assert group_errors([(LEADER, 1, {REQUIRED: RACK, GROUP_NAME: "g"})]) == [
        f"{LEADER}.annotations[{GROUP_NAME}]: Invalid value: 'g': can only define groups of exactly 2 pod sets, "
        "got: 1 pod set(s)"
    ]


def test_a_group_without_a_one_pod_leader_is_refused_on_both_pod_sets() -> None:
    grouped = {PREFERRED: RACK, GROUP_NAME: "g"}
    wanted = (
        "Invalid value: 'g': can only define groups where at least one pod set has only 1 replica, got: 2 replica(s) "
        "and 3 replica(s) in the group"
    )
    assert group_errors([(LEADER, 2, grouped), (WORKERS, 3, grouped)]) == [
        f"{LEADER}.annotations[{GROUP_NAME}]: {wanted}",
        f"{WORKERS}.annotations[{GROUP_NAME}]: {wanted}",
    ]


@pytest.mark.parametrize(
    "workers", [{PREFERRED: RACK, GROUP_NAME: "g"}, {REQUIRED: HOST, GROUP_NAME: "g"}, {GROUP_NAME: "g"}]
)
def test_a_group_asking_two_levels_is_refused_naming_the_other_pod_set(workers: dict[str, str]) -> None:
    consistent = f"must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with"
    assert group_errors([(LEADER, 1, {REQUIRED: RACK, GROUP_NAME: "g"}), (WORKERS, 4, workers)]) == [
        f"{LEADER}.annotations: Invalid value: {consistent} '{WORKERS}.annotations' in group 'g'",
        f"{WORKERS}.annotations: Invalid value: {consistent} '{LEADER}.annotations' in group 'g'",
    ]


LAYERS = f'[{{"topology": "{RACK}", "size": 4}}, {{"topology": "{HOST}", "size": 2}}]'


def test_layers_of_slices_give_the_pod_sets_constraints() -> None:
    # Kueue's podSetTopologyRequestBuilder with TASMultiLayerTopology (on by default since v0.19)
    annotations = {REQUIRED: "example.com/block", SLICE_CONSTRAINTS: LAYERS}
    assert annotation_errors(annotations, "m") == []
    assert topology_request(annotations) == {
        "required": "example.com/block",
        "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 4}, {"topology": HOST, "size": 2}],
    }


BLOCK = "cloud.com/block"
RACK_16 = '{"topology": "cloud.com/rack", "size": 16}'


@pytest.mark.parametrize(
    ("annotations", "wanted"),
    [
        pytest.param(
            {REQUIRED: BLOCK, SLICE_REQUIRED: "cloud.com/rack", SLICE_SIZE: "16", SLICE_CONSTRAINTS: f"[{RACK_16}]"},
            [
                f"m.annotations[{SLICE_CONSTRAINTS}]: Forbidden: may not be set when '{SLICE_REQUIRED}' is specified",
                f"m.annotations[{SLICE_CONSTRAINTS}]: Forbidden: may not be set when '{SLICE_SIZE}' is specified",
            ],
            id="invalid: mutual exclusivity with podset-slice-required-topology",
        ),
        pytest.param(
            {REQUIRED: BLOCK, SLICE_CONSTRAINTS: f"[{RACK_16}]", GROUP_NAME: "group1"},
            [f"m.annotations[{GROUP_NAME}]: Forbidden: may not be set when '{SLICE_CONSTRAINTS}' is specified"],
            id="invalid: with podset-group-name",
        ),
        pytest.param(
            {REQUIRED: BLOCK, SLICE_CONSTRAINTS: "[]"},
            [
                f"m.annotations[{SLICE_CONSTRAINTS}]: Invalid value: '[]': topology constraints must contain between "
                "1 and 3 entries"
            ],
            id="invalid: empty array",
        ),
        pytest.param(
            {REQUIRED: BLOCK, SLICE_CONSTRAINTS: f'[{RACK_16}, {{"topology": "cloud.com/rack", "size": 4}}]'},
            [f'm.annotations[{SLICE_CONSTRAINTS}][1].topology: Duplicate value: "cloud.com/rack (also at index 0)"'],
            id="invalid: duplicate topology labels",
        ),
        pytest.param(
            {REQUIRED: BLOCK, SLICE_CONSTRAINTS: f'[{RACK_16}, {{"topology": "{HOST}", "size": 5}}]'},
            [
                f"m.annotations[{SLICE_CONSTRAINTS}][1].size: Invalid value: 5: must evenly divide the parent layer "
                "size 16"
            ],
            id="invalid: size does not divide parent",
        ),
        pytest.param(
            {REQUIRED: BLOCK, SLICE_CONSTRAINTS: '[{"topology": "cloud.com/rack", "size": 0}]'},
            [f"m.annotations[{SLICE_CONSTRAINTS}][0].size: Invalid value: 0: must be greater than or equal to 1"],
            id="invalid: size less than 1",
        ),
    ],
)
def test_bad_layers_of_slices_are_refused_in_kueues_words(annotations: dict[str, str], wanted: list[str]) -> None:
    # Kueue's TestValidateSliceRequiredTopologyConstraints (tas_validation_test.go), case by case (the ids)
    assert annotation_errors(annotations, "m") == wanted


def test_layers_that_are_not_json_are_refused_in_one_line() -> None:
    # "invalid: not valid JSON"
    (error,) = annotation_errors({SLICE_CONSTRAINTS: "[{"}, "m")
    assert error.startswith(f"m.annotations[{SLICE_CONSTRAINTS}]: Invalid value: '[{{': must be a valid JSON array")


def test_a_slice_larger_than_its_pod_set_is_refused() -> None:
    # TestValidateSliceSizeAnnotationUpperBound: "valid: PodSetSliceSizeAnnotation within bound", "invalid:
    # PodSetSliceSizeAnnotation exceeds pod count", "valid: multi-layer outermost size within bound", "invalid:
    # multi-layer outermost size exceeds pod count"
    sliced = {REQUIRED: BLOCK, SLICE_REQUIRED: "cloud.com/rack", SLICE_SIZE: "16"}
    layered = {REQUIRED: BLOCK, SLICE_CONSTRAINTS: f"[{RACK_16}]"}
    assert pod_set_errors([(WORKERS, 16, sliced), (LEADER, 32, layered)]) == []
    assert pod_set_errors([(WORKERS, 8, sliced), (LEADER, 8, layered)]) == [
        f"{WORKERS}.annotations[{SLICE_SIZE}]: Invalid value: '16': must not be greater than pod set count 8",
        f"{LEADER}.annotations[{SLICE_CONSTRAINTS}]: Invalid value: 16: must not be greater than pod set count 8",
    ]


def test_layers_nested_too_deep_to_read_are_one_line_too() -> None:
    (error,) = annotation_errors({SLICE_CONSTRAINTS: "[" * 100_000}, "m")
    assert error.startswith(f"m.annotations[{SLICE_CONSTRAINTS}]: Invalid value: ")
    assert "must be a valid JSON array" in error
