"""The metric contract: names, types, labels and units as exporter/README.md documents them."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kuota.exporter.allocation import Holder
from kuota.exporter.attribution import Attribution, PodGpuFigures
from kuota.exporter.exposition import ScrapeRenderer
from kuota.exporter.readings import DeviceReading, DeviceSample, Gpu, GpuStatus
from kuota.exporter.snapshot import Snapshot

README = Path(__file__).parents[3] / "kuota" / "exporter" / "README.md"
SHARED = Gpu(
    index=0, uuid="GPU-0", parent_uuid="GPU-0", minor=0, model="NVIDIA H100 80GB HBM3", pci_bus_id="00000000:18:00.0"
)
IDLE = Gpu(index=1, uuid="GPU-1", parent_uuid="GPU-1", minor=1, model="NVIDIA L4")
MIG = Gpu(
    index=2,
    uuid="MIG-2",
    parent_uuid="GPU-2",
    minor=2,
    model="NVIDIA H100 80GB HBM3",
    mig_profile="1g.10gb",
    gpu_instance=7,
    compute_instance=0,
)
A = Holder("team-a", "notebook", "main")
B = Holder("team-b", "trainer", "worker")
C = Holder("team-c", "mig-user", "main")


def full_reading(gpu: Gpu, **changes: float | None) -> DeviceReading:
    values: dict[str, float | None] = dict(
        gpu_util_percent=50.0,
        mem_copy_util_percent=10.0,
        fb_used_mib=1000.0,
        fb_free_mib=80000.0,
        power_w=300.0,
        temp_c=40.0,
        sm_clock_mhz=1980.0,
        energy_mj=123456.0,
        mem_clock_mhz=2619.0,
        memory_temp_c=38.0,
        pcie_replays=2.0,
        enc_util_percent=3.0,
        dec_util_percent=4.0,
        fb_reserved_mib=512.0,
        nvlink_kib=4096.0,
        remapped_rows_correctable=1.0,
        remapped_rows_uncorrectable=0.0,
        row_remap_failure=0.0,
        gr_engine_active=0.5,
        tensor_active=0.25,
        dram_active=0.125,
    )
    values.update(changes)
    return DeviceReading(gpu=gpu, **values)  # type: ignore[arg-type]


SNAPSHOT = Snapshot(
    node_name="gpu-node-1",
    devices=DeviceSample(
        at=0.0,
        readings=(
            full_reading(SHARED),
            full_reading(IDLE, energy_mj=None, gr_engine_active=None, tensor_active=None, dram_active=None),
            DeviceReading(gpu=MIG, fb_used_mib=2048.0, fb_free_mib=7808.0),
        ),
        statuses=(GpuStatus(0, "GPU-0", True, last_xid=13), GpuStatus(1, "GPU-1", True), GpuStatus(2, "GPU-2", False)),
        driver_version="570.124.06",
    ),
    attribution=Attribution(
        holders={"GPU-0": (A, B), "MIG-2": (C,)},
        figures=(
            PodGpuFigures("GPU-0", A, True, 12.5, 2 << 30),
            PodGpuFigures("GPU-0", B, True, 70.0, 6 << 30),
            PodGpuFigures("MIG-2", C, True, None, 1 << 30),
        ),
    ),
    errors={"podresources": 3},
    last_success={"nvml_devices": 1.0},
    not_ready_reason="",
)


def scrape(snapshot: Snapshot = SNAPSHOT, hostname: str = "Hostname") -> dict[str, list[tuple[dict[str, str], float]]]:
    renderer = ScrapeRenderer(lambda: snapshot, hostname)
    renderer.render()  # a previous scrape, so the scrape-duration series exists
    return _collect(renderer.render().decode())


def _collect(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Series by the name written in the text: the client's parser appends _total to a counter's samples,
    which Prometheus does not, and dcgm-exporter's counters have no such suffix."""
    written = set(re.findall(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]", text, flags=re.MULTILINE))
    series: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name if sample.name in written else sample.name.removesuffix("_total")
            series.setdefault(name, []).append((sample.labels, sample.value))
    return series


def documented_metrics() -> set[str]:
    return set(re.findall(r"^\| `([A-Za-z_]+)` \|", README.read_text(), flags=re.MULTILINE))


def test_every_documented_metric_is_exported_and_nothing_undocumented() -> None:
    exported = set(scrape())
    assert exported == documented_metrics()


def test_dcgm_series_carry_dcgm_labels_and_one_series_per_pod_sharing_a_gpu() -> None:
    util = scrape()["DCGM_FI_DEV_GPU_UTIL"]
    on_shared = [labels for labels, _ in util if labels["UUID"] == "GPU-0"]
    assert sorted(lab["pod"] for lab in on_shared) == ["notebook", "trainer"]
    first = on_shared[0]
    assert set(first) == {
        "gpu",
        "UUID",
        "pci_bus_id",
        "DCGM_FI_DRIVER_VERSION",
        "device",
        "modelName",
        "GPU_I_PROFILE",
        "GPU_I_ID",
        "Hostname",
        "container",
        "namespace",
        "pod",
    }
    assert (first["gpu"], first["device"], first["modelName"], first["Hostname"]) == (
        "0",
        "nvidia0",
        "NVIDIA H100 80GB HBM3",
        "gpu-node-1",
    )
    assert (first["pci_bus_id"], first["DCGM_FI_DRIVER_VERSION"]) == ("00000000:18:00.0", "570.124.06")


def test_counters_are_typed_and_named_as_dcgm_exporter_writes_them_without_a_total_suffix() -> None:
    text = ScrapeRenderer(lambda: SNAPSHOT).render().decode()
    for name in (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    ):
        assert f"# TYPE {name} counter\n" in text
        assert re.search(rf"^{name}\{{gpu=\"0\"", text, flags=re.MULTILINE), name
        assert f"{name}_total" not in text
    assert "# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge\n" in text
    assert "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n" in text


def test_profiling_ratios_are_exported_where_gpm_gave_them_and_absent_elsewhere() -> None:
    series = scrape()
    for name, value in (
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.25),
        ("DCGM_FI_PROF_DRAM_ACTIVE", 0.125),
    ):
        assert {(labels["UUID"], v) for labels, v in series[name]} == {("GPU-0", value)}  # once per pod on GPU-0
        assert len(series[name]) == 2


def test_the_hostname_label_can_take_dcgm_exporters_next_spelling_on_every_series() -> None:
    series = scrape(hostname="hostname")
    for name in ("DCGM_FI_DEV_GPU_UTIL", "kuota_gpu_allocated", "kuota_gpu_up", "DCGM_FI_DEV_XID_ERRORS"):
        labels = series[name][0][0]
        assert labels["hostname"] == "gpu-node-1" and "Hostname" not in labels, name


def test_an_unallocated_gpu_has_empty_pod_labels() -> None:
    (idle,) = [labels for labels, _ in scrape()["DCGM_FI_DEV_POWER_USAGE"] if labels["UUID"] == "GPU-1"]
    assert (idle["pod"], idle["namespace"], idle["container"]) == ("", "", "")


def test_unsupported_fields_are_absent_never_zero() -> None:
    series = scrape()
    assert not [lab for lab, _ in series["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] if lab["UUID"] == "GPU-1"]
    assert not [lab for lab, _ in series["DCGM_FI_DEV_GPU_UTIL"] if lab["GPU_I_ID"] == "7"]
    assert not [lab for lab, _ in series["kuota_pod_gpu_sm_utilization_percent"] if lab["UUID"] == "MIG-2"]


def test_mig_instances_are_labelled_like_dcgm_with_the_parent_uuid_and_instance() -> None:
    (mig,) = [lab for lab, _ in scrape()["DCGM_FI_DEV_FB_USED"] if lab["GPU_I_ID"] == "7"]
    assert (mig["UUID"], mig["GPU_I_PROFILE"], mig["pod"]) == ("GPU-2", "1g.10gb", "mig-user")


def test_kuota_pod_series_give_each_time_sliced_pod_its_own_figures() -> None:
    series = scrape()
    sm_series = series["kuota_pod_gpu_sm_utilization_percent"]
    sm = {(lab["namespace"], lab["pod"], lab["container"]): v for lab, v in sm_series}
    assert sm == {("team-a", "notebook", "main"): 12.5, ("team-b", "trainer", "worker"): 70.0}
    labels = series["kuota_gpu_allocated"][0][0]
    assert set(labels) == {"Hostname", "gpu", "UUID", "namespace", "pod", "container"}
    assert {lab["UUID"] for lab, _ in series["kuota_gpu_allocated"]} == {"GPU-0", "MIG-2"}
    assert {v for _, v in series["kuota_pod_gpu_memory_used_bytes"]} == {2 << 30, 6 << 30, 1 << 30}


def test_health_series_report_lost_gpus_errors_by_source_and_sample_age() -> None:
    series = scrape()
    assert {(lab["UUID"], v) for lab, v in series["kuota_gpu_up"]} == {("GPU-0", 1), ("GPU-1", 1), ("GPU-2", 0)}
    errors = {lab["source"]: v for lab, v in series["kuota_exporter_errors_total"]}
    assert errors["podresources"] == 3 and errors["nvml_devices"] == 0
    assert [lab["source"] for lab, _ in series["kuota_exporter_sample_age_seconds"]] == ["nvml_devices"]
    assert {(lab["UUID"], v) for lab, v in series["DCGM_FI_DEV_XID_ERRORS"]} == {("GPU-0", 13)}


def test_without_nvml_no_gpu_series_are_invented() -> None:
    series = scrape(Snapshot(node_name="n"))
    assert "DCGM_FI_DEV_GPU_UTIL" not in series
    assert "kuota_gpu_up" not in series
    assert {v for _, v in series["kuota_exporter_errors_total"]} == {0}


def test_label_values_are_escaped_so_the_text_stays_parseable() -> None:
    odd = Holder('team-"q"', "pod\\with\nnewline", "main")
    snapshot = Snapshot(
        node_name="n",
        attribution=Attribution(holders={}, figures=(PodGpuFigures("GPU-9", odd, True, 1.0, 1),)),
    )
    ((labels, _),) = scrape(snapshot)["kuota_gpu_allocated"]
    assert (labels["namespace"], labels["pod"]) == ('team-"q"', "pod\\with\nnewline")


def test_a_new_snapshot_is_rendered_afresh_and_an_unchanged_one_is_reused() -> None:
    current = [SNAPSHOT]
    renderer = ScrapeRenderer(lambda: current[0])
    first = renderer.render()
    assert b"kuota_gpu_allocated{" in first
    current[0] = Snapshot(node_name="gpu-node-1")
    assert b"kuota_gpu_allocated{" not in renderer.render()
