"""report.html renders in headless Chromium (Debian's ``chromium``) without script errors, charts included."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

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


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium not found: install the Debian package with 'apt-get install -y chromium'")
    return found


def test_html_is_self_contained_and_its_check_script_passes(synthetic_week_report: ReportRun, tmp_path: Path) -> None:
    page = synthetic_week_report.out / "report.html"
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']https?://""", text), "the page must not load anything"
    assert text.count("<svg") >= 6
    for svg in re.findall(r"<svg\b.*?</svg>", text, re.DOTALL):
        assert "$" not in svg and "mathdefault" not in svg, "tick labels as text, never TeX source"
    completed = subprocess.run(
        [_chromium(), *_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    dom = completed.stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None, dom[:500]
    # the page's script counted the charts drawn and recorded it on the body, out of the reader's sight
    assert 'data-render-check="ok"' in body.group(0), body.group(0)
    assert 'data-charts="6"' in body.group(0) and 'data-charts-drawn="6"' in body.group(0), body.group(0)
    figures = re.findall(r'<figure class="chart" id="([^"]+)"><svg\b', dom)
    assert len(figures) == 6, ("the four charts and the two daily trends", figures)
    assert "charts rendered" not in dom and "not checked" not in dom, "no check result is written for the reader"
    console_errors = [
        line
        for line in completed.stderr.splitlines()
        if "CONSOLE" in line and ("Uncaught" in line or ":ERROR:" in line)
    ]
    assert not console_errors, console_errors
