"""``kuota exporter`` as a process: real pynvml loading the fake libnvidia-ml.so.1 through LD_LIBRARY_PATH."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kuota.exporter.commands import EXPORTER
from kuota.exporter.errors import ExporterConfigurationError
from kuota.exporter.service import ServiceSettings
from tests.fakes import proc_tree
from tests.fakes.exporter_process import running_exporter
from tests.fakes.nvml.scenario import Busy, Process, Scenario, h100s
from tests.waiting import wait_until


def exporter_args(tmp_path: Path) -> list[str]:
    (tmp_path / "proc").mkdir(exist_ok=True)
    return [
        "--node-name",
        "gpu-node-1",
        "--proc-root",
        str(tmp_path / "proc"),
        "--pod-resources-socket",
        str(tmp_path / "absent.sock"),
        "--no-pod-watch",
        "--process-interval",
        "0.2",
        "--device-interval",
        "0.2",
        "--pod-resources-interval",
        "0.5",
        "--nvml-retry-interval",
        "0.3",
    ]


def test_without_the_kubelet_socket_the_command_serves_gpu_series_but_is_not_ready(
    tmp_path: Path, fake_nvml_dir: Path
) -> None:
    scenario = tmp_path / "scenario.txt"
    Scenario(gpus=h100s(2), processes=(Process(0, 77),), busy=(Busy(0, 77, sm=35),), epoch=time.time()).write(scenario)
    proc_tree.write_process(tmp_path / "proc", 77, proc_tree.host_process())
    with running_exporter(tmp_path, fake_nvml_dir, scenario, exporter_args(tmp_path)) as exporter:
        wait_until(
            lambda: 'source="podresources"} 0.0' not in exporter.get("/metrics")[1],
            "a counted kubelet error",
            timeout=20,
        )
        wait_until(lambda: "DCGM_FI_DEV_GPU_UTIL{" in exporter.get("/metrics")[1], "the GPUs' series", timeout=20)
        readiness = exporter.get("/readyz")
        status, body = exporter.get("/metrics")
    assert readiness[0] == 503 and "absent.sock" in readiness[1], readiness
    assert status == 200
    families = {family.name: family for family in text_string_to_metric_families(body)}
    util = {s.labels["UUID"]: s.value for s in families["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert util == {h100s(2)[0].uuid: 35.0, h100s(2)[1].uuid: 0.0}
    assert {s.labels["pod"] for s in families["DCGM_FI_DEV_GPU_UTIL"].samples} == {""}
    assert {s.value for s in families["kuota_gpu_up"].samples} == {1.0}


def test_a_driver_older_than_the_bindings_gives_one_log_line_and_not_ready_without_exiting(
    tmp_path: Path, old_driver_nvml_dir: Path
) -> None:
    scenario = tmp_path / "scenario.txt"
    Scenario(gpus=h100s(1), processes=(Process(0, 77),)).write(scenario)
    with running_exporter(tmp_path, old_driver_nvml_dir, scenario, exporter_args(tmp_path)) as exporter:
        _status, reason = wait_until(
            lambda: (r := exporter.get("/readyz"))[0] == 503 and "nvidia-ml-py" in r[1] and r, "503 naming the cause"
        )
        wait_until(lambda: _errors(exporter.get("/metrics")[1]) >= 3, "three failed attempts to use NVML", timeout=20)
        log = exporter.log()
        assert exporter.process.poll() is None
    assert log.count("NVML unavailable") == 1, log
    assert "pin nvidia-ml-py" in reason


def test_a_node_without_the_nvidia_library_is_not_ready_and_says_why(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.txt"
    Scenario().write(scenario)
    empty = tmp_path / "no-driver"
    empty.mkdir()
    with running_exporter(tmp_path, empty, scenario, exporter_args(tmp_path)) as exporter:
        _status, reason = wait_until(lambda: (r := exporter.get("/readyz"))[0] == 503 and r, "503 from /readyz")
    assert "libnvidia-ml.so.1" in reason


def _errors(body: str) -> float:
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "kuota_exporter_errors_total" and sample.labels["source"] == "nvml_devices":
                return sample.value
    return 0.0


def _settings(*extra: str) -> ServiceSettings:
    parser = argparse.ArgumentParser()
    EXPORTER.add_arguments(parser)
    return ServiceSettings.from_args(parser.parse_args(["--node-name", "gpu-node-1", *extra]))


def test_the_hostname_label_defaults_to_dcgm_exporters_and_takes_its_next_spelling() -> None:
    assert _settings().hostname_label == "Hostname"
    assert _settings("--hostname-label", "hostname").hostname_label == "hostname"


def test_an_unknown_hostname_label_is_one_line_naming_the_flag_and_the_choices() -> None:
    with pytest.raises(ExporterConfigurationError, match=r"--hostname-label 'node' is not one of Hostname, hostname"):
        _settings("--hostname-label", "node")
