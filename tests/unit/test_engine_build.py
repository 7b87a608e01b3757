"""The installed engine build is the one asked for, and an edit after compiling is caught."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

from kuota.engine_build import engine_build, stale_compiled_modules

EXTENSION = importlib.machinery.EXTENSION_SUFFIXES[0]
SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def test_the_engine_is_compiled_unless_pure_python_was_asked_for() -> None:
    """Asked for at install, nothing is compiled; asked for when testing (``make unit``), tests/conftest.py loads
    every module from its source even where the install compiled it."""
    wanted = "pure Python" if os.environ.get("KUOTA_PURE_PYTHON") == "1" else "compiled (mypyc)"
    assert engine_build() == wanted
    if wanted == "pure Python":
        import kuota.simulator.replay  # noqa: F401  (it loads every module setup.py compiles)

        loaded = {name: str(getattr(module, "__file__", None) or "") for name, module in sys.modules.items()}
        assert [name for name, file in loaded.items() if name.startswith("kuota") and file.endswith(SUFFIXES)] == []


def test_the_compiled_modules_runtime_library_installs_inside_kuota() -> None:
    """mypyc's shared library of the group is named in setup.py; left to mypyc it would be a top-level name."""
    checkout = Path(__file__).resolve().parents[2]
    if engine_build() == "pure Python":
        assert not list(checkout.glob(f"*__mypyc{EXTENSION}"))
        return
    assert list((checkout / "kuota").glob(f"engine__mypyc{EXTENSION}"))
    assert not list(checkout.glob(f"*__mypyc{EXTENSION}"))


def _module(folder: Path, name: str, source_mtime: float, compiled_mtime: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    source, compiled = folder / f"{name}.py", folder / f"{name}{EXTENSION}"
    source.write_text("")
    compiled.write_bytes(b"")
    os.utime(source, (source_mtime, source_mtime))
    os.utime(compiled, (compiled_mtime, compiled_mtime))


def test_a_source_newer_than_its_compiled_module_is_stale(tmp_path: Path) -> None:
    _module(tmp_path / "kuota" / "engine", "quota_engine", source_mtime=2000, compiled_mtime=1000)
    _module(tmp_path / "kuota" / "engine", "model", source_mtime=1000, compiled_mtime=2000)
    _module(tmp_path / "kuota" / "simulator", "replay", source_mtime=3000, compiled_mtime=1000)
    (tmp_path / "kuota" / "engine" / "decoding.py").write_text("")  # never compiled: not stale

    assert stale_compiled_modules(tmp_path) == ["kuota/engine/quota_engine.py", "kuota/simulator/replay.py"]


def test_a_compiled_module_whose_source_is_gone_is_stale(tmp_path: Path) -> None:
    """A renamed module's old compiled copy stays beside the sources and still answers the old import."""
    _module(tmp_path / "kuota" / "simulator", "inputs", source_mtime=1000, compiled_mtime=2000)
    (tmp_path / "kuota" / "simulator" / "inputs.py").unlink()
    (tmp_path / "kuota" / f"engine__mypyc{EXTENSION}").write_bytes(b"")  # the group's runtime, no module

    assert stale_compiled_modules(tmp_path) == [f"kuota/simulator/inputs{EXTENSION}"]


def test_a_pure_python_checkout_has_nothing_stale(tmp_path: Path) -> None:
    (tmp_path / "kuota" / "engine").mkdir(parents=True)
    (tmp_path / "kuota" / "engine" / "quota_engine.py").write_text("")
    assert stale_compiled_modules(tmp_path) == []


def test_the_pure_python_baseline_loads_every_engine_module_from_source() -> None:
    script = (
        "from kuota.engine_build import engine_build, prefer_pure_python\n"
        "prefer_pure_python()\n"
        "import kuota.simulator.replay, kuota.engine.quota_tree\n"
        "print(engine_build(), kuota.simulator.replay.__file__, kuota.engine.quota_tree.__file__, sep='|')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    build, *files = done.stdout.strip().split("|")
    assert (build, [Path(f).suffix for f in files]) == ("pure Python", [".py", ".py"])
