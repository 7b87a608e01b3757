"""report.html and its charts as a person reads them: waits on log axes labelled as durations (never TeX
source), no check output in the page, and every team on the verdict quadrant drawn with its verdict."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from kuota.report.figures.measurements import GpuMeasurements, Measurements, QueueMeasurements
from kuota.report.figures.prices import parse_price
from kuota.report.figures.schema import Report, WhatIfScenario
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import Quadrant, Thresholds
from kuota.report.figures.window import Window, WorkHours
from kuota.report.writers import html_file, svg_charts

END = int(datetime(2026, 10, 5, tzinfo=UTC).timestamp())
WINDOW = Window.build(2 * 3600, END, 60, WorkHours())
INF = float("inf")
# cumulative wait buckets: p95 about 3.7 h, far over the 30 min threshold
LONG_WAITS = ((60.0, 5.0), (3600.0, 10.0), (14400.0, 20.0), (INF, 20.0))
SHORT_WAITS = ((10.0, 10.0), (60.0, 20.0), (INF, 20.0))


def _report() -> Report:
    """Four teams, each in its own case:

    - ``busy-cured``: busy with a long queue ("buy" by its figures), but the what-if's borrowing cures it: tune;
    - ``busy-idle-elsewhere``: the same figures, but it waited while quota idled elsewhere: tune;
    - ``busy-buy``: the same figures, nothing cures it: buy;
    - ``quiet``: little used, short waits: over-provisioned.
    """
    teams = ("busy-cured", "busy-idle-elsewhere", "busy-buy", "quiet")
    gpu = GpuMeasurements(
        source="test",
        allocated={team: (4.0, 4.0) for team in teams},
        used={"busy-cured": (3.8, 3.8), "busy-idle-elsewhere": (3.6, 3.9), "busy-buy": (3.7, 3.7), "quiet": (0.4, 0.4)},
        idle_held=None,
        inventory=(16.0, 16.0),
        cluster_used=(11.5, 11.8),
    )
    waits = {team: LONG_WAITS for team in teams[:3]} | {"quiet": SHORT_WAITS}
    queues = QueueMeasurements(
        wait_buckets=waits,
        pending_average={team: 1.0 for team in teams},
        pending_max={team: 2.0 for team in teams},
        pending_hourly={},
        cohorts={},
        nominal={team: (4.0, 4.0) for team in teams},
        usage={},
        borrowed={},
        waiting_steps={team: 60.0 for team in teams[:3]},
        waiting_while_idle_steps={"busy-cured": 0.0, "busy-idle-elsewhere": 50.0, "busy-buy": 0.0},
        cluster_waiting_steps=60.0,
        cluster_waiting_while_idle_steps=50.0,
        queue_steps=120.0,
        cluster_unused_average=None,
        preemptions=None,
        evictions=None,
        wait_buckets_daily={team: (wait,) for team, wait in waits.items()},
    )
    borrowing = WhatIfScenario("borrowing", "borrowing", 100.0, 80.0, {"busy-cured": 120.0, "busy-buy": 7200.0})
    return build_report(
        Measurements(2, gpu, queues),
        window=WINDOW,
        thresholds=Thresholds(),
        price=parse_price("2"),
        namespace_queues={team: team for team in teams},
        whatif=[borrowing],
        trend_day_ends=(END,),
    )


@pytest.fixture(scope="module")
def report() -> Report:
    return _report()


@pytest.fixture(scope="module")
def charts(report: Report) -> dict[str, str]:
    drawn = {chart_id: svg for chart_id, _, svg in svg_charts.all_charts(report) if svg is not None}
    assert set(drawn) == {
        "levers",
        "utilization-hour-of-week",
        "wait-distribution",
        "allocated-used",
        "quadrant",
        "utilization-trend",
        "wait-trend",
    }
    return drawn


def _texts(svg: str) -> list[str]:
    """The texts matplotlib drew, in order: it writes each as a comment before the glyphs that draw it."""
    return re.findall(r"<!-- (.*?) -->", svg)


def test_the_report_holds_the_cases_the_chart_tests_read(report: Report) -> None:
    verdicts = {team.name: team.verdict.quadrant for team in report.teams}
    assert verdicts == {
        "busy-cured": Quadrant.TUNE,
        "busy-idle-elsewhere": Quadrant.TUNE,
        "busy-buy": Quadrant.BUY,
        "quiet": Quadrant.OVER_PROVISIONED,
    }


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.5, "0.5 s"),
        (30, "30 s"),
        (60, "1 min"),
        (90, "1.5 min"),
        (1800, "30 min"),
        (3600, "1 h"),
        (21600, "6 h"),
        (86400, "1 d"),
        (3 * 86400, "3 d"),
        (7 * 86400, "1 w"),
        (100_000, "1.16 d"),
    ],
)
def test_a_wait_is_labelled_as_people_say_it(seconds: float, text: str) -> None:
    assert svg_charts.duration_text(seconds) == text


def test_no_chart_holds_tex_source(charts: dict[str, str]) -> None:
    for chart_id, svg in charts.items():
        assert "mathdefault" not in svg, chart_id
        # the levers chart is in dollars: its "$" are drawn as they are, never read as TeX
        assert "$" not in svg or chart_id == "levers", chart_id
    assert any(text.endswith(" / month") and text.startswith("  $") for text in _texts(charts["levers"]))


@pytest.mark.parametrize("chart_id", ["wait-distribution", "quadrant", "wait-trend"])
def test_wait_axes_are_ticked_at_round_durations(charts: dict[str, str], chart_id: str) -> None:
    duration = re.compile(r"^\d+(\.\d+)? (s|min|h|d|w)$")
    ticks = [text for text in _texts(charts[chart_id]) if duration.match(text)]
    assert len(ticks) >= 2, _texts(charts[chart_id])
    assert "1 h" in ticks, ticks
    if chart_id != "quadrant":
        assert "long-wait threshold (30 min)" in _texts(charts[chart_id])


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (1, 100_000, ["1 s", "10 s", "1 min", "10 min", "1 h", "6 h", "1 d"]),
        (100, 20_000, ["5 min", "10 min", "30 min", "1 h", "3 h"]),
        (2000, 2500, ["34 min", "36 min", "38 min", "40 min"]),  # no round duration inside: round minutes
        (13_000, 14_000, ["3.7 h", "3.8 h"]),
    ],
)
def test_wait_ticks_are_round_durations_and_never_too_many(low: float, high: float, ticks: list[str]) -> None:
    found = svg_charts._DurationLocator().tick_values(low, high)
    assert [svg_charts.duration_text(seconds) for seconds in found] == ticks


def test_the_page_shows_no_check_output(report: Report) -> None:
    page = html_file.render(report)
    script = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert len(script) == 1
    for writes_text in ("textContent", "innerText", "innerHTML", "document.write", "createTextNode"):
        assert writes_text not in script[0]
    seen = re.sub(r"<script>.*?</script>|<svg\b.*?</svg>", "", page, flags=re.DOTALL)
    for debug in ("charts rendered", "not checked", "render-check"):
        assert debug not in seen
    body = re.search(r"<body[^>]*>", page)
    assert body is not None and body.group(0) == '<body data-charts="7">'
    assert page.count('<figure class="chart"') == 7


def test_every_quadrant_point_shows_its_verdict(charts: dict[str, str]) -> None:
    texts = _texts(charts["quadrant"])
    # the legend names each verdict drawn; the corners name the quadrants
    assert {"verdict: tune", "verdict: buy", "verdict: over-provisioned"} <= set(texts), texts
    assert "verdict: healthy" not in texts, "only the verdicts drawn"
    assert "cluster (verdict: tune)" in texts
    # a point whose verdict is not its quadrant says so and why; the others are just named
    assert "busy-cured (tune: borrowing fixes it in the what-if)" in texts
    assert "busy-idle-elsewhere (tune: idle quota elsewhere, borrow)" in texts
    assert "busy-buy" in texts and "quiet" in texts
    # tune and buy are drawn apart: their own colour and marker each
    assert "#10ac84" in charts["quadrant"] and "#ee5253" in charts["quadrant"]
