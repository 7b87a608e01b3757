"""What an admitted pod set's pods start with when it is placed by topology (Kueue's ``podset.FromAssignment``):
the topology gate, the pod set label, the Workload annotation and, for a placement nobody asked for (implied by a
queue whose every flavor is a TAS flavor), the unconstrained annotation."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.webhook.controller.job_reconciler import placements_of
from kuota.webhook.jobs.topology import POD_SET_LABEL, TOPOLOGY_GATE, UNCONSTRAINED, WORKLOAD_ANNOTATION

FLAVORS = {"tas": {"metadata": {"name": "tas"}, "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": "racks"}}}
ASSIGNED = {
    "name": "main",
    "flavors": {"nvidia.com/gpu": "tas"},
    "count": 2,
    "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": []},
}


def workload(request: dict[str, Any] | None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": 2, "template": {"spec": {"containers": []}}}
    if request is not None:
        pod_set["topologyRequest"] = request
    return {"metadata": {"name": "job-a-1234", "namespace": "ns"}, "spec": {"podSets": [pod_set]}}


@pytest.mark.parametrize(
    ("request_", "implied"),
    [
        (None, True),
        ({"podIndexLabel": "batch.kubernetes.io/job-completion-index"}, True),
        ({"required": "example.com/rack"}, False),
        ({"unconstrained": True}, False),
    ],
)
def test_a_pod_set_placed_without_asking_is_annotated_unconstrained(
    request_: dict[str, Any] | None, implied: bool
) -> None:
    (placement,), names = placements_of({"podSetAssignments": [ASSIGNED]}, FLAVORS, {}, workload=workload(request_))  # type: ignore[arg-type]
    assert names == ["tas"]
    assert placement.scheduling_gates == (TOPOLOGY_GATE,)
    assert placement.labels == {POD_SET_LABEL: "main"}
    wanted = {WORKLOAD_ANNOTATION: "job-a-1234"}
    if implied:
        wanted[UNCONSTRAINED] = "true"
    assert placement.annotations == wanted


def test_a_pod_set_without_a_topology_assignment_starts_ungated_and_unmarked() -> None:
    plain = {key: value for key, value in ASSIGNED.items() if key != "topologyAssignment"}
    (placement,), _ = placements_of({"podSetAssignments": [plain]}, FLAVORS, {}, workload=workload(None))  # type: ignore[arg-type]
    assert (placement.scheduling_gates, placement.labels, placement.annotations) == ((), {}, {})
