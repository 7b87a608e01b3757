"""Which build of the quota engine is installed: mypyc-compiled extensions (``setup.py``) or pure Python.

A compiled module sits beside its source and wins the import, so in a working checkout an edit made after the
last ``pip install -e .`` would silently run the old code; ``stale_compiled_modules`` finds those.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
# The packages setup.py compiles modules of (its COMPILED_MODULES).
COMPILED_PACKAGES = ("engine", "simulator")
_COMPILED_PREFIXES = tuple(f"kuota.{package}." for package in COMPILED_PACKAGES)


class _SourceFirst(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        del target
        if not fullname.startswith(_COMPILED_PREFIXES):
            return None
        name = fullname.rpartition(".")[2]
        for folder in path or ():
            source = Path(folder) / f"{name}.py"
            if source.exists():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def prefer_pure_python() -> None:
    """Load the engine from its sources even where it is compiled: the baseline the benchmarks compare with.
    Call it before anything imports the engine or the simulator."""
    if any(name.startswith(_COMPILED_PREFIXES) for name in sys.modules):
        raise RuntimeError("prefer_pure_python() must run before the engine is imported")
    sys.meta_path.insert(0, _SourceFirst())


def engine_build() -> str:
    """``compiled (mypyc)`` or ``pure Python``: how ``kuota.engine.engine`` was loaded."""
    from kuota.engine import engine

    suffix = Path(engine.__file__ or "").name
    compiled = any(suffix.endswith(ending) for ending in importlib.machinery.EXTENSION_SUFFIXES)
    return "compiled (mypyc)" if compiled else "pure Python"


def stale_compiled_modules(checkout: Path = _CHECKOUT) -> list[str]:
    """Sources edited after their compiled module was built, as paths relative to ``checkout``."""
    stale = []
    for ending in importlib.machinery.EXTENSION_SUFFIXES:
        for extension in (
            path for package in COMPILED_PACKAGES for path in (checkout / "kuota" / package).glob(f"*{ending}")
        ):
            source = extension.with_name(extension.name.removesuffix(ending) + ".py")
            if source.exists() and source.stat().st_mtime > extension.stat().st_mtime:
                stale.append(str(source.relative_to(checkout)))
    return sorted(set(stale))
