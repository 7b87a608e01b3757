"""The NVML reader against the real pynvml bindings and the fake libnvidia-ml.so.1."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuota.exporter.errors import NvmlReinitRequiredError, NvmlUnavailableError
from kuota.exporter.nvml_reader import NvmlReader
from tests.fakes.nvml.scenario import A100, L4, MIB, Busy, Gpm, Gpu, MigDevice, Process, Scenario, Xid, gpu_uuid
from tests.waiting import wait_until

H100_0 = Gpu(
    uuid=gpu_uuid(0),
    minor=0,
    mem_mhz=2619,
    memory_temp_c=44,
    enc_percent=12,
    dec_percent=7,
    pcie_replays=3,
    remapped_rows_correctable=2,
    remapped_rows_uncorrectable=1,
    row_remap_failure=True,
    nvlink_kib_per_s=1_000_000,
    gpm=Gpm(graphics=80.0, tensor=40.0, dram=25.0),
)
A100_1 = Gpu(uuid=gpu_uuid(1), minor=1, name=A100, power_mw=250_000, gpm=None)
L4_2 = Gpu(uuid=gpu_uuid(2), minor=2, name=L4, fb_total_mib=23034, power_mw=72_000, gpm=None)
H100_MIG_3 = Gpu(uuid=gpu_uuid(3), minor=3, mig=True)
MIG_A = MigDevice(gpu=3, uuid="MIG-aaaaaaaa-0000-0000-0000-000000000001", gpu_instance=1)
MIG_B = MigDevice(
    gpu=3,
    uuid="MIG-aaaaaaaa-0000-0000-0000-000000000002",
    gpu_instance=2,
    name="NVIDIA H100 80GB HBM3 MIG 3g.40gb",
    fb_total_mib=40192,
)


def mixed(**changes: object) -> Scenario:
    base = Scenario(
        gpus=(H100_0, A100_1, L4_2, H100_MIG_3),
        migs=(MIG_A, MIG_B),
        processes=(
            Process(0, 100, 4096 * MIB),
            Process(0, 101, None),
            Process(1, 200, 1024 * MIB),
            Process(3, 300, 2048 * MIB, gpu_instance=1, compute_instance=0),
        ),
        busy=(Busy(0, 100, sm=30), Busy(0, 101, sm=50), Busy(1, 200, sm=80)),
        unsupported=((2, "nvmlDeviceGetTotalEnergyConsumption"),),
        epoch=time.time(),
    )
    return Scenario(**{**base.__dict__, **changes})  # type: ignore[arg-type]


@pytest.fixture
def reader() -> Iterator[NvmlReader]:
    opened = NvmlReader(process_interval=1.0)
    yield opened
    opened.close()


def test_discovers_whole_gpus_and_mig_instances_with_their_identity(scenario_path: Path, reader: NvmlReader) -> None:
    mixed().write(scenario_path)
    devices = reader.open()
    assert [d.uuid for d in devices] == [H100_0.uuid, A100_1.uuid, L4_2.uuid, H100_MIG_3.uuid, MIG_A.uuid, MIG_B.uuid]
    mig_b = devices[-1]
    assert (mig_b.parent_uuid, mig_b.index, mig_b.gpu_instance, mig_b.mig_profile) == (H100_MIG_3.uuid, 3, 2, "3g.40gb")
    assert devices[2].model == L4 and devices[2].device == "nvidia2"
    assert reader.driver_version == "570.124.06"


def test_device_readings_convert_units_and_leave_unsupported_fields_empty(
    scenario_path: Path, reader: NvmlReader
) -> None:
    mixed().write(scenario_path)
    reader.open()
    sample = reader.read_devices()
    by_uuid = {r.gpu.uuid: r for r in sample.readings}
    h100 = by_uuid[H100_0.uuid]
    assert h100.gpu_util_percent == 80.0  # 30 % + 50 % from its two processes
    assert h100.fb_used_mib == pytest.approx(4096)  # the process that reports memory; the reservation apart
    assert h100.fb_reserved_mib == pytest.approx(512)
    assert h100.fb_free_mib == pytest.approx(81559 - 512 - 4096)
    assert (h100.power_w, h100.temp_c, h100.sm_clock_mhz) == (350.0, 41.0, 1980.0)
    assert h100.energy_mj is not None and h100.energy_mj >= 0
    assert by_uuid[L4_2.uuid].energy_mj is None  # NOT_SUPPORTED: absent, not 0
    assert by_uuid[H100_MIG_3.uuid].gpu_util_percent is None  # no device utilization with MIG on
    assert by_uuid[MIG_A.uuid].fb_used_mib == pytest.approx(2048)
    assert sample.failures == 0
    assert all(status.up for status in sample.statuses)


def test_process_sampling_gives_per_pid_sm_and_memory_and_none_for_mig(scenario_path: Path, reader: NvmlReader) -> None:
    mixed().write(scenario_path)
    reader.open()
    sample = reader.read_processes()
    assert {(p.device_uuid, p.pid, p.used_bytes) for p in sample.processes} == {
        (H100_0.uuid, 100, 4096 * MIB),
        (H100_0.uuid, 101, None),
        (A100_1.uuid, 200, 1024 * MIB),
        (MIG_A.uuid, 300, 2048 * MIB),
    }
    assert sample.sm_percent[H100_0.uuid] == {100: 30.0, 101: 50.0}
    assert sample.sm_percent[A100_1.uuid] == {200: 80.0}
    assert sample.sm_percent[L4_2.uuid] == {}  # idle: NVML says NOT_FOUND, which is 0 %, not a failure
    assert MIG_A.uuid not in sample.sm_percent and H100_MIG_3.uuid not in sample.sm_percent
    assert sample.failures == 0


def test_a_second_read_only_sees_samples_newer_than_the_last_one(scenario_path: Path, reader: NvmlReader) -> None:
    now = time.time()
    mixed(busy=(Busy(0, 100, sm=90, start=0, end=0.5),), epoch=now).write(scenario_path)
    reader.open()
    wait_until(lambda: time.time() > now + 0.6, "the burst to end")
    first = reader.read_processes()
    assert first.sm_percent[H100_0.uuid].get(100, 0) > 0
    second = reader.read_processes()
    assert second.sm_percent[H100_0.uuid] == {}


def test_a_lost_gpu_goes_down_while_the_others_keep_reporting(scenario_path: Path, reader: NvmlReader) -> None:
    mixed().write(scenario_path)
    reader.open()
    mixed(lost=((1, 0.0),)).write(scenario_path)
    sample = reader.read_devices()
    statuses = {s.uuid: s.up for s in sample.statuses}
    assert statuses[A100_1.uuid] is False
    assert statuses[H100_0.uuid] is True
    assert A100_1.uuid not in {r.gpu.uuid for r in sample.readings}
    processes = reader.read_processes()
    assert A100_1.uuid not in processes.sm_percent
    assert H100_0.uuid in processes.sm_percent


def test_xid_79_marks_the_gpu_down_and_is_kept_as_the_last_xid(scenario_path: Path, reader: NvmlReader) -> None:
    now = time.time()
    mixed(epoch=now).write(scenario_path)
    reader.open()
    mixed(epoch=now, xids=(Xid(gpu=0, at=0.05, code=79),)).write(scenario_path)
    wait_until(lambda: time.time() > now + 0.1, "the XID's time")
    status = {s.uuid: s for s in reader.read_devices().statuses}[H100_0.uuid]
    assert (status.up, status.last_xid) == (False, 79)


def test_a_gpu_lost_before_discovery_is_reported_down_without_a_uuid(scenario_path: Path, reader: NvmlReader) -> None:
    mixed(lost=((2, -1e9),)).write(scenario_path)
    reader.open()
    statuses = reader.read_devices().statuses
    assert [(s.index, s.uuid, s.up) for s in statuses if not s.up] == [(2, "", False)]


def test_a_driver_reload_asks_for_reinitialisation_and_reopening_works(scenario_path: Path, reader: NvmlReader) -> None:
    mixed().write(scenario_path)
    reader.open()
    mixed(generation=1).write(scenario_path)
    with pytest.raises(NvmlReinitRequiredError):
        reader.read_devices()
    reader.close()
    reader.open()
    assert len(reader.read_devices().readings) == 6


def test_a_missing_driver_is_unavailable_with_an_actionable_message(scenario_path: Path, reader: NvmlReader) -> None:
    mixed(init_error=9).write(scenario_path)
    with pytest.raises(NvmlUnavailableError, match="driver is loaded"):
        reader.open()


def test_the_other_dcgm_default_fields_are_read_with_their_units(scenario_path: Path, reader: NvmlReader) -> None:
    now = time.time()
    mixed(epoch=now - 10).write(scenario_path)
    reader.open()
    h100 = {r.gpu.uuid: r for r in reader.read_devices().readings}[H100_0.uuid]
    assert (h100.mem_clock_mhz, h100.memory_temp_c, h100.pcie_replays) == (2619.0, 44.0, 3.0)
    assert (h100.enc_util_percent, h100.dec_util_percent) == (12.0, 7.0)
    assert (h100.remapped_rows_correctable, h100.remapped_rows_uncorrectable, h100.row_remap_failure) == (2, 1, 1)
    # sent plus received over all links since the epoch, in KiB: about 1 GiB/s for 10 s
    assert h100.nvlink_kib is not None and 10_000_000 <= h100.nvlink_kib <= 10_000_000 + (time.time() - now) * 1e6
    assert reader.read_devices().driver_version == "570.124.06"
    assert reader.devices()[0].pci_bus_id == "00000000:18:00.0"
    mig_a = reader.devices()[4]
    assert mig_a.pci_bus_id == reader.devices()[3].pci_bus_id  # a MIG instance carries its GPU's address


def test_each_new_field_is_absent_where_the_gpu_does_not_support_it(scenario_path: Path, reader: NvmlReader) -> None:
    not_supported = (
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlDeviceGetEncoderUtilization",
        "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetRemappedRows",
        "NVML_FI_DEV_MEMORY_TEMP",
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        "nvmlGpmSampleGet",
    )
    mixed(unsupported=tuple((0, name) for name in not_supported)).write(scenario_path)
    reader.open()
    reader.read_devices()
    sample = reader.read_devices()
    h100 = {r.gpu.uuid: r for r in sample.readings}[H100_0.uuid]
    assert (h100.pcie_replays, h100.enc_util_percent, h100.dec_util_percent, h100.memory_temp_c) == (None,) * 4
    assert (h100.remapped_rows_correctable, h100.remapped_rows_uncorrectable, h100.row_remap_failure) == (None,) * 3
    assert h100.nvlink_kib is None  # half of the pair is missing: no made-up total
    assert (h100.gr_engine_active, h100.tensor_active, h100.dram_active) == (None,) * 3
    assert h100.mem_clock_mhz == 2619.0 and h100.fb_reserved_mib == pytest.approx(512)
    assert sample.failures == 0


def test_gpm_ratios_come_from_two_readings_on_hopper_and_never_on_older_gpus(
    scenario_path: Path, reader: NvmlReader, caplog: pytest.LogCaptureFixture
) -> None:
    mixed().write(scenario_path)
    with caplog.at_level(logging.INFO, logger="kuota.exporter.nvml_reader"):
        reader.open()
    first = {r.gpu.uuid: r for r in reader.read_devices().readings}
    assert first[H100_0.uuid].gr_engine_active is None  # one sample so far: nothing to compare with
    second = {r.gpu.uuid: r for r in reader.read_devices().readings}
    h100 = second[H100_0.uuid]
    assert (h100.gr_engine_active, h100.tensor_active, h100.dram_active) == (0.8, 0.4, 0.25)
    third = {r.gpu.uuid: r for r in reader.read_devices().readings}[H100_0.uuid]
    assert third.gr_engine_active == 0.8  # the buffers alternate: every later reading has a pair
    for older in (A100_1, L4_2):
        assert (second[older.uuid].gr_engine_active, second[older.uuid].dram_active) == (None, None)
    assert second[MIG_A.uuid].tensor_active is None
    unsupported = [r.getMessage() for r in caplog.records if "does not support GPM" in r.getMessage()]
    assert len(unsupported) == 2 and A100 in unsupported[0] and L4 in unsupported[1]
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in unsupported[0]


def test_a_gpu_lost_while_gpm_samples_goes_down_and_reopening_starts_gpm_afresh(
    scenario_path: Path, reader: NvmlReader
) -> None:
    mixed().write(scenario_path)
    reader.open()
    reader.read_devices()
    mixed(lost=((0, 0.0),)).write(scenario_path)
    sample = reader.read_devices()
    assert {s.uuid: s.up for s in sample.statuses}[H100_0.uuid] is False
    assert H100_0.uuid not in {r.gpu.uuid for r in sample.readings}
    mixed().write(scenario_path)
    reader.close()
    reader.open()
    assert {r.gpu.uuid: r for r in reader.read_devices().readings}[H100_0.uuid].gr_engine_active is None
    assert {r.gpu.uuid: r for r in reader.read_devices().readings}[H100_0.uuid].gr_engine_active == 0.8
