"""report.html as a person reads it: no check output in the page."""

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
from kuota.report.writers import html_file

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


def test_the_report_holds_the_cases_the_chart_tests_read(report: Report) -> None:
    verdicts = {team.name: team.verdict.quadrant for team in report.teams}
    assert verdicts == {
        "busy-cured": Quadrant.TUNE,
        "busy-idle-elsewhere": Quadrant.TUNE,
        "busy-buy": Quadrant.BUY,
        "quiet": Quadrant.OVER_PROVISIONED,
    }


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
    assert body is not None and body.group(0) == '<body data-charts="6">'
    assert page.count('<figure class="chart"') == 6
