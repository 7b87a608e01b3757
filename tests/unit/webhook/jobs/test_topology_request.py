"""Pod-template topology annotations: the pod set's topologyRequest (Kueue's ``TestPodSetTopologyRequestBuilder``
cases) and the webhook's checks with Kueue's messages (``TestValidateTASPodSetRequest``, tas_validation_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.webhook.jobs.adapter import PodSet
from kuota.webhook.jobs.topology_request import (
    GROUP_NAME,
    PREFERRED,
    REQUIRED,
    SLICE_REQUIRED,
    SLICE_SIZE,
    UNCONSTRAINED,
    annotation_errors,
    topology_request,
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
