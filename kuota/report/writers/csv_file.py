"""``report.csv``: the main figures, one row for the cluster, one per team and one per namespace, then one per
lever of the cluster and of each team (``scope``).

The columns and their order are a contract (docs/report.md): new columns are only ever added at the end.
Numbers are plain decimals, in the units the column names; a missing figure is an empty cell, never 0. Names
come from labels anyone can choose, and a spreadsheet runs a cell starting with ``=``, ``+``, ``-`` or ``@``
as a formula (OWASP's "CSV injection"): such a name is written with a leading apostrophe.
"""

from __future__ import annotations

import csv
import io

from kuota.report.figures.levers import Lever
from kuota.report.figures.schema import Money, NamespaceReport, Report, TeamReport

COLUMNS = (
    "scope",  # cluster, team or namespace
    "name",
    "team",  # the namespace's team; the team's own name on a team row
    "namespaces",  # a team's namespaces, space-separated
    "cluster_queue",
    "allocated_gpu_hours",
    "used_gpu_hours",
    "utilization_percent",
    "idle_held_gpu_hours",
    "price_per_gpu_hour",
    "allocated_dollars",
    "used_dollars",
    "idle_dollars",
    "wait_p50_s",
    "wait_p95_s",
    "verdict",
    # lever rows (scope "lever"): name is the lever's, team its team (empty for the cluster's)
    "lever_dollars_per_month",
    "lever_gpu_hours",
    "lever_effort",
    "lever_missing",
)

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(value: str) -> str:
    """A name as a cell no spreadsheet runs as a formula."""
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _money(money: Money | None) -> list[str]:
    if money is None:
        return ["", "", "", ""]
    return [
        _number(money.price_per_gpu_hour),
        _number(money.allocated_dollars),
        _number(money.used_dollars),
        _number(money.idle_dollars),
    ]


def _team_row(team: TeamReport) -> list[str]:
    util = team.utilization
    queue = team.queueing
    return [
        "team",
        text_cell(team.name),
        text_cell(team.name),
        text_cell(" ".join(team.namespaces)),
        text_cell(team.cluster_queue or ""),
        _number(util.allocated_gpu_hours if util else None),
        _number(util.used_gpu_hours if util else None),
        _number(util.average_percent if util else None),
        _number(sum(team.idle_cost.gpu_hours.values()) if team.idle_cost else None),
        *_money(team.money),
        _number(queue.wait_p50_s if queue else None),
        _number(queue.wait_p95_s if queue else None),
        team.verdict.quadrant.value,
    ]


def _namespace_row(namespace: NamespaceReport) -> list[str]:
    return [
        "namespace",
        text_cell(namespace.name),
        text_cell(namespace.team),
        text_cell(namespace.name),
        "",
        _number(namespace.allocated_gpu_hours),
        _number(namespace.used_gpu_hours),
        _number(namespace.utilization_percent),
        _number(namespace.idle_held_gpu_hours),
        *_money(namespace.money),
        "",
        "",
        "",
    ]


def _cluster_row(report: Report) -> list[str]:
    """The same figures as a team's, of all GPU-hours held (report.json has the cluster's of capacity)."""
    c = report.cluster
    held = [n.idle_held_gpu_hours for n in report.namespaces if n.idle_held_gpu_hours is not None]
    utilization = None
    if c.allocated_gpu_hours and c.used_gpu_hours is not None:
        utilization = 100.0 * c.used_gpu_hours / c.allocated_gpu_hours
    return [
        "cluster",
        "cluster",
        "",
        "",
        "",
        _number(c.allocated_gpu_hours),
        _number(c.used_gpu_hours),
        _number(utilization),
        _number(sum(held) if held else None),
        *_money(c.money),
        _number(c.queueing.wait_p50_s if c.queueing else None),
        _number(c.queueing.wait_p95_s if c.queueing else None),
        c.verdict.quadrant.value,
    ]


def _lever_row(lever: Lever, team: str) -> list[str]:
    figures = [_number(lever.dollars_per_month), _number(lever.gpu_hours), lever.effort.value, lever.missing or ""]
    return ["lever", text_cell(lever.name), text_cell(team), *[""] * (len(COLUMNS) - 7), *figures]


def render(report: Report) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    figures = [_cluster_row(report), *map(_team_row, report.teams), *map(_namespace_row, report.namespaces)]
    writer.writerows(row + [""] * (len(COLUMNS) - len(row)) for row in figures)
    writer.writerows(_lever_row(lever, "") for lever in report.cluster.levers)
    writer.writerows(_lever_row(lever, team.name) for team in report.teams for lever in team.levers)
    return buffer.getvalue()
