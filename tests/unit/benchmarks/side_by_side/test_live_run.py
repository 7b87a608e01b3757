"""The pure parts of the live driver: which planned object a Workload stands for, and condition updates."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.side_by_side import kinds
from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.live_run import PlannedObject, origin_key, with_conditions


def test_a_standalone_workload_stands_for_itself() -> None:
    assert origin_key({"metadata": {"namespace": "ns", "name": "small-0-1-0"}}) == "ns/small-0-1-0"


def test_a_job_owned_workload_stands_for_its_job() -> None:
    workload = {
        "metadata": {
            "namespace": "ns",
            "name": "job-small-0-1-0-3f2a1",
            "ownerReferences": [{"kind": "Job", "name": "small-0-1-0", "controller": True}],
        }
    }
    assert origin_key(workload) == "ns/small-0-1-0"


def test_a_workload_stands_for_its_controller_owner_of_any_kind_and_a_pod_groups_for_the_group() -> None:
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js-0", "controller": True}
    assert origin_key({"metadata": {"namespace": "ns", "name": "jobset-js-0-1a2b3", "ownerReferences": [owner]}}) == (
        "ns/js-0"
    )
    pods = [{"apiVersion": "v1", "kind": "Pod", "name": f"pg-0-driver-{i}"} for i in range(2)]
    assert origin_key({"metadata": {"namespace": "ns", "name": "pg-0", "ownerReferences": pods}}) == "ns/pg-0"


def test_a_pod_groups_planned_object_creates_each_pod_and_only_a_standalone_workload_is_executed() -> None:
    pods = kinds.pod_group("pg-0", "ns", "queue", "p1", 5)
    group = PlannedObject("ns/pg-0", 0.0, "scenario", 5.0, None, {"apiVersion": "v1", "kind": "List", "items": pods})
    assert [obj["metadata"]["name"] for obj in group.objects] == ["pg-0-driver-0", "pg-0-workers-0", "pg-0-workers-1"]
    assert not group.is_standalone
    job_set = kinds.jobset("js-0", "ns", "queue", "p1", 5)
    assert PlannedObject("ns/js-0", 0.0, "scenario", 5.0, None, job_set).objects == [job_set]


def test_each_kind_asks_the_scenarios_cpu_in_all() -> None:
    for kind in (kinds.JOBSET, kinds.POD_GROUP):
        assert sum(shape.count * shape.cpu for shape in kinds.pod_sets(kind, 5)) == 5
    assert [(s.name, s.count, s.cpu) for s in kinds.pod_sets(kinds.RAYJOB, 10)] == [
        ("head", 1, 1),
        ("workers", 2, 4),
        ("submitter", 1, 1),
    ]
    with pytest.raises(MeasureError, match="cannot be shaped"):
        kinds.pod_sets(kinds.JOBSET, 4)


def test_setting_a_condition_keeps_the_others_and_moves_the_transition_time_only_on_change() -> None:
    admitted = {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": "T0"}
    workload: dict[str, Any] = {
        "metadata": {"generation": 3},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": "T0"},
                admitted,
            ]
        },
    }
    conditions = with_conditions(
        workload,
        [("Admitted", "True", "Admitted", "again"), ("Finished", "True", "ByTest", "By test runner")],
    )
    by_type = {c["type"]: c for c in conditions}
    assert by_type["QuotaReserved"]["lastTransitionTime"] == "T0"
    assert by_type["Admitted"]["lastTransitionTime"] == "T0"
    assert by_type["Admitted"]["message"] == "again"
    assert by_type["Finished"]["status"] == "True"
    assert by_type["Finished"]["lastTransitionTime"] != "T0"
    assert by_type["Finished"]["observedGeneration"] == 3
    assert "message" not in admitted  # the watched object is left as it was
