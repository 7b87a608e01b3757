"""Benchmark: the exporter's scrape latency, resident memory and sampling CPU on the fake NVML.

8 GPUs, 128 GPU processes and 64 pods (each GPU time-sliced between eight pods running two processes each),
then the same density at 16 and 64 GPUs. The exporter runs in its own process
(real pynvml, the fake libnvidia-ml.so.1 via LD_LIBRARY_PATH, a fake /proc, a gRPC PodResources server) with
its pod directory preloaded, as a pod watch would fill it. Targets: p99 scrape <= 20 ms, RSS <= 60 MiB,
sampling at 1 s under 2 % of a core. Ratios are to the 8-GPU row of the same run.

    .venv/bin/python benchmarks/exporter_scrape.py [--scrapes 300] [--idle-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The harness (HTTP client, fake kubelet, fake NVML builder) is imported only by the parent: the child is the
# exporter alone, so its RSS is the exporter's, not the harness's.
if TYPE_CHECKING:
    from tests.fakes.nvml.scenario import Scenario
    from tests.fakes.podresources_server import Assigned

PROCESSES_PER_GPU = 16
PODS_PER_GPU = 8


@dataclass(frozen=True)
class Row:
    gpus: int
    processes: int
    pods: int
    p50_ms: float
    p99_ms: float
    series: int
    rss_mib: float
    cpu_percent: float


def node_layout(gpus: int, workdir: Path) -> tuple[Scenario, list[Assigned], dict[str, dict[str, object]]]:
    """Each GPU time-sliced between PODS_PER_GPU pods, each pod running two processes on it."""
    from tests.fakes import proc_tree
    from tests.fakes.nvml.scenario import Busy, Gpu, Process, Scenario, gpu_uuid
    from tests.fakes.podresources_server import Assigned

    proc = workdir / "proc"
    processes, busy, assigned, pods = [], [], [], {}
    pid = 10_000
    for gpu in range(gpus):
        for slot in range(PODS_PER_GPU):
            uid = f"{gpu:08x}-0000-4000-8000-{slot:012x}"
            container_id = f"{gpu:032x}{slot:032x}"
            name = f"pod-{gpu}-{slot}"
            namespace = f"team-{slot % 4}"
            pods[uid] = {"namespace": namespace, "name": name, "containers": {container_id: "main"}}
            assigned.append(Assigned(namespace, name, "main", (f"{gpu_uuid(gpu)}::{slot}",)))
            for _ in range(PROCESSES_PER_GPU // PODS_PER_GPU):
                pid += 1
                processes.append(Process(gpu, pid, 512 << 20))
                busy.append(Busy(gpu, pid, sm=(pid % 7) + 1))
                proc_tree.write_process(proc, pid, proc_tree.systemd_v2(uid, container_id))
    scenario = Scenario(
        gpus=tuple(Gpu(uuid=gpu_uuid(i), minor=i) for i in range(gpus)),
        processes=tuple(processes),
        busy=tuple(busy),
        epoch=time.time(),
    )
    return scenario, assigned, pods


async def measure(gpus: int, nvml_dir: Path, scrapes: int, idle_seconds: float) -> Row:
    from tests.fakes.podresources_server import FakeKubelet

    with tempfile.TemporaryDirectory(prefix=f"exporter-bench-{gpus}-") as scratch:
        workdir = Path(scratch)
        scenario, assigned, pods = node_layout(gpus, workdir)
        scenario.write(workdir / "scenario.txt")
        (workdir / "pods.json").write_text(json.dumps(pods))
        port = _free_port()
        async with FakeKubelet(workdir / "kubelet.sock") as kubelet:
            kubelet.assign(assigned)
            env = {
                **os.environ,
                "LD_LIBRARY_PATH": str(nvml_dir),
                "FAKE_NVML_SCENARIO": str(workdir / "scenario.txt"),
                "PYTHONPATH": str(REPO),
            }
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--child",
                str(workdir / "pods.json"),
                "--node-name",
                "bench-node",
                "--listen",
                f"127.0.0.1:{port}",
                "--proc-root",
                str(workdir / "proc"),
                "--pod-resources-socket",
                str(workdir / "kubelet.sock"),
                "--no-pod-watch",
                "--log-level",
                "WARNING",
                env=env,
            )
            try:
                return await _drive(
                    child,
                    port,
                    gpus=gpus,
                    processes=len(scenario.processes),
                    pods=len(pods),
                    scrapes=scrapes,
                    idle=idle_seconds,
                )
            finally:
                child.terminate()
                await child.wait()


async def _drive(
    child: asyncio.subprocess.Process, port: int, *, gpus: int, processes: int, pods: int, scrapes: int, idle: float
) -> Row:
    import aiohttp

    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        deadline = time.monotonic() + 60
        while True:  # ready, and per-pod figures for every pod
            try:
                async with http.get(url + "/metrics") as response:
                    body = await response.text()
                if body.count("kuota_pod_gpu_sm_utilization_percent{") >= pods:
                    break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the exporter at {url} did not report {pods} pods within 60 s")
            await asyncio.sleep(0.2)
        series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
        cpu_before, wall_before = _cpu_seconds(child.pid), time.monotonic()
        await asyncio.sleep(idle)  # sampling only, no scrapes
        cpu_percent = 100 * (_cpu_seconds(child.pid) - cpu_before) / (time.monotonic() - wall_before)
        latencies = []
        for _ in range(scrapes):
            started = time.perf_counter()
            async with http.get(url + "/metrics") as response:
                await response.read()
            latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.01)
    quantiles = statistics.quantiles(latencies, n=100)
    return Row(
        gpus, processes, pods, statistics.median(latencies), quantiles[98], series, _rss_mib(child.pid), cpu_percent
    )


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def _child(argv: list[str]) -> int:
    """The exporter itself, with the pod directory a pod watch would have filled."""
    from kuota.exporter.commands import EXPORTER
    from kuota.exporter.pod_directory import PodInfo
    from kuota.exporter.service import ExporterService, ServiceSettings

    pods_file, rest = argv[0], argv[1:]
    parser = argparse.ArgumentParser()
    EXPORTER.add_arguments(parser)
    settings = ServiceSettings.from_args(parser.parse_args(rest))
    service = ExporterService(settings)
    raw = json.loads(Path(pods_file).read_text())
    service.sampler.set_pods({uid: PodInfo(uid=uid, **fields) for uid, fields in raw.items()})
    asyncio.run(service.run())
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return _child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--gpus", type=int, nargs="+", default=[8, 16, 64])
    args = parser.parse_args()
    from tests.fakes.nvml.build import build

    with tempfile.TemporaryDirectory(prefix="fake-nvml-") as scratch:
        nvml_dir = build(Path(scratch)).parent
        rows = [asyncio.run(measure(gpus, nvml_dir, args.scrapes, args.idle_seconds)) for gpus in args.gpus]
    base = rows[0]
    print(
        f"{'GPUs':>5} {'procs':>6} {'pods':>5} {'series':>7} {'p50 ms':>7} {'p99 ms':>7} {'RSS MiB':>8} "
        f"{'CPU %':>6}   ratio to {base.gpus} GPUs (p99, RSS, CPU)"
    )
    for row in rows:
        print(
            f"{row.gpus:>5} {row.processes:>6} {row.pods:>5} {row.series:>7} {row.p50_ms:>7.2f} {row.p99_ms:>7.2f} "
            f"{row.rss_mib:>8.1f} {row.cpu_percent:>6.2f}   "
            f"{row.p99_ms / base.p99_ms:.2f}x, {row.rss_mib / base.rss_mib:.2f}x, "
            f"{row.cpu_percent / base.cpu_percent if base.cpu_percent else float('nan'):.2f}x"
        )
    print("targets at 8 GPUs: p99 <= 20 ms, RSS <= 60 MiB, CPU < 2 % of a core (sampling every 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
