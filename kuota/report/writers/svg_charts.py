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

Colour never carries a figure alone: the levers' bars are labelled in dollars (their teams' segments too, where
the name fits), and each cell of the idle-held heat maps is labelled with its GPU-hours.
"""

from __future__ import annotations

import html
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

from kuota.report.figures.levers import Lever
from kuota.report.figures.schema import Report, TeamReport
from kuota.report.figures.verdicts import Quadrant, Verdict, moved_by, placed
from kuota.report.figures.window import HOURS_PER_WEEK, Window, trend_day_s
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
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# the levers chart colours this many teams apart (most dollars first) and the rest as one "other teams" segment
_LEVER_TEAMS = 8
_OTHER_TEAMS, _CLUSTER_WIDE = "other teams", "cluster-wide"
_TEAM_COLOURS = (0, 1, 2, 3, 4, 5, 6, 9)  # tab10 without its grey, which "other teams" would be taken for
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


def _gpu_hours_text(value: float) -> str:
    """A heat map cell's GPU-hours in at most four characters."""
    if value >= 9.95:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 0.995 else f"{value:.2f}".removeprefix("0")


# the heat map's colour ramp, light to dark (ColorBrewer's YlOrRd), and a slot the window does not cover
_HEAT_RAMP = ((255, 255, 204), (254, 217, 118), (253, 141, 60), (227, 26, 28), (128, 0, 38))
_UNCOVERED = "#dfe4ea"
_CELL_W, _CELL_H, _LEFT, _TOP = 36, 26, 44, 40


def _heat(fraction: float) -> str:
    """The ramp's colour at ``fraction`` (0 to 1), interpolated between its stops."""
    position = max(0.0, min(1.0, fraction)) * (len(_HEAT_RAMP) - 1)
    low = min(int(position), len(_HEAT_RAMP) - 2)
    mix = position - low
    rgb = (round(a + (b - a) * mix) for a, b in zip(_HEAT_RAMP[low], _HEAT_RAMP[low + 1], strict=True))
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def idle_held_by_hour_of_week(slots: Sequence[float] | None, window: Window, whose: str) -> str | None:
    """``whose`` idle-held GPU-hours as a 7 x 24 heat map, each cell labelled with its GPU-hours; slots of the
    week the window does not cover are grey (not 0). None without utilization series or without idle hours.

    Written as SVG markup directly, not through matplotlib: a report of a hundred teams draws a hundred of these,
    and a grid of labelled rectangles needs no plotting library (its text stays text a reader can select)."""
    if slots is None or not any(slots):
        return None
    covered = {window.hour_of_week(index) for index in range(window.hours)}
    top = max(slots)
    width, height = _LEFT + 24 * _CELL_W + 20, _TOP + 7 * _CELL_H + 70
    title = f"GPU-hours held idle by hour of week, {_label(whose)}: {sum(slots):,.1f} in all"
    if len(covered) < HOURS_PER_WEEK:
        title += " (grey: hours the window does not cover)"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" font-family="DejaVu Sans, sans-serif">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="{width / 2:.0f}" y="20" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
    ]
    for day, name in enumerate(_DAYS):
        y = _TOP + day * _CELL_H
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y + _CELL_H / 2 + 4:.0f}" text-anchor="end" font-size="11">{name}</text>'
        )
        for hour in range(24):
            slot, x = day * 24 + hour, _LEFT + hour * _CELL_W
            value = slots[slot]
            fill = (_heat(value / top) if value > 0 else "#ffffff") if slot in covered else _UNCOVERED
            cell = f'<rect x="{x}" y="{y}" width="{_CELL_W - 1}" height="{_CELL_H - 1}" fill="{fill}"/>'
            if slot in covered and value > 0:
                label = _gpu_hours_text(value)
                ink = "#ffffff" if value > 0.6 * top else "#222222"  # the ramp's dark end: white text on it
                cell = (
                    f'<g id="idle-cell-{slot}"><!-- {label} -->{cell}<text x="{x + _CELL_W / 2:.0f}" '
                    f'y="{y + _CELL_H / 2 + 4:.0f}" text-anchor="middle" font-size="10" fill="{ink}">{label}</text></g>'
                )
            parts.append(cell)
    bottom = _TOP + 7 * _CELL_H
    parts += [
        f'<text x="{_LEFT + hour * _CELL_W + _CELL_W / 2:.0f}" y="{bottom + 14}" text-anchor="middle" '
        f'font-size="10">{hour}</text>'
        for hour in range(24)
    ]
    zone = html.escape(window.work_hours.timezone)
    parts.append(
        f'<text x="{_LEFT}" y="{bottom + 32}" font-size="11">hour of day ({zone}); a cell holds that hour of every '
        "day of the window</text>"
    )
    # the legend: the ramp from 0 to the fullest slot, labelled at both ends
    legend_x, legend_y, steps = _LEFT, bottom + 44, 40
    parts += [
        f'<rect x="{legend_x + 4 * step}" y="{legend_y}" width="4" height="10" fill="{_heat(step / (steps - 1))}"/>'
        for step in range(steps)
    ]
    parts += [
        f'<text x="{legend_x + 4 * steps + 8}" y="{legend_y + 9}" font-size="11">0 to {_gpu_hours_text(top)} '
        "idle-held GPU-hours in a cell</text>",
        "</svg>",
    ]
    return "".join(parts)


def _team_dollars(teams: Sequence[TeamReport], name: str) -> dict[str, float]:
    """Each team's dollars per month of the lever named ``name``, where it has them."""
    return {
        team.name: lever.dollars_per_month
        for team in teams
        for lever in team.levers
        if lever.name == name and lever.dollars_per_month is not None
    }


def _fits(text: str, width: float, axes_width_pt: float, x_span: float, fontsize: float) -> bool:
    """Whether ``text`` fits inside a bar segment ``width`` long (an average glyph is about 0.6 em wide)."""
    return len(text) * fontsize * 0.6 + 4 <= width / x_span * axes_width_pt


def _lever_row(lever: Lever) -> str:
    return f"{_label(lever.name)}\neffort: {lever.effort.value}"


def levers_by_team(report: Report) -> str | None:
    """The cluster's levers as horizontal bars of dollars per month, ranked, each split into its teams'
    segments; levers without dollars are listed below them as not priced (never drawn as 0). None when no
    lever has dollars."""
    levers = report.cluster.levers
    drawn = [lever for lever in levers if lever.dollars_per_month is not None]
    if not drawn:
        return None
    unpriced = [lever for lever in levers if lever.dollars_per_month is None]
    by_lever = {lever.name: _team_dollars(report.teams, lever.name) for lever in drawn}
    totals: dict[str, float] = {}
    for dollars in by_lever.values():
        for team, value in dollars.items():
            totals[team] = totals.get(team, 0.0) + value
    named = sorted(totals, key=lambda team: (-totals[team], team))[:_LEVER_TEAMS]
    palette = matplotlib.colormaps["tab10"]
    colours: dict[str, Any] = {team: palette(index) for index, team in zip(_TEAM_COLOURS, named, strict=False)}
    colours |= {_OTHER_TEAMS: "#8395a7", _CLUSTER_WIDE: "#576574"}
    rows = len(drawn) + len(unpriced)
    figure, axes = _figure(11, 0.62 * rows + 1.9)
    widest = max(lever.dollars_per_month or 0.0 for lever in drawn)
    x_span = widest * 1.22  # room for each bar's total after it
    axes_width_pt = 11 * 72 * 0.7  # about the axes' share of the figure, beside the levers' names and the legend
    legend: dict[str, Any] = {}
    for row, lever in enumerate(drawn):
        assert lever.dollars_per_month is not None
        dollars = by_lever[lever.name]
        segments = [(team, dollars[team]) for team in named if team in dollars]
        other = sum(value for team, value in dollars.items() if team not in colours)
        if other > 0:
            segments.append((_OTHER_TEAMS, other))
        rest = lever.dollars_per_month - sum(value for _, value in segments)
        if rest > 1e-6 * lever.dollars_per_month:  # the cluster's own lever, or its share no team carries
            segments.append((_CLUSTER_WIDE, rest))
        left = 0.0
        for who, value in segments:
            bar = axes.barh(row, value, left=left, color=colours[who], edgecolor="white", linewidth=0.8)
            legend.setdefault(who, bar)
            inside = f"{_label(who)} ${value:,.0f}"
            if not _fits(inside, value, axes_width_pt, x_span, 8):
                inside = f"${value:,.0f}"
            if _fits(inside, value, axes_width_pt, x_span, 8):
                axes.text(left + value / 2, row, inside, ha="center", va="center", fontsize=8, color="white")
            left += value
        axes.text(left, row, f"  ${lever.dollars_per_month:,.0f} / month", va="center", fontsize=9,
                  fontweight="bold")  # fmt: skip
    for row, lever in enumerate(unpriced, start=len(drawn)):
        why = f"missing: {lever.missing}" if lever.missing else "not quantified"
        axes.text(0, row, f"  not priced ({_label(why)})", va="center", fontsize=8, style="italic", color="#576574")
    axes.set_yticks(range(rows), [_lever_row(lever) for lever in (*drawn, *unpriced)], fontsize=8)
    axes.set_ylim(rows - 0.5, -0.5)  # the largest lever on top
    axes.set_xlim(0, x_span)
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _position: f"${value:,.0f}"))
    axes.set_xlabel("dollars per month (the window's pace over a 730-hour month)")
    axes.set_title("Levers cheaper than buying GPUs, by team: dollars per month")
    order = [who for who in (*named, _OTHER_TEAMS, _CLUSTER_WIDE) if who in legend]
    # beside the axes: inside, it would cover a bar's total wherever it went
    axes.legend([legend[who] for who in order], [_label(who) for who in order], fontsize=8, title="team",
                loc="upper left", bbox_to_anchor=(1.01, 1))  # fmt: skip
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


def team_chart_id(index: int) -> str:
    """The id of the idle-held heat map of ``report.teams[index]`` (a team's name is no HTML id)."""
    return f"idle-hour-of-week-team-{index}"


def all_charts(report: Report) -> list[tuple[str, str, str | None]]:
    """(id, caption, SVG or None when the data for it is missing or there is nothing to draw); the trend charts'
    ids are their files'."""
    # read when a text is made and when it is drawn (tick labels are made in savefig): set around both
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        window = report.window
        return (
            [
                ("levers", "Levers by team, dollars per month", levers_by_team(report)),
                (
                    "idle-hour-of-week",
                    "GPU-hours held idle by hour of week, all teams",
                    idle_held_by_hour_of_week(report.cluster.idle_held_by_hour_of_week, window, "all teams"),
                ),
            ]
            + [
                (
                    team_chart_id(index),
                    f"GPU-hours held idle by hour of week, {team.name}",
                    idle_held_by_hour_of_week(team.idle_held_by_hour_of_week, window, team.name),
                )
                for index, team in enumerate(report.teams)
            ]
            + [
                (
                    "utilization-hour-of-week",
                    "Utilization by team and hour of week",
                    utilization_by_hour_of_week(report),
                ),
                ("wait-distribution", "Admission wait distribution per ClusterQueue", wait_distribution(report)),
                ("allocated-used", "Allocated versus used GPU-hours", allocated_versus_used(report)),
                ("quadrant", "Every team on the verdict quadrant", quadrant(report)),
            ]
            + [(chart.chart_id, chart.caption, trend(report, chart)) for chart in TREND_CHARTS]
        )
