"""A pod missing one of its mounts (no ServiceAccount token, no kubelet PodResources socket, no NVML library)
says which in one line of its container's log, and its readiness probe fails: never a crash loop without a
reason, never a traceback."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest

from tests.cluster import Cluster
from tests.cluster.pod_container import PodContainer
from tests.fakes.podresources_server import FakeKubelet
from tests.integration.images.conftest import service_account
from tests.integration.images.test_exporter_image import start_exporter
from tests.integration.images.test_manager_image import start_manager
from tests.unit.chart.rendering import Rendered
from tests.waiting import async_wait_until, wait_until

pytestmark = pytest.mark.integration


def test_without_a_service_account_token_the_manager_says_so_in_one_line_and_is_never_ready(
    cluster: Cluster, chart: Rendered, tmp_path: Path
) -> None:
    container = start_manager(cluster, chart, tmp_path, account=None)
    try:
        wait_until(container.exited, "the manager without a token to exit", timeout=60)
        log = container.logs().strip()
        assert not container.ready(), log
        assert container.state()["ExitCode"] != 0, log
        assert "Traceback" not in log, log
        assert "service account" in log.splitlines()[-1] and "automountServiceAccountToken" in log, log
    finally:
        container.stop()


# What each missing mount's one line names. Without the PodResources socket the exporter keeps serving the GPUs'
# own series but is not ready: per-pod attribution is lost, and a wrong socket mount must show.
MISSING = {
    "PodResources socket": "kubelet.sock",
    "NVML library": "libnvidia-ml.so.1",
    "service account token": "automountServiceAccountToken",
}


@pytest.mark.parametrize("missing", sorted(MISSING))
async def test_a_missing_mount_gives_one_clear_line_and_the_exporter_is_not_ready(
    cluster: Cluster, chart: Rendered, fake_nvml: Path, tmp_path: Path, missing: str
) -> None:
    named = MISSING[missing]
    (tmp_path / "pod-resources").mkdir()
    account = None
    if missing != "service account token":
        account = service_account(cluster, "kuota-exporter", tmp_path / "account")
    nvml = None if missing == "NVML library" else fake_nvml
    socket = tmp_path / ("no-kubelet" if missing == "PodResources socket" else "pod-resources") / "kubelet.sock"
    socket.parent.mkdir(exist_ok=True)
    async with FakeKubelet(socket):
        exporter = await asyncio.to_thread(start_exporter, cluster, chart, tmp_path, nvml, account)
        try:
            said = await async_wait_until(
                lambda: [line for line in exporter.logs().splitlines() if named in line], f"a line naming {named}", 60
            )
            log = exporter.logs()
            assert len(said) == 1, log
            assert "Traceback" not in log, log
            assert not exporter.ready(), log
            if missing == "PodResources socket":  # it serves, says why it is not ready, and /metrics still flows
                status, reason = exporter.readiness_reply()
                assert status == 503 and named in reason, (status, reason, log)
                await async_wait_until(
                    lambda: asyncio.to_thread(serves_gpu_series, exporter),
                    "the GPUs' series while not ready",
                    30,
                )
        finally:
            await asyncio.to_thread(exporter.stop)


def serves_gpu_series(exporter: PodContainer) -> bool:
    with urllib.request.urlopen(f"http://{exporter.address}:{exporter.ports['metrics']}/metrics", timeout=5) as reply:
        return "DCGM_FI_DEV_GPU_UTIL{" in reply.read().decode()
