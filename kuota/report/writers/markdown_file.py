"""``report.md``: the report for people, as Markdown tables (missing data spelled out, never 0).

Team, namespace, queue, cohort and pod names come from Prometheus labels and Workloads, which anyone who can
create a namespace or a job names. Every text that holds one goes through :func:`markdown_text` (Markdown
punctuation backslash-escaped, ``<>&`` as HTML entities, line breaks and control characters replaced), so a
name renders as the characters it has, never as a link, an image, markup or a new table row. Texts of the
report's own (figure names, numbers) are written as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from kuota.report.figures.calibration import Calibration, Tolerance
from kuota.report.figures.levers import Lever
from kuota.report.figures.schema import Change, IdleCost, Money, NamespaceReport, Queueing, Report, TeamReport
from kuota.report.figures.window import trend_day_s
from kuota.report.writers.trends import TREND_CHARTS
from kuota.report.writers.trends import lines as trend_lines

MISSING = "missing data"

# What can start markup anywhere in a line: with brackets escaped no link or image can form, so parentheses and
# "!" stay as they are and the raw file reads as it renders. "#", "+" and "-" only matter at a value's start.
_MARKDOWN_ESCAPES = str.maketrans({**{c: "\\" + c for c in "\\`*_[]|~$"}, "<": "&lt;", ">": "&gt;", "&": "&amp;"})
_LINE_START_MARKUP = "#+-"
# C0/C1 controls, line and paragraph separators, and bidirectional overrides (which reorder what is shown)
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def markdown_text(value: str) -> str:
    """A foreign text as Markdown that renders exactly its characters, on one line."""
    text = _UNSHOWABLE.sub("\ufffd", value.replace("\t", " ")).translate(_MARKDOWN_ESCAPES)
    return "\\" + text if text[:1] in _LINE_START_MARKUP and text else text


def hours_text(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def number(value: float | None, digits: int = 1, unit: str = "") -> str:
    return MISSING if value is None else f"{value:,.{digits}f}{unit}"


def percent(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}%"


def share(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1%}"


def money(value: float | None) -> str:
    return MISSING if value is None else f"${value:,.0f}"


def _table(header: Sequence[str], rows: Iterable[list[str]]) -> list[str]:
    """Cells are Markdown already: a label's through :func:`markdown_text`, which escapes its pipes."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_UNESCAPED_PIPE.sub("\\|", cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def _cost(cost: IdleCost | None, hour_class: str) -> str:
    if cost is None:
        return MISSING
    return f"{cost.gpu_hours[hour_class]:,.1f} GPU-h = {money(cost.dollars[hour_class])}"


TEAM_COLUMNS = (
    "team",
    "namespaces",
    "util avg",
    "util p95",
    "allocated GPU-h",
    "used GPU-h",
    "wait p50",
    "wait p95",
    "pending avg",
    "verdict",
)


def team_row(team: TeamReport) -> list[str]:
    """One team's cells, in ``TEAM_COLUMNS`` order (both report formats)."""
    util = team.utilization
    queue: Queueing | None = team.queueing
    return [
        team.name,
        ", ".join(team.namespaces) or "-",
        percent(util.average_percent if util else None),
        percent(util.p95_percent if util else None),
        number(util.allocated_gpu_hours if util else None),
        number(util.used_gpu_hours if util else None),
        hours_text(queue.wait_p50_s if queue else None),
        hours_text(queue.wait_p95_s if queue else None),
        number(queue.pending_average if queue else None),
        team.verdict.quadrant.value,
    ]


MONEY_COLUMNS = ("team", "price per GPU-h", "allocated $", "used $", "idle $ (allocated - used)", "priced by")


def _money_cells(money: Money | None) -> list[str]:
    return [
        MISSING if money is None else money_exact(money.price_per_gpu_hour),
        money_text(money.allocated_dollars if money else None),
        money_text(money.used_dollars if money else None),
        money_text(money.idle_dollars if money else None),
    ]


def money_text(value: float | None) -> str:
    return MISSING if value is None else f"${value:,.2f}"


def money_exact(value: float | None) -> str:
    return MISSING if value is None else f"${value:,.3f}"


def money_row(team: TeamReport) -> list[str]:
    """A team's money, in ``MONEY_COLUMNS`` order (names raw: each format escapes them)."""
    return [team.name, *_money_cells(team.money), "; ".join(team.money.priced_by) if team.money else MISSING]


NAMESPACE_COLUMNS = (
    "namespace",
    "team",
    "GPU models (GPU-h)",
    "allocated GPU-h",
    "used GPU-h",
    "util avg",
    "idle-held GPU-h",
    "allocated $",
    "used $",
    "idle $",
)


def models_text(models: Mapping[str, float]) -> str:
    if not models:
        return "-"
    return "; ".join(f"{model or 'unknown'} ({hours:,.1f})" for model, hours in models.items())


def namespace_row(namespace: NamespaceReport) -> list[str]:
    """A namespace's cells, in ``NAMESPACE_COLUMNS`` order (names raw: each format escapes them)."""
    return [
        namespace.name,
        namespace.team,
        models_text(namespace.gpu_models),
        number(namespace.allocated_gpu_hours),
        number(namespace.used_gpu_hours),
        percent(namespace.utilization_percent),
        number(namespace.idle_held_gpu_hours),
        *_money_cells(namespace.money)[1:],
    ]


TREND_COLUMNS = ("day (UTC, start)", "cluster util", "cluster wait p50", "cluster wait p95")


def trend_rows(report: Report) -> list[list[str]]:
    daily = report.cluster.daily
    day_s = trend_day_s(report.window.length_s)
    rows = []
    for index, end in enumerate(report.trend_day_ends):
        start = datetime.fromtimestamp(end - day_s, tz=UTC).strftime("%a %Y-%m-%d %H:%M")
        rows.append(
            [
                start,
                percent(daily.utilization_percent[index] if daily else None),
                hours_text(daily.wait_p50_s[index] if daily else None),
                hours_text(daily.wait_p95_s[index] if daily else None),
            ]
        )
    return rows


CHANGE_COLUMNS = (
    "team",
    "util before / now",
    "wait p50 before / now",
    "wait p95 before / now",
    "idle cost before / now",
    "verdict before / now",
)


def change_row(change: Change) -> list[str]:
    """One team's week-over-week cells, in ``CHANGE_COLUMNS`` order (the name raw)."""
    return [
        change.name,
        f"{percent(change.utilization_before_percent)} / {percent(change.utilization_now_percent)}",
        f"{hours_text(change.wait_p50_before_s)} / {hours_text(change.wait_p50_now_s)}",
        f"{hours_text(change.wait_p95_before_s)} / {hours_text(change.wait_p95_now_s)}",
        f"{money(change.idle_cost_before_dollars)} / {money(change.idle_cost_now_dollars)}",
        f"{change.verdict_before or MISSING} / {change.verdict_now or MISSING}",
    ]


def prices_text(report: Report) -> list[str]:
    """The prices applied: the default, and each named one (names raw)."""
    table = report.prices
    named = table.named if table is not None else {}
    return [f"{key}: ${price.per_gpu_hour:.3f} per GPU-hour ({price.source})" for key, price in named.items()]


# the items listed under each lever (report.json has them all)
LEVER_ITEMS_SHOWN = 10


def lever_lines(levers: Sequence[Lever]) -> list[str]:
    """The levers' table, then the pods or Workloads behind each."""
    lines = _table(
        ["#", "lever", "$ per month", "GPU-hours", "effort", "evidence"],
        (
            [
                str(i),
                f"**{markdown_text(lv.name)}**",
                money(lv.dollars_per_month),
                number(lv.gpu_hours),
                lv.effort.value,
                markdown_text(lv.evidence + (f"; missing: {lv.missing}" if lv.missing else "")),
            ]
            for i, lv in enumerate(levers, 1)
        ),
    )
    for lv in levers:
        if not lv.items:
            continue
        lines += [f"Behind {markdown_text(lv.name)}:", ""]
        lines += [
            # an item without a namespace is the cluster's (a GPU model's commitment)
            f"- {markdown_text(f'{item.namespace}/{item.name}' if item.namespace else item.name)}: "
            f"{number(item.gpu_hours)} GPU-h, "
            f"{money(item.dollars)} ({markdown_text(item.detail)})"
            for item in lv.items[:LEVER_ITEMS_SHOWN]
        ]
        more = len(lv.items) - LEVER_ITEMS_SHOWN
        lines += [f"- ... and {more} more (report.json lists them)"] * (more > 0) + [""]
    return lines


def _markdown_team_row(team: TeamReport) -> list[str]:
    cells = team_row(team)
    return [markdown_text(team.name), markdown_text(", ".join(team.namespaces)) or "-", *cells[2:]]


def render(report: Report) -> str:
    t = report.thresholds
    c = report.cluster
    lines = [
        "# kuota weekly report: buy or tune?",
        "",
        f"Window: {report.window.describe()}, resolution {report.window.resolution_s} s, "
        f"hours classed in {report.window.work_hours.timezone} "
        f"(workday Mon-Fri {report.window.work_hours.first}:00-{report.window.work_hours.last}:00).",
        f"GPU series: {report.gpu_source or MISSING}. Price: {report.price.source}, "
        f"${report.price.per_gpu_hour:.3f} per GPU-hour.",
        "",
        f"Thresholds: low utilization = average under {t.low_utilization_percent:g}% over the window; "
        f"long queue = p95 admission wait over {hours_text(t.long_wait_s)}; idle = hourly mean under "
        f"{t.idle_percent:g}%; idle holders listed from {t.idle_holder_hours:g} idle GPU-hours; "
        f"'idle elsewhere' = at least {t.idle_elsewhere_gpus} GPUs of other queues' nominal quota unused; "
        f"a long queue is 'tune' whatever the utilization when at least {t.waiting_while_idle_share:.0%} "
        "of its waiting happened while GPUs sat idle elsewhere.",
        "",
    ]
    if report.empty:
        lines += ["**The window is empty: no GPU or queue series have samples in it.**", ""]
    lines += [
        "## Cluster",
        "",
        f"**Verdict: {c.verdict.quadrant.value}** - {markdown_text(c.verdict.reason)}.",
        "",
    ]
    lines += _table(
        ["figure", "value"],
        [
            [
                "capacity (GPU-hours)",
                number(c.capacity_gpu_hours) + (f" ({c.capacity_source})" * bool(c.capacity_source)),
            ],
            ["allocated GPU-hours", number(c.allocated_gpu_hours)],
            ["used GPU-hours (busy)", number(c.used_gpu_hours)],
            ["allocation of capacity", percent(c.allocation_percent)],
            ["utilization of capacity, average", percent(c.utilization_average_percent)],
            ["utilization of capacity, p95 hour", percent(c.utilization_p95_percent)],
            [
                "admission wait p50 / p95",
                f"{hours_text(c.queueing.wait_p50_s if c.queueing else None)} / "
                f"{hours_text(c.queueing.wait_p95_s if c.queueing else None)}",
            ],
            ["time some queue had pending work", share(c.waiting_share)],
            ["... while idle quota sat elsewhere", share(c.waiting_while_idle_elsewhere_share)],
            ["unused nominal GPU quota, average", number(c.unused_quota_gpus_average)],
            ["idle GPU-hours and cost, nights", _cost(c.idle_cost, "night")],
            ["idle GPU-hours and cost, weekends", _cost(c.idle_cost, "weekend")],
            ["idle GPU-hours and cost, workdays", _cost(c.idle_cost, "workday")],
            ["GPU-hours of failed or cancelled jobs", number(c.failed_gpu_hours)],
            ["GPU-hours held by serving (Deployments, StatefulSets)", number(c.serving_gpu_hours)],
        ],
    )
    if c.levers:
        lines += ["Levers for the cluster, ranked by dollars per month:", ""]
        lines += lever_lines(c.levers)
    lines += ["## Teams", ""]
    lines += _table(TEAM_COLUMNS, (_markdown_team_row(team) for team in report.teams))
    for team in report.teams:
        q = team.queueing
        lines += [
            f"### {markdown_text(team.name)}",
            "",
            f"**Verdict: {team.verdict.quadrant.value}** - {markdown_text(team.verdict.reason)}.",
            "",
        ]
        cohort = q.cohort if q else None
        lines += _table(
            ["figure", "value"],
            [
                [
                    "ClusterQueue / cohort",
                    f"{markdown_text(team.cluster_queue or 'none')} / {markdown_text(cohort or 'none')}",
                ],
                ["admissions in window", number(q.admissions if q else None, 0)],
                [
                    "pending workloads avg / max",
                    f"{number(q.pending_average if q else None)} / {number(q.pending_max if q else None)}",
                ],
                ["borrowed GPU-hours", number(q.borrowed_gpu_hours if q else None)],
                [
                    "hours waiting / while idle elsewhere",
                    f"{number(q.waiting_hours if q else None)} / "
                    f"{number(q.waiting_while_idle_elsewhere_hours if q else None)}",
                ],
                ["preemptions by this queue", number(q.preemptions if q else None, 0)],
                ["idle-held GPU-hours and cost, nights", _cost(team.idle_cost, "night")],
                ["idle-held GPU-hours and cost, weekends", _cost(team.idle_cost, "weekend")],
                ["GPU-hours of failed or cancelled jobs", number(team.failed_gpu_hours)],
                ["GPU-hours held by serving (Deployments, StatefulSets)", number(team.serving_gpu_hours)],
            ],
        )
        if team.idle_holders:
            lines += ["Pods holding GPUs while idle:", ""]
            lines += _table(
                ["namespace", "pod", "idle GPU-hours"],
                (
                    [markdown_text(h.namespace), markdown_text(h.pod), f"{h.idle_gpu_hours:.1f}"]
                    for h in team.idle_holders
                ),
            )
        if team.levers:
            lines += ["Levers, ranked by dollars per month:", ""]
            lines += lever_lines(team.levers)
    lines += _money_and_namespaces(report)
    lines += _trends(report)
    lines += _week_over_week(report)
    lines += ["## What-if", ""]
    if report.whatif is None:
        lines += ["Not run (give --history or --kubeconfig, and --config, for a replay through `kuota simulate`).", ""]
    else:
        lines += _table(
            ["scenario", "p95 wait", "utilization", "what changed"],
            (
                [markdown_text(s.name), hours_text(s.wait_p95_s), percent(s.utilization_percent), s.description]
                for s in report.whatif
            ),
        )
        lines += _calibration(report)
    if report.missing:
        lines += ["## Missing data", ""]
        lines += [
            f"- `{metric}`: no samples in the window, so {why} cannot be shown." for metric, why in report.missing
        ]
        lines += [""]
    if report.notes:
        lines += ["## Notes", ""] + [f"- {markdown_text(note)}" for note in report.notes] + [""]
    return "\n".join(lines)


def _money_and_namespaces(report: Report) -> list[str]:
    lines = [
        "## Money per team",
        "",
        "Each GPU-hour is priced by its ResourceFlavor (the ClusterQueue's GPU usage per flavor), else by its GPU "
        "model, else at the default price. Idle $ is allocated minus used: GPU-hours held but not busy.",
        "",
    ]
    named = prices_text(report)
    if named:
        lines += ["Prices named with --price:", ""] + [f"- {markdown_text(line)}" for line in named] + [""]
    lines += _table(
        MONEY_COLUMNS,
        ([markdown_text(cells[0]), *cells[1:-1], markdown_text(cells[-1])] for cells in map(money_row, report.teams)),
    )
    lines += ["## Namespaces", ""]
    lines += _table(
        NAMESPACE_COLUMNS,
        (
            [markdown_text(cells[0]), markdown_text(cells[1]), markdown_text(cells[2]), *cells[3:]]
            for cells in map(namespace_row, report.namespaces)
        ),
    )
    return lines


def _trends(report: Report) -> list[str]:
    lines = ["## Daily trends", ""]
    for chart in TREND_CHARTS:
        if trend_lines(report, chart):
            lines += [f"![{chart.caption}]({chart.file_name})", ""]
        else:
            lines += [f"{chart.caption}: {MISSING}.", ""]
    lines += _table(TREND_COLUMNS, trend_rows(report))
    return lines


def _week_over_week(report: Report) -> list[str]:
    comparison = report.week_over_week
    if comparison is None:
        return []
    rows = [comparison.cluster, *comparison.teams]
    return [
        "## Week over week",
        "",
        f"Compared with the report of {markdown_text(comparison.previous_window)} (--previous); teams are matched "
        "by name.",
        "",
        *_table(CHANGE_COLUMNS, ([markdown_text(c[0]), *c[1:]] for c in map(change_row, rows))),
    ]


CALIBRATION_COLUMNS = ["team", "p50 wait measured / replayed", "p95 wait", "allocation of nominal quota", "calibration"]


def calibration_row(name: str, calibration: Calibration) -> list[str]:
    return [
        name,
        f"{hours_text(calibration.wait_p50_measured_s)} / {hours_text(calibration.wait_p50_replayed_s)}",
        f"{hours_text(calibration.wait_p95_measured_s)} / {hours_text(calibration.wait_p95_replayed_s)}",
        f"{percent(calibration.allocation_measured_percent)} / {percent(calibration.allocation_replayed_percent)}",
        "within" if calibration.within_tolerance else "off: " + "; ".join(calibration.off),
    ]


def _calibration(report: Report) -> list[str]:
    """The current queues' replay against the measured week: where it is off, the what-if moves no verdict."""
    tolerance = report.calibration_tolerance
    if tolerance is None:
        return []
    rows = [calibration_row(markdown_text(t.name), t.calibration) for t in report.teams if t.calibration]
    if report.cluster.calibration is not None:
        rows.append(calibration_row("**cluster**", report.cluster.calibration))
    return [
        f"### {CALIBRATION_TITLE}",
        "",
        calibration_tolerance_text(tolerance),
        "",
        *_table(CALIBRATION_COLUMNS, rows),
    ]


CALIBRATION_TITLE = "Calibration: the current queues replayed against the measured week"


def calibration_tolerance_text(tolerance: Tolerance) -> str:
    return (
        f"Tolerance: p95 waits within a factor of {tolerance.wait_factor:g} (both under "
        f"{tolerance.wait_floor_s:g} s agree), allocation within {tolerance.allocation_points:g} percentage points "
        "(GPU-hours held over nominal GPU quota: allocated to pods, measured; admitted, replayed). Where a row is "
        "off, the what-if's borrowing scenario does not move its verdict."
    )
