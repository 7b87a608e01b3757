"""Reads GPU allocations from the kubelet's PodResources API over one long-lived gRPC channel.

The channel is opened once and reused: gRPC reconnects on its own after a kubelet restart, and every call
carries a deadline, so a stuck kubelet costs one timeout, never a hung sampler.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from kuota.exporter.allocation import DeviceAllocation, Holder, is_gpu_device_id, parse_device_id
from kuota.exporter.errors import PodResourcesUnavailableError
from kuota.exporter.podresources import api_pb2

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")


def allocations_from_response(response: api_pb2.ListPodResourcesResponse) -> tuple[DeviceAllocation, ...]:
    """Every GPU or MIG device id in a List response, with the container holding it."""
    found: list[DeviceAllocation] = []
    for pod in response.pod_resources:
        for container in pod.containers:
            holder = Holder(namespace=pod.namespace, pod=pod.name, container=container.name)
            for devices in container.devices:
                for device_id in devices.device_ids:
                    if not is_gpu_device_id(devices.resource_name, device_id):
                        continue
                    uuid, replica = parse_device_id(device_id)
                    found.append(
                        DeviceAllocation(
                            holder=holder, resource=devices.resource_name, device_uuid=uuid, replica=replica
                        )
                    )
    return tuple(found)


class PodResourcesClient:
    def __init__(self, socket_path: Path, timeout: float = 5.0) -> None:
        self._socket_path = socket_path
        self._timeout = timeout
        self._channel: Any = None
        self._stub: Any = None

    async def __aenter__(self) -> PodResourcesClient:
        import grpc

        from kuota.exporter.podresources import api_pb2_grpc

        self._channel = grpc.aio.insecure_channel(f"unix://{self._socket_path}")
        # The generated stub is untyped; its one method is wrapped, typed, in list_allocations.
        self._stub = api_pb2_grpc.PodResourcesListerStub(self._channel)  # type: ignore[no-untyped-call]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None

    async def list_allocations(self) -> tuple[DeviceAllocation, ...]:
        import grpc

        if self._stub is None:
            raise PodResourcesUnavailableError("the PodResources client is not open: use it as 'async with'")
        try:
            response = await self._stub.List(api_pb2.ListPodResourcesRequest(), timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise PodResourcesUnavailableError(
                f"PodResources List on {self._socket_path} failed ({error.code().name}: {error.details()}); "
                "check --pod-resources-socket and that /var/lib/kubelet/pod-resources is mounted"
            ) from error
        return allocations_from_response(response)
