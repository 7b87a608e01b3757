"""The report's charts as inline SVG (matplotlib Figure objects; imported only when a report is written).

Team and pod names are labels anyone can choose, and matplotlib reads a text between two ``$`` as TeX math:
``$\\foo{$`` would stop the drawing. So every chart is drawn with math text and TeX off (``text.parse_math``
and ``text.usetex`` False): a label is drawn as the characters it has. Labels are also cut to ``_LABEL_CHARS``,
so one long name cannot stretch a chart.
"""

from __future__ import annotations

import io
import math
from datetime import UTC, datetime
from typing import Any

import matplotlib

# Figure objects draw through their own canvas: no pyplot, no global backend or figure registry.
from matplotlib.figure import Figure

from kuota.report.figures.schema import Report
from kuota.report.figures.window import trend_day_s
from kuota.report.writers.trends import TREND_CHARTS, TrendChart, lines

_MAX_ROWS = 40
_LABEL_CHARS = 48


def _label(name: str) -> str:
    return name if len(name) <= _LABEL_CHARS else name[: _LABEL_CHARS - 1] + "\u2026"


def _figure(width: float, height: float) -> tuple[Figure, Any]:
    figure = Figure(figsize=(width, height))
    return figure, figure.subplots()


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def utilization_by_hour_of_week(report: Report) -> str | None:
    rows = [t for t in report.teams if t.utilization and t.utilization.used_gpu_hours is not None]
    rows = sorted(rows, key=lambda t: -(t.utilization.allocated_gpu_hours if t.utilization else 0))[:_MAX_ROWS]
    if not rows:
        return None
    grid = [[math.nan if v is None else v for v in t.utilization.by_hour_of_week] for t in rows if t.utilization]
    figure, axes = _figure(11, 0.3 * len(rows) + 1.6)
    image = axes.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest")
    axes.set_yticks(range(len(rows)), [_label(t.name) for t in rows], fontsize=8)
    axes.set_xticks([d * 24 + 12 for d in range(7)], ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"])
    for day in range(1, 7):
        axes.axvline(day * 24 - 0.5, color="white", linewidth=0.6)
    axes.set_title(f"GPU utilization by team and hour of week ({report.window.work_hours.timezone}), %")
    figure.colorbar(image, ax=axes, fraction=0.02)
    return _svg(figure)


def wait_distribution(report: Report) -> str | None:
    queues = [t for t in report.teams if t.queueing and t.queueing.admissions]
    queues = sorted(queues, key=lambda t: -(t.queueing.wait_p95_s or 0) if t.queueing else 0)[:12]
    if not queues:
        return None
    figure, axes = _figure(9, 4.5)
    for team in queues:
        if team.queueing is None or not team.queueing.admissions:
            continue
        finite = [(b, n) for b, n in team.queueing.wait_buckets if math.isfinite(b)]
        running, xs, ys = 0.0, [], []
        for bound, count in finite:
            running += count
            xs.append(bound)
            ys.append(running / team.queueing.admissions)
        axes.step(xs, ys, where="post", label=_label(team.name))
    axes.axvline(report.thresholds.long_wait_s, color="red", linestyle="--", linewidth=1, label="long-wait threshold")
    axes.set_xscale("log")
    axes.set_xlabel("admission wait (s, bucket upper bound)")
    axes.set_ylabel("share of admissions")
    axes.set_title("Admission wait distribution per ClusterQueue (cumulative)")
    axes.legend(fontsize=7, ncol=2)
    return _svg(figure)


def allocated_versus_used(report: Report) -> str | None:
    rows = [t for t in report.teams if t.utilization and t.utilization.allocated_gpu_hours > 0]
    rows = sorted(rows, key=lambda t: t.utilization.allocated_gpu_hours if t.utilization else 0)[-_MAX_ROWS:]
    if not rows:
        return None
    figure, axes = _figure(9, 0.3 * len(rows) + 1.5)
    # bar positions by index, not by name: two names cut to the same label stay two bars
    names = [_label(t.name) for t in rows]
    allocated = [t.utilization.allocated_gpu_hours if t.utilization else 0.0 for t in rows]
    used = [(t.utilization.used_gpu_hours or 0.0) if t.utilization else 0.0 for t in rows]
    positions = range(len(rows))
    axes.barh(positions, allocated, color="#c8d6e5", label="allocated GPU-hours")
    if any(t.utilization and t.utilization.used_gpu_hours is not None for t in rows):
        axes.barh(positions, used, color="#2e86de", label="used GPU-hours (busy)")
    axes.set_yticks(positions, names)
    axes.tick_params(axis="y", labelsize=8)
    axes.set_title("Allocated versus used GPU-hours per team")
    axes.legend(fontsize=8)
    return _svg(figure)


def quadrant(report: Report) -> str | None:
    points = [
        (t.name, t.utilization.average_percent, t.queueing.wait_p95_s)
        for t in report.teams
        if t.utilization and t.utilization.average_percent is not None and t.queueing and t.queueing.wait_p95_s
    ]
    cluster = report.cluster
    figure, axes = _figure(7, 5.5)
    threshold = report.thresholds
    axes.axvline(threshold.low_utilization_percent, color="grey", linestyle="--", linewidth=1)
    axes.axhline(threshold.long_wait_s, color="grey", linestyle="--", linewidth=1)
    for name, util, wait in points:
        axes.scatter([util], [max(wait, 1.0)], color="#2e86de")
        axes.annotate(_label(name), (util, max(wait, 1.0)), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if cluster.utilization_average_percent is not None and cluster.queueing and cluster.queueing.wait_p95_s:
        axes.scatter(
            [cluster.utilization_average_percent],
            [max(cluster.queueing.wait_p95_s, 1.0)],
            marker="*",
            s=160,
            color="#ee5253",
            label="cluster",
        )
        axes.legend(fontsize=8)
    axes.set_xlim(0, 100)
    axes.set_yscale("log")
    axes.set_xlabel("average GPU utilization over the window (%)")
    axes.set_ylabel("p95 admission wait (s)")
    for x, y, text in ((25, 0.97, "tune"), (75, 0.97, "buy"), (25, 0.03, "over-provisioned"), (75, 0.03, "healthy")):
        axes.text(
            x,
            y,
            text,
            transform=axes.get_xaxis_transform(),
            ha="center",
            va="top" if y > 0.5 else "bottom",
            fontsize=11,
            color="#8395a7",
        )
    axes.set_title("Verdict quadrant" + ("" if points else " (no team has both utilization and waits)"))
    return _svg(figure)


def trend(report: Report, chart: TrendChart) -> str | None:
    drawn = lines(report, chart)
    if not drawn:
        return None
    day_s = trend_day_s(report.window.length_s)
    days = [datetime.fromtimestamp(end - day_s, tz=UTC).strftime("%a %m-%d %H:%M") for end in report.trend_day_ends]
    figure, axes = _figure(9, 4.2)
    positions = range(len(days))
    for index, (label, values) in enumerate(drawn):
        ys = [math.nan if v is None else (max(v, 1.0) if chart.unit == "s" else v) for v in values]
        cluster = index == 0 and label == "cluster"
        axes.plot(positions, ys, marker="o", linewidth=2.5 if cluster else 1.2, label=_label(label))
    axes.set_xticks(positions, days, fontsize=8)
    if chart.unit == "s":
        axes.set_yscale("log")
        axes.axhline(
            report.thresholds.long_wait_s, color="red", linestyle="--", linewidth=1, label="long-wait threshold"
        )
        axes.set_ylabel("p95 admission wait (s)")
    else:
        axes.set_ylim(0, 100)
        axes.set_ylabel("GPU utilization (%)")
    axes.set_xlabel(f"{day_s // 3600} h starting at (UTC)")
    axes.set_title(chart.caption, fontsize=10)
    axes.legend(fontsize=7, ncol=2)
    return _svg(figure)


def all_charts(report: Report) -> list[tuple[str, str, str | None]]:
    """(id, caption, SVG or None when the data for it is missing); the trend charts' ids are their files'."""
    # read when a text is made and when it is drawn (tick labels are made in savefig): set around both
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        return [
            ("utilization-hour-of-week", "Utilization by team and hour of week", utilization_by_hour_of_week(report)),
            ("wait-distribution", "Admission wait distribution per ClusterQueue", wait_distribution(report)),
            ("allocated-used", "Allocated versus used GPU-hours", allocated_versus_used(report)),
            ("quadrant", "Every team on the verdict quadrant", quadrant(report)),
        ] + [(chart.chart_id, chart.caption, trend(report, chart)) for chart in TREND_CHARTS]
