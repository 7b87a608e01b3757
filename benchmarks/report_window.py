"""Benchmark: ``kuota report`` over a 7-day window of 1,000 GPUs in 100 namespaces, against a real Prometheus.

Targets (issue 6): under 60 s and under 1 GB peak memory for the report process. The baseline, measured in
the same run on the same data, is a 1-day window; the table shows how time and memory grow with the window.

The history is generated (125 nodes x 8 GPUs; each GPU runs a sequence of pods of 2-24 h at random loads,
with gaps; 100 ClusterQueues with waits and pending counts) and sampled every ``--step`` seconds, then
backfilled with promtool once and cached under ~/.cache/kuota/bench/. The levers read from the Workloads run too:
a ``--workloads`` dump of ``--workloads-per-namespace`` Workloads in each namespace (a fifth preempted and
finished, a tenth failed), priced with a spot price and a commitment discount.

    .venv/bin/python benchmarks/report_window.py [--gpus 1000] [--namespaces 100] [--step 600]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.report.openmetrics import OpenMetricsHistory
from tests.prometheus_server import PrometheusServer, backfill_openmetrics

END = 1_790_000_000 - 1_790_000_000 % 86400  # a midnight, UTC
DAYS = 7
GENERATOR_VERSION = 1  # bump when generate() changes, to rebuild the cached TSDB
BUCKETS = (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480, 40960, float("inf"))


def generate(gpus: int, namespaces: int, step: int, seed: int = 6) -> OpenMetricsHistory:
    rng = random.Random(seed)
    start = END - DAYS * 86400
    times = list(range(start, END + 1, step))
    om = OpenMetricsHistory()
    names = [f"team-{i:03d}" for i in range(namespaces)]
    for index in range(gpus):
        node, gpu = divmod(index, 8)
        base = {"Hostname": f"node-{node:03d}", "gpu": str(gpu), "UUID": f"GPU-{index:05d}"}
        om.gauge("kuota_gpu_up", base, ((t, 1) for t in times))
        t = start
        pod = 0
        while t < END:
            length = rng.randrange(2, 25) * 3600
            gap = rng.choice((0, 0, 3600, 4 * 3600))
            namespace = names[(node * 7 + pod) % namespaces]
            load = rng.choice((2.0, 35.0, 60.0, 90.0))
            labels = {**base, "namespace": namespace, "pod": f"job-{node}-{gpu}-{pod}", "container": "main"}
            held = [x for x in times if t < x <= min(END, t + length)]
            om.gauge("kuota_gpu_allocated", labels, ((x, 1) for x in held))
            om.gauge(
                "kuota_pod_gpu_sm_utilization_percent",
                labels,
                ((x, max(0.0, min(100.0, load + rng.uniform(-5, 5)))) for x in held),
            )
            t += length + gap
            pod += 1
    hourly = [x for x in times if x % 3600 == 0]
    for name in names:
        quota = {"cohort": "all", "cluster_queue": name, "flavor": "h100", "resource": "nvidia.com/gpu"}
        nominal = gpus // namespaces
        om.gauge("kueue_cluster_queue_nominal_quota", quota, ((t, nominal) for t in times))
        om.gauge("kueue_cluster_queue_resource_usage", quota, ((t, rng.randrange(0, nominal + 3)) for t in times))
        om.gauge(
            "kueue_pending_workloads",
            {"cluster_queue": name, "status": "active"},
            ((t, rng.choice((0, 0, 1, 3))) for t in times),
        )
        counts = [0] * len(BUCKETS)
        series: list[list[tuple[int, float]]] = [[] for _ in BUCKETS]
        for t in hourly:
            wait = rng.expovariate(1 / 900)
            for i, bound in enumerate(BUCKETS):
                counts[i] += 4 if wait <= bound else 0
                series[i].append((t, float(counts[i])))
        for bound, points in zip(BUCKETS, series, strict=True):
            om.add(
                "kueue_admission_wait_time_seconds",
                "histogram",
                "kueue_admission_wait_time_seconds_bucket",
                {"cluster_queue": name, "le": "+Inf" if bound == float("inf") else f"{bound:g}"},
                points,
            )
    return om


def tsdb(gpus: int, namespaces: int, step: int) -> Path:
    key = hashlib.sha256(f"{GENERATOR_VERSION}/{gpus}/{namespaces}/{step}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("KUOTA_CACHE", Path.home() / ".cache" / "kuota")) / "bench" / f"report-{key}"
    if not (cache / "complete").exists():
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        began = time.perf_counter()
        history = generate(gpus, namespaces, step).write_file(cache / "history.om")
        size = history.stat().st_size
        backfill_openmetrics(history, cache / "tsdb", timeout_s=3600)
        history.unlink()
        print(f"generated and backfilled {size / 1e6:.0f} MB of OpenMetrics in {time.perf_counter() - began:.0f} s")
        (cache / "complete").write_text("ok\n")
    return cache / "tsdb"


_PROBE = (
    "import resource, sys; from kuota.cli import main; code = main(sys.argv[1:]); "
    "print(f'PEAK_RSS_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr); sys.exit(code)"
)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def workloads_dump(path: Path, namespaces: int, per_namespace: int, seed: int = 6) -> Path:
    """Workloads created over the week: a fifth preempted and finished, a tenth failed, priorities -1 to 2."""
    rng = random.Random(seed)
    items = []
    for n in range(namespaces):
        for index in range(per_namespace):
            created = END - DAYS * 86400 + rng.randrange(0, DAYS * 86400 - 7200)
            admitted = created + rng.randrange(0, 1800)
            ended = min(END, admitted + rng.randrange(600, 12 * 3600))
            kind = index % 10
            conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": _iso(admitted)}]
            if kind < 2:
                conditions.append({"type": "Preempted", "status": "False", "lastTransitionTime": _iso(admitted)})
            reason = "Failed" if kind == 9 else "Succeeded"
            conditions.append(
                {"type": "Finished", "status": "True", "reason": reason, "lastTransitionTime": _iso(ended)}
            )
            requests = {"nvidia.com/gpu": str(rng.choice((1, 2, 4, 8)))}
            items.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "metadata": {
                        "name": f"job-{index}",
                        "namespace": f"team-{n:03d}",
                        "creationTimestamp": _iso(created),
                    },
                    "spec": {
                        "queueName": "default",
                        "priority": rng.randrange(-1, 3),
                        "podSets": [
                            {
                                "name": "main",
                                "count": 1,
                                "template": {"spec": {"containers": [{"resources": {"requests": requests}}]}},
                            }
                        ],
                    },
                    "status": {
                        "admission": {
                            "clusterQueue": f"team-{n:03d}",
                            "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "h100"}}],
                        },
                        "conditions": conditions,
                    },
                }
            )
    path.write_text(json.dumps({"kind": "List", "items": items}), encoding="utf-8")
    return path


def run_report(url: str, window: str, resolution: str, out: Path, workloads: Path) -> tuple[float, float]:
    began = time.perf_counter()
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            _PROBE,
            "report",
            "--prometheus",
            url,
            "--window",
            window,
            "--end",
            str(END),
            "--resolution",
            resolution,
            "--out",
            str(out),
            "--workloads",
            str(workloads),
            "--price",
            "h100-spot=2.0",
            "--commitment",
            "30%",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - began
    if completed.returncode != 0:
        raise SystemExit(f"kuota report failed ({completed.returncode}): {completed.stderr[-3000:]}")
    peak_kb = next(int(line.split()[1]) for line in completed.stderr.splitlines() if line.startswith("PEAK_RSS_KB"))
    return elapsed, peak_kb / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--workloads-per-namespace", type=int, default=100)
    parser.add_argument(
        "--step",
        type=int,
        default=600,
        help="sample spacing and report resolution in seconds (default 600: the history is "
        "backfilled once, and promtool needs minutes per few million samples)",
    )
    args = parser.parse_args()
    resolution = f"{args.step}s"
    data = tsdb(args.gpus, args.namespaces, args.step)
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        shutil.copytree(data, work / "tsdb")
        workloads = workloads_dump(work / "workloads.json", args.namespaces, args.workloads_per_namespace)
        with PrometheusServer.start(
            work / "prometheus", tsdb=work / "tsdb", lookback_delta=f"{args.step // 2}s"
        ) as server:
            rows = [
                (window, *run_report(server.url, window, resolution, work / window, workloads))
                for window in ("1d", "7d")
            ]
    base_time, base_rss = rows[0][1], rows[0][2]
    print(
        f"\nkuota report, {args.gpus} GPUs, {args.namespaces} namespaces, "
        f"{args.namespaces * args.workloads_per_namespace} Workloads, samples every {args.step} s, "
        f"resolution {resolution}"
    )
    print(f"{'window':>7} | {'time s':>7} | {'peak RSS MiB':>12} | {'time / 1d':>9} | {'RSS / 1d':>8} | target")
    for window, seconds, rss in rows:
        target = "< 60 s, < 1024 MiB" if window == "7d" else "baseline"
        print(
            f"{window:>7} | {seconds:7.1f} | {rss:12.0f} | {seconds / base_time:9.2f} | "
            f"{rss / base_rss:8.2f} | {target}"
        )


if __name__ == "__main__":
    main()
