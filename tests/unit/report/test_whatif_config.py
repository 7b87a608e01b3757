from __future__ import annotations

from typing import Any

import pytest

from kuota.report.errors import WhatIfError
from kuota.report.sources.whatif import (
    WHATIF_COHORT,
    Submission,
    nominal_gpus,
    summarize,
    with_borrowing,
    with_more_gpus,
)


def _queue(name: str, gpus: object, **spec: Any) -> dict[str, Any]:
    resources = [{"name": "nvidia.com/gpu", "nominalQuota": gpus}, {"name": "cpu", "nominalQuota": "64"}]
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["nvidia.com/gpu", "cpu"], "flavors": [{"name": "h100", "resources": resources}]}
            ],
            **spec,
        },
    }


def test_borrowing_puts_lone_queues_in_one_cohort_and_lets_owners_reclaim() -> None:
    config = [
        _queue("a", 8),
        _queue("b", 8, cohortName="existing", preemption={"reclaimWithinCohort": "LowerPriority"}),
    ]
    config[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "0"
    changed = with_borrowing(config)
    assert changed[0]["spec"]["cohortName"] == WHATIF_COHORT
    assert changed[0]["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    assert "borrowingLimit" not in changed[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert changed[1]["spec"]["cohortName"] == "existing"
    assert changed[1]["spec"]["preemption"]["reclaimWithinCohort"] == "LowerPriority"
    assert "cohortName" not in config[0]["spec"], "the input config is left untouched"


def test_more_gpus_are_shared_in_proportion_and_add_up_exactly() -> None:
    config = [_queue("a", 16), _queue("b", 8), _queue("c", "8")]
    assert nominal_gpus(with_more_gpus(config, 8)) == {"a": 20, "b": 10, "c": 10}
    assert sum(nominal_gpus(with_more_gpus(config, 5)).values()) == 32 + 5


def test_fractional_gpu_quota_is_refused_with_the_queue_named() -> None:
    with pytest.raises(WhatIfError, match="ClusterQueue a: nominalQuota '500m'"):
        nominal_gpus([_queue("a", "500m")])


def test_replay_waits_are_first_admission_minus_submission() -> None:
    output = {
        "workloads": [
            {"name": "w1", "namespace": "ml", "admissions": [{"at": 100.0}, {"at": 900.0}], "finishedAt": 1000.0},
            {"name": "w2", "namespace": "ml", "admissions": [], "finishedAt": None},
        ],
        "clusterQueues": {"ml": {"admissionWaitSeconds": {"p95": 40.0}, "gpuHoursAdmitted": 2.5}},
    }
    for workload in output["workloads"]:
        workload["clusterQueue"] = "ml"
    replay = summarize(output, {("ml", "w1"): Submission(60.0, 1), ("ml", "w2"): Submission(0.0, 1)}, 1000.0)
    assert replay.waits_s == [40.0]
    assert replay.per_queue_waits_s == {"ml": [40.0]}
    assert replay.admitted_gpu_hours == 2.5
    assert replay.horizon_s == 1000.0
