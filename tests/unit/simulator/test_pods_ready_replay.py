"""`kuota simulate` replays waitForPodsReady: a workload's ``podsReadyAfter``, the timeout, the backoff and the
deactivation past ``backoffLimitCount``, as the live manager applies them (Kueue v0.19+ defaults)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.simulator.test_simulate import CONFIG, _line, _simulate

WAIT = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 60s
  requeuingStrategy: {backoffBaseSeconds: 10, backoffLimitCount: 2}
"""
OFF = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {DisableWaitForPodsReady: true}
"""


@pytest.fixture
def with_configuration(monkeypatch: pytest.MonkeyPatch) -> Any:
    def use(text: str) -> None:
        monkeypatch.setattr("tests.unit.simulator.test_simulate.CONFIG", CONFIG + text)

    return use


def _evictions(workload: dict[str, Any]) -> list[tuple[float, str]]:
    return [(e["at"], e["reason"]) for e in workload["evictions"]]


def test_pods_never_ready_are_evicted_backed_off_then_deactivated(tmp_path: Path, with_configuration: Any) -> None:
    with_configuration(WAIT)
    lines = [_line("stuck", 0, 4, 100, podsReadyAfter=None), _line("next", 5, 4, 20)]
    stuck, following = _simulate(tmp_path, lines)["workloads"]
    # timeouts 60 s after each admission; backoff 10 s x 2^(n-1) (its first ends at 70, while "next" holds the
    # quota until 80); the third timeout passes backoffLimitCount 2
    assert [a["at"] for a in stuck["admissions"]] == [0.0, 80.0, 160.0]
    assert _evictions(stuck) == [(60.0, "PodsReadyTimeout"), (140.0, "PodsReadyTimeout"), (220.0, "PodsReadyTimeout")]
    assert stuck["status"] == "Deactivated"
    # the quota the stuck workload held in vain is what the one behind it waited for
    assert following["admissions"][0]["at"] == 60.0 and following["finishedAt"] == 80.0


def test_work_starts_when_the_pods_are_ready_and_a_slow_start_within_the_timeout_is_kept(
    tmp_path: Path, with_configuration: Any
) -> None:
    with_configuration(WAIT)
    [slow] = _simulate(tmp_path, [_line("slow", 0, 4, 100, podsReadyAfter=45)])["workloads"]
    assert slow["evictions"] == [] and slow["finishedAt"] == 145.0


def test_an_eviction_before_the_pods_are_ready_keeps_no_work(tmp_path: Path, with_configuration: Any) -> None:
    with_configuration(WAIT)
    lines = [_line("low", 0, 4, 100, podsReadyAfter=40), _line("high", 30, 4, 20, priorityClass="high")]
    low, _ = _simulate(tmp_path, lines)["workloads"]
    assert _evictions(low) == [(30.0, "Preempted")]
    assert low["admissions"][1]["at"] == 50.0 and low["finishedAt"] == 50.0 + 40 + 100, "all 100 s still to do"


def test_on_by_default_with_kueues_thirty_minutes(tmp_path: Path) -> None:
    [stuck] = _simulate(tmp_path, [_line("stuck", 0, 4, 100, podsReadyAfter=None)], "--until", "2000")["workloads"]
    assert _evictions(stuck) == [(1800.0, "PodsReadyTimeout")]


def test_turned_off_a_workload_whose_pods_never_start_holds_its_quota(tmp_path: Path, with_configuration: Any) -> None:
    with_configuration(OFF)
    lines = [_line("stuck", 0, 4, 100, podsReadyAfter=None), _line("next", 5, 4, 20)]
    stuck, following = _simulate(tmp_path, lines, "--until", "100000")["workloads"]
    assert stuck["status"] == "Admitted" and stuck["evictions"] == []
    assert following["status"] == "Pending"


def test_pods_ready_after_must_be_seconds_or_null(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kuota.cli import main
    from tests.unit.simulator.test_simulate import _files

    config, workloads = _files(tmp_path, [_line("a", 0, 1, 1, podsReadyAfter=-1)])
    assert main(["simulate", "--config", str(config), "--workloads", str(workloads)]) == 2
    assert "podsReadyAfter must be a number of seconds" in capsys.readouterr().err


BLOCKING = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 60s
  blockAdmission: true
  requeuingStrategy: {backoffBaseSeconds: 10, backoffLimitCount: 2}
"""


def _admitted_at(workloads: list[dict[str, Any]]) -> dict[str, list[float]]:
    return {w["name"]: [a["at"] for a in w["admissions"]] for w in workloads}


def test_block_admission_admits_the_next_only_once_the_pods_of_the_last_are_ready(
    tmp_path: Path, with_configuration: Any
) -> None:
    """Room for all three, but each waits for the pods of the one admitted before it (Kueue's scheduler waits
    for every admitted Workload's PodsReady before it admits again)."""
    lines = [
        _line("first", 0, 1, 100, podsReadyAfter=30),
        _line("second", 0, 1, 100, podsReadyAfter=10),
        _line("third", 0, 1, 100, podsReadyAfter=0),
        _line("fourth", 0, 1, 100),
    ]
    with_configuration(WAIT)
    assert _admitted_at(_simulate(tmp_path, lines)["workloads"]) == {
        n: [0.0] for n in ("first", "second", "third", "fourth")
    }
    with_configuration(BLOCKING)
    workloads = _simulate(tmp_path, lines)["workloads"]
    # ready at once: "fourth" follows "third" at the same instant
    assert _admitted_at(workloads) == {"first": [0.0], "second": [30.0], "third": [40.0], "fourth": [40.0]}


def test_block_admission_holds_the_next_until_pods_never_ready_time_out(
    tmp_path: Path, with_configuration: Any
) -> None:
    with_configuration(BLOCKING)
    lines = [_line("stuck", 0, 1, 100, podsReadyAfter=None), _line("next", 5, 1, 20)]
    stuck, following = _simulate(tmp_path, lines, "--until", "50")["workloads"]
    assert following["status"] == "Pending"
    assert following["reason"] == "waiting for all admitted workloads to be in PodsReady condition"
    stuck, following = _simulate(tmp_path, lines)["workloads"]
    assert _evictions(stuck)[0] == (60.0, "PodsReadyTimeout")
    assert following["admissions"][0]["at"] == 60.0


@pytest.mark.parametrize(("timestamp", "admitted_at_80"), [("Eviction", "middle"), ("Creation", "stuck")])
def test_requeued_after_a_timeout_it_queues_from_the_eviction_unless_timestamp_is_creation(
    tmp_path: Path, with_configuration: Any, timestamp: str, admitted_at_80: str
) -> None:
    """ "stuck" (created at 0) times out at 60 and backs off to 70; "old" (5) runs from 60 to 80; then "stuck"
    and "middle" (created at 10) compete: by the eviction at 60, "middle" is first; by creation, "stuck"."""
    with_configuration(WAIT.replace("backoffBaseSeconds: 10", f"backoffBaseSeconds: 10, timestamp: {timestamp}"))
    lines = [
        _line("stuck", 0, 4, 100, podsReadyAfter=None),
        _line("old", 5, 4, 20),
        _line("middle", 10, 4, 20),
    ]
    admissions = _admitted_at(_simulate(tmp_path, lines, "--until", "90")["workloads"])
    assert admissions["old"] == [60.0]
    assert [name for name, times in admissions.items() if 80.0 in times] == [admitted_at_80]
