"""The manager on a real control plane: admission throughput, quota-free-to-running latency, and memory.

    .venv/bin/python benchmarks/manager_admission.py [--jobs 2000] [--workloads 10000] [--compare etas|pods-ready]

1. 2,000 Jobs from three teams are created at once (50 requests in flight) through the webhook. Printed: the
   time until every Job that fits is unsuspended, and p50/p95 from creation to unsuspension.
2. 100 running Jobs are deleted at once; their quota goes to queued Jobs. Printed: p50/p95 from "quota free"
   (the delete returned) to "Job unsuspended" (target p95 <= 1 s).
3. Standalone Workloads are created until the cluster holds 10,000 Workloads in all (the Jobs' own
   included); printed: the manager's resident memory (target <= 150 MB at 10,000 Workloads) next to its
   memory when idle on an empty cluster (the baseline measured in this run).
Each phase runs on the control plane of tests/cluster, with the manager as a separate process.

``--etas both`` (the default) runs everything twice, each on a fresh control plane: with the admission ETAs
off (``--eta-interval 0``) and on (every 5 s), and prints the two side by side with the ratio of the
quota-free-to-unsuspended p95 (target: ETAs on within 10% of off). Every Job and Workload declares an
expected runtime (``kuota.dev/expected-runtime: 1h``), so the ETAs have a forward replay to run.

``--compare pods-ready`` sets waitForPodsReady side by side instead (ETAs on in both): off through Kueue's
``DisableWaitForPodsReady`` feature gate in a ``--config``, on as by default (every admitted Job's Workload gets
its PodsReady condition written; target: p95 and memory within 10% of off).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kuota.kube.client import KubeApi
from kuota.kube.reflector import Event, EventType, Reflector, ResourceType
from kuota.webhook.crds import crd_manifests
from tests.cluster import Cluster
from tests.manager_process import MANAGED_LABEL, ManagerProcess
from tests.waiting import async_wait_until, wait_until

TEAMS = ("research", "applied-ml", "inference")
EXPECTED_RUNTIME = "kuota.dev/expected-runtime"
HANDOFF = "quota free -> Job unsuspended p50 / p95"
FITS_PER_TEAM = 500  # nominal quota in cores; each Job asks for one


def _queues() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    ]
    for team in TEAMS:
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": team},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": "default",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": FITS_PER_TEAM},
                                        {"name": "memory", "nominalQuota": "100Ti"},
                                    ],
                                }
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
                "metadata": {"name": "queue", "namespace": team},
                "spec": {"clusterQueue": team},
            }
        )
    return objects


def _job(team: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"bench-{index:05d}",
            "namespace": team,
            "labels": {"kueue.x-k8s.io/queue-name": "queue"},
            "annotations": {EXPECTED_RUNTIME: "1h"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "bench", "resources": {"requests": {"cpu": "1"}}}],
                }
            }
        },
    }


def _workload(team: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": f"standalone-{index:05d}", "namespace": team, "annotations": {EXPECTED_RUNTIME: "1h"}},
        "spec": {
            "queueName": "queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "bench", "resources": {"requests": {"cpu": "1"}}}],
                        }
                    },
                }
            ],
        },
    }


def _rss(manager: ManagerProcess) -> str:
    """The manager's resident memory in MiB and in MB (the target's unit)."""
    assert manager.process is not None, "the manager is not running"
    for line in Path(f"/proc/{manager.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            kib = int(line.split()[1])
            return f"{kib / 1024:.0f} MiB = {kib * 1024 / 1e6:.0f} MB"
    raise RuntimeError(f"no VmRSS for the manager, pid {manager.process.pid}")


def _pending_workloads(manager: ManagerProcess) -> float:
    """The pending Workloads the manager's ``kueue_pending_workloads`` gauge reports, over every ClusterQueue
    and status (read by label, whatever other labels the series carries)."""
    return sum(value for (name, _), value in manager.metric_values().items() if name == "kueue_pending_workloads")


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


JOBS = ResourceType("batch", "v1", "jobs", namespaced=True)


class Unsuspensions:
    """When each Job was first seen unsuspended, from a watch (the manager's own Reflector) started before the
    load."""

    def __init__(self, api: KubeApi) -> None:
        self.seen: dict[str, float] = {}
        self.reflector: Reflector[Mapping[str, Any]] = Reflector(api, JOBS, lambda job: job)
        self.reflector.subscribe(self._observe)

    def _observe(self, event: Event[Mapping[str, Any]]) -> None:
        job = event.value
        if event.type is not EventType.DELETED and job["spec"].get("suspend") is False and event.key not in self.seen:
            self.seen[event.key] = time.perf_counter()


async def _create_all(
    api: KubeApi, collection: str, bodies: list[tuple[str, dict[str, Any]]], parallel: int = 50
) -> dict[str, float]:
    """POST every body to ``collection`` (a path with ``{namespace}``), retrying what the server sheds."""
    created: dict[str, float] = {}
    slots = asyncio.Semaphore(parallel)

    async def one(namespace: str, body: dict[str, Any]) -> None:
        async with slots:
            for _ in range(20):
                response = await api.request("POST", collection.format(namespace=namespace), body=body)
                if response.status not in (429, 500, 503, 504):
                    response.raise_for_status()
                    break
                await asyncio.sleep(0.5)
            created[f"{namespace}/{body['metadata']['name']}"] = time.perf_counter()

    await asyncio.gather(*(one(namespace, body) for namespace, body in bodies))
    return created


async def _phases(cluster: Cluster, manager: ManagerProcess, jobs: int, workloads: int) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    api = KubeApi.from_kubeconfig(cluster.kubeconfig)
    watcher = Unsuspensions(api)
    watching = asyncio.create_task(watcher.reflector.run())
    await asyncio.sleep(1)
    try:
        started = time.perf_counter()
        bodies = [(TEAMS[i % 3], _job(TEAMS[i % 3], i)) for i in range(jobs)]
        created = await _create_all(api, "/apis/batch/v1/namespaces/{namespace}/jobs", bodies)
        fits = min(jobs, FITS_PER_TEAM * len(TEAMS))
        await async_wait_until(lambda: len(watcher.seen) >= fits, "every Job that fits to run", timeout=600)
        all_in = time.perf_counter() - started
        latencies = [watcher.seen[key] - created[key] for key in watcher.seen if key in created]
        p50, p95 = _quantiles(latencies)
        rows.append(("Jobs created at once (through the webhook)", str(jobs), ""))
        rows.append(("time until every Job that fits runs", f"{all_in:.1f} s", f"{len(watcher.seen)} of {fits}"))
        rows.append(("creation -> unsuspended p50 / p95", f"{p50 * 1000:.0f} / {p95 * 1000:.0f} ms", ""))

        running = sorted(watcher.seen, key=watcher.seen.__getitem__)[:100]
        before = set(watcher.seen)
        freed_at = {}
        for key in running:
            namespace, name = key.split("/")
            path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
            (await api.request("DELETE", path, body={"propagationPolicy": "Background"})).raise_for_status()
            freed_at[key] = time.perf_counter()
        await async_wait_until(
            lambda: len(set(watcher.seen) - before) >= len(running), "queued Jobs to take the freed quota", timeout=120
        )
        successors = sorted(set(watcher.seen) - before, key=watcher.seen.__getitem__)
        frees = sorted(freed_at.values())
        handoffs = [watcher.seen[key] - frees[i] for i, key in enumerate(successors[: len(frees)])]
        p50, p95 = _quantiles(handoffs)
        rows.append(
            (
                HANDOFF,
                f"{p50 * 1000:.0f} / {p95 * 1000:.0f} ms",
                "target p95 <= 1000 ms",
            )
        )
        rows.append(("manager RSS with the Jobs", _rss(manager), ""))

        started = time.perf_counter()
        standalone = max(0, workloads - jobs)  # every Job has its Workload already
        await _create_all(
            api,
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads",
            [(TEAMS[i % 3], _workload(TEAMS[i % 3], i)) for i in range(standalone)],
        )
        created_in = time.perf_counter() - started
        still_queued = jobs - len(watcher.seen) + standalone
        wait_until(
            lambda: _pending_workloads(manager) >= still_queued,
            f"the manager to report {still_queued} pending Workloads",
            timeout=300,
        )
        await asyncio.sleep(10)  # let the caches and the engine settle before reading memory
        rows.append((f"{standalone} standalone Workloads created", f"{created_in:.1f} s", ""))
        rows.append(
            (
                f"manager RSS at {standalone + jobs} Workloads",
                _rss(manager),
                "target <= 150 MB",
            )
        )
    finally:
        watching.cancel()
        await api.close()
    return rows


def _measure(jobs: int, workloads: int, eta_interval: str, pods_ready: bool = True) -> list[tuple[str, str, str]]:
    """Every phase on a fresh control plane, the manager recomputing ETAs every ``eta_interval`` (0: off) and
    enforcing waitForPodsReady (its default) unless ``pods_ready`` is false."""
    with tempfile.TemporaryDirectory(prefix="kuota-bench-") as folder:
        cluster = Cluster.start(Path(folder))
        try:
            cluster.kubectl(
                "apply",
                "--server-side",
                "-f",
                "-",
                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crd_manifests()}),
            )
            for manifest in crd_manifests():
                cluster.kubectl(
                    "wait", "--for=condition=Established", "--timeout=60s", f"crd/{manifest['metadata']['name']}"
                )
            cluster.kubectl("create", "namespace", "kuota-system")
            for team in TEAMS:
                cluster.kubectl("create", "namespace", team)
                cluster.kubectl("label", "namespace", team, f"{MANAGED_LABEL}=true")
            cluster.kubectl(
                "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": _queues()})
            )
            arguments = ["--log-level=WARNING", f"--eta-interval={eta_interval}"]
            if not pods_ready:
                config = Path(folder) / "no-pods-ready.yaml"
                config.write_text(json.dumps(NO_PODS_READY))
                arguments.append(f"--config={config}")
            manager = ManagerProcess(cluster, "kuota-system", extra_args=tuple(arguments))
            manager.start()
            rows = [("manager RSS idle (baseline)", _rss(manager), "")]
            rows += asyncio.run(_phases(cluster, manager, jobs, workloads))
            cpu = _cpu_seconds(manager.process.pid)  # type: ignore[union-attr]
            rows.append(("manager CPU time, start to end (user + system)", f"{cpu:.1f} s", ""))
            manager.stop()
        finally:
            cluster.stop()
    return rows


NO_PODS_READY = {  # Kueue's gate for turning waitForPodsReady off (it is on by default since v0.19)
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "featureGates": {"DisableWaitForPodsReady": True},
}


def _p95_ms(rows: list[tuple[str, str, str]]) -> float:
    figure = next(figure for name, figure, _ in rows if name == HANDOFF)
    return float(figure.split("/")[1].split()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workloads", type=int, default=10000, help="Workloads in all, the Jobs' included")
    parser.add_argument(
        "--etas", choices=("on", "off", "both"), default="both", help="admission ETAs on, off, or both side by side"
    )
    parser.add_argument(
        "--compare",
        choices=("etas", "pods-ready"),
        default="etas",
        help="the knob --etas both sets side by side: the admission ETAs (waitForPodsReady on), or waitForPodsReady "
        "(ETAs on, every 5 s)",
    )
    args = parser.parse_args()
    settings = {"off": ["off"], "on": ["on"], "both": ["off", "on"]}[args.etas]
    knob = "ETAs" if args.compare == "etas" else "PodsReady"
    runs = {
        setting: _measure(args.jobs, args.workloads, "5s" if setting == "on" else "0")
        if args.compare == "etas"
        else _measure(args.jobs, args.workloads, "5s", pods_ready=setting == "on")
        for setting in settings
    }
    width = max(len(row[0]) for rows in runs.values() for row in rows)
    print(f"{'measure':<{width}}  " + "  ".join(f"{knob + ' ' + s:>18}" for s in settings) + "  note")
    first = runs[settings[0]]
    for index, (name, _, note) in enumerate(first):
        figures = "  ".join(f"{runs[s][index][1]:>18}" for s in settings)
        print(f"{name:<{width}}  {figures}  {note}")
    if len(settings) == 2:
        ratio = _p95_ms(runs["on"]) / max(1.0, _p95_ms(runs["off"]))
        print(f"quota free -> unsuspended p95, {knob} on / off: {ratio:.2f} (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
