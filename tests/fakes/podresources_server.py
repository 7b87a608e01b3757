"""A real gRPC PodResources server on a temporary unix socket, answering what the test tells it to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from kuota.exporter.podresources import api_pb2, api_pb2_grpc


@dataclass(frozen=True)
class Assigned:
    namespace: str
    pod: str
    container: str
    device_ids: tuple[str, ...]
    resource: str = "nvidia.com/gpu"


def response_for(assignments: Sequence[Assigned]) -> api_pb2.ListPodResourcesResponse:
    pods: dict[tuple[str, str], api_pb2.PodResources] = {}
    for a in assignments:
        pod = pods.setdefault((a.namespace, a.pod), api_pb2.PodResources(name=a.pod, namespace=a.namespace))
        pod.containers.append(
            api_pb2.ContainerResources(
                name=a.container,
                devices=[api_pb2.ContainerDevices(resource_name=a.resource, device_ids=list(a.device_ids))],
                cpu_ids=[2, 3],
            )
        )
    return api_pb2.ListPodResourcesResponse(pod_resources=list(pods.values()))


class _Lister(api_pb2_grpc.PodResourcesListerServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.response = api_pb2.ListPodResourcesResponse()
        self.calls = 0

    async def List(self, request: Any, context: Any) -> api_pb2.ListPodResourcesResponse:  # noqa: N802
        del request, context
        self.calls += 1
        return self.response


class FakeKubelet:
    """``async with FakeKubelet(path) as kubelet: kubelet.assign([...])``."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._lister = _Lister()
        self._server: Any = None

    @property
    def calls(self) -> int:
        return self._lister.calls

    def assign(self, assignments: Sequence[Assigned]) -> None:
        self._lister.response = response_for(assignments)

    async def __aenter__(self) -> FakeKubelet:
        self._server = grpc.aio.server()
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(self._lister, self._server)
        self._server.add_insecure_port(f"unix://{self.socket_path}")
        await self._server.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._server.stop(grace=None)
