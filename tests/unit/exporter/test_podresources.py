import time
from pathlib import Path

import pytest

from kuota.exporter.allocation import Holder, parse_device_id
from kuota.exporter.errors import PodResourcesUnavailableError
from kuota.exporter.podresources import generate
from kuota.exporter.podresources.client import PodResourcesClient
from tests.fakes.podresources_server import Assigned, FakeKubelet


def test_device_ids_name_whole_gpus_mig_instances_and_time_sliced_replicas() -> None:
    assert parse_device_id("GPU-1234") == ("GPU-1234", None)
    assert parse_device_id("GPU-1234::3") == ("GPU-1234", 3)
    assert parse_device_id("MIG-9abc") == ("MIG-9abc", None)


async def test_the_client_reads_gpu_allocations_from_a_real_grpc_server(tmp_path: Path) -> None:
    async with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.assign(
            [
                Assigned("team-a", "notebook", "main", ("GPU-1::0",)),
                Assigned("team-b", "trainer", "worker", ("GPU-1::1", "GPU-2")),
                Assigned("team-c", "mig", "main", ("MIG-3",), resource="nvidia.com/mig-1g.10gb"),
                Assigned("team-d", "nic", "main", ("0000:3b:00.0",), resource="example.com/nic"),
            ]
        )
        async with PodResourcesClient(kubelet.socket_path, timeout=5) as client:
            found = await client.list_allocations()
    by_device = sorted((a.device_uuid, a.replica, a.holder) for a in found)
    assert by_device == [
        ("GPU-1", 0, Holder("team-a", "notebook", "main")),
        ("GPU-1", 1, Holder("team-b", "trainer", "worker")),
        ("GPU-2", None, Holder("team-b", "trainer", "worker")),
        ("MIG-3", None, Holder("team-c", "mig", "main")),
    ]


async def test_a_missing_kubelet_socket_fails_within_the_timeout_with_a_clear_error(tmp_path: Path) -> None:
    started = time.monotonic()
    async with PodResourcesClient(tmp_path / "absent.sock", timeout=1.0) as client:
        with pytest.raises(PodResourcesUnavailableError, match="--pod-resources-socket"):
            await client.list_allocations()
    assert time.monotonic() - started < 5


def test_the_committed_generated_grpc_modules_match_api_proto() -> None:
    assert generate.main(["--check"]) == 0
