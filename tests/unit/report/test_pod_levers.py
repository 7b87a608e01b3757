"""The pod levers' rules on small hand-made pods: classification, auto-stop, fits, packing, prices, missing inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuota.report.errors import ReportInputError
from kuota.report.figures.gpu_models import CATALOGUE, smaller_models, smallest_mig_profile
from kuota.report.figures.levers import HOURS_PER_MONTH
from kuota.report.figures.pod_levers import (
    MEMORY_MISSING,
    Pod,
    PodLeverInputs,
    auto_stop_gpu_hours,
    is_inference_like,
    is_notebook_like,
    mig_for_inference,
    pack,
    pod_levers,
    right_sizing,
    stop_idle_holders,
)
from kuota.report.figures.prices import check_price_keys, parse_prices
from kuota.report.figures.verdicts import Thresholds
from kuota.report.figures.window import HourClass
from tests.unit.report.conftest import every_series_present, run_report, serving

H100 = "NVIDIA H100 80GB HBM3"
L4 = "NVIDIA L4"
GIB = 2**30
RULES = Thresholds()
DAY = 24
# two days: Monday's 24 hours (9-19 workday, the rest night), then a Saturday
CLASSES = [HourClass.WORKDAY if 9 <= h < 19 else HourClass.NIGHT for h in range(DAY)] + [HourClass.WEEKEND] * DAY


def _pod(
    name: str = "p",
    *,
    held: list[float] | None = None,
    idle: list[float] | None = None,
    memory_gib: float | None = 10.0,
    p95: float | None = 20.0,
    model: str = H100,
    price: float = 4.0,
) -> Pod:
    held = held if held is not None else [1.0] * len(CLASSES)
    return Pod(
        "ns",
        name,
        tuple(held),
        tuple(idle if idle is not None else [0.0] * len(held)),
        model,
        None if memory_gib is None else memory_gib * GIB,
        p95,
        price,
    )


def _inputs(
    *pods: Pod, memory: bool = True, prices: dict[str, float] | None = None, seen: tuple[str, ...] = (H100,)
) -> PodLeverInputs:
    return PodLeverInputs(
        pods=pods,
        hour_classes=CLASSES,
        window_hours=len(CLASSES),
        idle_measured=True,
        memory_series="kuota_pod_gpu_memory_used_bytes" if memory else None,
        model_prices=prices or {},
        models_seen=seen,
    )


def _idle_at_night() -> list[float]:
    return [0.0 if c is HourClass.WORKDAY else 1.0 for c in CLASSES]


def test_the_catalogue_knows_memory_and_mig_profiles_by_nvml_name() -> None:
    assert CATALOGUE[H100].memory_gb == 80
    assert CATALOGUE["NVIDIA A100-SXM4-40GB"].mig_profiles[0].name == "1g.5gb"
    assert CATALOGUE[L4].mig_profiles == (), "an L4 has no MIG"
    assert L4 in {m.name for m in smaller_models(H100)} and H100 not in {m.name for m in smaller_models(H100)}
    assert smaller_models("NVIDIA B999") == []


def test_the_smallest_mig_profile_holds_both_memory_and_compute() -> None:
    assert smallest_mig_profile(H100, 8.0, 0.10).name == "1g.10gb"  # type: ignore[union-attr]
    assert smallest_mig_profile(H100, 14.2, 0.10).name == "1g.20gb"  # type: ignore[union-attr]
    assert smallest_mig_profile(H100, 14.2, 0.20).name == "2g.20gb", "1 slice of 7 is 14% of the compute"  # type: ignore[union-attr]
    assert smallest_mig_profile("NVIDIA H200", 30.0, 0.1).name == "1g.35gb"  # type: ignore[union-attr]
    assert smallest_mig_profile(H100, 90.0, 0.1) is None
    assert smallest_mig_profile(L4, 1.0, 0.1) is None


def test_auto_stop_saves_each_idle_run_past_its_nth_hour() -> None:
    idle = [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1] + [0] * 37
    pod = _pod(idle=[float(i) for i in idle])
    assert [auto_stop_gpu_hours(pod, n) for n in (1, 2, 4)] == [2 + 4 + 0, 1 + 3, 1]


def test_an_hour_is_idle_only_when_most_of_the_gpu_time_held_was() -> None:
    pod = _pod(held=[2.0] * 48, idle=[1.0] * 48)  # one GPU of two idle: the pod is working
    assert auto_stop_gpu_hours(pod, 1) == 0.0


def test_a_notebook_is_long_lived_busy_in_working_hours_and_idle_off_hours() -> None:
    assert is_notebook_like(_pod(idle=_idle_at_night()), CLASSES)
    assert not is_notebook_like(_pod(idle=[1.0] * 48), CLASSES), "never busy: an idle holder, not interactive"
    short = [1.0 if 9 <= h < 30 else 0.0 for h in range(48)]
    assert not is_notebook_like(_pod(held=short, idle=[0.0] * 48), CLASSES), "under 24 hours held"


def test_inference_is_held_nearly_all_window_and_busy_nearly_all_of_it() -> None:
    assert is_inference_like(_pod(), 48)
    assert not is_inference_like(_pod(idle=_idle_at_night()), 48)
    assert not is_inference_like(_pod(held=[1.0] * 40 + [0.0] * 8), 48)


def test_stop_idle_holders_prices_each_pod_by_hour_class_with_auto_stop_per_month() -> None:
    notebook = _pod("notebook", idle=_idle_at_night(), price=2.0)
    lever = stop_idle_holders(_inputs(notebook, _pod("busy")), RULES)
    assert lever is not None
    runs = (9, 5 + 24)  # Monday 0-9, then 19:00 to Saturday's end
    assert lever.gpu_hours == sum(run - 1 for run in runs)
    assert lever.dollars == 2.0 * lever.gpu_hours
    assert lever.auto_stop == {n: 2.0 * sum(r - n for r in runs) * HOURS_PER_MONTH / 48 for n in (1, 2, 4)}
    [item] = lever.items
    assert item.name == "notebook" and item.detail.startswith("notebook-like")
    assert item.idle_gpu_hours_by_class == {"workday": 0.0, "night": 14.0, "weekend": 24.0}
    assert stop_idle_holders(_inputs(_pod("busy")), RULES) is None, "nothing idle: no lever"


def test_right_sizing_moves_a_low_use_pod_to_the_cheapest_priced_smaller_model() -> None:
    small = _pod("small", memory_gib=16, p95=25, held=[1.0] * 24 + [0.0] * 24)
    lever = right_sizing(_inputs(small, prices={L4: 1.0, "NVIDIA A10G": 1.5}), [small], RULES)
    assert lever is not None and lever.missing is None
    assert lever.dollars == 24 * (4.0 - 1.0)
    assert [item.target for item in lever.items] == [L4]
    assert lever.adding_models == {L4: 1 * 1.0 * HOURS_PER_MONTH}, "the cluster has no L4: one costs a month"
    seen = right_sizing(_inputs(small, prices={L4: 1.0}, seen=(H100, L4)), [small], RULES)
    assert seen is not None and seen.adding_models is None


def test_right_sizing_needs_memory_headroom_and_low_sm_use() -> None:
    too_big = _pod(memory_gib=22, p95=25)  # 22 GiB + 10% > an L4's 24 GB
    lever = right_sizing(_inputs(too_big, prices={L4: 1.0}), [too_big], RULES)
    assert lever is not None and lever.dollars is None, "no priced smaller model holds it"
    assert L4 not in {item.target for item in lever.items}
    busy = _pod(memory_gib=4, p95=31)
    assert right_sizing(_inputs(busy, prices={L4: 1.0}), [busy], RULES) is None
    assert right_sizing(_inputs(busy, prices={L4: 1.0}), [busy], Thresholds(right_size_percent=40)) is not None


def test_right_sizing_without_a_smaller_price_or_memory_says_what_is_missing_never_zero() -> None:
    small = _pod(memory_gib=4, p95=10)
    unpriced = right_sizing(_inputs(small), [small], RULES)
    assert unpriced is not None and unpriced.dollars is None and unpriced.gpu_hours == 48
    assert unpriced.missing is not None and "--price '" in unpriced.missing
    blind = right_sizing(_inputs(small, memory=False, prices={L4: 1.0}), [small], RULES)
    assert blind is not None and blind.dollars is None and blind.missing == MEMORY_MISSING


def test_packing_fills_seven_compute_slices_and_the_gpus_memory() -> None:
    h100 = CATALOGUE[H100]
    two = smallest_mig_profile(H100, 14.2, 0.2)
    three = smallest_mig_profile(H100, 30.0, 0.4)
    assert two is not None and three is not None
    assert pack([two] * 3, h100) == 1
    assert pack([two] * 4, h100) == 2, "8 slices do not fit in 7"
    assert pack([three, three, two], h100) == 2, "3g.40gb twice fills the memory"


def test_mig_frees_the_gpus_low_use_inference_packs_out_of() -> None:
    servers = [_pod(f"server-{i}", memory_gib=12, p95=20, price=3.0) for i in range(3)]
    lever = mig_for_inference(_inputs(*servers), servers, RULES)
    assert lever is not None
    assert lever.dollars == pytest.approx(2 * 48 * 3.0)
    assert {item.target for item in lever.items} == {"2g.20gb"}
    assert mig_for_inference(_inputs(servers[0]), servers[:1], RULES) is None, "one slice per GPU frees nothing"
    blind = mig_for_inference(_inputs(*servers, memory=False), servers, RULES)
    assert blind is not None and blind.dollars is None and blind.missing == MEMORY_MISSING


def test_inference_pods_go_to_mig_not_to_right_sizing() -> None:
    servers = [_pod(f"server-{i}", memory_gib=12, p95=20) for i in range(3)]
    names = [lever.name for lever in pod_levers(_inputs(*servers, prices={L4: 1.0}), RULES)]
    assert names == ["MIG for inference"]


def test_a_price_key_must_name_a_flavor_or_a_gpu_model() -> None:
    table = parse_prices(["4", "on-demand=3", f"{H100}=5", f"{L4}=1", "on-demand-spot=1", "NVIDIA B300=9"])
    with pytest.raises(ReportInputError, match="'NVIDIA B300' is no ResourceFlavor") as raised:
        check_price_keys(table, {"on-demand"}, {H100})
    assert "known:" in str(raised.value) and "\n" not in str(raised.value)
    check_price_keys(parse_prices(["on-demand=3", f"{H100}-spot=2", f"{L4}=1"]), {"on-demand"}, set())


def test_a_price_for_a_model_no_gpu_has_is_one_error_line(tmp_path: Path) -> None:
    with serving(every_series_present) as prometheus:
        run = run_report("--prometheus", prometheus.url, "--price", "NVIDIA B300=9", out=tmp_path / "out")
    assert run.exit_code == 2
    assert "'NVIDIA B300' is no ResourceFlavor of the queues" in run.assert_one_error_line()
