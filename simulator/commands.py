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
            "Namespaces, one Configuration; default: the built-in example",
        )
        parser.add_argument(
            "--workloads",
            type=Path,
            help="JSON Lines, one workload a line (docs/simulate.md), or a "
            "Philly/Helios trace CSV whose users are hashed onto the CONFIG's LocalQueues; default: "
            "the built-in example's week",
        )
        parser.add_argument("--until", type=float, metavar="SECONDS", help="stop at this time; report the state then")
        parser.add_argument("--output", type=Path, metavar="OUT.json", help="also write the full result as JSON")

    def run(self, args: argparse.Namespace) -> int:
        import json

        from kuota.simulator.errors import SimulateError
        from kuota.simulator.inputs import load_config, read_workloads, seed_directory
        from kuota.simulator.replay import replay
        from kuota.simulator.summary import output_document, summary

        if (args.config is None) != (args.workloads is None):
            print(
                "kuota simulate: give both --config and --workloads, or neither for the built-in example",
                file=sys.stderr,
            )
            return 2
        config = args.config or seed_directory()
        workloads_path = args.workloads or seed_directory() / "workloads.jsonl"
        if args.until is not None and args.until < 0:
            print("kuota simulate: --until must be >= 0 seconds", file=sys.stderr)
            return 2
        try:
            objects = load_config(config)
            workloads = read_workloads(workloads_path, objects)
            result = replay(objects, workloads, args.until)
        except SimulateError as error:
            print(f"kuota simulate: {error}", file=sys.stderr)
            return 2
        sys.stdout.write(summary(result))
        if args.output is not None:
            try:
                args.output.write_text(json.dumps(output_document(result), indent=1) + "\n")
            except OSError as error:
                print(f"kuota simulate: cannot write {args.output}: {error}", file=sys.stderr)
                return 2
        return 0


SIMULATE = _Simulate()
