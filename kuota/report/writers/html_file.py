"""``report.html``: one self-contained page (inline CSS, inline SVG charts, no external requests).

A small script checks on load that every chart the page promises (``<body data-charts>``) is there as drawn
SVG, and records what it found on the body, out of the reader's sight: ``data-charts-drawn`` (the count) and
``data-render-check`` (``ok`` or ``incomplete``), so a headless browser test can tell a broken page from a good
one. It writes no text into the page.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from kuota.report.figures.schema import Report, TeamReport
from kuota.report.writers import markdown_file as text
from kuota.report.writers.svg_charts import all_charts

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


def _team(team: TeamReport) -> str:
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
    if team.levers:
        items = "".join(
            f"<li><strong>{html.escape(lv.name)}</strong> ({text.number(lv.gpu_hours)} GPU-h): "
            f"{html.escape(lv.evidence)}</li>"
            for lv in team.levers
        )
        parts.append(f"<ol>{items}</ol>")
    parts.append("</details>")
    return "".join(parts)


def render(report: Report, charts: Sequence[tuple[str, str, str | None]] | None = None) -> str:
    """The page; ``charts`` as :func:`~kuota.report.writers.svg_charts.all_charts` drew them (drawn here when None)."""
    if charts is None:
        charts = all_charts(report)
    drawn = [(cid, caption, svg) for cid, caption, svg in charts if svg is not None]
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
        "<h2>Charts</h2>",
    ]
    for cid, caption, svg in charts:
        if svg is None:
            sections.append(f'<p class="missing">{html.escape(caption)}: missing data</p>')
        else:
            sections.append(
                f'<figure class="chart" id="{cid}">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'
            )
    sections += [
        "<h2>Teams</h2>",
        _table(
            text.TEAM_COLUMNS,
            [text.team_row(team) for team in report.teams],
        ),
    ]
    sections += [_team(team) for team in report.teams]
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
    if report.missing:
        items = "".join(f"<li><code>{html.escape(m)}</code>: {html.escape(why)}</li>" for m, why in report.missing)
        sections.append(f"<h2>Missing data</h2><ul>{items}</ul>")
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>kuota report</title>'
        f'<style>{_STYLE}</style></head>\n<body data-charts="{len(drawn)}">\n{body}\n'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
