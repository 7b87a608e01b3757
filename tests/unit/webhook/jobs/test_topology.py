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
    SLICE_REQUIRED,
    SLICE_SIZE,
    TOPOLOGY_GATE,
    UNCONSTRAINED,
    annotation_errors,
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
    plan = ungating_plan(levels, domains, pods)
    assert [(pod["metadata"]["name"], labels) for pod, labels in plan] == [("b", {HOST: "n1"}), ("c", {HOST: "n2"})]


def test_indexed_pods_go_to_the_domain_of_their_rank() -> None:
    # Kueue's "ranks: ungate pods according to their ranks for batch/Job - for all Pods"
    domains = ((("r1", "n1"), 1), (("r1", "n2"), 1))
    pods = [_pod("p0", index=1), _pod("p1", index=0)]
    plan = ungating_plan((RACK, HOST), domains, pods)
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
    plan = ungating_plan((RACK, HOST), domains, pods)
    assert [(pod["metadata"]["name"], labels[HOST]) for pod, labels in plan] == [("p0", "n1"), ("p1", "n2")]
