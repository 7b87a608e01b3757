from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kuota.report.sources.workload_history import (
    AFTER_THE_HOLDERS_S,
    job_history,
    read_workloads,
    with_known_priority_classes,
)

START = 1_790_000_000.0


def _iso(offset_s: float) -> str:
    return datetime.fromtimestamp(START + offset_s, tz=UTC).isoformat().replace("+00:00", "Z")


def _workload(
    name: str,
    created: float,
    admitted: float | None,
    finished: float | None = None,
    *,
    reason: str = "Succeeded",
    gpus: int = 4,
    count: int = 2,
) -> dict[str, Any]:
    conditions = []
    if admitted is not None:
        conditions.append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": _iso(admitted)})
    if finished is not None:
        conditions.append(
            {"type": "Finished", "status": "True", "reason": reason, "lastTransitionTime": _iso(finished)}
        )
    return {
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": _iso(created)},
        "spec": {
            "queueName": "default",
            "priorityClassRef": {"name": "low"},
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "8"}}},
                            ]
                        }
                    },
                }
            ],
        },
        "status": {"conditions": conditions},
    }


def test_finished_workload_becomes_a_simulate_record_with_its_run_time() -> None:
    history = job_history(read_workloads([_workload("w", 600, 900, 4500)]), START, START + 86400)
    assert history.records == [
        {
            "name": "w",
            "namespace": "ml",
            "queue": "default",
            "priorityClass": "low",
            "submitAt": 600.0,
            "duration": 3600.0,
            "maxExecutionSeconds": None,
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "requests": {"nvidia.com/gpu": "4", "cpu": "8"},
                    "nodeSelector": {},
                    "tolerations": [],
                }
            ],
        }
    ]
    assert history.failed_gpu_hours == {}


def test_failed_jobs_burn_their_gpus_times_their_run_hours() -> None:
    history = job_history(read_workloads([_workload("f", 0, 3600, 3600 + 1800, reason="Failed")]), START, START + 86400)
    assert history.failed_gpu_hours == {"ml": pytest.approx(8 * 0.5)}


def test_a_workload_deactivated_for_its_maximum_execution_time_ended_and_failed() -> None:
    deactivated = _workload("d", 0, 3600)
    deactivated["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "DeactivatedDueToMaximumExecutionTimeExceeded",  # Kueue's reason, and kuota's
            "lastTransitionTime": _iso(3600 + 900),
        }
    )
    history = job_history(read_workloads([deactivated]), START, START + 86400)
    assert history.records[0]["duration"] == 900.0
    assert history.failed_gpu_hours == {"ml": pytest.approx(8 * 0.25)}


def test_running_workload_runs_to_the_window_end_and_unadmitted_ones_are_counted_out() -> None:
    history = job_history(
        read_workloads(
            [
                _workload("r", 0, 100),
                _workload("p", 0, None),
                _workload("old", -20, -15, -10),
                _workload("late", 1000, None),
            ]
        ),
        START,
        START + 1000,
    )
    assert [r["duration"] for r in history.records] == [900.0]
    assert history.skipped == {
        "never admitted (no known duration)": 1,
        "created and ended before the window": 1,
        "created after the window": 1,
    }


def test_workloads_without_a_queue_or_pod_sets_are_counted_out_not_replayed() -> None:
    unqueued, empty = _workload("u", 0, 100, 200), _workload("e", 0, 100, 200)
    del unqueued["spec"]["queueName"]
    empty["spec"]["podSets"] = []
    history = job_history(read_workloads([unqueued, empty, _workload("ok", 0, 100, 200)]), START, START + 1000)
    assert [r["name"] for r in history.records] == ["ok"]
    assert history.skipped == {"no spec.queueName (not submitted to a queue)": 1, "no spec.podSets": 1}


def test_a_priority_class_the_replayed_queues_lack_replays_at_the_default_priority() -> None:
    history = job_history(
        read_workloads([_workload("a", 0, 100, 200), _workload("b", 0, 100, 200)]), START, START + 1000
    )
    kept = with_known_priority_classes(history, {"low"})
    assert kept == history
    defaulted = with_known_priority_classes(history, {"high"})
    assert [r["priorityClass"] for r in defaulted.records] == [None, None]
    assert defaulted.unknown_priority_classes == {"low": 2}
    assert [r["duration"] for r in defaulted.records] == [r["duration"] for r in history.records]


def test_a_workload_holding_quota_at_the_window_start_runs_from_time_0_for_what_it_had_left() -> None:
    notebook = _workload("notebook", -3 * 86400, -3 * 86400 + 60, gpus=1, count=1)
    trainer = _workload("trainer", -7200, -3600, 1800, reason="Failed")
    trainer["spec"]["maximumExecutionTimeSeconds"] = 10_000
    history = job_history(read_workloads([trainer, notebook]), START, START + 86400)
    by_name = {r["name"]: r for r in history.records}
    assert [r["name"] for r in history.records] == ["notebook", "trainer"]  # creation order at time 0
    assert by_name["notebook"]["submitAt"] == by_name["trainer"]["submitAt"] == 0.0
    assert by_name["notebook"]["duration"] == 86400.0  # still running at the end: the whole window
    assert by_name["trainer"]["duration"] == 1800.0
    assert by_name["trainer"]["maxExecutionSeconds"] == 10_000 - 3600  # the hour admitted before the window counts
    assert history.started_before.holding == {("ml", "notebook"), ("ml", "trainer")}
    assert history.started_before.pending_since == {}
    assert history.failed_gpu_hours == {"ml": 8 * 1800 / 3600}  # only its GPU-hours inside the window
    assert history.skipped == {}


def test_a_workload_pending_at_the_window_start_arrives_after_the_holders_in_creation_order() -> None:
    items = [
        _workload("in-window", 0, 50, 500),
        _workload("pending-younger", -100, 300, 900),
        _workload("holder", -50, -40),
        _workload("pending-older", -900, 200, 400),
    ]
    history = job_history(read_workloads(items), START, START + 1000)
    assert [(r["name"], r["submitAt"]) for r in history.records] == [
        ("holder", 0.0),
        ("pending-older", AFTER_THE_HOLDERS_S),
        ("pending-younger", AFTER_THE_HOLDERS_S),
        ("in-window", AFTER_THE_HOLDERS_S),
    ]
    assert [r["duration"] for r in history.records] == [1000.0, 200.0, 600.0, 450.0]
    assert history.started_before.pending_since == {("ml", "pending-older"): -900.0, ("ml", "pending-younger"): -100.0}
    assert history.started_before.holding == {("ml", "holder")}


def _serving(name: str, created: float, admitted: float, finished: float | None = None, **kind: Any) -> dict[str, Any]:
    workload = _workload(name, created, admitted, finished, **kind)
    workload["metadata"]["annotations"] = {"kuota.dev/serving": "true"}
    return workload


def test_serving_workloads_count_as_serving_never_as_failed_and_replay_with_their_lifetime() -> None:
    history = job_history(
        read_workloads(
            [
                _serving("llm-running", 600, 1200, count=1),
                _serving("llm-crashed", 0, 0, 3600, reason="Failed", count=1),
                _workload("job-failed", 0, 0, 1800, reason="Failed", count=1),
            ]
        ),
        START,
        START + 7200,
    )
    assert history.serving_gpu_hours == {"ml": pytest.approx(4 * (7200 - 1200) / 3600 + 4 * 1.0)}
    assert history.failed_gpu_hours == {"ml": pytest.approx(4 * 0.5)}  # the batch job's alone
    by_name = {record["name"]: record for record in history.records}
    # as long-lived as it was, from its submission (its wait included) to the window's end or its deletion
    assert by_name["llm-running"]["lifetime"] == 7200 - 600 and "duration" not in by_name["llm-running"]
    crashed = by_name["llm-crashed"]
    assert crashed["submitAt"] + crashed["lifetime"] == pytest.approx(3600)  # deleted when its Workload ended
    assert by_name["job-failed"]["duration"] == 1800
