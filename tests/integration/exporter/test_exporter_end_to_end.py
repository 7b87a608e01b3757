"""The whole node plane: ``kuota exporter`` (a process, real pynvml on the fake NVML, a fake /proc, a real
gRPC PodResources server, the pod watch on the real API server) scraped by a real Prometheus, asked in PromQL.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import GPU_RESOURCE, Cluster
from tests.fakes import proc_tree
from tests.fakes.exporter_process import running_exporter
from tests.fakes.nvml.build import build
from tests.fakes.nvml.scenario import Busy, Process, Scenario, h100s
from tests.fakes.podresources_server import Assigned, FakeKubelet
from tests.prometheus_server import PrometheusServer
from tests.waiting import async_wait_until

pytestmark = pytest.mark.integration

GPUS = h100s(2)
SHARED, WHOLE = GPUS[0].uuid, GPUS[1].uuid


@pytest.fixture(scope="module")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fake-nvml")).parent


def gpu_pod(name: str, namespace: str, node: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "fake", "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}],
        },
    }


async def create_pod(cluster: Cluster, manifest: dict[str, Any]) -> str:
    done = await asyncio.to_thread(cluster.kubectl, "create", "-o", "json", "-f", "-", input=json.dumps(manifest))
    uid: str = json.loads(done.stdout)["metadata"]["uid"]
    return uid


def promql(url: str, query: str) -> dict[tuple[str, ...], float]:
    """{label values in sorted label-name order: value} for an instant query."""
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout=5) as r:
        body = json.loads(r.read())
    return {
        tuple(v for _, v in sorted(item["metric"].items())): float(item["value"][1]) for item in body["data"]["result"]
    }


async def test_prometheus_sees_per_pod_and_per_namespace_use_of_a_time_sliced_gpu(
    cluster: Cluster,
    namespace: str,
    make_namespace: Callable[[], str],
    fake_nvml_dir: Path,
    tmp_path: Path,
) -> None:
    node = cluster.node_names[0]
    notebook_uid = await create_pod(cluster, gpu_pod("notebook", namespace, node, 1))
    second_namespace = make_namespace()
    trainer_uid = await create_pod(cluster, gpu_pod("trainer", second_namespace, node, 2))

    proc = tmp_path / "proc"
    proc_tree.write_process(proc, 1001, proc_tree.systemd_v2(notebook_uid))
    proc_tree.write_process(proc, 2001, proc_tree.cgroupfs_v1(trainer_uid))
    proc_tree.write_process(proc, 2002, proc_tree.namespaced_v2(trainer_uid))
    scenario = tmp_path / "scenario.txt"
    Scenario(
        gpus=GPUS,
        processes=(Process(0, 1001), Process(0, 2001), Process(0, 2002)),
        busy=(Busy(0, 1001, sm=10), Busy(0, 2001, sm=40), Busy(0, 2002, sm=20)),
        epoch=time.time(),
    ).write(scenario)

    async with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.assign(
            [
                Assigned(namespace, "notebook", "main", (f"{SHARED}::0",)),
                Assigned(second_namespace, "trainer", "main", (f"{SHARED}::1", WHOLE)),
            ]
        )
        args = [
            "--node-name",
            node,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--proc-root",
            str(proc),
            "--pod-resources-socket",
            str(kubelet.socket_path),
            "--process-interval",
            "0.5",
            "--device-interval",
            "1",
            "--pod-resources-interval",
            "1",
            "--utilization-window",
            "5",
        ]
        with running_exporter(tmp_path, fake_nvml_dir, scenario, args) as exporter:
            target = exporter.url.removeprefix("http://")
            prometheus = await asyncio.to_thread(
                functools.partial(PrometheusServer.start, tmp_path / "prometheus", scrape_targets=[target])
            )
            try:
                url = prometheus.url
                per_pod = "kuota_pod_gpu_sm_utilization_percent"
                expected_pods = {
                    (SHARED, "main", namespace, "notebook"): 10.0,
                    (SHARED, "main", second_namespace, "trainer"): 60.0,
                    (WHOLE, "main", second_namespace, "trainer"): 0.0,
                }

                async def pods_settled() -> dict[tuple[str, ...], float] | None:
                    found = await asyncio.to_thread(
                        promql, url, f"sum by (UUID, container, namespace, pod) ({per_pod})"
                    )
                    return found if found == expected_pods else None

                await async_wait_until(pods_settled, f"per-pod SM {expected_pods}", timeout=90, interval=0.5)
                by_namespace = await asyncio.to_thread(promql, url, f"sum by (namespace) ({per_pod})")
                held = await asyncio.to_thread(promql, url, "count by (namespace) (kuota_gpu_allocated)")
                dcgm = await asyncio.to_thread(promql, url, "DCGM_FI_DEV_GPU_UTIL")
                up = await asyncio.to_thread(promql, url, "sum(kuota_gpu_up)")
            finally:
                await asyncio.to_thread(prometheus.stop)
    assert by_namespace == {(namespace,): 10.0, (second_namespace,): 60.0}
    assert held == {(namespace,): 1.0, (second_namespace,): 2.0}
    # dcgm-compatible: the shared GPU's device figure appears once per pod holding a replica.
    shared_pods = sorted(key for key in dcgm if SHARED in key)
    assert len(shared_pods) == 2 and {dcgm[key] for key in shared_pods} == {70.0}
    assert up == {(): 2.0}
