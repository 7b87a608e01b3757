from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.workloads.seed_week import (
    DAY,
    FINETUNE_AT,
    HOUR,
    MONDAY,
    SWEEP_AT,
    TUESDAY,
    WEEK,
    render_week_jsonl,
    week_workloads,
)
from kuota.simulator.lines import WorkloadLine
from tests.paths import GUIDE
from tests.unit.benchmarks.workloads.simulate_contract import reference_problems, stream_problems

SEED = Path(__file__).parents[4] / "kuota" / "simulator" / "seed"


def config_objects() -> list[dict[str, Any]]:
    return [obj for path in sorted(SEED.glob("*.yaml")) for obj in yaml.safe_load_all(path.read_text()) if obj]


def gpus(workload: WorkloadLine) -> int:
    return sum(p["count"] * int(p["requests"].get("nvidia.com/gpu", "0")) for p in workload["podSets"])


def peak_demand(workloads: list[WorkloadLine], until: float) -> int:
    """Most GPUs asked at once if every workload ran from its submission, over [0, until)."""
    events = sorted(
        [(w["submitAt"], gpus(w)) for w in workloads if w["submitAt"] < until]
        + [(w["submitAt"] + w["duration"], -gpus(w)) for w in workloads if w["submitAt"] < until],
        key=lambda event: (event[0], event[1]),
    )
    peak = current = 0
    for at, change in events:
        current += change
        if at < until:
            peak = max(peak, current)
    return peak


def test_the_file_is_exactly_what_the_generator_writes() -> None:
    assert (SEED / "workloads.jsonl").read_text() == render_week_jsonl(), (
        "examples/seed/workloads.jsonl is stale: regenerate it with the command in examples/seed/README.md"
    )


@pytest.mark.parametrize(
    "name",
    [
        "resourceflavor-h100-ondemand.yaml",
        "clusterqueue-research.yaml",
        "localqueue-research.yaml",
        "workloadpriorityclass-production-finetune.yaml",
    ],
)
def test_the_guides_objects_are_used_verbatim(name: str) -> None:
    assert (SEED / name).read_bytes() == (GUIDE / name).read_bytes()


def test_every_example_line_satisfies_the_contract_and_names_config_objects() -> None:
    lines = [json.loads(line) for line in (SEED / "workloads.jsonl").read_text().splitlines()]
    assert stream_problems(lines) == []
    assert reference_problems(config_objects(), lines) == []


def test_the_config_is_three_teams_of_8_h100_in_cohort_gpu_pool() -> None:
    queues = {obj["metadata"]["name"]: obj["spec"] for obj in config_objects() if obj["kind"] == "ClusterQueue"}
    assert set(queues) == {"research", "applied-ml", "inference"}
    gpu = {
        name: next(r for r in spec["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
        for name, spec in queues.items()
    }
    assert gpu["research"] == {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 12}
    assert gpu["applied-ml"]["nominalQuota"] == 8
    assert gpu["inference"] == {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4, "lendingLimit": 4}
    for name, spec in queues.items():
        assert spec["cohortName"] == "gpu-pool"
        assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
        assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": name}}
        covered = spec["resourceGroups"][0]["coveredResources"]
        assert covered == ["cpu", "memory", "nvidia.com/gpu"]


def test_the_weekend_sweep_alone_asks_for_more_than_research_may_use() -> None:
    week = week_workloads()
    sweep = [w for w in week if w["name"].startswith("sweep-")]
    assert {w["namespace"] for w in sweep} == {"research"}
    assert {w["priorityClass"] for w in sweep} == {"sweep"}
    assert all(SWEEP_AT <= w["submitAt"] < SWEEP_AT + HOUR for w in sweep)
    assert sum(gpus(w) for w in sweep) > 8 + 12
    research_before_tuesday = [w for w in week if w["namespace"] == "research" and w["submitAt"] < TUESDAY * DAY]
    assert research_before_tuesday == sweep


def test_applied_ml_is_idle_until_its_8_gpu_finetune_on_monday_at_nine() -> None:
    applied_ml = [w for w in week_workloads() if w["namespace"] == "applied-ml"]
    first = min(applied_ml, key=lambda w: w["submitAt"])
    assert FINETUNE_AT == MONDAY * DAY + 9 * HOUR
    assert (first["name"], first["submitAt"], first["priorityClass"]) == (
        "llm-finetune-mon",
        FINETUNE_AT,
        "production-finetune",
    )
    assert gpus(first) == 8
    assert [(p["count"], p["requests"]) for p in first["podSets"]] == [
        (2, {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"})
    ]


def test_inference_keeps_within_its_unlent_4_gpus_until_tuesday() -> None:
    inference = [w for w in week_workloads() if w["namespace"] == "inference"]
    assert peak_demand(inference, until=TUESDAY * DAY) <= 4


def test_every_workload_would_end_within_the_week_if_started_on_submission() -> None:
    week = week_workloads()
    assert week[0]["submitAt"] >= 0
    assert max(w["submitAt"] + w["duration"] for w in week) < WEEK
