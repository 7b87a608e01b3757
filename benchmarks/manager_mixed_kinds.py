"""The manager's memory with 10,000 Workloads of mixed kinds (target <= 150 MB resident), on a real control plane.

    .venv/bin/python benchmarks/manager_mixed_kinds.py [--workloads 10000]

The manager runs with ``integrations.frameworks: [batch/job, pod]``. A quarter of the Workloads come from Jobs,
a quarter from single Pods (gated until admitted, so watched by the manager), a quarter from pod groups of two
Pods each, and the rest are standalone Workloads; every object goes through the webhook. Each team's quota fits
only a few, so nearly everything stays queued (the memory a backlog costs). Printed: the manager's resident
memory idle on an empty cluster (the baseline) and at the end, with the objects counted from the API server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.manager_admission import TEAMS, _create_all, _job, _queues, _rss, _workload
from kuota.kube.client import KubeApi
from kuota.webhook.crds import crd_manifests
from tests.cluster import Cluster
from tests.manager_process import MANAGED_LABEL, ManagerProcess
from tests.waiting import async_wait_until

CONFIG = (
    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n  frameworks: [batch/job, pod]\n"
)


def _pod(team: str, name: str, group: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "queue"}
    annotations = {}
    if group is not None:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = "2"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": team, "labels": labels, "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "bench", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


async def _count(api: KubeApi, path: str) -> int:
    total, token = 0, ""
    while True:
        query = [("limit", "500")] + ([("continue", token)] if token else [])
        page = (await api.request("GET", path, query=query)).object()
        total += len(page["items"])
        token = page["metadata"].get("continue") or ""
        if not token:
            return total


async def _load(manager: ManagerProcess, cluster: Cluster, workloads: int) -> list[tuple[str, str]]:
    api = KubeApi.from_kubeconfig(cluster.kubeconfig)
    rows: list[tuple[str, str]] = []
    quarter = workloads // 4
    try:
        started = time.perf_counter()
        await _create_all(
            api,
            "/apis/batch/v1/namespaces/{namespace}/jobs",
            [(TEAMS[i % 3], _job(TEAMS[i % 3], i)) for i in range(quarter)],
        )
        pods = [(TEAMS[i % 3], _pod(TEAMS[i % 3], f"single-{i:05d}")) for i in range(quarter)]
        pods += [
            (TEAMS[g % 3], _pod(TEAMS[g % 3], f"group-{g:05d}-{member}", group=f"group-{g:05d}"))
            for g in range(quarter)
            for member in range(2)
        ]
        await _create_all(api, "/api/v1/namespaces/{namespace}/pods", pods)
        standalone = workloads - 3 * quarter
        await _create_all(
            api,
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads",
            [(TEAMS[i % 3], _workload(TEAMS[i % 3], i)) for i in range(standalone)],
        )
        path = "/apis/kueue.x-k8s.io/v1beta2/workloads"

        async def every_workload() -> int | None:
            count = await _count(api, path)
            return count if count >= workloads else None

        found = await async_wait_until(every_workload, f"{workloads} Workloads", timeout=900, interval=5)
        rows.append(("objects created (Jobs, single Pods, grouped Pods, Workloads)",
                     f"{quarter}, {quarter}, {2 * quarter}, {standalone}"))  # fmt: skip
        rows.append(("time to create them and for every Workload to exist", f"{time.perf_counter() - started:.0f} s"))
        rows.append(("Workloads in the cluster", str(found)))
        await asyncio.sleep(15)  # let the caches and the engine settle before reading memory
        rows.append((f"manager RSS at {found} Workloads of mixed kinds (target <= 150 MB)", _rss(manager)))
    finally:
        await api.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=10000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kuota-bench-") as folder:
        cluster = Cluster.start(Path(folder))
        try:
            crds = {"apiVersion": "v1", "kind": "List", "items": crd_manifests()}
            cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(crds))
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
            config = Path(folder) / "config.yaml"
            config.write_text(CONFIG)
            manager = ManagerProcess(cluster, "kuota-system", extra_args=("--log-level=WARNING", f"--config={config}"))
            manager.start()
            rows = [("manager RSS idle (baseline)", _rss(manager))]
            rows += asyncio.run(_load(manager, cluster, args.workloads))
            manager.stop()
        finally:
            cluster.stop()
    width = max(len(name) for name, _ in rows)
    for name, figure in rows:
        print(f"{name:<{width}}  {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
