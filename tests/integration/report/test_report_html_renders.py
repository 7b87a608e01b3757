"""report.html renders in headless Chromium (Debian's ``chromium``) without script errors, charts included, and
its screenshot is a drawn page."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import numpy
import pytest

from tests.integration.report.conftest import ReportRun

pytestmark = pytest.mark.integration

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)
# the charts of the synthetic week: its levers (priced at p5.48xlarge), idle holders of the cluster and of its
# one idle team (inference, the second of applied-ml, inference, research), and the six others
CHARTS = {
    "levers",
    "idle-hour-of-week",
    "idle-hour-of-week-team-1",
    "utilization-hour-of-week",
    "wait-distribution",
    "allocated-used",
    "quadrant",
    "utilization-trend",
    "wait-trend",
}
SCREEN = (1280, 4000)


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium not found: install the Debian package with 'apt-get install -y chromium'")
    return found


def _console_lines(stderr: str) -> list[str]:
    """What the page wrote to the console: Chromium logs it at INFO whatever its level (console.error too), and
    the page itself writes nothing, so any line is an error or a refused load."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _chromium_run(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [_chromium(), *_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert not _console_lines(completed.stderr), _console_lines(completed.stderr)
    return completed


def test_html_is_self_contained_and_its_check_script_passes(synthetic_week_report: ReportRun, tmp_path: Path) -> None:
    page = synthetic_week_report.out / "report.html"
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']https?://""", text), "the page must not load anything"
    charts = dict(re.findall(r'<figure class="chart" id="([^"]+)">(<svg\b.*?</svg>)', text, re.DOTALL))
    assert set(charts) == CHARTS
    for chart_id, svg in charts.items():
        assert "mathdefault" not in svg, "tick labels as text, never TeX source"
        assert "$" not in svg or chart_id == "levers", "no TeX: only the levers chart's dollars have a '$'"
    dom = _chromium_run("--dump-dom", page.as_uri(), profile=tmp_path / "profile").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None, dom[:500]
    # the page's script counted the charts drawn and recorded it on the body, out of the reader's sight
    assert 'data-render-check="ok"' in body.group(0), body.group(0)
    drawn = f'data-charts="{len(CHARTS)}"', f'data-charts-drawn="{len(CHARTS)}"'
    assert all(attribute in body.group(0) for attribute in drawn), body.group(0)
    figures = re.findall(r'<figure class="chart" id="([^"]+)"><svg\b', dom)
    assert sorted(figures) == sorted(CHARTS)
    assert "charts rendered" not in dom and "not checked" not in dom, "no check result is written for the reader"


def test_a_screenshot_of_the_page_is_drawn(synthetic_week_report: ReportRun, tmp_path: Path) -> None:
    page = synthetic_week_report.out / "report.html"
    shot = tmp_path / "report.png"
    width, height = SCREEN
    _chromium_run(f"--screenshot={shot}", f"--window-size={width},{height}", page.as_uri(), profile=tmp_path / "p")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(shot)[:, :, :3]
    assert pixels.shape == (height, width, 3)
    # a drawn page: ink on white all the way down (the charts run past the screen's height), in many colours
    for band in numpy.array_split(pixels, 4):
        assert band.std() > 0.05, "a blank band"
    colours = numpy.unique((pixels * 255).round().astype(numpy.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 200, len(colours)
