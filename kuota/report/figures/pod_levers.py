"""The pod levers, each pod named with its figure: stop idle holders, right-size to a smaller GPU, MIG for inference.

Every rule reads a pod's series alone (pure; no I/O, no clock):

- an hour is *idle* for a pod when at least :data:`IDLE_HOUR_SHARE` of the GPU-time it held in that hour was at
  under the idle threshold (the hourly mean of each GPU), *busy* when it held GPUs and was not idle;
- *notebook-like*: held GPUs in at least :data:`NOTEBOOK_MIN_HOURS` of the window's hours (long-lived), busy in
  some workday hour and idle in most of the night and weekend hours it held GPUs (interactive);
- *inference-like*: held GPUs in at least :data:`INFERENCE_HELD_SHARE` of the window's hours and busy in at least
  :data:`INFERENCE_BUSY_SHARE` of those;
- an *auto-stop after N idle hours* stops a pod at the end of its N-th consecutive idle hour: each run of idle
  hours saves the idle GPU-hours of its hours past the N-th.

A pod is priced at its namespace's price for its GPU model. A lever whose input is missing (a memory series, a
GPU model, a price for a smaller model) says so in ``missing`` and is never priced at 0.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from kuota.report.figures.gpu_models import (
    CATALOGUE,
    MIG_COMPUTE_SLICES,
    GpuModel,
    MigProfile,
    smaller_models,
    smallest_mig_profile,
)
from kuota.report.figures.levers import HOURS_PER_MONTH, Effort, Lever, LeverItem, per_month
from kuota.report.figures.measurements import Hourly
from kuota.report.figures.verdicts import Thresholds
from kuota.report.figures.window import HourClass

AUTO_STOP_HOURS = (1, 2, 4)
IDLE_HOUR_SHARE = 0.9
NOTEBOOK_MIN_HOURS = 24
INFERENCE_HELD_SHARE = 0.9
INFERENCE_BUSY_SHARE = 0.9
# a pod fits a GPU or a MIG slice when its peak memory plus this share of it does
MEMORY_HEADROOM = 0.1
GB = 1e9
GIB = 2**30

MEMORY_MISSING = "peak GPU memory per pod (kuota_pod_gpu_memory_used_bytes, or dcgm-exporter's DCGM_FI_DEV_FB_USED)"

STOP_IDLE = "stop idle holders"
RIGHT_SIZE = "right-sizing to smaller GPUs"
MIG = "MIG for inference"


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    held: Hourly  # GPU-hours held per hour of the window
    idle: Hourly  # GPU-hours held at under the idle threshold per hour (zeros where none)
    model: str  # "" where not known
    memory_peak_bytes: float | None
    sm_p95_percent: float | None
    price: float  # per GPU-hour of its GPUs

    @cached_property
    def idle_hours(self) -> tuple[bool, ...]:
        return tuple(i > 0 and i >= IDLE_HOUR_SHARE * h for h, i in zip(self.held, self.idle, strict=True))

    @cached_property
    def held_hours(self) -> int:
        return sum(1 for h in self.held if h > 0)

    def busy_gpu_hours(self) -> float:
        return max(0.0, sum(self.held) - sum(self.idle))

    def gpus(self) -> int:
        """The most GPUs it held at once (an hour's GPU-hours, rounded up)."""
        return math.ceil(max(self.held, default=0.0) - 1e-9)


@dataclass(frozen=True)
class PodLeverInputs:
    """One team's pods and what the pod levers weigh them against."""

    pods: Sequence[Pod]
    hour_classes: Sequence[HourClass]  # of each hour of the window
    window_hours: float
    idle_measured: bool  # the idle-held series exist
    memory_series: str | None  # the memory series read, None where there is none
    model_prices: Mapping[str, float]  # --price MODEL=... per GPU-hour, by model name
    models_seen: Collection[str]  # the GPU models the cluster has


def auto_stop_gpu_hours(pod: Pod, after_hours: int) -> float:
    """The idle GPU-hours an auto-stop after ``after_hours`` consecutive idle hours would have saved."""
    saved = 0.0
    run = 0
    for hour, idle in enumerate(pod.idle_hours):
        run = run + 1 if idle else 0
        if run > after_hours:
            saved += pod.idle[hour]
    return saved


def is_notebook_like(pod: Pod, hour_classes: Sequence[HourClass]) -> bool:
    if pod.held_hours < NOTEBOOK_MIN_HOURS:
        return False
    held = [h > 0 for h in pod.held]
    idle = pod.idle_hours
    busy_workday = any(h and not i and c is HourClass.WORKDAY for h, i, c in zip(held, idle, hour_classes, strict=True))
    off_hours = [i for h, i, c in zip(held, idle, hour_classes, strict=True) if h and c is not HourClass.WORKDAY]
    return busy_workday and bool(off_hours) and sum(off_hours) > len(off_hours) / 2


def is_inference_like(pod: Pod, window_hours: int) -> bool:
    if pod.held_hours < INFERENCE_HELD_SHARE * window_hours:
        return False
    busy = sum(1 for h, i in zip(pod.held, pod.idle_hours, strict=True) if h > 0 and not i)
    return busy >= INFERENCE_BUSY_SHARE * pod.held_hours


def pod_levers(inputs: PodLeverInputs, thresholds: Thresholds) -> list[Lever]:
    """The team's pod levers that have something to say, unranked."""
    inference = [pod for pod in inputs.pods if is_inference_like(pod, len(inputs.hour_classes))]
    others = [pod for pod in inputs.pods if pod not in inference]
    levers = [
        stop_idle_holders(inputs, thresholds),
        right_sizing(inputs, others, thresholds),
        mig_for_inference(inputs, inference, thresholds),
    ]
    return [lever for lever in levers if lever is not None]


def _month(dollars: float, inputs: PodLeverInputs) -> float | None:
    return per_month(dollars, inputs.window_hours)


def stop_idle_holders(inputs: PodLeverInputs, thresholds: Thresholds) -> Lever | None:
    """Per pod, its idle GPU-hours by hour class and what an auto-stop after 1, 2, 4 idle hours would save."""
    if not inputs.idle_measured:
        return None
    saved = dict.fromkeys(AUTO_STOP_HOURS, 0.0)
    recovered_hours = idle_hours = idle_dollars = 0.0
    items: list[tuple[bool, LeverItem]] = []
    for pod in inputs.pods:
        idle = sum(pod.idle)
        if idle <= 0:
            continue
        recovered = {n: auto_stop_gpu_hours(pod, n) for n in AUTO_STOP_HOURS}
        for n, hours in recovered.items():
            saved[n] += hours * pod.price
        recovered_hours += recovered[AUTO_STOP_HOURS[0]]
        idle_hours += idle
        idle_dollars += idle * pod.price
        if idle < thresholds.idle_holder_hours:
            continue
        by_class = {hour_class.value: 0.0 for hour_class in HourClass}
        for value, hour_class in zip(pod.idle, inputs.hour_classes, strict=True):
            by_class[hour_class.value] += value
        notebook = is_notebook_like(pod, inputs.hour_classes)
        classes = ", ".join(f"{name} {hours:.1f}" for name, hours in by_class.items())
        after = ", ".join(f"{n} h: {recovered[n]:.1f}" for n in AUTO_STOP_HOURS)
        items.append(
            (
                notebook,
                LeverItem(
                    pod.namespace,
                    pod.name,
                    recovered[AUTO_STOP_HOURS[0]],
                    recovered[AUTO_STOP_HOURS[0]] * pod.price,
                    f"{'notebook-like; ' if notebook else ''}idle {idle:.1f} GPU-h ({classes}), "
                    f"${idle * pod.price:,.2f}; auto-stop after {after} GPU-h",
                    idle_gpu_hours_by_class=by_class,
                    idle_dollars_by_class={name: hours * pod.price for name, hours in by_class.items()},
                ),
            )
        )
    first = AUTO_STOP_HOURS[0]
    if saved[first] <= 0:
        return None
    monthly = {n: _month(dollars, inputs) or 0.0 for n, dollars in saved.items()}
    shown = ", ".join(f"{n} h ${monthly[n]:,.0f}" for n in AUTO_STOP_HOURS)
    return Lever(
        STOP_IDLE,
        recovered_hours,
        f"{idle_hours:.1f} GPU-hours (${idle_dollars:,.2f}) held at under {thresholds.idle_percent:g}% "
        f"utilization (hourly mean); an auto-stop after N idle hours saves per month: {shown}",
        dollars=saved[first],
        dollars_per_month=monthly[first],
        effort=Effort.SETTING,
        items=tuple(item for _, item in sorted(items, key=lambda pair: (not pair[0], -(pair[1].dollars or 0.0)))),
        auto_stop=monthly,
    )


def _fits(pod: Pod, memory_gb: float) -> bool:
    return pod.memory_peak_bytes is not None and pod.memory_peak_bytes * (1 + MEMORY_HEADROOM) <= memory_gb * GB


def _gib(pod: Pod) -> str:
    return f"{(pod.memory_peak_bytes or 0.0) / GIB:.1f} GiB"


def right_sizing(inputs: PodLeverInputs, pods: Sequence[Pod], thresholds: Thresholds) -> Lever | None:
    """Pods whose p95 SM use and peak memory fit a smaller GPU model, moved to the cheapest one priced."""
    low = [
        pod
        for pod in pods
        if pod.sm_p95_percent is not None
        and pod.sm_p95_percent <= thresholds.right_size_percent
        and pod.busy_gpu_hours() > 0
    ]
    if not low:
        return None
    if inputs.memory_series is None:
        hours = sum(pod.busy_gpu_hours() for pod in low)
        return Lever(
            RIGHT_SIZE,
            hours,
            f"{len(low)} pod(s) used at most {thresholds.right_size_percent:g}% SM (p95) for {hours:.1f} busy "
            "GPU-hours; whether a smaller GPU holds their memory is not known",
            effort=Effort.FLAVOR,
            missing=MEMORY_MISSING,
        )
    items: list[LeverItem] = []
    unpriced: list[str] = []
    unknown_models: set[str] = set()
    peaks: dict[str, Hourly] = {}  # target model -> GPUs held per hour by the pods moved to it
    for pod in low:
        own = CATALOGUE.get(pod.model)
        if own is None or pod.memory_peak_bytes is None:
            unknown_models.add(pod.model or "unknown")
            continue
        fitting = [m for m in smaller_models(own.name) if _fits(pod, m.memory_gb)]
        if not fitting:
            continue
        hours = pod.busy_gpu_hours()
        shape = f"p95 SM {pod.sm_p95_percent:.0f}%, peak {_gib(pod)} of {own.name}"
        cheaper = [m for m in fitting if inputs.model_prices.get(m.name, math.inf) < pod.price]
        if not cheaper:
            named = max(fitting, key=lambda m: m.memory_gb).name
            unpriced.append(named)
            items.append(LeverItem(pod.namespace, pod.name, hours, None, f"{shape}: fits {named}", target=named))
            continue
        target = min(cheaper, key=lambda m: (inputs.model_prices[m.name], m.name))
        saving = hours * (pod.price - inputs.model_prices[target.name])
        items.append(
            LeverItem(pod.namespace, pod.name, hours, saving, f"{shape}: fits {target.name}", target=target.name)
        )
        previous = peaks.get(target.name, (0.0,) * len(pod.held))
        peaks[target.name] = tuple(a + b for a, b in zip(previous, pod.held, strict=True))
    if not items and not unknown_models:
        return None
    priced_items = [item.dollars for item in items if item.dollars is not None]
    dollars = sum(priced_items) if priced_items else None
    adding = {
        model: math.ceil(max(held) - 1e-9) * inputs.model_prices[model] * HOURS_PER_MONTH
        for model, held in peaks.items()
        if model not in inputs.models_seen
    }
    missing = []
    if unpriced:
        missing.append(f"a price for a smaller GPU model (--price '{sorted(set(unpriced))[0]}=PRICE')")
    if unknown_models:
        missing.append(f"the memory of GPU model(s) {', '.join(sorted(unknown_models))} (not in kuota's catalogue)")
    evidence = (
        f"{len(items)} pod(s) used at most {thresholds.right_size_percent:g}% SM (p95) and fit a smaller GPU's "
        f"memory with {MEMORY_HEADROOM:.0%} headroom"
    )
    for model, monthly in sorted(adding.items()):
        evidence += f"; the cluster has no {model}: adding those needed would cost ${monthly:,.0f} per month"
    return Lever(
        RIGHT_SIZE,
        sum(item.gpu_hours for item in items),
        evidence,
        dollars=dollars,
        dollars_per_month=_month(dollars, inputs) if dollars is not None else None,
        effort=Effort.FLAVOR,
        items=tuple(sorted(items, key=lambda item: (-(item.dollars or 0.0), -item.gpu_hours, item.name))),
        missing="; ".join(missing) or None,
        adding_models=adding or None,
    )


def pack(profiles: Sequence[MigProfile], model: GpuModel) -> int:
    """GPUs of ``model`` that hold ``profiles``, first fit by compute slices then memory, largest first (the
    slices' positions on the GPU are not modelled)."""
    free: list[tuple[int, float]] = []
    for profile in sorted(profiles, key=lambda p: (-p.compute_slices, -p.memory_gb, p.name)):
        for index, (slices, memory) in enumerate(free):
            if slices >= profile.compute_slices and memory >= profile.memory_gb:
                free[index] = (slices - profile.compute_slices, memory - profile.memory_gb)
                break
        else:
            free.append((MIG_COMPUTE_SLICES - profile.compute_slices, model.memory_gb - profile.memory_gb))
    return len(free)


def mig_for_inference(inputs: PodLeverInputs, pods: Sequence[Pod], thresholds: Thresholds) -> Lever | None:
    """Low-use inference-like pods each on the smallest MIG profile that holds them, packed per GPU model."""
    low = [
        pod
        for pod in pods
        if pod.sm_p95_percent is not None and pod.sm_p95_percent < thresholds.low_utilization_percent
    ]
    if not low:
        return None
    if inputs.memory_series is None:
        hours = sum(sum(pod.held) for pod in low)
        return Lever(
            MIG,
            hours,
            f"{len(low)} inference-like pod(s) used under {thresholds.low_utilization_percent:g}% SM (p95); "
            "which MIG slice holds their memory is not known",
            effort=Effort.FLAVOR,
            missing=MEMORY_MISSING,
        )
    by_model: dict[str, list[tuple[Pod, MigProfile]]] = {}
    for pod in low:
        needed_gb = (pod.memory_peak_bytes or 0.0) * (1 + MEMORY_HEADROOM) / GB
        profile = smallest_mig_profile(pod.model, needed_gb, (pod.sm_p95_percent or 0.0) / 100)
        if profile is not None and pod.memory_peak_bytes is not None:
            by_model.setdefault(pod.model, []).append((pod, profile))
    items: list[LeverItem] = []
    packed: list[str] = []
    for model_name, placed in sorted(by_model.items()):
        held = sum(pod.gpus() for pod, _ in placed)
        needed = pack([profile for pod, profile in placed for _ in range(pod.gpus())], CATALOGUE[model_name])
        packed.append(f"{held} {model_name} GPU(s) held, {needed} needed packed")
        freed = (held - needed) / held if held else 0.0
        for pod, profile in placed:
            hours = sum(pod.held) * freed
            items.append(
                LeverItem(
                    pod.namespace,
                    pod.name,
                    hours,
                    hours * pod.price,
                    f"p95 SM {pod.sm_p95_percent:.0f}%, peak {_gib(pod)}: fits MIG {profile.name}",
                    target=profile.name,
                )
            )
    dollars = sum(item.dollars or 0.0 for item in items)
    if dollars <= 0:
        return None
    return Lever(
        MIG,
        sum(item.gpu_hours for item in items),
        f"{len(items)} inference-like pod(s) used under {thresholds.low_utilization_percent:g}% SM (p95) and fit "
        f"MIG slices: {'; '.join(packed)}",
        dollars=dollars,
        dollars_per_month=_month(dollars, inputs),
        effort=Effort.FLAVOR,
        items=tuple(sorted(items, key=lambda item: (-(item.dollars or 0.0), item.name))),
    )
