"""`kuota simulate` replays AdmissionChecks: quota reserved at the admission, work started once every check the
ClusterQueue runs is Ready, a Retry evicting (``AdmissionCheck``) and requeueing after its delay, a Rejected
deactivating, each check answering as the workload's ``admissionChecks`` declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kuota.cli import main
from tests.unit.simulator.test_pods_ready_replay import WAIT
from tests.unit.simulator.test_simulate import CONFIG, _files, _line, _simulate

CHECKED = CONFIG.replace(
    "  preemption: {withinClusterQueue: LowerPriority}\n",
    "  preemption: {withinClusterQueue: LowerPriority}\n"
    "  admissionChecksStrategy: {admissionChecks: [{name: capacity}, {name: budget}]}\n",
)
CHECKS = """\
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: capacity}
spec: {controllerName: example.com/capacity}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget}
spec: {controllerName: example.com/budget}
"""
INACTIVE = """\
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: capacity}
spec: {controllerName: example.com/capacity}
status:
  conditions:
  - {type: Active, status: "False", reason: Unknown, message: "", lastTransitionTime: "2025-01-01T00:00:00Z"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget}
spec: {controllerName: example.com/budget}
"""


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch) -> Any:
    def use(*documents: str) -> None:
        monkeypatch.setattr("tests.unit.simulator.test_simulate.CONFIG", CHECKED + "".join(documents))

    use(CHECKS)
    return use


def _evictions(workload: dict[str, Any]) -> list[tuple[float, str]]:
    return [(e["at"], e["reason"]) for e in workload["evictions"]]


def test_work_starts_once_every_check_is_ready_and_the_quota_is_held_meanwhile(tmp_path: Path, config: Any) -> None:
    checks = {"capacity": {"after": 30}, "budget": {"after": 10}}
    lines = [_line("a", 0, 4, 100, admissionChecks=checks), _line("b", 5, 4, 20)]
    document = _simulate(tmp_path, lines)
    first, second = document["workloads"]
    assert [a["at"] for a in first["admissions"]] == [0.0] and first["evictions"] == []
    assert first["finishedAt"] == 130.0, "the slower check's 30 s, then 100 s of work"
    assert second["admissions"][0]["at"] == 130.0, "the quota was reserved while the checks ran"
    assert document["clusterQueues"]["team"]["gpuHoursAdmitted"] == round(4 * (130 + 20) / 3600, 3)


def test_a_check_the_line_does_not_name_is_ready_at_once(tmp_path: Path, config: Any) -> None:
    [only] = _simulate(tmp_path, [_line("a", 0, 4, 100)])["workloads"]
    assert only["evictions"] == [] and only["finishedAt"] == 100.0


def test_retry_evicts_frees_the_quota_and_requeues_after_the_delay(tmp_path: Path, config: Any) -> None:
    checks = {"capacity": {"after": 10, "retries": 2, "requeueAfter": 50}}
    lines = [_line("a", 0, 4, 100, admissionChecks=checks), _line("b", 5, 4, 20)]
    retried, other = _simulate(tmp_path, lines)["workloads"]
    assert _evictions(retried) == [(10.0, "AdmissionCheck"), (70.0, "AdmissionCheck")]
    # requeued 50 s after each Retry; the third answer is Ready 10 s after the third reservation
    assert [a["at"] for a in retried["admissions"]] == [0.0, 60.0, 120.0]
    assert retried["status"] == "Finished" and retried["finishedAt"] == 230.0, "no work was done before"
    assert other["admissions"][0]["at"] == 10.0 and other["finishedAt"] == 30.0, "the freed quota went to b"


def test_retry_without_a_delay_is_queued_again_at_once(tmp_path: Path, config: Any) -> None:
    checks = {"capacity": {"after": 10, "retries": 1}}
    [retried] = _simulate(tmp_path, [_line("a", 0, 4, 100, admissionChecks=checks)])["workloads"]
    assert [a["at"] for a in retried["admissions"]] == [0.0, 10.0]
    assert retried["finishedAt"] == 120.0


def test_rejected_deactivates_and_frees_the_quota(tmp_path: Path, config: Any) -> None:
    checks = {"budget": {"after": 20, "reject": True}}
    lines = [_line("a", 0, 4, 100, admissionChecks=checks), _line("b", 5, 4, 20)]
    rejected, other = _simulate(tmp_path, lines)["workloads"]
    assert _evictions(rejected) == [(20.0, "AdmissionCheck")]
    assert rejected["status"] == "Deactivated" and rejected["finishedAt"] is None
    assert other["admissions"][0]["at"] == 20.0


def test_retries_come_before_the_rejection(tmp_path: Path, config: Any) -> None:
    checks = {"budget": {"after": 5, "retries": 1, "requeueAfter": 15, "reject": True}}
    [workload] = _simulate(tmp_path, [_line("a", 0, 4, 100, admissionChecks=checks)])["workloads"]
    assert _evictions(workload) == [(5.0, "AdmissionCheck"), (25.0, "AdmissionCheck")]
    assert workload["status"] == "Deactivated"


def test_the_first_failing_answer_decides_and_rejected_outranks_retry_at_one_instant(
    tmp_path: Path, config: Any
) -> None:
    checks = {"capacity": {"after": 20, "retries": 1}, "budget": {"after": 20, "reject": True}}
    [workload] = _simulate(tmp_path, [_line("a", 0, 4, 100, admissionChecks=checks)])["workloads"]
    assert _evictions(workload) == [(20.0, "AdmissionCheck")] and workload["status"] == "Deactivated"


def test_two_retries_at_one_instant_requeue_at_the_later_delay(tmp_path: Path, config: Any) -> None:
    checks = {
        "capacity": {"after": 10, "retries": 1, "requeueAfter": 30},
        "budget": {"after": 10, "retries": 1, "requeueAfter": 50},
    }
    [workload] = _simulate(tmp_path, [_line("a", 0, 4, 100, admissionChecks=checks)])["workloads"]
    assert [a["at"] for a in workload["admissions"]] == [0.0, 60.0]


def test_a_preemption_before_the_checks_answer_spends_no_retry(tmp_path: Path, config: Any) -> None:
    checks = {"capacity": {"after": 30, "retries": 1, "requeueAfter": 5}}
    lines = [_line("low", 0, 4, 100, admissionChecks=checks), _line("high", 10, 4, 20, priorityClass="high")]
    low, _ = _simulate(tmp_path, lines)["workloads"]
    # preempted at 10, admitted again at 30 when high finishes; its one Retry comes 30 s later
    assert _evictions(low) == [(10.0, "Preempted"), (60.0, "AdmissionCheck")]
    assert [a["at"] for a in low["admissions"]] == [0.0, 30.0, 65.0]
    assert low["finishedAt"] == 65.0 + 30 + 100


def test_the_pods_ready_timeout_counts_from_the_checks_being_ready(tmp_path: Path, config: Any) -> None:
    config(CHECKS, WAIT)
    checks = {"capacity": {"after": 50}}
    line = _line("stuck", 0, 4, 100, admissionChecks=checks, podsReadyAfter=None)
    [stuck] = _simulate(tmp_path, [line], "--until", "120")["workloads"]
    assert _evictions(stuck) == [(110.0, "PodsReadyTimeout")], "50 s of checks, then the 60 s timeout"


def test_a_check_whose_status_says_inactive_stops_its_cluster_queue(tmp_path: Path, config: Any) -> None:
    config(INACTIVE)
    [waiting] = _simulate(tmp_path, [_line("a", 0, 4, 100)])["workloads"]
    assert waiting["admissions"] == [] and "AdmissionCheckInactive" in waiting["reason"]


def test_naming_a_check_the_config_lacks_is_refused(
    tmp_path: Path, config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file, workloads = _files(tmp_path, [_line("a", 0, 4, 100, admissionChecks={"capcity": {"after": 1}})])
    assert main(["simulate", "--config", str(config_file), "--workloads", str(workloads)]) == 2
    assert "admissionChecks names capcity, which is no AdmissionCheck of the CONFIG" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ({"after": -1}, "after must be a number of seconds"),
        ({"retries": 1.5}, "retries must be a whole number from 0"),
        ({"reject": "yes"}, "reject must be true or false"),
        ({"ready": True}, "must be an object with keys among after, reject, requeueAfter, retries"),
    ],
)
def test_a_bad_check_behaviour_is_one_line_naming_the_field(
    tmp_path: Path, config: Any, capsys: pytest.CaptureFixture[str], behaviour: dict[str, Any], message: str
) -> None:
    config_file, workloads = _files(tmp_path, [_line("a", 0, 4, 100, admissionChecks={"capacity": behaviour})])
    assert main(["simulate", "--config", str(config_file), "--workloads", str(workloads)]) == 2
    err = capsys.readouterr().err
    assert message in err and "admissionChecks.capacity" in err and err.count("\n") == 1
