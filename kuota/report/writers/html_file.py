"""``report.html``: one self-contained page (inline CSS, inline SVG charts, no external requests).

The cluster's section holds the levers chart and the idle-held heat map; each team's its own heat map and its
levers' table, with the pods or Workloads behind each lever in a ``<details>``; the other charts have a section
of their own. Everything reads without JavaScript.

A small script checks on load that every chart the page promises (``<body data-charts>``) is there as drawn
SVG, and records what it found on the body, out of the reader's sight: ``data-charts-drawn`` (the count) and
``data-render-check`` (``ok`` or ``incomplete``), so a headless browser test can tell a broken page from a good
one. It writes no text into the page.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from kuota.report.figures.levers import Lever
from kuota.report.figures.schema import Report, TeamReport
from kuota.report.writers import markdown_file as text
from kuota.report.writers.svg_charts import all_charts, team_chart_id

Charts = dict[str, tuple[str, str | None]]  # id -> (caption, SVG or None)
# drawn in the cluster's or a team's section, not among the other charts
_CLUSTER_CHARTS = ("levers", "idle-hour-of-week")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left}
th{background:#f1f2f6}.verdict{font-size:1.2rem}.tune{color:#10ac84}.buy{color:#ee5253}
.missing{color:#8395a7;font-style:italic}figure.chart{margin:1rem 0}figure.chart svg{max-width:100%;height:auto}
details{margin:.5rem 0}summary{cursor:pointer;font-weight:600}
"""

_SCRIPT = """
document.addEventListener("DOMContentLoaded", function () {
  var expected = Number(document.body.dataset.charts);
  var drawn = document.querySelectorAll("figure.chart svg").length;
  document.body.dataset.chartsDrawn = String(drawn);
  document.body.dataset.renderCheck = drawn === expected ? "ok" : "incomplete";
});
"""


def _cell(value: str) -> str:
    css = ' class="missing"' if value == text.MISSING else ""
    return f"<td{css}>{html.escape(value)}</td>"


def _table(header: Sequence[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict(name: str, quadrant: str, reason: str) -> str:
    return (
        f'<p class="verdict">{html.escape(name)}: <strong class="{html.escape(quadrant)}">'
        f"{html.escape(quadrant)}</strong> - {html.escape(reason)}</p>"
    )


def _figure(chart_id: str, caption: str, svg: str) -> str:
    return f'<figure class="chart" id="{chart_id}">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'


def _idle_heat_map(chart_id: str, charts: Charts, slots: Sequence[float] | None, report: Report) -> str:
    caption, svg = charts[chart_id]
    if svg is not None:
        return _figure(chart_id, caption, svg)
    if slots is None:
        return f'<p class="missing">{html.escape(caption)}: missing data (no utilization series)</p>'
    return f"<p>No GPU was held idle (under {report.thresholds.idle_percent:g}% utilization) in the window.</p>"


def _lever_items(lever: Lever) -> str:
    """The pods or Workloads behind a lever, the first ``LEVER_ITEMS_SHOWN`` of them, in a ``<details>``."""
    shown = lever.items[: text.LEVER_ITEMS_SHOWN]
    rows = [
        [item.namespace, item.name, text.number(item.gpu_hours), text.money(item.dollars), item.detail]
        for item in shown
    ]
    more = len(lever.items) - len(shown)
    rest = f"<p>... and {more} more (report.json lists them all).</p>" if more > 0 else ""
    return (
        f"<details><summary>Behind {html.escape(lever.name)}: {len(lever.items)} pods or Workloads</summary>"
        f"{_table(['namespace', 'name', 'GPU-hours', '$ in the window', 'why'], rows)}{rest}</details>"
    )


def _levers(levers: Sequence[Lever]) -> str:
    """The levers' table, ranked as given (by dollars per month), then the items behind each."""
    header = "".join(f"<th>{h}</th>" for h in ("#", "lever", "$ per month", "GPU-hours", "effort", "evidence"))
    rows = []
    for rank, lever in enumerate(levers, 1):
        missing = f' <span class="missing">missing: {html.escape(lever.missing)}</span>' if lever.missing else ""
        rows.append(
            f"<tr><td>{rank}</td><td><strong>{html.escape(lever.name)}</strong></td>"
            f"{_cell(text.money(lever.dollars_per_month))}{_cell(text.number(lever.gpu_hours))}"
            f"<td>{html.escape(lever.effort.value)}</td><td>{html.escape(lever.evidence)}{missing}</td></tr>"
        )
    table = f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return table + "".join(_lever_items(lever) for lever in levers if lever.items)


def _team(index: int, team: TeamReport, charts: Charts, report: Report) -> str:
    parts = [
        f"<details><summary>{html.escape(team.name)} - {team.verdict.quadrant.value}</summary>",
        _verdict(team.name, team.verdict.quadrant.value, team.verdict.reason),
    ]
    if team.idle_holders:
        parts.append(
            _table(
                ["namespace", "pod", "idle GPU-hours"],
                [[h.namespace, h.pod, f"{h.idle_gpu_hours:.1f}"] for h in team.idle_holders],
            )
        )
    parts.append(_idle_heat_map(team_chart_id(index), charts, team.idle_held_by_hour_of_week, report))
    if team.levers:
        parts += ["<p>Levers, ranked by dollars per month:</p>", _levers(team.levers)]
    else:
        parts.append("<p>No lever applies to this team.</p>")
    parts.append("</details>")
    return "".join(parts)


def _cluster_levers(report: Report, charts: Charts) -> list[str]:
    levers = report.cluster.levers
    if not levers:
        return ["<h3>Levers</h3>", "<p>No lever applies: no team's figures point to one.</p>"]
    caption, svg = charts["levers"]
    shown = (
        _figure("levers", caption, svg)
        if svg is not None
        else "<p>No lever has dollars to chart: the table says what each lacks.</p>"
    )
    return ["<h3>Levers, ranked by dollars per month</h3>", shown, _levers(levers)]


def render(report: Report, charts: Sequence[tuple[str, str, str | None]] | None = None) -> str:
    """The page; ``charts`` as :func:`~kuota.report.writers.svg_charts.all_charts` drew them (drawn here when None)."""
    if charts is None:
        charts = all_charts(report)
    drawn = [(cid, caption, svg) for cid, caption, svg in charts if svg is not None]
    by_id: Charts = {cid: (caption, svg) for cid, caption, svg in charts}
    placed = {*_CLUSTER_CHARTS, *(team_chart_id(index) for index in range(len(report.teams)))}
    c = report.cluster
    sections = [
        "<h1>kuota weekly report: buy or tune?</h1>",
        f"<p>Window: {html.escape(report.window.describe())}. GPU series: "
        f"{html.escape(report.gpu_source or text.MISSING)}. Price: {html.escape(report.price.source)}.</p>",
    ]
    if report.empty:
        sections.append("<p><strong>The window is empty: no GPU or queue series have samples in it.</strong></p>")
    sections += [
        "<h2>Cluster</h2>",
        _verdict("cluster", c.verdict.quadrant.value, c.verdict.reason),
        _table(
            ["figure", "value"],
            [
                ["capacity GPU-hours", text.number(c.capacity_gpu_hours)],
                ["allocated GPU-hours", text.number(c.allocated_gpu_hours)],
                ["used GPU-hours", text.number(c.used_gpu_hours)],
                ["utilization of capacity, average", text.percent(c.utilization_average_percent)],
                ["admission wait p95", text.hours_text(c.queueing.wait_p95_s if c.queueing else None)],
                ["time some queue waited", text.share(c.waiting_share)],
                ["... while idle quota sat elsewhere", text.share(c.waiting_while_idle_elsewhere_share)],
                ["idle cost, nights", text.money(c.idle_cost.dollars["night"] if c.idle_cost else None)],
                ["idle cost, weekends", text.money(c.idle_cost.dollars["weekend"] if c.idle_cost else None)],
            ],
        ),
    ]
    sections += _cluster_levers(report, by_id)
    sections += [
        "<h3>Idle holders by hour of week</h3>",
        _idle_heat_map("idle-hour-of-week", by_id, c.idle_held_by_hour_of_week, report),
        "<h2>Charts</h2>",
    ]
    for cid, caption, svg in charts:
        if cid in placed:
            continue
        if svg is None:
            sections.append(f'<p class="missing">{html.escape(caption)}: missing data</p>')
        else:
            sections.append(_figure(cid, caption, svg))
    sections += [
        "<h2>Teams</h2>",
        _table(
            text.TEAM_COLUMNS,
            [text.team_row(team) for team in report.teams],
        ),
    ]
    sections += [_team(index, team, by_id, report) for index, team in enumerate(report.teams)]
    sections += [
        "<h2>Money per team</h2>",
        "<p>Each GPU-hour is priced by its ResourceFlavor, else by its GPU model, else at the default price. "
        "Idle $ is allocated minus used.</p>",
    ]
    named = text.prices_text(report)
    if named:
        sections.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in named) + "</ul>")
    sections += [
        _table(text.MONEY_COLUMNS, [text.money_row(team) for team in report.teams]),
        "<h2>Namespaces</h2>",
        _table(text.NAMESPACE_COLUMNS, [text.namespace_row(namespace) for namespace in report.namespaces]),
        "<h2>Daily trends</h2>",
        _table(text.TREND_COLUMNS, text.trend_rows(report)),
    ]
    if report.week_over_week is not None:
        comparison = report.week_over_week
        sections += [
            "<h2>Week over week</h2>",
            f"<p>Compared with the report of {html.escape(comparison.previous_window)}; teams matched by name.</p>",
            _table(text.CHANGE_COLUMNS, [text.change_row(c) for c in (comparison.cluster, *comparison.teams)]),
        ]
    sections.append("<h2>What-if</h2>")
    if report.whatif is None:
        sections.append('<p class="missing">not run</p>')
    else:
        sections.append(
            _table(
                ["scenario", "p95 wait", "utilization", "what changed"],
                [
                    [s.name, text.hours_text(s.wait_p95_s), text.percent(s.utilization_percent), s.description]
                    for s in report.whatif
                ],
            )
        )
    if report.calibration_tolerance is not None:
        rows = [text.calibration_row(t.name, t.calibration) for t in report.teams if t.calibration]
        if report.cluster.calibration is not None:
            rows.append(text.calibration_row("cluster", report.cluster.calibration))
        sections += [
            f"<h3>{html.escape(text.CALIBRATION_TITLE)}</h3>",
            f"<p>{html.escape(text.calibration_tolerance_text(report.calibration_tolerance))}</p>",
            _table(text.CALIBRATION_COLUMNS, rows),
        ]
    if report.missing:
        items = "".join(f"<li><code>{html.escape(m)}</code>: {html.escape(why)}</li>" for m, why in report.missing)
        sections.append(f"<h2>Missing data</h2><ul>{items}</ul>")
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>kuota report</title>'
        f'<style>{_STYLE}</style></head>\n<body data-charts="{len(drawn)}">\n{body}\n'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
