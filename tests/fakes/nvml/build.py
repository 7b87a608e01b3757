"""Compile the fake NVML library with the machine's gcc into a folder of the caller's choosing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_nvml.c")
SONAME = "libnvidia-ml.so.1"


class FakeNvmlBuildError(RuntimeError):
    """gcc is missing or the fake did not compile; the message carries gcc's output."""


def build(out_dir: Path, *, old_driver: bool = False) -> Path:
    """Build ``out_dir/libnvidia-ml.so.1``; ``old_driver`` leaves out the _v3 process query."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise FakeNvmlBuildError("no C compiler on PATH: install gcc to build the fake libnvidia-ml.so.1")
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / SONAME
    command = [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", f"-Wl,-soname,{SONAME}"]
    command += ["-DFAKE_NVML_OLD_DRIVER"] if old_driver else []
    command += ["-o", str(library), str(SOURCE), "-lpthread"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if result.returncode != 0:
        raise FakeNvmlBuildError(f"building {library} failed:\n{result.stderr}")
    return library
