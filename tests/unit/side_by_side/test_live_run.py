"""The pure parts of the live driver: which planned object a Workload stands for, and condition updates."""

from __future__ import annotations

from typing import Any

from benchmarks.side_by_side.live_run import origin_key, with_conditions


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
