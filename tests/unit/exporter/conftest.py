"""Fixtures for the exporter's unit tests: the fake NVML library, built once per session, and a scenario file.

In this process the fake is loaded by absolute path before pynvml asks for ``libnvidia-ml.so.1``: the
dynamic loader then hands pynvml the already-loaded library whose soname matches (LD_LIBRARY_PATH is read
once at process start, too late to set here). Tests that run the exporter as a subprocess use
LD_LIBRARY_PATH, exactly as on a node.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.nvml.build import build
from tests.fakes.nvml.scenario import Scenario


@pytest.fixture(scope="session")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fake-nvml")).parent


@pytest.fixture(scope="session")
def old_driver_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fake-nvml-old"), old_driver=True).parent


@pytest.fixture(scope="session")
def loaded_fake_nvml(fake_nvml_dir: Path) -> Path:
    ctypes.CDLL(str(fake_nvml_dir / "libnvidia-ml.so.1"), mode=ctypes.RTLD_GLOBAL)
    return fake_nvml_dir


@pytest.fixture
def scenario_path(tmp_path: Path, loaded_fake_nvml: Path) -> Iterator[Path]:
    """Point the in-process fake at a fresh scenario file (empty until the test writes one)."""
    del loaded_fake_nvml
    path = tmp_path / "scenario.txt"
    Scenario().write(path)
    previous = os.environ.get("FAKE_NVML_SCENARIO")
    os.environ["FAKE_NVML_SCENARIO"] = str(path)
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop("FAKE_NVML_SCENARIO", None)
        else:
            os.environ["FAKE_NVML_SCENARIO"] = previous
