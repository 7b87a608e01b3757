"""`kuota simulate` replays serving workloads: a line with a ``lifetime`` instead of a ``duration`` never finishes
its work; it holds its quota whenever admitted (preempted, it queues again) until it is deleted ``lifetime``
seconds after its submission, pending or admitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kuota.cli import main
from tests.unit.simulator.test_simulate import _files, _line, _simulate


def _serving(name: str, at: float, gpus: int, lifetime: float, **extra: Any) -> dict[str, Any]:
    line = _line(name, at, gpus, 0, **extra)
    del line["duration"]
    line["lifetime"] = lifetime
    return line


def test_a_serving_workload_holds_its_quota_until_the_end_of_its_lifetime(tmp_path: Path) -> None:
    document = _simulate(tmp_path, [_serving("llm", 0, 4, 500), _line("job", 10, 4, 20)])
    llm, job = document["workloads"]
    assert [a["at"] for a in llm["admissions"]] == [0.0]
    assert (llm["status"], llm["finishedAt"], llm["reason"]) == ("Deleted", None, None)
    assert job["admissions"][0]["at"] == 500.0 and job["finishedAt"] == 520.0
    assert document["clusterQueues"]["team"]["gpuHoursAdmitted"] == round((4 * 500 + 4 * 20) / 3600, 3)


def test_a_serving_workload_still_pending_when_deleted_is_withdrawn(tmp_path: Path) -> None:
    job, llm = _simulate(tmp_path, [_line("job", 0, 4, 1000), _serving("llm", 10, 4, 100)])["workloads"]
    assert llm["status"] == "Deleted" and llm["admissions"] == []
    assert job["finishedAt"] == 1000.0


def test_a_preempted_serving_workload_queues_again_and_is_still_deleted_on_time(tmp_path: Path) -> None:
    lines = [_serving("llm", 0, 4, 300), _line("urgent", 100, 4, 50, priorityClass="high")]
    llm, urgent = _simulate(tmp_path, lines)["workloads"]
    assert [(e["at"], e["reason"]) for e in llm["evictions"]] == [(100.0, "Preempted")]
    assert [a["at"] for a in llm["admissions"]] == [0.0, 150.0]
    assert llm["status"] == "Deleted" and urgent["finishedAt"] == 150.0


@pytest.mark.parametrize("keys", [("duration", "lifetime"), ()])
def test_a_line_gives_exactly_one_of_duration_and_lifetime(
    tmp_path: Path, keys: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    line = _line("llm", 0, 4, 100)
    del line["duration"]
    line.update(dict.fromkeys(keys, 100))
    config, workloads = _files(tmp_path, [line])
    assert main(["simulate", "--config", str(config), "--workloads", str(workloads)]) != 0
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "exactly one of 'duration'" in error[0] and "workloads.jsonl:1:" in error[0]


def test_a_leaderworkerset_group_is_one_serving_line_of_a_leader_and_its_workers(tmp_path: Path) -> None:
    """docs/simulate.md's LeaderWorkerSet row: a group of size 3 is pod sets leader (1) and worker (2)."""
    group = _serving("llm-0", 0, 1, 300)
    group["podSets"] = [
        {**group["podSets"][0], "name": "leader"},
        {**group["podSets"][0], "name": "worker", "count": 2},
    ]
    document = _simulate(tmp_path, [group, _line("job", 10, 2, 20)])
    llm, job = document["workloads"]
    assert llm["admissions"][0]["flavors"] == {"leader": {"nvidia.com/gpu": "gpu"}, "worker": {"nvidia.com/gpu": "gpu"}}
    assert llm["status"] == "Deleted"
    assert job["admissions"][0]["at"] == 300.0  # the group's 3 GPUs of 4 held until its deletion
