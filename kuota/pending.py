"""A subcommand whose issue has not landed yet: it says so plainly and exits non-zero, with no fake output."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class PendingSubcommand:
    name: str
    summary: str
    example: str
    arrives_with: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(self, args: argparse.Namespace) -> int:
        del args
        print(f"kuota {self.name} is not available yet: it arrives with {self.arrives_with}.", file=sys.stderr)
        return 3
