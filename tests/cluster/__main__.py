"""``python -m tests.cluster up|down --workdir DIR [--nodes SPEC]``: a control plane left running for a person;
``python -m tests.cluster build``: build (or find cached) the control-plane binaries, Kueue's manager and kueuectl,
and the upstream job controllers (JobSet, KubeRay, the training-operator, the mpi-operator, Trainer v2, AppWrapper,
LeaderWorkerSet)."""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cluster.binaries import (
    ensure_appwrapper,
    ensure_binaries,
    ensure_jobset,
    ensure_kuberay,
    ensure_kueue,
    ensure_kueuectl,
    ensure_lws,
    ensure_mpi_operator,
    ensure_trainer,
    ensure_training_operator,
    ensure_vegeta,
)
from tests.cluster.controlplane import Cluster
from tests.cluster.nodes import DEFAULT_POOLS, parse_pools


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster", description=__doc__)
    parser.add_argument("action", choices=["up", "down", "build"])
    parser.add_argument("--workdir", type=Path, help="folder for certificates, logs and etcd data")
    parser.add_argument("--nodes", type=Path, help="node-pool spec (YAML list); default: three 8xH100 nodes")
    args = parser.parse_args()
    if args.action == "build":
        builds = {
            # The side-by-side tests compare kuota with Kueue: its manager is cached here too, never committed.
            "kueue": ensure_kueue,
            "kueuectl": ensure_kueuectl,  # Kueue's kubectl plugin, run against kuota by its tests
            "vegeta": ensure_vegeta,  # the webhook benchmark's load generator
            # The controllers of the job kinds kuota admits, run by tests/integration/job_kinds.
            "jobset": ensure_jobset,
            "kuberay": ensure_kuberay,
            "training-operator": ensure_training_operator,
            "lws": ensure_lws,  # LeaderWorkerSet, run by tests/integration/manager/test_leaderworkerset.py
            "mpi-operator": ensure_mpi_operator,
            "trainer": ensure_trainer,
            "appwrapper": ensure_appwrapper,
        }
        # Independent go builds overlap their downloads and links (the Go build cache is safe to share).
        with ThreadPoolExecutor(max_workers=3) as pool:
            control_plane = pool.submit(ensure_binaries)
            futures = {name: pool.submit(build) for name, build in builds.items()}
            for name, path in vars(control_plane.result()).items():
                print(f"{name}: {path}")
            for name, future in futures.items():
                print(f"{name}: {future.result()}")
        return 0
    if args.workdir is None:
        parser.error(f"{args.action} needs --workdir")
    workdir = args.workdir.resolve()
    if args.action == "down":
        if not (workdir / "processes.json").exists():
            print(f"no control plane recorded in {workdir}", file=sys.stderr)
            return 1
        Cluster.attach(workdir).stop()
        print(f"stopped the control plane in {workdir}")
        return 0
    pools = parse_pools(args.nodes.read_text()) if args.nodes else DEFAULT_POOLS
    cluster = Cluster.start(workdir, pools, die_with_parent=False)
    print(f"control plane ready in {cluster.startup_seconds:.1f}s at {cluster.server}", file=sys.stderr)
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
