"""Compiles the quota engine and the replay loop with mypyc; everything else is in pyproject.toml.

The compiled modules are the same strictly typed sources, turned into C extensions: 1.6 to 1.9 times faster
decisions (``benchmarks/simulate_philly.py``, ``benchmarks/engine_scale.py``). Where they cannot be built (no C
compiler or no Python headers) kuota installs as pure Python and says so; ``KUOTA_PURE_PYTHON=1`` asks for that.
``kuota version`` tells which one is installed.

In these modules, a record built on the hot path (per attempt, per decision, per replayed workload) is a plain
class with a written-out ``__init__``, not a dataclass: mypyc compiles a dataclass's class, but the ``__init__``
the decorator generates runs as interpreted bytecode (a frozen one through ``object.__setattr__``), which cost
Philly's replay an eighth of its time. ``Final`` attributes keep them read-only to mypy. Likewise, a hot
function takes a ``dict``, not a ``Mapping``, where every caller has one: compiled, a dict's ``get`` and
``items`` are direct calls, a Mapping's a method looked up by name; and keys are tuples of any length where
mypyc would unbox a fixed-length one (``quota_tree.FlavorResource``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

COMPILED_MODULES = [
    "kuota/engine/decisions.py",
    "kuota/engine/fair_sharing.py",
    "kuota/engine/flavor_assignment.py",
    "kuota/engine/model.py",
    "kuota/engine/preemption.py",
    "kuota/engine/quantities.py",
    "kuota/engine/queue_manager.py",
    "kuota/engine/queues.py",
    "kuota/engine/quota_engine.py",
    "kuota/engine/quota_tree.py",
    "kuota/engine/scheduler.py",
    "kuota/engine/topology.py",
    "kuota/engine/topology_admission.py",
    "kuota/simulator/replay.py",
    "kuota/simulator/workload_reading.py",
]


class BuildExtOrPurePython(build_ext):
    """A failed compile leaves the pure-Python modules in place instead of failing the install."""

    failed = False

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # the compiler's errors have no common base class
            self._fall_back(error)

    def build_extension(self, ext: Any) -> None:
        if self.failed:
            return
        try:
            super().build_extension(ext)
        except Exception as error:
            self._fall_back(error)

    def _fall_back(self, error: Exception) -> None:
        if self.failed:
            return
        self.failed = True
        # A compiled module without the rest of its group would fail to import: keep none of them.
        for ext in self.extensions:
            Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
        self.extensions = []
        reason = str(error).rsplit("]", 1)[-1].strip(" '.") or type(error).__name__
        print(
            f"kuota: the mypyc-compiled engine could not be built ({reason}); installing pure Python, which decides "
            "1.6 to 1.9 times slower. Install a C compiler and the Python headers (Debian: gcc python3-dev) to "
            "compile it.",
            file=sys.stderr,
        )


def _extensions() -> list[Any]:
    if os.environ.get("KUOTA_PURE_PYTHON") == "1":
        return []
    from mypyc.build import mypycify

    # Named inside kuota, the modules' shared runtime library installs as kuota/engine__mypyc, not as a top-level name.
    return list(mypycify(COMPILED_MODULES, opt_level="3", group_name="kuota.engine"))


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExtOrPurePython})
