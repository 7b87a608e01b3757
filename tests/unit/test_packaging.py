"""What ``pip install .`` installs: one import root, ``kuota``, holding every plane folder and the seed example.

The plane folders (``kuota/webhook/``, ``kuota/engine/``, ...) are where a wheel holds them. A plane folder
without ``__init__.py`` would be silently left out of the wheel, and ``pip install .`` would then fail at import
time; a second top-level name would shadow another project's package.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", "*.so", ".mypy_cache", ".ruff_cache", "out")
PLANES = ("webhook", "engine", "simulator", "exporter", "report", "certs", "kube")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """A wheel built from a copy of this checkout as ``pip install .`` builds it (pure Python, to keep it quick;
    from a copy, so the build's own build/ folder cannot carry files of an earlier tree into it)."""
    source = tmp_path_factory.mktemp("source") / "kuota"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
        env={**os.environ, "KUOTA_PURE_PYTHON": "1"},
        capture_output=True,
    )
    (built,) = out.glob("kuota-*.whl")
    return zipfile.ZipFile(built)


def _record(wheel: zipfile.ZipFile) -> list[str]:
    (record,) = [name for name in wheel.namelist() if name.endswith(".dist-info/RECORD")]
    return [row[0] for row in csv.reader(io.StringIO(wheel.read(record).decode()))]


def test_kuota_is_the_only_top_level_name(wheel: zipfile.ZipFile) -> None:
    top_level = {path.split("/")[0] for path in _record(wheel) if ".dist-info/" not in path}
    assert top_level == {"kuota"}
    (listed,) = [name for name in wheel.namelist() if name.endswith(".dist-info/top_level.txt")]
    assert wheel.read(listed).decode().split() == ["kuota"]


def test_every_source_module_of_every_plane_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    shipped = set(_record(wheel))
    sources = {
        path.relative_to(ROOT).as_posix()
        for plane in PLANES
        for path in (ROOT / "kuota" / plane).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    sources |= {f"kuota/{path.name}" for path in (ROOT / "kuota").glob("*.py")}
    assert sources - shipped == set()


def test_the_seed_example_ships_once_as_package_data(wheel: zipfile.ZipFile) -> None:
    example = {
        path.name for path in (ROOT / "kuota" / "simulator" / "seed").iterdir() if path.suffix in (".yaml", ".jsonl")
    }
    shipped = {path.rpartition("/")[2] for path in _record(wheel) if path.startswith("kuota/simulator/seed/")}
    assert example and example <= shipped


def test_benchmark_generators_are_not_shipped(wheel: zipfile.ZipFile) -> None:
    assert not [path for path in _record(wheel) if "synthetic" in path or "kueue_harness" in path]
