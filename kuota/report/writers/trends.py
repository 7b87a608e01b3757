"""The daily trends the report draws (pure): which lines each trend chart has, so that report.html, the SVG
files beside it and report.md's links agree on which charts exist without drawing them twice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kuota.report.figures.schema import Daily, Report

TREND_TEAMS = 8  # lines besides the cluster's, the teams holding the most GPU-hours


@dataclass(frozen=True)
class TrendChart:
    chart_id: str  # also the SVG file's name, without ".svg"
    caption: str
    unit: str
    values: Callable[[Daily], tuple[float | None, ...]]

    @property
    def file_name(self) -> str:
        return f"{self.chart_id}.svg"


TREND_CHARTS = (
    TrendChart(
        "utilization-trend",
        "Daily GPU utilization: the cluster (of capacity) and the largest teams (of allocated GPUs)",
        "%",
        lambda daily: daily.utilization_percent,
    ),
    TrendChart(
        "wait-trend",
        "Daily p95 admission wait: the cluster and the largest teams",
        "s",
        lambda daily: daily.wait_p95_s,
    ),
)


def lines(report: Report, chart: TrendChart) -> list[tuple[str, tuple[float | None, ...]]]:
    """(label, one value per trend day) for the cluster and the largest teams, each with at least one value;
    empty when no line has any (the chart is then missing data)."""
    teams = sorted(
        (t for t in report.teams if t.daily is not None),
        key=lambda t: -(t.utilization.allocated_gpu_hours if t.utilization else 0.0),
    )
    candidates = [("cluster", report.cluster.daily)] + [(t.name, t.daily) for t in teams]
    drawn = []
    for label, daily in candidates:
        values = chart.values(daily) if daily is not None else ()
        if any(v is not None for v in values):
            drawn.append((label, values))
    return drawn[: TREND_TEAMS + 1]
