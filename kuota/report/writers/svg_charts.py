"""The report's charts as inline SVG (matplotlib Figure objects; imported only when a report is written).

Team and pod names are labels anyone can choose, and matplotlib reads a text between two ``$`` as TeX math:
``$\\foo{$`` would stop the drawing. So every chart is drawn with math text and TeX off (``text.parse_math``
and ``text.usetex`` False): a label is drawn as the characters it has. Labels are also cut to ``_LABEL_CHARS``,
so one long name cannot stretch a chart.

With math text off, matplotlib's log-scale tick labels (``$\\mathdefault{10^{4}}$``) would print as that
source text, so every log axis here is one of waits and gets ticks at round durations, labelled as people say
them ("30 s", "10 min", "6 h"; :func:`duration_text`).

The verdict quadrant draws each team with its verdict's marker; where a rule moved the verdict out of the
quadrant its figures place it in (the what-if, waiting while quota idled elsewhere), the label says which.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import matplotlib
from matplotlib.axis import Axis

# Figure objects draw through their own canvas: no pyplot, no global backend or figure registry.
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, Locator, MaxNLocator, NullLocator

from kuota.report.figures.schema import Report
from kuota.report.figures.verdicts import Quadrant, Verdict, moved_by, placed
from kuota.report.figures.window import trend_day_s
from kuota.report.writers.trends import TREND_CHARTS, TrendChart, lines

_MAX_ROWS = 40
_LABEL_CHARS = 48


_MINUTE, _HOUR, _DAY, _WEEK = 60, 3600, 86400, 7 * 86400
# round durations for wait ticks, coarsest tier first: each tier holds the one before it
_DURATION_TIERS: tuple[tuple[float, ...], ...] = (
    (0.1, 1, 10, _MINUTE, 10 * _MINUTE, _HOUR, 6 * _HOUR, _DAY, _WEEK, 4 * _WEEK),
    (0.1, 1, 10, 30, _MINUTE, 5 * _MINUTE, 10 * _MINUTE, 30 * _MINUTE, _HOUR, 3 * _HOUR, 6 * _HOUR, 12 * _HOUR,
     _DAY, 3 * _DAY, _WEEK, 2 * _WEEK, 4 * _WEEK),
    (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, _MINUTE, 2 * _MINUTE, 5 * _MINUTE, 10 * _MINUTE, 20 * _MINUTE,
     30 * _MINUTE, _HOUR, 2 * _HOUR, 3 * _HOUR, 6 * _HOUR, 12 * _HOUR, _DAY, 2 * _DAY, 3 * _DAY, _WEEK,
     2 * _WEEK, 4 * _WEEK),
)  # fmt: skip
_MAX_TICKS = 7
# a verdict's marker and colour (the colours of report.html's verdict text where it has one)
_VERDICT_STYLE: dict[Quadrant, tuple[str, str]] = {
    Quadrant.TUNE: ("o", "#10ac84"),
    Quadrant.BUY: ("s", "#ee5253"),
    Quadrant.OVER_PROVISIONED: ("D", "#ff9f43"),
    Quadrant.HEALTHY: ("^", "#2e86de"),
    Quadrant.UNKNOWN: ("x", "#8395a7"),
}


def duration_text(seconds: float) -> str:
    """A wait as people say it, to 3 significant digits: "30 s", "10 min", "6 h", "3 d", "2 w"."""
    for unit, name in ((_WEEK, "w"), (_DAY, "d"), (_HOUR, "h"), (_MINUTE, "min")):
        if seconds >= unit:
            return f"{seconds / unit:.3g} {name}"
    return f"{seconds:.3g} s"


class _DurationLocator(Locator):
    """Major ticks at round durations: the finest tier that puts at most ``_MAX_TICKS`` in view; where no tier
    puts two in view (a narrow range, 35 to 40 min), round numbers of the range's unit ("36 min", "38 min")."""

    def __call__(self) -> Sequence[float]:
        assert self.axis is not None
        low, high = self.axis.get_view_interval()
        return self.tick_values(low, high)

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        low, high = sorted((vmin, vmax))
        inside: list[float] = []
        for tier in reversed(_DURATION_TIERS):
            inside = [float(t) for t in tier if low <= t <= high]
            if len(inside) <= _MAX_TICKS:
                break
        if len(inside) >= 2:
            return inside
        unit = next((u for u in (_WEEK, _DAY, _HOUR, _MINUTE) if high >= u), 1)
        steps = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(low / unit, high / unit)
        return [float(step) * unit for step in steps if low <= step * unit <= high]


def _wait_axis(axis: Axis) -> None:
    """A log axis of waits, ticked at round durations (call after ``set_?scale("log")``, which resets ticks)."""
    axis.set_major_locator(_DurationLocator())
    axis.set_major_formatter(FuncFormatter(lambda seconds, _position: duration_text(seconds)))
    axis.set_minor_locator(NullLocator())


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
    long_wait = report.thresholds.long_wait_s
    axes.axvline(
        long_wait, color="red", linestyle="--", linewidth=1, label=f"long-wait threshold ({duration_text(long_wait)})"
    )
    axes.set_xscale("log")
    _wait_axis(axes.xaxis)
    axes.set_xlabel("admission wait (bucket upper bound)")
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


def _point_label(name: str, verdict: Verdict, utilization: float, wait_s: float, report: Report) -> str:
    """The name, and where a rule moved the verdict out of the quadrant the point sits in, the verdict and why."""
    why = moved_by(verdict, placed(utilization, wait_s, report.thresholds))
    return name if why is None else f"{name} ({verdict.quadrant.value}: {why})"


def _beside(utilization: float, rise: float) -> dict[str, Any]:
    """A label's offset and alignment: right of its point, or left of it in the right half (to stay inside)."""
    right = utilization <= 60
    return {"xytext": (5 if right else -5, rise), "ha": "left" if right else "right"}


def quadrant(report: Report) -> str | None:
    points = [
        (t.name, t.verdict, t.utilization.average_percent, t.queueing.wait_p95_s)
        for t in report.teams
        if t.utilization and t.utilization.average_percent is not None and t.queueing and t.queueing.wait_p95_s
    ]
    cluster = report.cluster
    figure, axes = _figure(7, 5.5)
    threshold = report.thresholds
    axes.axvline(threshold.low_utilization_percent, color="grey", linestyle="--", linewidth=1)
    axes.axhline(threshold.long_wait_s, color="grey", linestyle="--", linewidth=1)
    for name, verdict, util, wait in points:
        marker, colour = _VERDICT_STYLE[verdict.quadrant]
        axes.scatter([util], [max(wait, 1.0)], marker=marker, color=colour)
        axes.annotate(
            _point_label(_label(name), verdict, util, wait, report),
            (util, max(wait, 1.0)),
            fontsize=7,
            textcoords="offset points",
            **_beside(util, 3),
        )
    handles = [
        Line2D([], [], linestyle="", marker=marker, color=colour, label=f"verdict: {quadrant.value}")
        for quadrant, (marker, colour) in _VERDICT_STYLE.items()
        if any(verdict.quadrant is quadrant for _, verdict, _, _ in points)
    ]
    if cluster.utilization_average_percent is not None and cluster.queueing and cluster.queueing.wait_p95_s:
        util, wait = cluster.utilization_average_percent, cluster.queueing.wait_p95_s
        colour = _VERDICT_STYLE[cluster.verdict.quadrant][1]
        axes.scatter([util], [max(wait, 1.0)], marker="*", s=200, color=colour, edgecolors="#222222")
        axes.annotate(
            _point_label("cluster", cluster.verdict, util, wait, report),
            (util, max(wait, 1.0)),
            fontsize=8,
            fontweight="bold",
            textcoords="offset points",
            **_beside(util, -12),
        )
        handles.append(
            Line2D(
                [],
                [],
                linestyle="",
                marker="*",
                markersize=12,
                color=colour,
                markeredgecolor="#222222",
                label=f"cluster (verdict: {cluster.verdict.quadrant.value})",
            )
        )
    if handles:
        axes.legend(handles=handles, fontsize=8, loc="center right")
    axes.set_xlim(0, 100)
    axes.set_yscale("log")
    axes.margins(y=0.15)  # room for the quadrants' names above and below the points
    _wait_axis(axes.yaxis)
    axes.set_xlabel(f"average GPU utilization over the window (%; low under {threshold.low_utilization_percent:g}%)")
    axes.set_ylabel(f"p95 admission wait (long over {duration_text(threshold.long_wait_s)})")
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
        _wait_axis(axes.yaxis)
        long_wait = report.thresholds.long_wait_s
        axes.axhline(
            long_wait,
            color="red",
            linestyle="--",
            linewidth=1,
            label=f"long-wait threshold ({duration_text(long_wait)})",
        )
        axes.set_ylabel("p95 admission wait")
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
