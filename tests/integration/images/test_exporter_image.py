"""The exporter image run as the chart's DaemonSet runs it (args, env, mounts, hostPID and securityContext from
``helm template``): the fake NVML library mounted where the NVIDIA container runtime mounts the driver's, the
kubelet's PodResources socket in the chart's hostPath, the chart's ServiceAccount for the pod watch; a real
Prometheus scrapes it. Then the same image as the report CronJob's container, with its rendered command, against
that Prometheus and the API server, writing into the volume the chart mounts."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster import GPU_RESOURCE, Cluster
from tests.cluster.pod_container import PodContainer
from tests.fakes.nvml.build import SONAME
from tests.fakes.nvml.scenario import Scenario, h100s
from tests.fakes.podresources_server import Assigned, FakeKubelet
from tests.integration.images.conftest import VALUES, identity, rbac_denials, service_account
from tests.integration.whole_stack.scrape_configs import Target, scrape_config
from tests.prometheus_server import PrometheusServer
from tests.unit.chart.rendering import CHART, Rendered, pod_spec, render
from tests.waiting import async_wait_until, wait_until

pytestmark = pytest.mark.integration

GPUS = h100s(2)
# The job label the chart's rules and dashboard select the exporter's series by.
JOB = yaml.safe_load((CHART / "values.yaml").read_text())["monitoring"]["jobs"]["exporter"]
# Where the NVIDIA container toolkit mounts the driver's NVML in a Debian-based image.
NVML_IN_CONTAINER = f"/usr/lib/x86_64-linux-gnu/{SONAME}"


def start_exporter(
    cluster: Cluster, chart: Rendered, workdir: Path, nvml: Path | None, account: Path | None
) -> PodContainer:
    spec = pod_spec(chart.one("DaemonSet"))
    scenario = workdir / "scenario.txt"
    Scenario(gpus=GPUS, processes=(), busy=(), epoch=time.time()).write(scenario)
    runtime_mounts = {scenario: "/etc/fake-nvml/scenario.txt"} | ({nvml: NVML_IN_CONTAINER} if nvml else {})
    return PodContainer.start(
        spec,
        "exporter",
        identity=identity(cluster, "kuota-exporter-image"),
        workdir=workdir,
        volumes={"pod-resources": workdir / "pod-resources"},
        service_account=account,
        runtime_mounts=runtime_mounts,
        runtime_env={"FAKE_NVML_SCENARIO": "/etc/fake-nvml/scenario.txt"},
    )


def exporter_service_monitor() -> dict[str, Any]:
    """The chart's ServiceMonitor for the exporter, scraping often enough for a test."""
    monitoring = {"serviceMonitor": {"enabled": True, "interval": "2s", "scrapeTimeout": "1s"}}
    return render({**VALUES, "monitoring": monitoring}).one("ServiceMonitor", "kuota-exporter")


def _no_secrets(name: str, key: str) -> str:
    raise AssertionError(f"the exporter's ServiceMonitor names no Secret, yet asked for {name}/{key}")


def promql(url: str, query: str) -> dict[tuple[str, ...], float]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout=5) as r:
        body = json.loads(r.read())
    return {tuple(sorted(item["metric"].values())): float(item["value"][1]) for item in body["data"]["result"]}


def gpu_pod(name: str, namespace: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "fake", "resources": {"limits": {GPU_RESOURCE: "1"}}}],
        },
    }


async def test_prometheus_scrapes_the_exporter_image_and_the_report_image_reads_it(
    cluster: Cluster, chart: Rendered, namespace: str, fake_nvml: Path, tmp_path: Path
) -> None:
    node = identity(cluster, "").node_name
    cluster.kubectl("create", "-f", "-", input=json.dumps(gpu_pod("trainer", namespace, node)))
    (tmp_path / "pod-resources").mkdir()
    account = service_account(cluster, "kuota-exporter", tmp_path / "account")
    async with FakeKubelet(tmp_path / "pod-resources" / "kubelet.sock") as kubelet:
        kubelet.assign([Assigned(namespace, "trainer", "main", (GPUS[0].uuid,))])
        exporter = await asyncio.to_thread(start_exporter, cluster, chart, tmp_path, fake_nvml, account)
        try:
            await async_wait_until(exporter.ready, "the exporter container's readiness", timeout=120, interval=0.5)
            target = Target(f"127.0.0.1:{exporter.ports['metrics']}", "kuota-exporter-image", "exporter", node)
            scrape = scrape_config(exporter_service_monitor(), "kuota-exporter", [target], _no_secrets)
            prometheus = await asyncio.to_thread(PrometheusServer.start, tmp_path / "prometheus", scrape_configs=scrape)
            try:
                url = prometheus.url

                async def allocated() -> dict[tuple[str, ...], float] | None:
                    found = await asyncio.to_thread(
                        promql, url, f'count by (namespace, pod) (kuota_gpu_allocated{{job="{JOB}", node="{node}"}})'
                    )
                    return found or None

                assert await async_wait_until(allocated, "kuota_gpu_allocated", timeout=90, interval=0.5) == {
                    (namespace, "trainer"): 1.0
                }
                assert await asyncio.to_thread(promql, url, f'sum(kuota_gpu_up{{job="{JOB}"}})') == {(): 2.0}
                report_folder = await asyncio.to_thread(run_report, cluster, url, tmp_path)
            finally:
                await asyncio.to_thread(prometheus.stop)
            log = exporter.logs()
        finally:
            await asyncio.to_thread(exporter.stop)
    assert not rbac_denials(log)
    assert json.loads((report_folder / "latest" / "report.json").read_text())["schemaVersion"] == 1


def run_report(cluster: Cluster, prometheus_url: str, workdir: Path) -> Path:
    """The CronJob's container, rendered with this Prometheus' URL, run to its end; the folder of its volume."""
    values = {"report": {**VALUES["report"], "prometheusUrl": prometheus_url}}
    spec = pod_spec(render(values).one("CronJob"))
    report_folder = workdir / "report"
    report_folder.mkdir()
    report_folder.chmod(0o777)
    container = PodContainer.start(
        spec,
        "report",
        identity=identity(cluster, "kuota-report-image"),
        workdir=workdir,
        volumes={"report": report_folder},
        service_account=service_account(cluster, "kuota-report", workdir / "report-account"),
    )
    try:
        wait_until(container.exited, "the report container to finish", timeout=300, interval=0.5)
        log = container.logs()
        assert container.state()["ExitCode"] == 0, log
        assert not rbac_denials(log)
    finally:
        container.stop()
    return report_folder
