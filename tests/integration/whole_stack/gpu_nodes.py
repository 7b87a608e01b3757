"""The node side of the fake cluster: for each fake GPU node, the kubelet's device plugin and PodResources
API (a real gRPC server), the GPUs' processes (fake NVML scenario and /proc), ``kuota exporter`` as a real
process, and a dcgm-exporter look-alike, all driven from the pods the API server says run on the node.

:meth:`GpuNodes.reconcile` plays the device plugin: a pod that turned Running gets free GPUs of its node, and
one process per GPU busy at its team's SM percentage; a pod that stopped running gives them back. Each
(pod, GPU) holding is recorded with the wall-clock times the test made it visible, which are the ground truth
the report's GPU-hours are checked against.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.cluster import GPU_RESOURCE
from tests.fakes import proc_tree
from tests.fakes.exporter_process import ExporterProcess
from tests.fakes.nvml.scenario import H100, Busy, Gpu, Process, Scenario, gpu_uuid
from tests.fakes.podresources_server import Assigned, FakeKubelet

GPUS_PER_NODE = 8
DRIVER = "570.124.06"
# The exporter's sampling: processes and PodResources read four times a second, SM use averaged over 1 s.
PROCESS_INTERVAL_S = 0.25
POD_RESOURCES_INTERVAL_S = 0.25
UTILIZATION_WINDOW_S = 1.0


@dataclass
class Holding:
    """One GPU held by one pod's container, busy at ``sm_percent``; ``end`` is None while held."""

    namespace: str
    pod: str
    uid: str
    container: str
    node: str
    gpu_index: int
    gpu_uuid: str
    pid: int
    sm_percent: int
    start: float
    end: float | None = None

    def seconds(self) -> float:
        assert self.end is not None, f"{self.namespace}/{self.pod} still holds {self.gpu_uuid}"
        return self.end - self.start


def _gpu_request(pod: Mapping[str, Any]) -> tuple[str, int]:
    """(container, GPUs) of the pod's one GPU container."""
    for container in pod["spec"]["containers"]:
        limits = (container.get("resources") or {}).get("limits") or {}
        if GPU_RESOURCE in limits:
            return container["name"], int(limits[GPU_RESOURCE])
    return "", 0


@dataclass
class FakeNode:
    name: str
    index: int
    workdir: Path
    kubelet: FakeKubelet
    gpus: tuple[Gpu, ...]
    held: dict[int, Holding] = field(default_factory=dict)  # GPU index -> its holder
    exporter: ExporterProcess | None = None

    @property
    def scenario_path(self) -> Path:
        return self.workdir / "scenario.txt"

    @property
    def proc_root(self) -> Path:
        return self.workdir / "proc"

    def publish(self) -> None:
        """What the node shows now: processes and their SM use first, then the kubelet's allocations, so the
        exporter never sees an allocation whose process is not there yet."""
        for holding in self.held.values():
            proc_tree.write_process(self.proc_root, holding.pid, proc_tree.systemd_v2(holding.uid))
        Scenario(
            gpus=self.gpus,
            processes=tuple(Process(h.gpu_index, h.pid) for h in self.held.values()),
            busy=tuple(Busy(h.gpu_index, h.pid, sm=h.sm_percent) for h in self.held.values()),
            driver=DRIVER,
            epoch=time.time(),
        ).write(self.scenario_path)
        by_container: dict[tuple[str, str, str], list[str]] = {}
        for holding in sorted(self.held.values(), key=lambda h: h.gpu_index):
            key = (holding.namespace, holding.pod, holding.container)
            by_container.setdefault(key, []).append(holding.gpu_uuid)
        self.kubelet.assign(
            [Assigned(ns, pod, container, tuple(ids)) for (ns, pod, container), ids in by_container.items()]
        )

    def dcgm_exposition(self) -> str:
        """dcgm-exporter 3.x/4.x's text for these GPUs: the holder's pod labels on an allocated GPU."""
        held = dict(self.held)  # a snapshot: this runs on the HTTP server's thread
        lines = [
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        ]
        for gpu in self.gpus:
            labels = {
                "gpu": str(gpu.minor),
                "UUID": gpu.uuid,
                "pci_bus_id": f"00000000:{0x18 + gpu.minor:02X}:00.0",
                "device": f"nvidia{gpu.minor}",
                "modelName": gpu.name,
                "Hostname": self.name,
                "DCGM_FI_DRIVER_VERSION": DRIVER,
            }
            holder = held.get(gpu.minor)
            if holder is not None:
                labels.update(container=holder.container, namespace=holder.namespace, pod=holder.pod)
            text = ",".join(f'{key}="{value}"' for key, value in labels.items())
            lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{text}}} {holder.sm_percent if holder else 0}")
        return "\n".join(lines) + "\n"


class _DcgmHandler(BaseHTTPRequestHandler):
    exposition: Callable[[], str]

    def do_GET(self) -> None:
        body = self.exposition().encode() if self.path == "/metrics" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@contextlib.contextmanager
def dcgm_exporter(exposition: Callable[[], str]) -> Iterator[str]:
    """A real HTTP server on loopback serving ``exposition()`` at /metrics; yields its host:port."""
    handler = type("Handler", (_DcgmHandler,), {"exposition": staticmethod(exposition)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="fake-dcgm-exporter", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class GpuNodes:
    """Every fake GPU node's device plugin, processes and exporters; see the module docstring."""

    def __init__(self, nodes: Sequence[FakeNode], team_sm_percent: Mapping[str, int]) -> None:
        self.nodes = {node.name: node for node in nodes}
        self.team_sm_percent = team_sm_percent
        self.holdings: list[Holding] = []
        self._pids = itertools.count(10_000)

    def reconcile(self, pods: Sequence[Mapping[str, Any]]) -> None:
        """Allocate GPUs to pods that run, free those of pods that stopped; publish what changed."""
        running = {
            pod["metadata"]["uid"]: pod
            for pod in pods
            if pod["status"].get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
            and pod["spec"].get("nodeName") in self.nodes
        }
        changed: set[str] = set()
        now = time.time()
        for node in self.nodes.values():
            for index, holding in list(node.held.items()):
                if holding.uid not in running:
                    holding.end = now
                    del node.held[index]
                    changed.add(node.name)
        held_uids = {h.uid for node in self.nodes.values() for h in node.held.values()}
        for uid, pod in running.items():
            container, count = _gpu_request(pod)
            if uid in held_uids or count == 0:
                continue
            node = self.nodes[pod["spec"]["nodeName"]]
            free = [gpu for gpu in node.gpus if gpu.minor not in node.held][:count]
            assert len(free) == count, f"{pod['metadata']['name']} bound to {node.name} without {count} free GPUs"
            namespace = pod["metadata"]["namespace"]
            for gpu in free:
                holding = Holding(
                    namespace=namespace,
                    pod=pod["metadata"]["name"],
                    uid=uid,
                    container=container,
                    node=node.name,
                    gpu_index=gpu.minor,
                    gpu_uuid=gpu.uuid,
                    pid=next(self._pids),
                    sm_percent=self.team_sm_percent[namespace],
                    start=now,
                )
                node.held[gpu.minor] = holding
                self.holdings.append(holding)
            changed.add(node.name)
        for name in sorted(changed):
            self.nodes[name].publish()

    def exporter_args(self, node: FakeNode, kubeconfig: Path) -> list[str]:
        return [
            "--node-name", node.name,
            "--kubeconfig", str(kubeconfig),
            "--proc-root", str(node.proc_root),
            "--pod-resources-socket", str(node.kubelet.socket_path),
            "--process-interval", str(PROCESS_INTERVAL_S),
            "--device-interval", "1",
            "--pod-resources-interval", str(POD_RESOURCES_INTERVAL_S),
            "--utilization-window", str(UTILIZATION_WINDOW_S),
        ]  # fmt: skip


def node_gpus(node_index: int) -> tuple[Gpu, ...]:
    """Eight H100s with UUIDs unique across the cluster."""
    return tuple(
        Gpu(uuid=gpu_uuid(node_index * GPUS_PER_NODE + minor), minor=minor, name=H100) for minor in range(GPUS_PER_NODE)
    )
