from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks.workloads.philly_teams import philly_teams_config
from kuota.simulator.traces import convert_trace
from tests.unit.benchmarks.workloads.simulate_contract import reference_problems

PHILLY = Path(__file__).parents[3] / "data" / "traces" / "philly-head.csv"


def test_fourteen_teams_share_one_cohort_with_borrowing_and_reclaim_on() -> None:
    config = philly_teams_config()
    cluster_queues = [obj for obj in config.objects if obj["kind"] == "ClusterQueue"]
    assert [cq["metadata"]["name"] for cq in cluster_queues] == [f"team-{i:02d}" for i in range(1, 15)]
    for cq in cluster_queues:
        spec = cq["spec"]
        assert spec["cohortName"] == "philly"
        assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
        resources = spec["resourceGroups"][0]["flavors"][0]["resources"]
        assert resources == [
            {"name": "cpu", "nominalQuota": 192},
            {"name": "memory", "nominalQuota": "1536Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": 48},
        ]


def test_each_team_selects_only_its_own_namespace() -> None:
    config = philly_teams_config()
    for cq in (obj for obj in config.objects if obj["kind"] == "ClusterQueue"):
        name = cq["metadata"]["name"]
        assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": name}}


def test_philly_jobs_map_onto_the_config_queues() -> None:
    config = philly_teams_config()
    converted = convert_trace(PHILLY, config.queues)
    assert reference_problems(config.objects, converted.workloads) == []


def test_the_config_renders_as_yaml_that_loads_back_unchanged() -> None:
    config = philly_teams_config()
    assert tuple(yaml.safe_load_all(config.to_yaml())) == config.objects
