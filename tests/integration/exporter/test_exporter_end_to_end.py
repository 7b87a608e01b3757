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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import GPU_RESOURCE, Cluster
from tests.fakes import proc_tree
from tests.fakes.exporter_process import running_exporter
from tests.fakes.nvml.build import build
from tests.fakes.nvml.scenario import A100, MIB, Busy, Gpm, Gpu, Process, Scenario, gpu_uuid, h100s
from tests.fakes.podresources_server import Assigned, FakeKubelet
from tests.prometheus_server import PrometheusServer, running_prometheus
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


# The panel and variable queries of NVIDIA's own dashboard for dcgm-exporter (NVIDIA/dcgm-exporter,
# grafana/dcgm-exporter-dashboard.json, as of commit 1f7abdb7): GPU temperature and its average, power and its
# sum, SM clocks, GPU utilization, framebuffer used, tensor core utilization; the variables are
# label_values(DCGM_FI_DEV_GPU_TEMP, instance) and label_values(DCGM_FI_DEV_GPU_TEMP, gpu).
DASHBOARD_PANEL_QUERIES = (
    'DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"}',
    'avg(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"})',
    'DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"}',
    'sum(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"})',
    'DCGM_FI_DEV_SM_CLOCK{instance=~"$instance", gpu=~"$gpu"} * 1000000',
    'DCGM_FI_DEV_GPU_UTIL{instance=~"$instance", gpu=~"$gpu"}',
    'DCGM_FI_DEV_FB_USED{instance=~"$instance", gpu=~"$gpu"}',
    'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{instance=~"$instance", gpu=~"$gpu"}',
)
DASHBOARD_VARIABLES = (("DCGM_FI_DEV_GPU_TEMP", "instance"), ("DCGM_FI_DEV_GPU_TEMP", "gpu"))
# Grafana's "All" for a multi-value variable without an allValue is a regex matching every value.
ALL = ".+"

HOPPER = Gpu(
    uuid=gpu_uuid(0),
    minor=0,
    memory_temp_c=45,
    enc_percent=9,
    dec_percent=4,
    pcie_replays=6,
    remapped_rows_correctable=3,
    remapped_rows_uncorrectable=1,
    nvlink_kib_per_s=2_000_000,
    gpm=Gpm(graphics=70.0, tensor=35.0, dram=20.0),
)
AMPERE = Gpu(uuid=gpu_uuid(1), minor=1, name=A100, power_mw=250_000, gpm=None)


def _get_json(url: str, path: str, query: list[tuple[str, str]]) -> Any:
    with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(query)}", timeout=5) as response:
        return json.loads(response.read())["data"]


@pytest.fixture(scope="module")
def dcgm_node(fake_nvml_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A kuota exporter on an H100 (GPM) and an A100 (no GPM), scraped by a real Prometheus: (its URL, log)."""
    workdir = tmp_path_factory.mktemp("dcgm-node")
    (workdir / "proc").mkdir()
    scenario = workdir / "scenario.txt"
    Scenario(
        gpus=(HOPPER, AMPERE),
        processes=(Process(0, 501, 2048 * MIB),),
        busy=(Busy(0, 501, sm=55),),
        unsupported=((1, "nvmlDeviceGetEncoderUtilization"), (1, "NVML_FI_DEV_MEMORY_TEMP")),
        epoch=time.time(),
    ).write(scenario)
    args = ["--node-name", "gpu-node-7", "--proc-root", str(workdir / "proc"), "--no-pod-watch"]
    args += ["--pod-resources-socket", str(workdir / "absent.sock"), "--device-interval", "0.5"]
    args += ["--process-interval", "0.5"]
    with running_exporter(workdir, fake_nvml_dir, scenario, args) as exporter:
        target = exporter.url.removeprefix("http://")
        with running_prometheus(workdir / "prometheus", scrape_targets=[target]) as prometheus:
            prometheus.wait_for_series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", timeout_s=90)
            # enough scrapes for a slope through the readings' 0.5 s steps
            prometheus.wait_for_series("count_over_time(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[20s]) >= 6", timeout_s=90)
            yield prometheus.url, exporter.log_path


def test_prometheus_sees_the_new_dcgm_fields_with_their_types_and_dcgm_labels(dcgm_node: tuple[str, Path]) -> None:
    url, _log = dcgm_node
    by_gpu = "max by (gpu) ({})"
    assert promql(url, by_gpu.format("DCGM_FI_DEV_MEMORY_TEMP")) == {("0",): 45.0}  # NOT_SUPPORTED on the A100
    assert promql(url, by_gpu.format("DCGM_FI_DEV_ENC_UTIL")) == {("0",): 9.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_DEC_UTIL")) == {("0",): 4.0, ("1",): 0.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_MEM_CLOCK")) == {("0",): 2619.0, ("1",): 2619.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_PCIE_REPLAY_COUNTER")) == {("0",): 6.0, ("1",): 0.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS")) == {("0",): 3.0, ("1",): 0.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")) == {("0",): 1.0, ("1",): 0.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_ROW_REMAP_FAILURE")) == {("0",): 0.0, ("1",): 0.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_FB_RESERVED")) == {("0",): 512.0, ("1",): 512.0}
    assert promql(url, by_gpu.format("DCGM_FI_DEV_FB_USED")) == {("0",): 2048.0, ("1",): 0.0}
    # The slope through several scrapes of readings taken every 0.5 s: near the scripted rate, and far from a
    # wrong unit (x1000 or x1024).
    nvlink = promql(url, "deriv(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu='0'}[20s])")
    assert len(nvlink) == 1 and 1_200_000 < next(iter(nvlink.values())) < 2_800_000  # 2 GB/s in KiB/s
    energy = promql(url, "deriv(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu='0'}[20s]) / 1000")
    assert len(energy) == 1 and 210 < next(iter(energy.values())) < 490  # W: the fake's 350 W, from mJ
    labels = {
        (item["gpu"], item["pci_bus_id"], item["DCGM_FI_DRIVER_VERSION"], item["Hostname"])
        for item in _get_json(url, "/api/v1/series", [("match[]", "DCGM_FI_DEV_POWER_USAGE")])
    }
    assert labels == {
        ("0", "00000000:18:00.0", "570.124.06", "gpu-node-7"),
        ("1", "00000000:19:00.0", "570.124.06", "gpu-node-7"),
    }
    metadata = _get_json(url, "/api/v1/metadata", [])
    for name in ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"):
        assert [entry["type"] for entry in metadata[name]] == ["counter"], name  # the bare name, typed counter
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total" not in metadata


def test_gpm_profiling_series_exist_on_hopper_only_and_the_log_says_why(dcgm_node: tuple[str, Path]) -> None:
    url, log = dcgm_node
    assert promql(url, "max by (gpu) (DCGM_FI_PROF_GR_ENGINE_ACTIVE)") == {("0",): 0.7}
    assert promql(url, "max by (gpu) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)") == {("0",): 0.35}
    assert promql(url, "max by (gpu) (DCGM_FI_PROF_DRAM_ACTIVE)") == {("0",): 0.2}
    assert promql(url, "count_over_time(DCGM_FI_PROF_DRAM_ACTIVE{gpu='1'}[1h])") == {}  # never a zero for the A100
    lines = [line for line in log.read_text().splitlines() if "does not support GPM" in line]
    assert len(lines) == 1 and "GPU 1" in lines[0] and A100 in lines[0]


def test_every_query_of_nvidias_dcgm_exporter_dashboard_returns_data(dcgm_node: tuple[str, Path]) -> None:
    url, _log = dcgm_node
    empty: list[str] = []
    for panel in DASHBOARD_PANEL_QUERIES:
        query = panel.replace("$instance", ALL).replace("$gpu", ALL)
        if not promql(url, query):
            empty.append(query)
    for metric, label in DASHBOARD_VARIABLES:
        if not _get_json(url, f"/api/v1/label/{label}/values", [("match[]", metric)]):
            empty.append(f"label_values({metric}, {label})")
    assert empty == []
