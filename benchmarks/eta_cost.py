"""Benchmark: what one admission-ETA recomputation costs the manager at scale.

Run: ``.venv/bin/python benchmarks/eta_cost.py [--queues 1000] [--pending 10000]``. A controller state like
the manager's (its engine, and its view of every Workload as the API shows it): ``--queues`` ClusterQueues of
8 GPUs, each full with 8 running 1-GPU Workloads, and ``--pending`` Workloads waiting across them, every one
declaring its runtime (``kuota.dev/expected-runtime``, 10 to 80 min). Then the controller's own
recomputation (:class:`kuota.webhook.controller.etas.EtaBook`): the snapshot on the event loop (the Workloads
and admissions as the engine holds them; each annotated runtime parsed once, so the first round parses all of
them, later ones none) and the forward replay in its worker thread. Printed: CPU
seconds of each part (target: at most 1 s per recomputation, compiled engine), and the resident memory the
ETAs' cache adds. The manager's own memory at 10,000 Workloads with ETAs on is
``benchmarks/manager_admission.py``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import sys
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kuota.engine.decoding import parse_object, parse_workload
from kuota.engine.model import Configuration
from kuota.engine_build import engine_build
from kuota.kube.client import KubeApi
from kuota.simulator.forecast import forecast
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import ApiWriter
from kuota.webhook.controller.etas import EtaBook
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.state import ControllerState, compact_workload

TARGET_SECONDS = 1.0
API = "kueue.x-k8s.io/v1beta2"
NOW = datetime.datetime(2026, 12, 1, 12, tzinfo=datetime.UTC).timestamp()


def _queue_objects(index: int) -> list[dict[str, Any]]:
    name = f"team-{index:04d}"
    return [
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": name},
            "spec": {"clusterQueue": name},
        },
    ]


def _workload(namespace: str, name: str, index: int, admitted_at: float | None) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"{namespace}-{name}",
            "resourceVersion": str(index + 1),
            "creationTimestamp": status.rfc3339(NOW - 7200 + index * 0.01),
            "annotations": {"kuota.dev/expected-runtime": f"{10 * (1 + index % 8)}m"},
        },
        "spec": {
            "queueName": "q",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
        "status": {"conditions": []},
    }
    if admitted_at is not None:
        usage = {"nvidia.com/gpu": "1"}
        obj["status"] = {
            "admission": {
                "clusterQueue": namespace,
                "podSetAssignments": [
                    {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": "gpu"}, "resourceUsage": usage}
                ],
            },
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": status.rfc3339(admitted_at)}
            ],
        }
    return obj


def _state(queues: int, pending: int) -> ControllerState:
    state = ControllerState(Configuration(), clock=lambda: NOW)
    engine = state.engine
    engine.apply(parse_object({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}))
    for index in range(queues):
        for obj in _queue_objects(index):
            engine.apply(parse_object(obj))
    count = 0
    for index in range(queues):
        namespace = f"team-{index:04d}"
        for slot in range(8):
            obj = _workload(namespace, f"running-{slot}", count, NOW - 60 * (1 + slot))
            state.workloads.observe(f"{namespace}/running-{slot}", compact_workload(obj))
            pod_sets = status.admitted_pod_sets(obj)
            assert pod_sets is not None
            parsed = state.parsed[f"{namespace}/running-{slot}"] = parse_workload(obj, {})
            engine.restore_admitted(parsed, namespace, pod_sets, NOW - 60 * (1 + slot))
            count += 1
    for index in range(pending):
        namespace = f"team-{index % queues:04d}"
        obj = _workload(namespace, f"pending-{index}", count, None)
        state.workloads.observe(f"{namespace}/pending-{index}", compact_workload(obj))
        parsed = state.parsed[f"{namespace}/pending-{index}"] = parse_workload(obj, {})
        engine.submit(parsed)
        count += 1
    return state


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _loop_during_replay(book: EtaBook) -> tuple[float, int]:
    """The controller's recomputation, with a 1 ms timer on the event loop meanwhile. Its first tick waits
    out the snapshot, on the loop (the table's snapshot column); how late the others fire while the replay
    runs in its worker thread is how long a decision would wait for the GIL."""
    lateness: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lateness.append(time.perf_counter() - started - 0.001)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)  # the timer is set before the snapshot starts
    await book.recompute()
    done.set()
    await ticker
    return max(lateness[1:], default=0.0), len(lateness)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10000)
    args = parser.parse_args()
    state = _state(args.queues, args.pending)
    book = EtaBook(state, ApiWriter(cast(KubeApi, None), ControllerMetrics()))
    gc.collect()
    before = _rss_mib()
    rows = []
    for round_name in ("first (parses every annotation)", "steady (nothing changed)"):
        started = time.process_time()
        taken = book.snapshot(NOW)
        snapshot = time.process_time() - started
        started = time.process_time()
        etas = forecast(taken.objects, taken.running, taken.pending, NOW, recent=taken.recent)
        replay = time.process_time() - started
        rows.append((round_name, snapshot, replay, len(etas), len(taken.pending), len(taken.running)))
    stall, ticks = asyncio.run(_loop_during_replay(book))  # the controller's own path, worker thread included
    gc.collect()
    print(
        f"{args.pending} pending + {8 * args.queues} running Workloads over {args.queues} ClusterQueues; "
        f"engine {engine_build()}"
    )
    print(f"{'round':32} {'snapshot s':>10} {'replay s':>9} {'total s':>8} {'vs 1 s':>7} {'ETAs':>6}")
    for name, snapshot, replay, made, waiting, _ in rows:
        total = snapshot + replay
        print(
            f"{name:32} {snapshot:10.2f} {replay:9.2f} {total:8.2f} {total / TARGET_SECONDS:6.2f}x "
            f"{made:6d} of {waiting}"
        )
    print(f"resident memory the ETAs' cache and last ETAs add: {_rss_mib() - before:.0f} MiB")
    print(
        f"event loop while the replay ran in its worker thread: a 1 ms timer fired {ticks} times, at most "
        f"{stall * 1000:.1f} ms late"
    )
    print("(CPU seconds of this process: the snapshot runs on the event loop, the replay in a worker thread)")


if __name__ == "__main__":
    main()
