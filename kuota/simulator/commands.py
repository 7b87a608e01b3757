"""The ``kuota simulate`` subcommand (argparse only at import time)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class _Simulate:
    name = "simulate"
    summary = "Replay workloads through the quota engine and report who ran where and who waited."
    example = (
        "kuota simulate   (the built-in three-team example)\n"
        "  kuota simulate --config examples/seed --workloads examples/seed/workloads.jsonl --output out.json"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--config",
            type=Path,
            help="a YAML file (several documents) or a folder of them: "
            "ResourceFlavors, ClusterQueues, LocalQueues, Cohorts, WorkloadPriorityClasses, "
            "Namespaces, Topologies, one Configuration; default: the built-in example",
        )
        parser.add_argument(
            "--workloads",
            type=Path,
            help="JSON Lines, one workload a line (docs/simulate.md), or a "
            "Philly/Helios trace CSV whose users are hashed onto the CONFIG's LocalQueues; default: "
            "the built-in example's week",
        )
        parser.add_argument(
            "--nodes",
            type=Path,
            help="the nodes for topology-aware scheduling (ResourceFlavors with a topologyName, a Topology in "
            "CONFIG): node pools with their level labels, or a kubectl get nodes -o json dump (docs/simulate.md)",
        )
        parser.add_argument(
            "--until", type=float, metavar="SECONDS", help="stop at this time (0 to 1e12 s); report the state then"
        )
        parser.add_argument("--output", type=Path, metavar="OUT.json", help="also write the full result as JSON")
        parser.add_argument(
            "--etas",
            action="store_true",
            help="at every submission, predict the admission ETA from what was known then (runtimes from "
            "maxExecutionSeconds, else the history of finished workloads) and compare it with the replay",
        )

    def run(self, args: argparse.Namespace) -> int:
        import json

        from kuota.files import write_file
        from kuota.simulator.config_reading import load_config, seed_directory
        from kuota.simulator.errors import SimulateError
        from kuota.simulator.limits import check_until
        from kuota.simulator.node_inventory import read_nodes
        from kuota.simulator.replay import replay
        from kuota.simulator.summary import output_document, summary
        from kuota.simulator.workload_reading import read_workloads

        if (args.config is None) != (args.workloads is None):
            return _fail("give both --config and --workloads, or neither for the built-in example")
        config = args.config or seed_directory()
        workloads_path = args.workloads or seed_directory() / "workloads.jsonl"
        try:
            until = check_until(args.until, "--until")
            objects = load_config(config)
            workloads = read_workloads(workloads_path, objects)
            nodes = read_nodes(args.nodes) if args.nodes is not None else []
            result = replay(objects, workloads, until, nodes=nodes)
        except SimulateError as error:
            return _fail(str(error))
        sys.stdout.write(summary(result))
        output = output_document(result)
        if args.etas:
            from kuota.simulator.eta_replay import eta_summary, predictions, with_etas

            made = list(predictions(objects, workloads, result))
            output = with_etas(output, made)
            sys.stdout.write(eta_summary(output["etaAccuracy"], len(made)))
        if args.output is not None:
            # Whole or not at all, and never through a symlink planted at the name (kuota.files).
            document = json.dumps(output, indent=1, allow_nan=False) + "\n"
            try:
                write_file(args.output, document)
            except OSError as error:
                return _fail(f"cannot write {args.output}: {error.strerror or error}")
        return 0


def _fail(message: str) -> int:
    """The command's one line on stderr, every character printable (a file name may hold a newline), and its
    exit code."""
    shown = "".join(character if character.isprintable() else repr(character)[1:-1] for character in message)
    print(f"kuota simulate: {shown}", file=sys.stderr)
    return 2


SIMULATE = _Simulate()
