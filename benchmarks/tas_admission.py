"""Benchmark: admission with topology-aware scheduling against the same stream without it, in one run.

Run: ``.venv/bin/python benchmarks/tas_admission.py [--workloads 2000] [--pure] [--repeat 3]``. Each mode runs
in its own process (peak memory is that mode's), with the engine as installed (``--pure``: its pure-Python
sources), ``--repeat`` times, the modes taking turns; each figure is the run of least CPU (a plain run takes a
few tens of milliseconds, so one run's ratio moves with whatever else the machine does).

The cluster: 1,000 nodes of 8 GPUs in 4 levels (2 zones, 10 blocks, 100 racks, 1,000 hosts), one ResourceFlavor
and one ClusterQueue whose quota is the cluster's 8,000 GPUs. The stream: 2,000 workloads pending at once, gangs of
1, 2, 4, 8 or 16 pods of 8 GPUs each (seeded), the gangs of up to 8 pods requiring one rack and the larger ones
preferring one block; each runs 1 to 4 hours, and a finished one makes room for the next. With TAS, the flavor
names the Topology and the nodes are known to the engine; without, the same flavor, quota and workloads carry no
topology, so only quota decides. Reported per mode: admissions, CPU seconds, decisions per second, peak RSS, and
the CPU ratio of TAS to no TAS (target: at most 3x).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time

TARGET_RATIO = 3.0
GPU = "nvidia.com/gpu"
LEVELS = ("example.com/zone", "example.com/block", "example.com/rack", "kubernetes.io/hostname")


def _run(workloads: int, tas: bool, pure: bool) -> dict[str, float]:
    from kuota.engine_build import prefer_pure_python

    if pure:
        prefer_pure_python()
    from kuota.engine import (
        Admission,
        PodSet,
        QuotaEngine,
        Topology,
        TopologyNode,
        TopologyRequest,
        Workload,
        parse_object,
    )

    api = "kueue.x-k8s.io/v1beta2"
    engine = QuotaEngine()
    flavor_spec: dict[str, object] = {"nodeLabels": {"pool": "gpu"}}
    if tas:
        flavor_spec["topologyName"] = "datacenter"
        engine.apply(Topology("datacenter", LEVELS))
        for host in range(1000):
            rack, block, zone = host // 10, host // 100, host // 500
            labels = {"pool": "gpu", LEVELS[0]: f"z{zone}", LEVELS[1]: f"b{block}", LEVELS[2]: f"r{rack}"}
            labels[LEVELS[3]] = f"host-{host:04d}"
            engine.apply_node(TopologyNode(f"host-{host:04d}", labels, {GPU: 8, "pods": 110}))
    engine.apply(
        parse_object({"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}, "spec": flavor_spec})
    )
    quota = {"name": GPU, "nominalQuota": 8000}
    queue = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "gpu", "resources": [quota]}]}],
    }
    engine.apply(parse_object({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": queue}))
    engine.apply(
        parse_object(
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": "ns"},
                "spec": {"clusterQueue": "cq"},
            }
        )
    )
    rng = random.Random(32)
    runtimes: dict[str, float] = {}
    for index in range(workloads):
        count = rng.choice((1, 2, 4, 8, 16))
        request = None
        if tas:
            request = TopologyRequest(required=LEVELS[2]) if count <= 8 else TopologyRequest(preferred=LEVELS[1])
        pod_set = PodSet("main", count, {GPU: 8}, topology_request=request)
        name = f"w{index:05d}"
        engine.submit(Workload("ns", name, "q", (pod_set,), created=float(index), uid=name))
        runtimes[f"ns/{name}"] = 3600.0 * rng.uniform(1.0, 4.0)
    started = time.process_time()
    now = float(workloads)
    ends: list[tuple[float, str]] = []
    admissions = decisions = 0
    while True:
        for decision in engine.schedule(now):
            decisions += 1
            if isinstance(decision, Admission):
                admissions += 1
                ends.append((now + runtimes[decision.workload], decision.workload))
        if not ends:
            break
        ends.sort(reverse=True)
        now, key = ends.pop()
        engine.finish(key)
        while ends and ends[-1][0] <= now:
            engine.finish(ends.pop()[1])
    seconds = time.process_time() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"admissions": admissions, "decisions": decisions, "seconds": seconds, "rss": rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--pure", action="store_true", help="the engine's pure-Python sources, not the compiled build")
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode; the one of least CPU is reported")
    parser.add_argument("--one", choices=("tas", "plain"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_run(args.workloads, args.one == "tas", args.pure)))
        return
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, not {args.repeat}")
    results: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for mode in ("plain", "tas"):
            command = [sys.executable, __file__, "--workloads", str(args.workloads), "--one", mode]
            output = subprocess.run(
                [*command, *(["--pure"] if args.pure else [])], check=True, capture_output=True, text=True
            )
            figures = json.loads(output.stdout)
            if mode not in results or figures["seconds"] < results[mode]["seconds"]:
                results[mode] = figures
    print(
        f"{args.workloads:,} workloads, 1,000 nodes in 4 levels, engine "
        f"{'pure Python' if args.pure else 'as installed'}, least CPU of {args.repeat} run(s) per mode"
    )
    print(f"{'mode':8} {'admitted':>9} {'decisions':>10} {'CPU s':>8} {'decisions/s':>12} {'peak RSS MiB':>13}")
    for mode, figures in results.items():
        rate = figures["decisions"] / figures["seconds"] if figures["seconds"] else float("inf")
        print(
            f"{mode:8} {figures['admissions']:>9,.0f} {figures['decisions']:>10,.0f} {figures['seconds']:>8.2f} "
            f"{rate:>12,.0f} {figures['rss'] / 2**20:>13.0f}"
        )
    ratio = results["tas"]["seconds"] / results["plain"]["seconds"]
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    print(f"TAS / no TAS CPU: {ratio:.2f}x ({verdict} the {TARGET_RATIO:.0f}x target)")


if __name__ == "__main__":
    main()
