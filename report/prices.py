"""Price per GPU-hour: a number, or a named instance preset (the guide's on-demand prices, us-east-1, Oct 2026)."""

from __future__ import annotations

from dataclasses import dataclass

from kuota.report.errors import ReportInputError


@dataclass(frozen=True)
class InstancePrice:
    instance: str
    gpus: int
    dollars_per_hour: float

    @property
    def per_gpu_hour(self) -> float:
        return self.dollars_per_hour / self.gpus


PRESETS = {
    "p5.48xlarge": InstancePrice("p5.48xlarge", 8, 55.04),  # 8x H100
    "p4d.24xlarge": InstancePrice("p4d.24xlarge", 8, 21.96),  # 8x A100
}


# Far above any GPU's price, and low enough that a week's idle cost stays a finite number.
MAX_PER_GPU_HOUR = 1_000_000.0


@dataclass(frozen=True)
class Price:
    per_gpu_hour: float
    source: str  # "p5.48xlarge ($55.04/h for 8 GPUs)" or "--price 4.10"


def parse_price(text: str) -> Price:
    preset = PRESETS.get(text.strip())
    if preset is not None:
        return Price(
            preset.per_gpu_hour,
            f"{preset.instance} (${preset.dollars_per_hour:.2f}/h on demand for {preset.gpus} GPUs)",
        )
    try:
        value = float(text)
    except ValueError as error:
        names = ", ".join(PRESETS)
        raise ReportInputError(
            f"--price {text!r} is neither dollars per GPU-hour (e.g. 6.88) nor a preset ({names})"
        ) from error
    if not 0 <= value <= MAX_PER_GPU_HOUR:
        raise ReportInputError(
            f"--price {text!r} is not dollars per GPU-hour from 0 to {MAX_PER_GPU_HOUR:,.0f} (e.g. 6.88)"
        )
    return Price(value, f"--price {value:g} per GPU-hour")
