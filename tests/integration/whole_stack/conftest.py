"""One run of the whole stack for the module: ``kuota manager`` and a ``kuota exporter`` per fake GPU node as
real processes, a real Prometheus scraping them with the chart's ServiceMonitors (and a dcgm-exporter
look-alike beside them), the seed story played as real Jobs through the webhook, then ``kuota report``."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import math
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota.kube.client import KubeApi
from tests.cluster import RUN_SECONDS_ANNOTATION, Cluster
from tests.fakes.exporter_process import ExporterProcess
from tests.fakes.nvml.build import build
from tests.fakes.podresources_server import FakeKubelet
from tests.integration.whole_stack import story
from tests.integration.whole_stack.gpu_nodes import (
    GPUS_PER_NODE,
    FakeNode,
    GpuNodes,
    Holding,
    dcgm_exporter,
    node_gpus,
)
from tests.integration.whole_stack.kueue_queries import QUERIES as KUEUE_QUERIES
from tests.integration.whole_stack.scrape_configs import Target, scrape_config
from tests.manager_process import MANAGED_LABEL, ManagerProcess
from tests.prometheus_server import PrometheusServer
from tests.unit.chart.rendering import NAMESPACE, render
from tests.waiting import async_wait_until, wait_until

SCRAPE_S = 1  # the ServiceMonitors' interval, rendered into them
RESOLUTION_S = 1  # the report's --resolution: one scrape per step
POLL_S = 0.25  # how often the test lists pods and Workloads
LONG_WAIT_S = 10  # the report's --long-wait, in the story's compressed time
DCGM_JOB = "dcgm-exporter"
WAIT = 120.0  # deadline of each wait on the cluster: a loaded 2-core machine takes seconds per step


@dataclass(frozen=True)
class StoryRun:
    report: dict[str, Any]
    start: int  # the report's window: (start, end]
    end: int
    timeline: story.Timeline
    holdings: tuple[Holding, ...]
    capacity_gpus: int
    dcgm_series_per_gpu: dict[str, int]  # UUID -> DCGM_FI_DEV_GPU_UTIL series in Prometheus (both exporters)
    dcgm_jobs: set[str]
    up_labels: list[dict[str, str]]  # each scrape target's labels, as the scrape configs left them
    kueue_panels: dict[str, int]  # each of Kueue's Grafana queries: the series it returned at the run's end
    seconds: float  # the run's wall clock, setup to report

    @property
    def length_s(self) -> int:
        return self.end - self.start


def _promql(url: str, query: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout=10) as r:
        result: list[dict[str, Any]] = json.loads(r.read())["data"]["result"]
        return result


def _threaded(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    """``check`` (blocking HTTP) as a coroutine function, run off the event loop the fake kubelets serve on."""

    async def run() -> bool:
        return await asyncio.to_thread(check)

    return run


def _secret_value(cluster: Cluster, name: str, key: str) -> str | None:
    found = cluster.kubectl("get", "secret", name, "-n", NAMESPACE, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    data = json.loads(found.stdout).get("data") or {}
    return base64.b64decode(data[key]).decode() if key in data else None


def _clean_slate(cluster: Cluster) -> None:
    """No Job, Workload or queue object of the story's teams from before: the manager would count their quota.
    Runs while the manager runs, which releases the Workloads' finalizers."""
    for namespace in story.TEAMS:
        cluster.kubectl("delete", "jobs", "--all", "-n", namespace, "--cascade=background", "--wait=false", check=False)
        cluster.kubectl("delete", "workloads", "--all", "-n", namespace, "--wait=false", check=False)

    def gone() -> bool:
        listed = json.loads(cluster.kubectl("get", "workloads", "-A", "-o", "json").stdout)["items"]
        return not [w for w in listed if w["metadata"]["namespace"] in story.TEAMS]

    wait_until(gone, "the teams' Workloads to be deleted", timeout=WAIT)

    def running_on_nodes() -> list[str]:
        """Pods of any test that still run on the fake nodes: they would hold GPUs the story counts on."""
        pods = json.loads(
            cluster.kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName!=", "-o", "json").stdout
        )
        live = [p for p in pods["items"] if p["status"].get("phase") in ("Pending", "Running")]
        return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in live]

    wait_until(lambda: not running_on_nodes(), "no pod running on the fake GPU nodes", timeout=WAIT)
    cluster.kubectl(
        "delete", "clusterqueues,localqueues,resourceflavors,cohorts,workloadpriorityclasses", "--all", "-A"
    )


@contextlib.asynccontextmanager
async def _gpu_nodes(cluster: Cluster, workdir: Path) -> AsyncIterator[GpuNodes]:
    nvml_dir = (await asyncio.to_thread(build, workdir / "fake-nvml")).parent
    async with contextlib.AsyncExitStack() as stack:
        nodes = []
        for index, name in enumerate(cluster.node_names):
            folder = workdir / name
            (folder / "proc").mkdir(parents=True)
            kubelet = await stack.enter_async_context(FakeKubelet(folder / "kubelet.sock"))
            nodes.append(FakeNode(name, index, folder, kubelet, node_gpus(index)))
        gpu_nodes = GpuNodes(nodes, story.TEAM_SM_PERCENT)
        for node in nodes:
            node.publish()
            node.exporter = await asyncio.to_thread(
                ExporterProcess.start,
                node.workdir,
                nvml_dir,
                node.scenario_path,
                gpu_nodes.exporter_args(node, cluster.kubeconfig),
            )
            stack.callback(node.exporter.stop)
        yield gpu_nodes


async def _poll(api: KubeApi, nodes: GpuNodes, timeline: story.Timeline) -> None:
    """The device plugin and the test's record of the Workloads, every ``POLL_S``."""
    while True:
        pods = await api.request("GET", "/api/v1/pods", query={"fieldSelector": "spec.nodeName!="})
        if pods.ok:
            nodes.reconcile(pods.object()["items"])
        sent = time.time()
        workloads = await api.request("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads")
        if workloads.ok:
            timeline.observe(sent, time.time(), workloads.object()["items"])
        await asyncio.sleep(POLL_S)


def _create_job(cluster: Cluster, name: str, node: str | None) -> None:
    manifest = story.job_manifest(story.seed_records()[name], node)
    cluster.kubectl("create", "-f", "-", input=json.dumps(manifest))


def _finish_jobs(cluster: Cluster, namespace: str, *jobs: str) -> None:
    """Their pods' containers exit 0 now (the fake kubelet completes pods that carry this annotation)."""
    for job in jobs:
        cluster.kubectl(
            "annotate", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job}",
            f"{RUN_SECONDS_ANNOTATION}=0", "--overwrite",
        )  # fmt: skip


async def _until(timeline: story.Timeline, what: str, check: Any) -> None:
    def holds() -> bool:
        if timeline.poller is not None and timeline.poller.done():
            timeline.poller.result()  # the device plugin or the record failed: say why, not "timed out"
            raise AssertionError("the poller stopped")
        return bool(check(timeline))

    await async_wait_until(holds, what, timeout=WAIT, interval=POLL_S)


def _admitted(timeline: story.Timeline, namespace: str, job: str) -> bool:
    workload = timeline.workload(namespace, job)
    return workload is not None and story.is_true(workload, "QuotaReserved") and story.is_true(workload, "Admitted")


def _finished(timeline: story.Timeline, namespace: str, job: str) -> bool:
    workload = timeline.workload(namespace, job)
    return workload is not None and story.is_true(workload, "Finished")


def _waiting(timeline: story.Timeline, namespace: str, job: str) -> bool:
    """Seen by the manager and left pending (its QuotaReserved condition says False, with a reason)."""
    workload = timeline.workload(namespace, job)
    reserved = story.condition(workload, "QuotaReserved") if workload is not None else None
    return reserved is not None and reserved["status"] == "False"


def _running_pods(nodes: GpuNodes, namespace: str, job: str, pods: int) -> bool:
    holders = {h.pod for node in nodes.nodes.values() for h in node.held.values() if h.namespace == namespace}
    return sum(1 for pod in holders if pod.startswith(f"{job}-")) == pods


async def _play(cluster: Cluster, timeline: story.Timeline, nodes: GpuNodes) -> None:
    """The compressed story (tests/integration/whole_stack/story.py)."""

    async def kubectl(job: str, node: str | None) -> None:
        await asyncio.to_thread(_create_job, cluster, job, node)

    await kubectl(story.EMBEDDING, "h100-0")
    await _until(timeline, "the embedding job to run", lambda t: _running_pods(nodes, "inference", story.EMBEDDING, 1))
    # Saturday: one trial at a time, so the admission order (which preemption goes by) is the creation order
    for trial in story.SWEEP:
        if trial == story.SWEEP[len(story.FIRST_WAVE)]:
            # Queue order is by creation, stamped in whole seconds; the preempted trials must go back ahead of
            # the waiting ones (as the story has it), so those are created in a later second than the last one
            # admitted, or a tie would let either go first.
            last = timeline.workload("research", story.FIRST_WAVE[-1])
            assert last is not None
            second = story.timestamp(last["metadata"]["creationTimestamp"]) + 1
            await async_wait_until(lambda s=second: time.time() >= s, "the clock to pass the last admitted trial's")
        await kubectl(trial, story.SWEEP_NODES[trial])
        if trial in story.FIRST_WAVE:
            await _until(timeline, f"{trial} admitted", lambda t, j=trial: _admitted(t, "research", j))
        else:
            await _until(timeline, f"{trial} left waiting", lambda t, j=trial: _waiting(t, "research", j))
    await _until(
        timeline, "research on 20 GPUs", lambda t: all(_running_pods(nodes, "research", j, 1) for j in story.FIRST_WAVE)
    )
    await asyncio.sleep(story.PHASE_S["saturday"])  # story time passing, not a wait for a condition
    # Monday: the fine-tune reclaims applied-ml's quota
    await kubectl(story.FINETUNE, None)
    await _until(timeline, "the fine-tune running", lambda t: _running_pods(nodes, "applied-ml", story.FINETUNE, 2))
    await asyncio.sleep(story.PHASE_S["monday"])
    # Tuesday: the fine-tune ends, the preempted trials resume
    await asyncio.to_thread(_finish_jobs, cluster, "applied-ml", story.FINETUNE)
    await _until(
        timeline,
        "the preempted trials running again",
        lambda t: all(_running_pods(nodes, "research", j, 1) for j in story.PREEMPTED),
    )
    await asyncio.sleep(story.PHASE_S["tuesday"])
    # Drain: the first six trials finish, the last two run; then everything finishes
    await asyncio.to_thread(_finish_jobs, cluster, "research", *story.SWEEP[:6])
    await _until(
        timeline,
        "the last trials running",
        lambda t: all(_running_pods(nodes, "research", j, 1) for j in story.SWEEP[10:]),
    )
    await asyncio.sleep(story.PHASE_S["drain"])
    await asyncio.to_thread(_finish_jobs, cluster, "research", *story.SWEEP[6:])
    await asyncio.to_thread(_finish_jobs, cluster, "inference", story.EMBEDDING)
    every_job = [("research", j) for j in story.SWEEP] + [
        ("applied-ml", story.FINETUNE),
        ("inference", story.EMBEDDING),
    ]
    await _until(timeline, "every Workload finished", lambda t: all(_finished(t, ns, j) for ns, j in every_job))
    await async_wait_until(
        lambda: not any(node.held for node in nodes.nodes.values()), "every GPU given back", timeout=WAIT
    )


async def _scraped_after(url: str, moment: float, targets: int) -> None:
    def after() -> bool:
        stamps = _promql(url, "timestamp(up)")
        return len(stamps) == targets and all(float(s["value"][1]) >= moment for s in stamps)

    await async_wait_until(_threaded(after), f"every target scraped after {moment}", timeout=WAIT)


def _report(prometheus: str, cluster: Cluster, start: int, end: int, out: Path) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "kuota", "report",
        "--prometheus", prometheus,
        "--kubeconfig", str(cluster.kubeconfig),
        "--end", str(end),
        "--window", f"{end - start}s",
        "--resolution", f"{RESOLUTION_S}s",
        "--long-wait", f"{LONG_WAIT_S}s",
        "--idle-holder-hours", "0.001",
        "--out", str(out),
    ]  # fmt: skip
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, check=False, cwd=repo,
        env=dict(os.environ, PYTHONPATH=str(repo)),
    )  # fmt: skip
    assert done.returncode == 0, f"kuota report exited {done.returncode}:\n{done.stderr}"
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


async def _run(cluster: Cluster, workdir: Path) -> StoryRun:
    began = time.monotonic()
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    cluster.kubectl("apply", "-f", str(story.SEED / "namespaces.yaml"))
    for namespace in story.TEAMS:
        cluster.kubectl("label", "namespace", namespace, f"{MANAGED_LABEL}=true", "--overwrite")

    values = {"monitoring": {"serviceMonitor": {"enabled": True, "interval": f"{SCRAPE_S}s", "scrapeTimeout": "1s"}}}
    chart = await asyncio.to_thread(render, values)
    monitors = {m["metadata"]["labels"]["app.kubernetes.io/component"]: m for m in chart.of_kind("ServiceMonitor")}
    services = {
        s["metadata"]["labels"]["kuota.dev/scrape"]: s["metadata"]["name"]
        for s in chart.of_kind("Service")
        if "kuota.dev/scrape" in s["metadata"].get("labels", {})
    }
    # The manager serves /metrics as the chart's ServiceMonitor scrapes it; over HTTPS, the chart's scraper
    # ServiceAccount (token Secret, metrics-reader binding) is what the endpoint authenticates as.
    secure = monitors["manager"]["spec"]["endpoints"][0].get("scheme") == "https"
    reader = [
        obj
        for obj in chart.objects
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Secret")
        and "metrics" in obj["metadata"]["name"]
    ]
    if reader:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(reader))
    manager = ManagerProcess(cluster, NAMESPACE, identity="whole-stack", secure_metrics=secure)
    secrets_dir = workdir / "secrets"
    secrets_dir.mkdir()

    def secret_file(name: str, key: str) -> str:
        path = secrets_dir / f"{name}-{key}"
        value = _secret_value(cluster, name, key)
        assert value is not None, f"Secret {NAMESPACE}/{name} has no {key}"
        path.write_text(value)
        return str(path)

    timeline = story.Timeline()
    try:
        await asyncio.to_thread(manager.start)
        await asyncio.to_thread(_clean_slate, cluster)
        async with KubeApi.from_kubeconfig(cluster.kubeconfig) as api, _gpu_nodes(cluster, workdir) as nodes:
            with contextlib.ExitStack() as servers:
                dcgm = {
                    name: servers.enter_context(dcgm_exporter(node.dcgm_exposition))
                    for name, node in nodes.nodes.items()
                }
                if secure:
                    await async_wait_until(
                        lambda: _secret_value(cluster, "kuota-metrics-scraper", "token"), "the scraper's token"
                    )
                scrape = [
                    *scrape_config(
                        monitors["manager"],
                        services["manager"],
                        [Target(f"127.0.0.1:{manager.metrics_port}", "kuota-manager-0", "manager", "h100-0")],
                        secret_file,
                    ),
                    *scrape_config(
                        monitors["exporter"],
                        services["exporter"],
                        [
                            Target(
                                node.exporter.url.removeprefix("http://"), f"kuota-exporter-{name}", "exporter", name
                            )
                            for name, node in nodes.nodes.items()
                            if node.exporter is not None
                        ],
                        secret_file,
                    ),
                    # dcgm-exporter as its chart's ServiceMonitor scrapes it: honorLabels false, so the holder's
                    # namespace/pod move to exported_namespace/exported_pod under the exporter pod's own labels
                    {
                        "job_name": DCGM_JOB,
                        "honor_labels": False,
                        "scrape_interval": f"{SCRAPE_S}s",
                        "scrape_timeout": "1s",
                        "static_configs": [
                            {
                                "targets": [address],
                                "labels": {
                                    "namespace": "gpu-operator",
                                    "pod": f"nvidia-dcgm-exporter-{name}",
                                    "container": "nvidia-dcgm-exporter",
                                    "service": "nvidia-dcgm-exporter",
                                    "endpoint": "gpu-metrics",
                                },
                            }
                            for name, address in dcgm.items()
                        ],
                    },
                ]
                targets = 1 + 2 * len(nodes.nodes)
                capacity = GPUS_PER_NODE * len(nodes.nodes)
                prometheus = await asyncio.to_thread(
                    functools.partial(PrometheusServer.start, workdir / "prometheus", scrape_configs=scrape)
                )
                servers.callback(prometheus.stop)
                url = prometheus.url

                def all_up() -> bool:
                    return sum(float(s["value"][1]) for s in _promql(url, "up")) == targets

                await async_wait_until(
                    _threaded(all_up), f"all {targets} targets up (log: {prometheus.log_path})", timeout=WAIT
                )
                seed = [str(p) for p in sorted(story.SEED.glob("*.yaml")) if p.name != "namespaces.yaml"]
                await asyncio.to_thread(cluster.kubectl, "apply", *(a for p in seed for a in ("-f", p)))

                def queues_scraped() -> bool:
                    nominal = _promql(url, 'kueue_cluster_queue_nominal_quota{resource="nvidia.com/gpu"}')
                    return len(nominal) == len(story.TEAMS) and len(_promql(url, "kuota_gpu_up")) == capacity

                await async_wait_until(_threaded(queues_scraped), "the queues and GPUs in Prometheus", timeout=WAIT)
                poller = timeline.poller = asyncio.create_task(_poll(api, nodes, timeline))
                start = math.ceil(time.time()) + 1
                await _scraped_after(url, start, targets)
                await _play(cluster, timeline, nodes)
                end = math.ceil(time.time()) + 1
                await _scraped_after(url, end, targets)
                poller.cancel()
                report = await asyncio.to_thread(_report, url, cluster, start, end, workdir / "report")
                per_gpu = _promql(url, f"count by (UUID) (last_over_time(DCGM_FI_DEV_GPU_UTIL[{end - start}s]))")
                jobs = _promql(url, f"count by (job) (last_over_time(DCGM_FI_DEV_GPU_UTIL[{end - start}s]))")
                up = _promql(url, "up")
                kueue_panels = {name: len(_promql(url, query)) for name, query in KUEUE_QUERIES.items()}
    finally:
        try:
            await asyncio.to_thread(_clean_slate, cluster)
        finally:
            manager.stop()
            manager.unregister()
            if reader:  # a later helm install of the chart must find none of its objects unowned
                cluster.kubectl("delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(reader))
    return StoryRun(
        report=report,
        start=start,
        end=end,
        timeline=timeline,
        holdings=tuple(nodes.holdings),
        capacity_gpus=capacity,
        dcgm_series_per_gpu={s["metric"]["UUID"]: int(float(s["value"][1])) for s in per_gpu},
        dcgm_jobs={s["metric"]["job"] for s in jobs},
        up_labels=[s["metric"] for s in up],
        kueue_panels=kueue_panels,
        seconds=time.monotonic() - began,
    )


@pytest.fixture(scope="module")
def whole_stack(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StoryRun]:
    del kuota_crds
    run = asyncio.run(_run(cluster, tmp_path_factory.mktemp("whole-stack")))
    print(f"\nwhole stack: story and report in {run.seconds:.0f}s, window {run.length_s}s")
    yield run
