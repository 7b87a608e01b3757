"""One controller, one fresh control plane: install, start, apply the queues, drive the load, measure, tear down.

Everything here is the imperative shell; what it measured goes back as timelines and :class:`ManagerUsage`.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from benchmarks.side_by_side.controllers import (
    DEFAULT_FRAMEWORKS,
    Controller,
    KueueController,
    KuotaController,
    KuotaWithoutEtasController,
    apply_objects,
)
from benchmarks.side_by_side.errors import ControllerError
from benchmarks.side_by_side.live_run import LiveRun, PlannedObject
from benchmarks.side_by_side.measures import WorkloadTimeline, percentile
from benchmarks.side_by_side.process_usage import (
    busiest,
    dispatched_requests,
    flow_schema_name,
    read_cpu_seconds,
    read_peak_rss_mib,
    requests_by_kind,
    writes_flow_schema_name,
)
from benchmarks.side_by_side.rest import KubeApi
from benchmarks.side_by_side.table import ManagerUsage
from tests.cluster import Cluster
from tests.waiting import wait_until

CONTROLLERS: dict[str, Callable[[Cluster, tuple[str, ...], Mapping[str, Any]], Controller]] = {
    "kuota": KuotaController,
    "kuota-no-etas": KuotaWithoutEtasController,
    "Kueue": KueueController,
}
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LiveResult:
    timelines: list[WorkloadTimeline]
    usage: ManagerUsage
    creation_lag_p95: float
    write_failures: int
    busiest_requests: list[tuple[str, int]]


@contextmanager
def _work_folder(name: str, keep_under: Path | None) -> Iterator[Path]:
    if keep_under is None:
        with tempfile.TemporaryDirectory(prefix=f"side-by-side-{name.lower()}-") as folder:
            yield Path(folder)
        return
    keep_under.mkdir(parents=True, exist_ok=True)
    yield Path(tempfile.mkdtemp(prefix=f"{name.lower()}-", dir=keep_under))


@contextmanager
def controller_on_fresh_cluster(
    name: str,
    queue_objects: Sequence[dict[str, Any]],
    keep_under: Path | None = None,
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS,
    configuration: Mapping[str, Any] | None = None,
    *,
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[tuple[Cluster, Controller]]:
    """A new control plane with ``name``'s controller running (``frameworks``: the integrations it enables;
    ``configuration``: more fields of its Configuration; ``node_labels``: labels added to its fake nodes, by node
    name, before the controller starts) and the queue objects applied and active (every AdmissionCheck among them
    set Active by hand: no check controller runs); its folder (logs, etcd) is removed afterwards unless
    ``keep_under`` is given."""
    with _work_folder(name, keep_under) as folder:
        began = time.monotonic()
        cluster = Cluster.start(folder)
        try:
            for node, labels in (node_labels or {}).items():
                cluster.kubectl("label", "node", node, *(f"{key}={value}" for key, value in labels.items()))
            controller = CONTROLLERS[name](cluster, frameworks, configuration or {})
            controller.install()
            controller.start()
            try:
                labels = controller.namespace_labels()
                objects = [_labelled(obj, labels) for obj in queue_objects]
                apply_objects(cluster, objects)
                for check in (obj["metadata"]["name"] for obj in objects if obj["kind"] == "AdmissionCheck"):
                    _set_active(cluster, check)
                queues = [obj["metadata"]["name"] for obj in objects if obj["kind"] == "ClusterQueue"]
                wait_until(
                    lambda: _all_active(cluster, queues),
                    f"{name}: every ClusterQueue Active (logs in {folder})",
                    timeout=120,
                )
                print(f"  {name}: control plane, controller and queues ready in {time.monotonic() - began:.0f}s")
                yield cluster, controller
            finally:
                controller.stop()
        finally:
            cluster.stop()


def _labelled(obj: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    if obj["kind"] != "Namespace" or not labels:
        return obj
    merged = {**(obj["metadata"].get("labels") or {}), **labels}
    return {**obj, "metadata": {**obj["metadata"], "labels": merged}}


def _set_active(cluster: Cluster, check: str) -> None:
    """What an AdmissionCheck's controller does when it starts: its ``Active`` condition True."""
    condition = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "set by the side-by-side harness",
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    patch = json.dumps({"status": {"conditions": [condition]}})
    cluster.kubectl(
        "patch", "admissionchecks.kueue.x-k8s.io", check, "--subresource=status", "--type=merge", "-p", patch
    )


def _all_active(cluster: Cluster, queues: list[str]) -> bool:
    listing = json.loads(cluster.kubectl("get", "clusterqueues.kueue.x-k8s.io", "-o", "json").stdout)
    active = {
        item["metadata"]["name"]
        for item in listing["items"]
        if any(
            c.get("type") == "Active" and c.get("status") == "True"
            for c in (item.get("status") or {}).get("conditions") or []
        )
    }
    return set(queues) <= active


def api_for(cluster: Cluster) -> KubeApi:
    return KubeApi(cluster.server, cluster.ssl_context())


@dataclass(frozen=True, slots=True)
class Measured(Generic[T]):
    outcome: T
    usage: ManagerUsage
    busiest_requests: list[tuple[str, int]]  # every client's, by verb and resource, during the drive


def measured(cluster: Cluster, controller: Controller, drive: Callable[[], Awaitable[T]]) -> Measured[T]:
    """Run ``drive`` on a fresh event loop; the manager's CPU and requests are counted over that span only."""
    schema, writes_schema = flow_schema_name(controller.user), writes_flow_schema_name(controller.user)
    metrics_before = cluster.kubectl("get", "--raw", "/metrics").stdout
    cpu_before = read_cpu_seconds(controller.pid)
    outcome = asyncio.run(_awaited(drive))
    cpu_after = read_cpu_seconds(controller.pid)
    metrics_after = cluster.kubectl("get", "--raw", "/metrics").stdout
    usage = ManagerUsage(
        cpu_seconds=cpu_after - cpu_before,
        peak_rss_mib=read_peak_rss_mib(controller.pid),
        apiserver_requests=sum(
            dispatched_requests(metrics_after, name) - dispatched_requests(metrics_before, name)
            for name in (schema, writes_schema)
        ),
        apiserver_writes=dispatched_requests(metrics_after, writes_schema)
        - dispatched_requests(metrics_before, writes_schema),
    )
    traffic = busiest(requests_by_kind(metrics_before), requests_by_kind(metrics_after), 8)
    return Measured(outcome, usage, traffic)


async def _awaited(drive: Callable[[], Awaitable[T]]) -> T:
    return await drive()


def run_load(
    name: str,
    queue_objects: Sequence[dict[str, Any]],
    plan: list[PlannedObject],
    deadline: float,
    keep_under: Path | None = None,
) -> LiveResult:
    with controller_on_fresh_cluster(name, queue_objects, keep_under) as (cluster, controller):

        async def drive() -> LiveRun:
            async with api_for(cluster) as api:
                live = LiveRun(api, plan)
                await live.run(deadline)
                return live

        result = measured(cluster, controller, drive)
    live = result.outcome
    if len(live.timelines) != len(plan):
        raise ControllerError(f"{name}: only {len(live.timelines)} of {len(plan)} objects were created")
    return LiveResult(
        timelines=list(live.timelines.values()),
        usage=result.usage,
        creation_lag_p95=percentile(live.creation_lag, 0.95),
        write_failures=live.write_failures,
        busiest_requests=result.busiest_requests,
    )
