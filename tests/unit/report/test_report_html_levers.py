"""report.html's levers chart and tables, and the idle-held heat maps by hour of week (figure and drawing)."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from kuota.report.figures.levers import Effort, Lever, LeverItem, cluster_levers
from kuota.report.figures.measurements import GpuMeasurements, Measurements
from kuota.report.figures.prices import parse_price
from kuota.report.figures.schema import Report
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import Thresholds
from kuota.report.figures.window import Window, WorkHours
from kuota.report.writers import html_file, svg_charts

END = int(datetime(2026, 10, 5, tzinfo=UTC).timestamp())  # Monday 00:00 UTC, 02:00 in Berlin


def _report(hours: int, timezone: str = "UTC") -> Report:
    """Two teams; ``ml``'s trainer idles in a ramp (0, 0.1, 0.2, ... GPU-hours), ``web``'s notebook every
    third hour (1 GPU-hour)."""
    window = Window.build(hours * 3600, END, 60, WorkHours(timezone=timezone))
    trainer = tuple(0.1 * (hour % 10) for hour in range(hours))
    notebook = tuple(1.0 if hour % 3 == 0 else 0.0 for hour in range(hours))
    gpu = GpuMeasurements(
        source="test",
        allocated={"ml": (4.0,) * hours, "web": (1.0,) * hours},
        used={"ml": (2.0,) * hours, "web": (0.0,) * hours},
        idle_held={("ml", "trainer"): trainer, ("web", "notebook"): notebook},
        inventory=(8.0,) * hours,
        cluster_used=(2.0,) * hours,
    )
    return build_report(
        Measurements(hours, gpu, None),
        window=window,
        thresholds=Thresholds(),
        price=parse_price("2"),
        namespace_queues={},
    )


def _texts(svg: str) -> list[str]:
    """The texts matplotlib drew, in order: it writes each as a comment before the glyphs that draw it."""
    return [text.strip() for text in re.findall(r"<!-- (.*?) -->", svg)]


def _text_elements(svg: str) -> list[str]:
    """The texts of an SVG written as markup (the heat maps): its ``<text>`` elements, unescaped."""
    return [html.unescape(text) for text in re.findall(r"<text[^>]*>(.*?)</text>", svg)]


def _cells(svg: str) -> dict[int, str]:
    """The heat map's cell labels by their slot of the week."""
    return {int(slot): text for slot, text in re.findall(r'<g id="idle-cell-(\d+)">\s*<!-- (.*?) -->', svg)}


@pytest.mark.parametrize(("hours", "timezone"), [(30, "Europe/Berlin"), (8 * 24, "UTC")])
def test_idle_held_hours_fall_in_their_local_hour_of_week_and_add_up(hours: int, timezone: str) -> None:
    report = _report(hours, timezone)
    window = report.window
    for team in report.teams:
        slots = team.idle_held_by_hour_of_week
        assert slots is not None and len(slots) == 168
        assert team.idle_cost is not None
        assert sum(slots) == pytest.approx(sum(team.idle_cost.gpu_hours.values()))
    ml = next(team for team in report.teams if team.name == "ml")
    assert ml.idle_held_by_hour_of_week is not None
    expected = [0.0] * 168
    for hour in range(hours):
        expected[window.hour_of_week(hour)] += 0.1 * (hour % 10)
    assert ml.idle_held_by_hour_of_week == pytest.approx(expected)
    cluster = report.cluster.idle_held_by_hour_of_week
    assert cluster is not None
    by_team = [team.idle_held_by_hour_of_week or () for team in report.teams]
    assert cluster == pytest.approx([sum(values) for values in zip(*by_team, strict=True)])


def test_the_window_starts_in_its_local_hour_of_week() -> None:
    report = _report(30, "Europe/Berlin")
    web = next(team for team in report.teams if team.name == "web")
    assert web.idle_held_by_hour_of_week is not None
    # the window starts Saturday 2026-10-03 18:00 UTC, 20:00 in Berlin; the notebook idles in its first hour
    assert [slot for slot, value in enumerate(web.idle_held_by_hour_of_week) if value][:2] == [5 * 24 + 20, 5 * 24 + 23]


def test_without_utilization_series_the_heat_map_figure_is_missing() -> None:
    report = _report(3)
    gpu = GpuMeasurements("test", {"ml": (1.0, 1.0, 1.0)}, None, None, None, None)
    bare = build_report(
        Measurements(3, gpu, None),
        window=report.window,
        thresholds=Thresholds(),
        price=parse_price("2"),
        namespace_queues={},
    )
    assert bare.cluster.idle_held_by_hour_of_week is None
    assert [team.idle_held_by_hour_of_week for team in bare.teams] == [None]
    page = html_file.render(bare)
    assert "GPU-hours held idle by hour of week, all teams: missing data (no utilization series)" in page


@pytest.mark.parametrize(("hours", "timezone"), [(30, "Europe/Berlin"), (8 * 24, "UTC")])
def test_the_heat_maps_cells_are_labelled_and_sum_to_the_idle_gpu_hours(hours: int, timezone: str) -> None:
    report = _report(hours, timezone)
    slots = report.cluster.idle_held_by_hour_of_week
    assert slots is not None
    svg = svg_charts.idle_held_by_hour_of_week(slots, report.window, "all teams")
    assert svg is not None
    cells = _cells(svg)
    assert set(cells) == {slot for slot, value in enumerate(slots) if value > 0}
    # each label is its slot's GPU-hours to 2 significant digits or 0.05
    for slot, text in cells.items():
        assert float(text) == pytest.approx(slots[slot], rel=0.05, abs=0.05), slot
    assert sum(float(text) for text in cells.values()) == pytest.approx(sum(slots), rel=0.02)
    texts = _text_elements(svg)
    assert f"GPU-hours held idle by hour of week, all teams: {sum(slots):,.1f} in all" in " ".join(texts)
    assert [t for t in texts if t in svg_charts._DAYS] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert ("grey: hours the window does not cover" in " ".join(texts)) is (hours < 168)


def test_a_page_draws_the_cluster_and_each_idle_teams_heat_map() -> None:
    report = _report(30)
    page = html_file.render(report)
    ids = re.findall(r'<figure class="chart" id="([^"]+)"><svg\b', page)
    assert {"idle-hour-of-week", "idle-hour-of-week-team-0", "idle-hour-of-week-team-1"} <= set(ids)
    assert f'data-charts="{len(ids)}"' in page


def _with_levers(report: Report, team_levers: dict[str, tuple[Lever, ...]], own: tuple[Lever, ...] = ()) -> Report:
    teams = tuple(replace(team, levers=team_levers.get(team.name, ())) for team in report.teams)
    cluster = replace(
        report.cluster, levers=tuple(cluster_levers([(team.name, team.levers) for team in teams], extra=own))
    )
    return replace(report, teams=teams, cluster=cluster)


ITEMS = tuple(LeverItem("web", f"notebook-{i}", 13.0 - i, 26.0 - 2 * i, "idle all night") for i in range(13))
LEVERS = {
    "ml": (
        Lever("stop idle holders", 10.0, "idle", dollars=20.0, dollars_per_month=1000.0),
        Lever("right-sizing", 5.0, "too big", dollars=8.0, dollars_per_month=400.0, effort=Effort.FLAVOR),
    ),
    "web": (
        Lever("stop idle holders", 4.0, "idle", dollars=5.0, dollars_per_month=250.0, items=ITEMS),
        Lever("spot flavor", None, "interruptible", missing="the spot price"),
    ),
}
COMMITMENT = Lever("commitments", 100.0, "floor", dollars=60.0, dollars_per_month=3000.0, effort=Effort.CONTRACT)


def test_the_levers_chart_has_one_bar_per_priced_lever_labelled_in_dollars() -> None:
    report = _with_levers(_report(30), LEVERS, own=(COMMITMENT,))
    svg = svg_charts.levers_by_team(report)
    assert svg is not None
    texts = _texts(svg)
    totals = [text for text in texts if text.endswith("/ month")]
    assert totals == ["$3,000 / month", "$1,250 / month", "$400 / month"], "ranked, one per priced lever"
    # the teams' segments and the cluster's own lever, in dollars, named where the name fits
    assert {"ml $1,000", "ml $400", "cluster-wide $3,000"} <= set(texts)
    assert "$250" in texts or "web $250" in texts
    assert {"ml", "web", "cluster-wide"} <= set(texts), "the legend"
    assert {"effort: a contract", "effort: a setting", "effort: a new flavor"} <= set(texts)
    # the unpriced lever is listed with what it misses, never drawn as $0
    assert "not priced (missing: the spot price)" in texts
    assert not [text for text in texts if re.fullmatch(r".+ \$0|\$0 / month", text)]


def test_the_levers_chart_names_the_largest_teams_and_groups_the_rest() -> None:
    many = {f"t{i}": (Lever("stop idle holders", 1.0, "idle", dollars_per_month=100.0 + i),) for i in range(12)}
    report = _report(3)
    report = replace(report, teams=tuple(replace(report.teams[0], name=name) for name in many))
    svg = svg_charts.levers_by_team(_with_levers(report, many))
    assert svg is not None
    texts = _texts(svg)
    legend = [text for text in texts if re.fullmatch(r"t\d+|other teams", text)]
    assert legend == [f"t{i}" for i in range(11, 3, -1)] + ["other teams"]


def test_the_page_tables_each_teams_levers_with_the_items_behind_them() -> None:
    page = html_file.render(_with_levers(_report(30), LEVERS, own=(COMMITMENT,)))
    web = page[page.index("<summary>web - ") :]
    web = web[: web.index("</details>", web.index("Behind stop idle holders"))]
    rows = re.findall(r"<tr><td>(\d+)</td><td><strong>([^<]+)</strong></td><td[^>]*>([^<]+)</td>", web)
    assert rows == [("1", "stop idle holders", "$250"), ("2", "spot flavor", "missing data")]
    assert '<span class="missing">missing: the spot price</span>' in web
    assert "<summary>Behind stop idle holders: 13 pods or Workloads</summary>" in web
    listed = re.findall(r"<td>notebook-(\d+)</td>", web)
    assert listed == [str(i) for i in range(10)]
    assert "... and 3 more (report.json lists them all)." in web
    cluster = page[page.index("<h3>Levers, ranked by dollars per month</h3>") : page.index("<h2>Charts</h2>")]
    assert '<figure class="chart" id="levers"><svg' in cluster
    assert re.findall(r"<tr><td>\d+</td><td><strong>([^<]+)</strong>", cluster) == [
        "commitments",
        "stop idle holders",
        "right-sizing",
        "spot flavor",
    ]


def test_no_levers_no_chart_and_a_sentence_saying_so() -> None:
    report = _with_levers(_report(30), {})
    assert dict((cid, svg) for cid, _, svg in svg_charts.all_charts(report))["levers"] is None
    page = html_file.render(report)
    assert "<p>No lever applies: no team's figures point to one.</p>" in page
    assert 'id="levers"' not in page


def test_levers_without_dollars_are_tabled_but_not_charted() -> None:
    report = _with_levers(_report(30), {"web": LEVERS["web"][1:]})
    assert svg_charts.levers_by_team(report) is None
    page = html_file.render(report)
    assert "<p>No lever has dollars to chart: the table says what each lacks.</p>" in page
    assert 'id="levers"' not in page and "<strong>spot flavor</strong>" in page
