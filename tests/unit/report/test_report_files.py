"""The three files: label values escaped in report.md and drawn as text in the charts; written whole or not
at all, never through a symlink; and flags that would put NaN or infinity into a figure refused up front."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
from pathlib import Path

import markdown_it
import pytest

from kuota.report.writers.markdown_file import markdown_text
from tests.unit.report.conftest import every_series_present, matrix, run_report, serving

HOSTILE = (
    "<script>alert(1)</script>",
    "<svg onload=alert(1)>",
    "[x](javascript:alert(1))",
    "![i](http://evil/x.png)",
    "$\\foo{$",
    "a|b\n# not a heading",
    "*bold* _it_ `code` ~~s~~ &amp;",
)


def _hostile_namespaces(path: str, query: str) -> tuple[int, bytes]:
    """GPU-hours for namespaces named to break Markdown, HTML and matplotlib's math text."""
    if path.endswith("/query_range") and query.startswith("sum_over_time((sum by (namespace, pod, modelName)"):
        return 200, matrix(*(({"namespace": name, "pod": f"{name}-0"}, ["2", "1", "4"]) for name in HOSTILE))
    return every_series_present(path, query)


def test_markdown_text_escapes_markup_and_keeps_a_label_on_one_line() -> None:
    assert markdown_text("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert markdown_text("[x](javascript:alert(1))") == "\\[x\\](javascript:alert(1))"
    assert markdown_text("a|b\n# c") == "a\\|b\ufffd# c"
    assert markdown_text("\\*_`~$+-!&") == "\\\\\\*\\_\\`\\~\\$+-!&amp;"
    assert markdown_text("# team-ml.research (gpu)") == "\\# team-ml.research (gpu)", "the raw file reads as it renders"
    assert markdown_text("-a") == "\\-a" and markdown_text("+a") == "\\+a"
    assert markdown_text("\u202eevil") == "\ufffdevil"


def test_label_values_are_escaped_in_report_md_and_drawn_as_text_in_report_html(tmp_path: Path) -> None:
    with serving(_hostile_namespaces) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 0, run.stderr
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    for raw in ("<script", "<svg", "\n# not a heading"):
        assert raw not in markdown
    assert not re.search(r"(?<!\\)\]\((javascript|http://evil)", markdown), "a link can form only after an unescaped ]"
    for name in HOSTILE:
        assert f"### {markdown_text(name)}\n" in markdown
        assert f"| {markdown_text(name)} | {markdown_text(name)} |" in markdown
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert page.count("<script>") == 1, "only the page's own render check"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<!-- $\\foo{$ -->" in page, "matplotlib draws the label's characters, not TeX"
    assert 'data-charts="4"' in page and page.count('<figure class="chart"') == 4  # with the utilization trend


def test_report_md_renders_label_values_as_their_characters(tmp_path: Path) -> None:
    with serving(_hostile_namespaces) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 0, run.stderr
    rendered = (
        markdown_it.MarkdownIt("commonmark", {"html": True})
        .enable("table")
        .render((tmp_path / "out" / "report.md").read_text(encoding="utf-8"))
    )
    for markup in ("<script", "<svg", "<a ", "<em>", "<strong>bold", "<code>code", "<s>", "<h1>not"):
        assert markup not in rendered
    # the report's own trend charts are its only images
    assert re.findall(r"<img [^>]*>", rendered) == [
        '<img src="utilization-trend.svg" alt="Daily GPU utilization: the cluster (of capacity) and the largest '
        'teams (of allocated GPUs)" />'
    ]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert "[x](javascript:alert(1))" in rendered


def test_a_symlink_at_a_final_name_is_replaced_never_followed(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "kept.md").write_text("not the report's\n", encoding="utf-8")
    (out / "report.md").symlink_to(elsewhere / "kept.md")
    (out / "report.html").symlink_to(elsewhere / "created.html")  # dangling: must not create its target
    with serving(every_series_present) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=out)
    assert run.exit_code == 0, run.stderr
    assert (elsewhere / "kept.md").read_text(encoding="utf-8") == "not the report's\n"
    assert not (elsewhere / "created.html").exists()
    for name in ("report.json", "report.md", "report.html", "report.csv"):
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert sorted(p.name for p in out.iterdir()) == ["report.csv", "report.html", "report.json", "report.md"]


def test_a_failed_write_leaves_the_previous_report_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    with serving(every_series_present) as prometheus:
        assert run_report("--prometheus", prometheus.url, out=out).exit_code == 0
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        synced: list[int] = []
        real_fsync = os.fsync

        def full_on_the_last_file(descriptor: int) -> None:
            synced.append(descriptor)
            if len(synced) == 4:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(descriptor)

        monkeypatch.setattr(os, "fsync", full_on_the_last_file)
        run = run_report("--prometheus", prometheus.url, "--price", "9", out=out)
    assert run.exit_code == 2
    assert f"--out {out}: the report cannot be written: [Errno 28] No space left on device" in (
        run.assert_one_error_line()
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before, "no file replaced, no temporary file left"


def test_a_dangling_symlink_as_out_is_refused_without_creating_its_target(tmp_path: Path) -> None:
    (tmp_path / "out").symlink_to(tmp_path / "nowhere")
    with serving(every_series_present) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 2
    assert f"--out {tmp_path / 'out'} cannot be created" in run.assert_one_error_line()
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("flags", "fault"),
    [
        (["--price", "nan"], "--price 'nan' is not dollars per GPU-hour from 0 to 1,000,000"),
        (["--price", "inf"], "--price 'inf' is not dollars per GPU-hour"),
        (["--price", "-1"], "--price '-1' is not dollars per GPU-hour"),
        (["--low-utilization", "nan"], "--low-utilization nan must be a number from 0 to 100"),
        (["--idle-percent", "inf"], "--idle-percent inf must be a number from 0 to 100"),
        (["--idle-holder-hours", "nan"], "--idle-holder-hours nan must be a number from 0 to 8784"),
        (["--timeout", "nan"], "--timeout nan must be a number above 0 to 86400"),
        (["--timeout", "0"], "--timeout 0 must be a number above 0"),
        (["--end", "9" * 30], "is past any date a clock can give"),
        (["--long-wait", "9" * 400 + "s"], "is not a whole number of seconds from 1s to 100 years"),
        (["--window", "400d"], "--window 400 days is longer than 366 days"),
        (["--more-gpus", str(10**12)], "--more-gpus must be from 1 to 1000000"),
    ],
)
def test_flags_that_would_make_a_figure_nan_or_infinite_are_refused(
    flags: list[str], fault: str, tmp_path: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        unanswered = f"http://127.0.0.1:{sock.getsockname()[1]}"
    run = run_report("--prometheus", unanswered, *flags, out=tmp_path / "out")
    assert run.exit_code == 2, run.stderr
    assert fault in run.assert_one_error_line()


def test_report_json_is_strict_json_when_prometheus_answers_nan(tmp_path: Path) -> None:
    def nan_everywhere(path: str, query: str) -> tuple[int, bytes]:
        # a histogram's buckets are counts, where NaN is an error (test_prometheus_answers)
        if path.endswith("/query_range") and "_bucket" not in query:
            return 200, matrix(({"namespace": "ml", "cluster_queue": "q", "pod": "p"}, ["NaN", "NaN", "1"]))
        return every_series_present(path, query)

    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in report.json")

    with serving(nan_everywhere) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 0, run.stderr
    json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"), parse_constant=refuse)
