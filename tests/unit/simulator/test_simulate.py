"""``kuota simulate``: the contract's inputs and outputs, and the guide's story on the embedded example."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kuota.cli import main
from kuota.engine.model import Requirement
from kuota.simulator.config_reading import load_config, seed_directory
from kuota.simulator.errors import ConfigFileError, WorkloadFileError
from kuota.simulator.replay import replay
from kuota.simulator.summary import output_document
from kuota.simulator.workload_reading import SimulatedWorkload, convert_lines, read_workloads

CONFIG = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: team}
spec: {clusterQueue: team}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
"""


def _line(name: str, at: float, gpus: int, duration: float, **extra: Any) -> dict[str, Any]:
    line = {
        "name": name,
        "namespace": "team",
        "queue": "q",
        "priorityClass": None,
        "submitAt": at,
        "duration": duration,
        "maxExecutionSeconds": None,
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "requests": {"nvidia.com/gpu": str(gpus)},
                "nodeSelector": {},
                "tolerations": [],
            }
        ],
    }
    line.update(extra)
    return line


def _files(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[Path, Path]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    workloads = tmp_path / "workloads.jsonl"
    workloads.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return config, workloads


def _simulate(tmp_path: Path, lines: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    config, workloads = _files(tmp_path, lines)
    out = tmp_path / "out.json"
    assert main(["simulate", "--config", str(config), "--workloads", str(workloads), "--output", str(out), *extra]) == 0
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def test_output_json_follows_the_contract(tmp_path: Path) -> None:
    document = _simulate(tmp_path, [_line("a", 0, 4, 100), _line("b", 10, 4, 50)])
    assert set(document) == {"workloads", "clusterQueues"}
    first, second = document["workloads"]
    assert set(first) == {
        "name",
        "namespace",
        "clusterQueue",
        "status",
        "reason",
        "admissions",
        "evictions",
        "finishedAt",
    }
    assert first == {
        "name": "a",
        "namespace": "team",
        "clusterQueue": "team",
        "status": "Finished",
        "reason": None,
        "admissions": [{"at": 0.0, "flavors": {"main": {"nvidia.com/gpu": "gpu"}}, "borrowing": False}],
        "evictions": [],
        "finishedAt": 100.0,
    }
    assert second["admissions"][0]["at"] == 100.0 and second["finishedAt"] == 150.0
    assert document["clusterQueues"] == {
        "team": {
            "admissionWaitSeconds": {"p50": 0.0, "p95": 90.0, "max": 90.0},
            "admitted": 2,
            "evicted": 0,
            "gpuHoursAdmitted": 0.167,
        }
    }


def test_an_evicted_workload_frees_quota_at_once_and_resumes_its_remaining_work(tmp_path: Path) -> None:
    lines = [_line("low", 0, 4, 100), _line("high", 30, 4, 20, priorityClass="high")]
    document = _simulate(tmp_path, lines)
    low, high = document["workloads"]
    assert low["evictions"] == [{"at": 30.0, "reason": "Preempted", "preemptedBy": "team/high"}]
    assert high["admissions"][0]["at"] == 30.0
    assert [a["at"] for a in low["admissions"]] == [0.0, 50.0]
    assert low["finishedAt"] == 120.0  # 30 s done before, 70 s after


def test_until_reports_the_state_at_that_time(tmp_path: Path) -> None:
    document = _simulate(
        tmp_path, [_line("a", 0, 4, 100), _line("b", 10, 4, 50), _line("c", 500, 1, 5)], "--until", "60"
    )
    statuses = {w["name"]: w["status"] for w in document["workloads"]}
    assert statuses == {"a": "Admitted", "b": "Pending"}
    assert document["clusterQueues"]["team"]["gpuHoursAdmitted"] == round(4 * 60 / 3600, 3)


def test_workloads_that_can_never_fit_are_inadmissible_with_a_reason(tmp_path: Path) -> None:
    document = _simulate(tmp_path, [_line("huge", 0, 6, 10), _line("lost", 0, 1, 10, queue="nope")])
    huge, lost = document["workloads"]
    assert huge["status"] == "Inadmissible"
    assert huge["reason"].startswith("needs 6 nvidia.com/gpu in flavor gpu, more than ClusterQueue team can ever use")
    assert lost["status"] == "Inadmissible"
    assert lost["reason"].startswith("LocalQueue nope does not exist in namespace team")


def test_max_execution_seconds_deactivates(tmp_path: Path) -> None:
    document = _simulate(tmp_path, [_line("capped", 0, 1, 100, maxExecutionSeconds=30)])
    [capped] = document["workloads"]
    assert capped["status"] == "Deactivated"
    assert capped["evictions"] == [{"at": 30.0, "reason": "Deactivated", "preemptedBy": None}]


def test_strict_reader_rejects_unknown_keys_and_bad_quantities(tmp_path: Path) -> None:
    config, workloads = _files(tmp_path, [_line("a", 0, 1, 1, colour="red")])
    with pytest.raises(WorkloadFileError, match=r"workloads.jsonl:1: unknown key\(s\) colour"):
        read_workloads(workloads, load_config(config))
    bad = _line("a", 0, 1, 1)
    bad["podSets"][0]["requests"]["memory"] = "lots"
    with pytest.raises(WorkloadFileError, match=r"requests\.memory"):
        list(convert_lines([("line 1", bad)], {}))


def test_a_missing_priority_class_affects_only_its_workload_and_the_run_goes_on(tmp_path: Path) -> None:
    """Kueue's Job reconciler raises an event and creates no Workload for a Job whose WorkloadPriorityClass does
    not exist (kueue.x-k8s.io/priority-class names none); every other Job runs. Here it never takes quota: the
    other workload, submitted after it, is admitted at once and finishes."""
    lines = [_line("typo", 0, 4, 100, priorityClass="urgent"), _line("other", 1, 4, 10)]
    typo, other = _simulate(tmp_path, lines)["workloads"]
    assert typo["status"] == "Inadmissible"
    assert typo["reason"].startswith("WorkloadPriorityClass 'urgent' not found, so no Workload is created for it")
    assert typo["admissions"] == [] and typo["clusterQueue"] is None
    assert other["status"] == "Finished" and other["admissions"][0]["at"] == 1.0


def test_invalid_config_names_file_document_and_field(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(CONFIG.replace("nominalQuota: 4", "nominalQuota: 4, borrowingLimit: 2"))
    with pytest.raises(
        ConfigFileError,
        match=r"bad.yaml \(document 2\).*borrowingLimit: must be unset when "
        "cohortName is empty",
    ):
        load_config(config)


def test_a_config_that_is_not_yaml_is_named_with_the_parsers_complaint(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("kind: ClusterQueue\nspec: [unclosed\n")
    with pytest.raises(ConfigFileError, match=r"broken.yaml: not valid YAML: .*flow sequence"):
        load_config(config)


def test_cli_reports_input_errors_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--config", str(tmp_path / "missing.yaml"), "--workloads", str(tmp_path)]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["simulate", "--config", str(tmp_path)]) == 2


def test_a_trace_csv_is_read_directly_mapping_users_to_local_queues(tmp_path: Path) -> None:
    config, _ = _files(tmp_path, [])
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
        "0,7,2,0,1,0,100,0,Pass\n1,8,4,0,2,50,60,0,Failed\n"
    )
    workloads = read_workloads(trace, load_config(config))
    assert [(w.workload.key, w.submit_at, w.duration) for w in workloads] == [
        ("team/job-0", 0.0, 100.0),
        ("team/job-1", 50.0, 60.0),
    ]
    assert workloads[1].workload.pod_sets[0].count == 2


def test_the_embedded_example_tells_the_guides_story(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate"]) == 0
    story = capsys.readouterr().out
    assert "research runs on 20 GPUs, 12 borrowed beyond its 8 nominal" in story
    assert (
        "d2 09:00  applied-ml/llm-finetune-mon preempts 4 of research's workloads to take back its own nominal quota"
    ) in story
    assert "4 of 4 resumed later" in story


def test_the_embedded_example_preempts_the_most_recently_admitted_sweep_trials() -> None:
    objects = load_config(seed_directory())
    result = replay(objects, read_workloads(seed_directory() / "workloads.jsonl", objects))
    document = output_document(result)
    monday = 2 * 86400 + 9 * 3600
    victims = [w for w in document["workloads"] if any(e["at"] == monday for e in w["evictions"])]
    assert {w["evictions"][0]["preemptedBy"] for w in victims} == {"applied-ml/llm-finetune-mon"}
    sweeps = [w for w in document["workloads"] if w["name"].startswith("sweep-")]
    last_admitted_before = sorted(
        (max(a["at"] for a in w["admissions"] if a["at"] <= monday), w["name"])
        for w in sweeps
        if any(a["at"] <= monday for a in w["admissions"])
    )
    assert sorted(w["name"] for w in victims) == sorted(name for _, name in last_admitted_before[-4:])
    assert all(w["status"] == "Finished" for w in document["workloads"])


def test_workloads_of_one_plain_pod_set_share_it_and_a_bad_later_line_is_still_rejected() -> None:
    first, second = convert_lines([("line 1", _line("a", 0, 2, 1)), ("line 2", _line("b", 1, 2, 1))], {})
    assert first.workload.pod_sets[0] is second.workload.pod_sets[0]
    assert first.workload.pod_sets[0].requests == {"nvidia.com/gpu": 2}
    extra = _line("c", 2, 2, 1)
    extra["podSets"][0]["colour"] = "red"
    with pytest.raises(WorkloadFileError, match=r"line 2: podSets\[0\]: unknown key\(s\) colour"):
        list(convert_lines([("line 1", _line("a", 0, 2, 1)), ("line 2", extra)], {}))
    flagged = _line("d", 3, 2, 1)
    flagged["podSets"][0]["count"] = True
    with pytest.raises(WorkloadFileError, match=r"line 2: podSets\[0\]\.count"):
        list(convert_lines([("line 1", _line("a", 0, 2, 1)), ("line 2", flagged)], {}))


def test_a_replay_collects_garbage_less_often_and_gives_the_callers_setting_back() -> None:
    objects = load_config(seed_directory())
    arrivals = read_workloads(seed_directory() / "workloads.jsonl", objects)
    seen: list[tuple[int, int, int]] = []

    def watching() -> Iterator[SimulatedWorkload]:
        for arrival in arrivals:
            seen.append(gc.get_threshold())
            yield arrival

    caller = (1234, 7, 9)
    before = gc.get_threshold()
    gc.set_threshold(*caller)
    try:
        replay(objects, watching())
        assert gc.get_threshold() == caller
        assert {threshold[0] for threshold in seen} == {100_000}
        late = [arrivals[1], arrivals[0]]  # out of submission order: the replay fails
        with pytest.raises(WorkloadFileError, match="give arrivals in submission order"):
            replay(objects, late)
        assert gc.get_threshold() == caller
    finally:
        gc.set_threshold(*before)


def test_a_pod_set_may_carry_a_required_node_affinity_checked_like_a_pod_templates() -> None:
    line = _line("a", 0, 2, 1)
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
    line["podSets"][0]["nodeAffinity"] = {"nodeSelectorTerms": terms}
    (parsed,) = convert_lines([("line 1", line)], {})
    assert parsed.workload.pod_sets[0].node_affinity == ((Requirement("zone", "In", ("b",)),),)
    terms[0]["matchExpressions"][0]["operator"] = "Near"
    with pytest.raises(
        WorkloadFileError,
        match=r"line 1: podSets\[0\]: nodeAffinity\.nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.operator: "
        r'Unsupported value: "Near"',
    ):
        list(convert_lines([("line 1", line)], {}))


def test_etas_come_from_declared_runtimes_and_the_streams_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        _line("first", 0, 4, 100),
        _line("declared", 10, 4, 300, maxExecutionSeconds=400),
        _line("unknown", 20, 4, 100),
        _line("learnt", 150, 4, 100),
    ]
    document = _simulate(tmp_path, lines, "--etas")
    etas = {entry["name"]: entry["eta"] for entry in document["workloads"]}
    # "declared" waits for "first", whose runtime nobody knows yet; "learnt" arrives once "first" finished
    # (100 s, the history) while "declared" runs (400 s declared) and "unknown" waits for it.
    assert etas["declared"]["predictedStartAt"] is None
    assert etas["learnt"] == {
        "predictedAt": 150.0,
        "predictedStartAt": 100.0 + 400.0 + 100.0,
        "runtimeSources": {"maxExecutionTimeSeconds": 1, "history": 1},
        "similarJobs": 1,
        "baselineWaitSeconds": 100.0,
        "beyondHorizon": False,
    }
    actual = {entry["name"]: entry["admissions"][0]["at"] for entry in document["workloads"]}
    assert actual["learnt"] == 100.0 + 300.0 + 100.0  # "declared" ran 300 s of its 400
    accuracy = document["etaAccuracy"]
    assert accuracy["compared"] == 1
    assert accuracy["eta"]["medianErrorSeconds"] == 100.0
    assert accuracy["baseline"]["medianErrorSeconds"] == abs(100.0 - (500.0 - 150.0))
    assert "Admission ETAs: 4 predicted at submission, 1 compared with the replay" in capsys.readouterr().out
