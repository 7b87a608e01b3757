"""The seed week, replayed by ``kuota simulate``, tells the guide's story (read through the --output contract)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.workloads.seed_week import FINETUNE_AT, SWEEP_AT
from kuota.cli import main

SEED = Path(__file__).parents[4] / "kuota" / "simulator" / "seed"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    output = tmp_path_factory.mktemp("seed") / "out.json"
    code = main(
        ["simulate", "--config", str(SEED), "--workloads", str(SEED / "workloads.jsonl"), "--output", str(output)]
    )
    assert code == 0
    document = json.loads(output.read_text())
    return {(w["namespace"], w["name"]): w for w in document["workloads"]}


def sweep(outcome: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    return [w for (namespace, name), w in outcome.items() if namespace == "research" and name.startswith("sweep-")]


def test_on_saturday_morning_the_sweep_runs_ten_trials_on_20_gpus(
    outcome: dict[tuple[str, str], dict[str, Any]],
) -> None:
    started = [w for w in sweep(outcome) if w["admissions"][0]["at"] < SWEEP_AT + 600]
    assert len(started) == 10  # 2 GPUs each: research's 8 plus 12 borrowed
    assert sum(w["admissions"][0]["borrowing"] for w in started) == 6


def test_the_monday_finetune_starts_at_nine_without_waiting(outcome: dict[tuple[str, str], dict[str, Any]]) -> None:
    finetune = outcome[("applied-ml", "llm-finetune-mon")]
    assert [a["at"] for a in finetune["admissions"]] == [FINETUNE_AT]
    assert finetune["admissions"][0]["borrowing"] is False


def test_it_preempts_the_four_most_recently_admitted_sweep_trials(
    outcome: dict[tuple[str, str], dict[str, Any]],
) -> None:
    running_at_nine = [
        w for w in sweep(outcome) if w["admissions"][0]["at"] <= FINETUNE_AT < (w["finishedAt"] or float("inf"))
    ]
    latest_four = sorted(running_at_nine, key=lambda w: w["admissions"][0]["at"])[-4:]
    evicted = [w for w in outcome.values() if w["evictions"] and w["evictions"][0]["at"] == FINETUNE_AT]
    assert sorted(w["name"] for w in evicted) == sorted(w["name"] for w in latest_four)
    for workload in evicted:
        assert workload["evictions"] == [
            {"at": FINETUNE_AT, "reason": "Preempted", "preemptedBy": "applied-ml/llm-finetune-mon"}
        ]


def test_the_preempted_trials_resume_later_and_finish(outcome: dict[tuple[str, str], dict[str, Any]]) -> None:
    evicted = [w for w in sweep(outcome) if w["evictions"]]
    assert len(evicted) == 4
    for workload in evicted:
        assert len(workload["admissions"]) == 2
        assert workload["admissions"][1]["at"] > FINETUNE_AT
        assert workload["status"] == "Finished"


def test_every_workload_finishes_within_the_week(outcome: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert {w["status"] for w in outcome.values()} == {"Finished"}
    assert max(w["finishedAt"] for w in outcome.values()) < 7 * 24 * 3600
