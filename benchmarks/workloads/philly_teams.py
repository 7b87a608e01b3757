"""The 14-team config the Philly benchmark replays the Philly 15k-job trace on.

Philly ran its jobs in 14 virtual clusters, so the config has 14 teams, ``team-01`` .. ``team-14``, each a
namespace, a LocalQueue ``team-NN-queue`` and a ClusterQueue ``team-NN`` in one cohort ``philly``, over one
ResourceFlavor ``gpu-node`` (no labels or taints: the trace says nothing about node types).

Quotas, per team: 48 ``nvidia.com/gpu`` (six 8-GPU nodes, enough for the trace's largest job, 48 GPUs),
192 cpu and 1536Gi memory (4 cores and 32Gi per GPU, the ratios the trace converter asks for, so the GPUs are
what binds). 14 x 48 = 672 GPUs against a mean demand of 554 GPUs over the trace's 57.6 days (sum of
gpu_num x run_time over the span): about 82% offered load, so queues form at the peaks and borrowing
matters.

Borrowing and preemption are on: no borrowingLimit or lendingLimit (a team may run on every idle GPU of
the cohort and lends all it does not use), ``reclaimWithinCohort: Any`` and ``withinClusterQueue:
LowerPriority``, as in the guide's research queue. Users are hashed onto the teams by
:mod:`kuota.simulator.queue_mapping`, which is uneven (a few heavy users dominate), as real teams are;
say so wherever results are reported.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from benchmarks.workloads.manifests import (
    Manifest,
    QueueingConfig,
    ResourceQuota,
    cluster_queue,
    cohort,
    local_queue,
    namespace,
    resource_flavor,
)
from kuota.simulator.errors import SourceSpecError
from kuota.simulator.queue_mapping import QueueTarget

PHILLY_TEAMS = 14
PHILLY_GPUS_PER_TEAM = 48
PHILLY_COHORT = "philly"
PHILLY_FLAVOR = "gpu-node"


def philly_teams_config(
    teams: int = PHILLY_TEAMS,
    gpus_per_team: int = PHILLY_GPUS_PER_TEAM,
    *,
    cpu_per_gpu: int = 4,
    memory_gib_per_gpu: int = 32,
) -> QueueingConfig:
    for name, value in (
        ("teams", teams),
        ("gpus_per_team", gpus_per_team),
        ("cpu_per_gpu", cpu_per_gpu),
        ("memory_gib_per_gpu", memory_gib_per_gpu),
    ):
        if value < 1:
            raise SourceSpecError(f"{name} must be at least 1, got {value}")
    objects: list[Manifest] = [resource_flavor(PHILLY_FLAVOR), cohort(PHILLY_COHORT)]
    queues: list[QueueTarget] = []
    for index in range(1, teams + 1):
        team = f"team-{index:02d}"
        target = QueueTarget(team, f"{team}-queue")
        queues.append(target)
        objects.append(namespace(team))
        objects.append(
            cluster_queue(
                team,
                cohort_name=PHILLY_COHORT,
                flavor=PHILLY_FLAVOR,
                quotas=(
                    ResourceQuota("cpu", gpus_per_team * cpu_per_gpu),
                    ResourceQuota("memory", f"{gpus_per_team * memory_gib_per_gpu}Gi"),
                    ResourceQuota("nvidia.com/gpu", gpus_per_team),
                ),
                namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": team}},
                reclaim_within_cohort="Any",
                within_cluster_queue="LowerPriority",
            )
        )
        objects.append(local_queue(target, team))
    return QueueingConfig(objects=tuple(objects), queues=tuple(queues))


def isolated_teams(objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The baseline the benchmarks compare with: the same teams, each on its own quota (no cohort, so no
    borrowing and no reclaim)."""
    isolated = []
    for original in objects:
        if original["kind"] == "Cohort":
            continue
        obj = copy.deepcopy(dict(original))
        if obj["kind"] == "ClusterQueue":
            obj["spec"].pop("cohortName", None)
            obj["spec"].pop("preemption", None)
        isolated.append(obj)
    return isolated
