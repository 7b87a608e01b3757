"""The real Helios Earth traces (tests/data/traces/helios-earth, 16 teams, May 2020, one row a minute) as
the manager's and the exporter's series, for the report to read from a real Prometheus.

Each team becomes a ClusterQueue and a namespace of its own name. Per minute row i (sampled at the end of
its minute, so the report's (start, end] hours hold exactly their 60 rows):

- ``kueue_cluster_queue_nominal_quota`` = total_gpu_num (the team's GPUs: its quota today),
  ``kueue_cluster_queue_resource_usage`` = running_gpu_num, ``kueue_pending_workloads{status="active"}`` =
  pending_gpujob_num, ``kuota_gpu_allocated`` = running_gpu_num as one aggregate series per team;
- no SM utilization: the trace's "gpu_utilization" is allocation, so the utilization series are left out
  and the report must call them missing;
- ``kueue_admission_wait_time_seconds`` is *derived*, not measured: pending jobs leave the queue first in,
  first out, so a decrease of the pending count admits the oldest arrivals; jobs that started without
  queueing (running jobs up by more than the queue released) are observed with a wait of 0.

Gauges are written only when they change and on each hour boundary: the test Prometheus runs with a 1 h
lookback, so each instant still sees the value in force, exactly.
"""

from __future__ import annotations

import csv
import gzip
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.integration.report.openmetrics import OpenMetricsHistory

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces" / "helios-earth"
START = int(datetime(2020, 5, 1, tzinfo=UTC).timestamp())
BUCKETS = (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480, 40960, float("inf"))
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class TeamTrace:
    name: str
    total: tuple[int, ...]
    running: tuple[int, ...]
    pending_jobs: tuple[int, ...]
    running_jobs: tuple[int, ...]
    pending_gpus: tuple[int, ...]


def traces_folder() -> Path:
    return TRACES


def load(folder: Path = TRACES) -> list[TeamTrace]:
    teams = []
    for path in sorted(folder.glob("earth_*.csv.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        teams.append(
            TeamTrace(
                # Kubernetes names are lowercase; the 16 team ids stay distinct lowercased
                path.name.removeprefix("earth_").removesuffix(".csv.gz").lower(),
                tuple(int(r["total_gpu_num"]) for r in rows),
                tuple(int(r["running_gpu_num"]) for r in rows),
                tuple(int(r["pending_gpujob_num"]) for r in rows),
                tuple(int(r["running_gpujob_num"]) for r in rows),
                tuple(int(r["pending_gpu_num"]) for r in rows),
            )
        )
    return teams


def minutes(teams: list[TeamTrace]) -> int:
    return len(teams[0].total)


def end(teams: list[TeamTrace]) -> int:
    return START + 60 * minutes(teams)


def waits(team: TeamTrace) -> Iterator[tuple[int, float]]:
    """(minute of admission, wait in seconds), FIFO as the module docstring says."""
    queue: deque[int] = deque()
    previous_pending = previous_running = 0
    for minute, (pending, running) in enumerate(zip(team.pending_jobs, team.running_jobs, strict=True)):
        change = pending - previous_pending
        released = 0
        if change > 0:
            queue.extend([minute] * change)
        else:
            for _ in range(min(-change, len(queue))):
                released += 1
                yield minute, 60.0 * (minute - queue.popleft())
        for _ in range(max(0, running - previous_running - released)):
            yield minute, 0.0
        previous_pending, previous_running = pending, running


def _changes(values: tuple[int, ...], last_time: int) -> Iterator[tuple[int, float]]:
    """A sample where the value changes and on every hour boundary (the heartbeat the lookback needs)."""
    previous: int | None = None
    for minute, value in enumerate(values):
        if value != previous or (minute + 1) % 60 == 0:
            yield START + 60 * (minute + 1), float(value)
            previous = value
    if START + 60 * len(values) != last_time:
        raise ValueError("trace length and window disagree")


def history(teams: list[TeamTrace]) -> OpenMetricsHistory:
    om = OpenMetricsHistory()
    finish = end(teams)
    for team in teams:
        quota = {"cohort": "", "cluster_queue": team.name, "flavor": "default", "resource": GPU}
        om.gauge("kueue_cluster_queue_nominal_quota", quota, _changes(team.total, finish))
        om.gauge("kueue_cluster_queue_resource_usage", quota, _changes(team.running, finish))
        om.gauge(
            "kueue_pending_workloads",
            {"cluster_queue": team.name, "status": "active"},
            _changes(team.pending_jobs, finish),
        )
        om.gauge(
            "kuota_gpu_allocated",
            {
                "namespace": team.name,
                "pod": "all-jobs",
                "Hostname": "helios-earth",
                "gpu": "all",
                "UUID": f"team-{team.name}",
                "container": "",
            },
            _changes(team.running, finish),
        )
    for team in teams:
        observed = list(waits(team))
        for bound in BUCKETS:
            om.add(
                "kueue_admission_wait_time_seconds",
                "histogram",
                "kueue_admission_wait_time_seconds_bucket",
                {
                    "cluster_queue": team.name,
                    "priority_class": "",
                    "le": "+Inf" if bound == float("inf") else f"{bound:g}",
                },
                _bucket_counter(observed, bound, finish),
            )
    return om


def _bucket_counter(observed: list[tuple[int, float]], bound: float, finish: int) -> Iterator[tuple[int, float]]:
    count = 0
    points = [(START, 0.0)]
    for minute, wait in observed:
        if wait <= bound:
            count += 1
            t = START + 60 * (minute + 1)
            if points[-1][0] == t:
                points[-1] = (t, float(count))
            else:
                points.append((t, float(count)))
    if points[-1][0] != finish:
        points.append((finish, float(count)))
    return iter(points)


DEMAND_STEP_MINUTES = 10


def _job(team: str, number: int, submitted: int, gpus: int, ended: int) -> dict[str, object]:
    return {
        "name": f"{team}-{number}",
        "namespace": team,
        "queue": "default",
        "priorityClass": None,
        "submitAt": float(submitted),
        "duration": float(max(60, ended - submitted)),
        "maxExecutionSeconds": None,
        "podSets": [{"name": "main", "count": 1, "requests": {GPU: str(gpus)}, "nodeSelector": {}, "tolerations": []}],
    }


def workloads(teams: list[TeamTrace]) -> Iterator[dict[str, object]]:
    """The month's demand as simulate workloads, for the what-if.

    The trace has counts, not jobs, so jobs are rebuilt from each team's demand (running + pending GPUs,
    every 10 minutes): a rise of k GPUs submits k GPUs of jobs (8-GPU pods and one remainder pod); a fall
    finishes the most recent ones (last in, first out). A job's duration is its time in the system in the
    trace, queueing included, so the replay's demand is if anything heavier than the real one.
    """
    finish = 60 * minutes(teams)
    for team in teams:
        stack: list[tuple[int, int]] = []  # (submitted at, GPUs)
        numbers = itertools.count(1)
        demand = 0
        for minute in range(0, minutes(teams), DEMAND_STEP_MINUTES):
            now = 60 * minute
            wanted = team.running[minute] + team.pending_gpus[minute]
            while wanted > demand:
                size = min(8, wanted - demand)
                stack.append((now, size))
                demand += size
            while wanted < demand:
                submitted, size = stack.pop()
                released = min(size, demand - wanted)
                yield _job(team.name, next(numbers), submitted, released, now)
                if size > released:
                    stack.append((submitted, size - released))
                demand -= released
        for submitted, size in stack:
            yield _job(team.name, next(numbers), submitted, size, finish)


def config(teams: list[TeamTrace]) -> list[dict[str, object]]:
    """Today's queues: one ClusterQueue per team with its GPUs as nominal quota, no cohort."""
    objects: list[dict[str, object]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    ]
    for team in teams:
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": team.name},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [
                                {"name": "default", "resources": [{"name": GPU, "nominalQuota": max(team.total)}]}
                            ],
                        }
                    ],
                },
            }
        )
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": team.name},
                "spec": {"clusterQueue": team.name},
            }
        )
    return objects
