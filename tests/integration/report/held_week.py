"""A generated week whose Workloads began before it: the cluster's history is replayed through the real engine
from three days before the window, and both the Prometheus series and the ``kubectl get workloads -A -o json``
dump are written from that one replay, so the report's what-if, replaying only the window, must find the week
as it was.

Two ClusterQueues on 12 H100s (3 nodes x 4), no cohort, no preemption:

- inference (nominal 4): a notebook holding 1 GPU from three days before the window, and two serving pods of
  1 GPU each from two days before; all three still run when the week ends;
- research (nominal 8): a 4-GPU training run from a day before the window to 60 h into it, a 4-GPU job from
  two hours before to one hour into it, and a 4-GPU job created half an hour before the window that waits for
  that one; then every day at 09:00 a burst of three 4-GPU jobs of two hours each.

``LONG_HOLDERS`` are those a Workloads dump can lose (the notebook, the serving pods, the training run).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kuota.simulator.simulation import simulate
from tests.integration.report.openmetrics import OpenMetricsHistory, gpus_up, pod_gpu_labels

START = int(datetime(2026, 9, 28, tzinfo=UTC).timestamp())
HOURS = 168
END = START + HOURS * 3600
REPLAY_FROM = START - 3 * 86400  # the cluster's history begins here
STEP_S = 300
BUCKETS = (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480, 40960, math.inf)
GPU = "nvidia.com/gpu"
NODES = ("node-a", "node-b", "node-c")
GPUS_PER_NODE = 4
NOMINAL = {"inference": 4, "research": 8}
FOREVER_S = 30 * 86400
LONG_HOLDERS = frozenset({"notebook-alice", "server-0", "server-1", "train-long"})
BUSY_PERCENT = {"research": 80.0, "inference": 60.0}


@dataclass(frozen=True)
class Job:
    namespace: str
    name: str
    created: int  # Unix seconds
    gpus: int
    duration_s: int


def jobs() -> list[Job]:
    listed = [
        Job("inference", "notebook-alice", START - 3 * 86400 + 600, 1, FOREVER_S),
        Job("inference", "server-0", START - 2 * 86400, 1, FOREVER_S),
        Job("inference", "server-1", START - 2 * 86400 + 30, 1, FOREVER_S),
        Job("research", "train-long", START - 86400, 4, 86400 + 60 * 3600),
        Job("research", "job-before", START - 7200, 4, 3 * 3600),
        Job("research", "waiting-at-start", START - 1800, 4, 2 * 3600),
    ]
    for day in range(7):
        for index in range(3):
            created = START + day * 86400 + 9 * 3600 + 60 * index + 17
            listed.append(Job("research", f"burst-{day}-{index}", created, 4, 2 * 3600))
    return listed


CONFIG_YAML = "\n---\n".join(
    [
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}",
        *(
            f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [{GPU}]
    flavors:
    - name: h100
      resources:
      - {{name: {GPU}, nominalQuota: {gpus}}}"""
            for name, gpus in NOMINAL.items()
        ),
        *(
            f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: default, namespace: {name}}}\n"
            f"spec: {{clusterQueue: {name}}}"
            for name in NOMINAL
        ),
    ]
)


@dataclass(frozen=True)
class Run:
    """One job as the cluster ran it (Unix seconds)."""

    job: Job
    admitted: float | None
    finished: float | None


def cluster_week(config: Sequence[Mapping[str, Any]], workdir: Path) -> list[Run]:
    """The cluster's history from REPLAY_FROM, decided by the real engine (the manager's), to the week's end."""
    path = workdir / "cluster-history.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for job in sorted(jobs(), key=lambda j: j.created):
            record = {
                "name": job.name,
                "namespace": job.namespace,
                "queue": "default",
                "submitAt": job.created - REPLAY_FROM,
                "duration": job.duration_s,
                "podSets": [{"name": "main", "count": 1, "requests": {GPU: str(job.gpus)}}],
            }
            out.write(json.dumps(record) + "\n")
    output = simulate(config, path, float(END - REPLAY_FROM))
    by_name = {job.name: job for job in jobs()}
    runs = []
    for workload in output["workloads"]:
        admissions = workload["admissions"]
        if workload["evictions"]:
            raise AssertionError(f"{workload['name']} was evicted: the week has no preemption")
        finished = workload["finishedAt"]
        runs.append(
            Run(
                by_name[workload["name"]],
                REPLAY_FROM + admissions[0]["at"] if admissions else None,
                REPLAY_FROM + finished if finished is not None else None,
            )
        )
    return runs


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).isoformat().replace("+00:00", "Z")


def workloads_dump(runs: Sequence[Run], leave_out: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``kubectl get workloads -A -o json`` at the week's end."""
    items = []
    for run in runs:
        if run.job.name in leave_out:
            continue
        conditions = []
        if run.admitted is not None:
            conditions.append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": _iso(run.admitted)})
        if run.finished is not None:
            conditions.append(
                {"type": "Finished", "status": "True", "reason": "Succeeded", "lastTransitionTime": _iso(run.finished)}
            )
        container = {"name": "main", "resources": {"requests": {GPU: str(run.job.gpus)}}}
        items.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": run.job.name,
                    "namespace": run.job.namespace,
                    "creationTimestamp": _iso(run.job.created),
                },
                "spec": {
                    "queueName": "default",
                    "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
                },
                "status": {"conditions": conditions},
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _samples() -> Iterator[tuple[int, bool]]:
    """(time, inside the window) for every sample time, from an hour before the window (counters' baseline)."""
    for t in range(START - 3600 + STEP_S, END + 1, STEP_S):
        yield t, t > START


def _held(run: Run, t: int) -> bool:
    return run.admitted is not None and run.admitted <= t and (run.finished is None or t < run.finished)


def _gpus_of(runs: Sequence[Run]) -> dict[str, list[tuple[str, int]]]:
    """Each run's (node, GPU index): the lowest free ones when admitted."""
    free = [(node, gpu) for node in NODES for gpu in range(GPUS_PER_NODE)]
    events = sorted(
        [(r.admitted, 1, r) for r in runs if r.admitted is not None]
        + [(r.finished, 0, r) for r in runs if r.finished is not None and r.admitted is not None],
        key=lambda e: (e[0], e[1]),
    )
    held: dict[str, list[tuple[str, int]]] = {}
    for _, admitting, run in events:
        if admitting:
            free.sort()
            held[run.job.name], free = free[: run.job.gpus], free[run.job.gpus :]
        else:
            free += held[run.job.name]
    return held


def prometheus_history(runs: Sequence[Run]) -> OpenMetricsHistory:
    om = OpenMetricsHistory()
    gpus_up(om, NODES, GPUS_PER_NODE, (t for t, _ in _samples()))
    placed = _gpus_of(runs)
    for run in runs:
        for node, gpu in placed.get(run.job.name, []):
            labels = pod_gpu_labels(node, gpu, run.job.namespace, run.job.name)
            times = [t for t, inside in _samples() if inside and _held(run, t)]
            if times:
                om.gauge("kuota_gpu_allocated", labels, ((t, 1) for t in times))
                busy = BUSY_PERCENT[run.job.namespace]
                om.gauge("kuota_pod_gpu_sm_utilization_percent", labels, ((t, busy) for t in times))
    for cq, nominal in NOMINAL.items():
        quota = {"cluster_queue": cq, "flavor": "h100", "resource": GPU}
        mine = [r for r in runs if r.job.namespace == cq]
        om.gauge("kueue_cluster_queue_nominal_quota", quota, ((t, nominal) for t, _ in _samples()))
        om.gauge(
            "kueue_cluster_queue_resource_usage",
            quota,
            ((t, sum(r.job.gpus for r in mine if _held(r, t))) for t, _ in _samples()),
        )
        for status in ("active", "inadmissible"):
            om.gauge(
                "kueue_pending_workloads",
                {"cluster_queue": cq, "status": status},
                ((t, 0 if status == "inadmissible" else sum(1 for r in mine if _pending(r, t))) for t, _ in _samples()),
            )
        observed = [(r.admitted, r.admitted - r.job.created) for r in mine if r.admitted is not None]
        for bound in BUCKETS:
            om.add(
                "kueue_admission_wait_time_seconds",
                "histogram",
                "kueue_admission_wait_time_seconds_bucket",
                {"cluster_queue": cq, "priority_class": "", "le": "+Inf" if math.isinf(bound) else f"{bound:g}"},
                ((t, float(sum(1 for at, wait in observed if at <= t and wait <= bound))) for t, _ in _samples()),
            )
    return om


def _pending(run: Run, t: int) -> bool:
    return run.job.created <= t and (run.admitted is None or t < run.admitted)
