"""The ``kuota`` command: one entry point, one subcommand per shipped program.

Each subcommand's arguments and runner live beside the code they drive (``<package>/commands.py``); those
modules import only argparse at import time, so ``kuota --help`` and ``kuota simulate`` never load NVML,
gRPC or the Kubernetes client.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

from kuota import __version__


class Subcommand(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def example(self) -> str: ...

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _subcommands() -> list[Subcommand]:
    from kuota.certs.commands import CERTS
    from kuota.exporter.commands import EXPORTER
    from kuota.report.commands import REPORT
    from kuota.simulator.commands import SIMULATE
    from kuota.webhook.commands import MANAGER

    return [MANAGER, SIMULATE, EXPORTER, REPORT, CERTS, _Version()]


class _Version:
    name = "version"
    summary = "Print kuota's version."
    example = "kuota version"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        del parser

    def run(self, args: argparse.Namespace) -> int:
        del args
        from kuota.engine_build import engine_build

        print(f"kuota {__version__} (quota engine: {engine_build()})")
        return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kuota",
        description="Fair GPU sharing for Kubernetes: Kueue-compatible quota admission, "
        "per-pod GPU utilization and a weekly buy-versus-tune report.",
        epilog="Run 'kuota <command> --help' for one command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"kuota {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for subcommand in _subcommands():
        sub = commands.add_parser(
            subcommand.name,
            help=subcommand.summary,
            description=subcommand.summary,
            epilog=f"example: {subcommand.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        subcommand.add_arguments(sub)
        run: Callable[[argparse.Namespace], int] = subcommand.run
        sub.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
