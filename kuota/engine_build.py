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
_EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


class _SourceFirst(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        del target
        if not fullname.startswith("kuota."):  # setup.py compiles modules of kuota only
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
    if any(_compiled(module) for name, module in sys.modules.items() if name.startswith("kuota.")):
        raise RuntimeError("prefer_pure_python() must run before the engine is imported")
    sys.meta_path.insert(0, _SourceFirst())


def engine_build() -> str:
    """``compiled (mypyc)`` or ``pure Python``: how ``kuota.engine.quota_engine`` was loaded."""
    from kuota.engine import QuotaEngine

    return "compiled (mypyc)" if _compiled(sys.modules[QuotaEngine.__module__]) else "pure Python"


def stale_compiled_modules(checkout: Path = _CHECKOUT) -> list[str]:
    """Compiled modules that would run other code than their source, as paths relative to ``checkout``: the
    source edited after the build, or gone (a module moved or renamed; ``pip install -e .`` leaves its old
    compiled copy behind, and that copy still wins the import of the old name)."""
    root = checkout / "kuota"
    stale = []
    for extension in (path for path in root.rglob("*") if path.name.endswith(_EXTENSIONS)):
        if extension.parent == root and extension.name.startswith("engine__mypyc"):
            continue  # mypyc's runtime library of the group, not a module of ours
        source = extension.with_name(extension.name.split(".")[0] + ".py")
        if not source.exists():
            stale.append(str(extension.relative_to(checkout)))
        elif source.stat().st_mtime > extension.stat().st_mtime:
            stale.append(str(source.relative_to(checkout)))
    return sorted(set(stale))


def _compiled(module: object) -> bool:
    return str(getattr(module, "__file__", None) or "").endswith(_EXTENSIONS)
