"""Prices per flavor and GPU model, money per team and namespace, report.csv, the daily trends and --previous,
through the real ``kuota report`` against a fake Prometheus (whose answers are hand-made, so the truth is known).

The fake week (3 hours): namespace ``ml`` (LocalQueue to ClusterQueue ``team-ml``) holds 4 H100s at 50% and 1
A100 at 100% every hour; namespace ``web`` (no queue) holds 2 A100s, idle. ``team-ml``'s GPU quota usage is 3
GPUs in flavor ``spot`` and 1 in ``on-demand`` each hour, so its GPU-hours are 3/4 ``spot`` and 1/4
``on-demand``. ``web``'s 2 A100s are held by one pod, ``web-0``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from kuota.report.errors import ReportInputError
from kuota.report.figures.prices import PRESETS, parse_price, parse_prices
from kuota.report.writers.csv_file import COLUMNS
from kuota.report.writers.markdown_file import markdown_text
from tests.unit.report.conftest import Answer, ReportRun, every_series_present, matrix, run_report, serving

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
BUCKETS = "kueue_admission_wait_time_seconds_bucket"
QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: default, namespace: ml}
spec: {clusterQueue: team-ml}
"""
PRICES = ("--price", "2", "--price", "spot=1", "--price", f"{A100}=p4d.24xlarge")
A100_PRICE = 21.96 / 8
# team-ml's price of a GPU-hour: 3/4 at spot's, 1/4 at on-demand's (not named: the model's, else the default)
ML_H100_PRICE = 0.75 * 1 + 0.25 * 2
ML_A100_PRICE = 0.75 * 1 + 0.25 * A100_PRICE


def _series(*rows: tuple[dict[str, str], str]) -> bytes:
    return matrix(*((labels, [value] * 3) for labels, value in rows))


def week(namespaces: tuple[str, str] = ("ml", "web")) -> Answer:
    ml, web = namespaces

    def answer(path: str, query: str) -> tuple[int, bytes]:
        if path.endswith("/query_range"):
            if query.startswith("sum_over_time((sum by (namespace, modelName)") and "sm_utilization" in query:
                return 200, _series(
                    ({"namespace": ml, "modelName": H100}, "2"),
                    ({"namespace": ml, "modelName": A100}, "1"),
                    ({"namespace": web, "modelName": A100}, "0"),
                )
            if query.startswith("sum_over_time((sum by (namespace, pod, modelName)"):  # GPU-hours per pod
                return 200, _series(
                    ({"namespace": ml, "pod": "ml-0", "modelName": H100}, "3"),
                    ({"namespace": ml, "pod": "ml-1", "modelName": H100}, "1"),
                    ({"namespace": ml, "pod": "ml-1", "modelName": A100}, "1"),
                    ({"namespace": web, "pod": "web-0", "modelName": A100}, "2"),
                )
            if query.startswith("sum by (namespace, pod) ((avg_over_time"):  # idle-held GPU-hours per pod
                return 200, _series(({"namespace": web, "pod": "web-0"}, "2"))
            if "sum by (cluster_queue, flavor)" in query:
                return 200, _series(
                    ({"cluster_queue": "team-ml", "flavor": "spot"}, "3"),
                    ({"cluster_queue": "team-ml", "flavor": "on-demand"}, "1"),
                )
            if BUCKETS in query:  # one trend point (a 3 h window is shorter than a day): 10 admissions
                return 200, matrix(
                    *(({"cluster_queue": "team-ml", "le": le}, [count]) for le, count in (("60", "5"), ("+Inf", "10")))
                )
        return every_series_present(path, query)

    return answer


def _run(tmp_path: Path, *flags: str, answer: Answer | None = None, out: str = "out") -> ReportRun:
    config = tmp_path / "queues.yaml"
    config.write_text(QUEUES, encoding="utf-8")
    with serving(answer or week()) as prometheus:
        return run_report("--prometheus", prometheus.url, "--config", str(config), *flags, out=tmp_path / out)


def _json(run: ReportRun) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((run.out / "report.json").read_text(encoding="utf-8"))
    return body


def _by_name(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(item for item in items if item["name"] == name)
    return found


def _csv(run: ReportRun) -> tuple[list[str], dict[tuple[str, ...], dict[str, str]]]:
    reader = csv.DictReader(io.StringIO((run.out / "report.csv").read_text(encoding="utf-8"), newline=""))
    # lever rows are keyed by their team too: two teams can have the same lever
    rows = {(row["scope"], row["name"]) + (row["team"],) * (row["scope"] == "lever"): row for row in reader}
    return list(reader.fieldnames or []), rows


def test_the_presets_are_the_guides_prices_only() -> None:
    assert {name: (preset.gpus, preset.dollars_per_hour) for name, preset in PRESETS.items()} == {
        "p5.48xlarge": (8, 55.04),
        "p4d.24xlarge": (8, 21.96),
    }
    assert parse_price("p5.48xlarge").per_gpu_hour == pytest.approx(6.88)


def test_named_prices_beside_the_default() -> None:
    table = parse_prices(["spot=1.5", f"{A100}=p4d.24xlarge"])
    assert table.default.per_gpu_hour == pytest.approx(55.04 / 8), "the default stays p5.48xlarge"
    assert table.of("spot", A100).per_gpu_hour == 1.5, "a flavor's price comes before its model's"
    assert table.of("on-demand", A100).per_gpu_hour == pytest.approx(A100_PRICE)
    assert table.of(None, H100) is table.default
    assert parse_prices(["3", "a=b=4"]).named["a=b"].per_gpu_hour == 4, "a name may hold '='; the price may not"


@pytest.mark.parametrize(
    ("flags", "fault"),
    [
        (["2", "3"], "--price '3': the default price is given twice"),
        (["a=1", "a=2"], "--price 'a=2': 'a' has a price already"),
        (["=1"], "needs a ResourceFlavor or GPU model name of 1 to 253 printable characters"),
        (["x" * 300 + "=1"], "needs a ResourceFlavor or GPU model name"),
        (["spot\n=1"], "needs a ResourceFlavor or GPU model name"),
        (["spot=cheap"], "--price 'cheap' is neither dollars per GPU-hour"),
        (["spot=-1"], "--price '-1' is not dollars per GPU-hour"),
    ],
)
def test_bad_prices_are_one_line_naming_the_flag(flags: list[str], fault: str) -> None:
    with pytest.raises(ReportInputError) as raised:
        parse_prices(flags)
    assert fault in str(raised.value)


def test_money_per_team_and_namespace_prices_each_gpu_hour_by_flavor_then_model_then_default(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path, *PRICES)
    assert run.exit_code == 0, run.stderr
    report = _json(run)
    ml = _by_name(report["namespaces"], "ml")
    assert ml["team"] == "team-ml"
    assert ml["gpu_models"] == {A100: pytest.approx(3), H100: pytest.approx(12)}
    allocated = 12 * ML_H100_PRICE + 3 * ML_A100_PRICE
    used = 6 * ML_H100_PRICE + 3 * ML_A100_PRICE
    assert ml["money"]["allocated_dollars"] == pytest.approx(allocated)
    assert ml["money"]["used_dollars"] == pytest.approx(used)
    assert ml["money"]["idle_dollars"] == pytest.approx(allocated - used)
    assert ml["money"]["price_per_gpu_hour"] == pytest.approx(allocated / 15)
    web = _by_name(report["namespaces"], "web")
    assert web["money"]["allocated_dollars"] == pytest.approx(6 * A100_PRICE), "no queue, no flavor: the model's price"
    assert web["money"]["used_dollars"] == 0
    assert web["money"]["priced_by"] == [f"{A100}: p4d.24xlarge ($21.96/h on demand for 8 GPUs)"]
    team = _by_name(report["teams"], "team-ml")
    assert team["money"] == ml["money"], "a team of one namespace costs what its namespace does"
    cluster = report["cluster"]["money"]
    assert cluster["allocated_dollars"] == pytest.approx(allocated + 6 * A100_PRICE)
    assert cluster["idle_dollars"] == pytest.approx(allocated - used + 6 * A100_PRICE)
    assert report["prices"]["default"]["per_gpu_hour"] == 2
    assert set(report["prices"]["named"]) == {"spot", A100}


def test_without_named_prices_every_gpu_hour_costs_the_default(tmp_path: Path) -> None:
    run = _run(tmp_path, "--price", "p5.48xlarge")
    assert run.exit_code == 0, run.stderr
    report = _json(run)
    assert report["cluster"]["money"]["allocated_dollars"] == pytest.approx(21 * 55.04 / 8)
    assert report["price"]["per_gpu_hour"] == pytest.approx(55.04 / 8), "the field of earlier reports stays"


def test_report_csv_has_the_documented_columns_and_a_row_per_team_and_namespace(tmp_path: Path) -> None:
    run = _run(tmp_path, *PRICES)
    assert run.exit_code == 0, run.stderr
    header, rows = _csv(run)
    assert header == list(COLUMNS)
    report = _json(run)
    levers = {("lever", lv["name"], "") for lv in report["cluster"]["levers"]} | {
        ("lever", lv["name"], team["name"]) for team in report["teams"] for lv in team["levers"]
    }
    assert levers and {key for key in rows if key[0] == "lever"} == levers
    for scope, name, team in levers:
        source = _by_name(report["cluster"]["levers"] if not team else _by_name(report["teams"], team)["levers"], name)
        row = rows[(scope, name, team)]
        if source["dollars_per_month"] is None:
            assert (row["lever_dollars_per_month"], row["lever_missing"]) == ("", source["missing"])
        else:
            assert float(row["lever_dollars_per_month"]) == pytest.approx(source["dollars_per_month"], abs=1e-4)
        assert (row["lever_effort"], row["allocated_gpu_hours"]) == (source["effort"], "")
    assert {key for key in rows if key[0] != "lever"} == {
        ("cluster", "cluster"),
        ("team", "team-ml"),
        ("team", "web"),
        ("namespace", "ml"),
        ("namespace", "web"),
    }
    for (scope, name, *_), row in rows.items():
        if scope in ("cluster", "lever"):
            continue
        source = _by_name(report["teams" if scope == "team" else "namespaces"], name)
        for column in ("allocated_dollars", "used_dollars", "idle_dollars"):
            assert float(row[column]) == pytest.approx(source["money"][column], abs=1e-4), (name, column)
    ml = rows[("namespace", "ml")]
    assert (ml["team"], float(ml["allocated_gpu_hours"]), float(ml["utilization_percent"])) == ("team-ml", 15, 60)
    assert rows[("team", "web")]["wait_p95_s"] == "", "missing is empty, never 0"
    assert rows[("team", "team-ml")]["verdict"] == _by_name(report["teams"], "team-ml")["verdict"]["quadrant"]
    assert float(rows[("cluster", "cluster")]["allocated_gpu_hours"]) == 21


def test_names_that_start_a_formula_are_written_as_text_in_report_csv(tmp_path: Path) -> None:
    hostile = ('=HYPERLINK("http://evil")', "@SUM(A1)")
    run = _run(tmp_path, answer=week(hostile))
    assert run.exit_code == 0, run.stderr
    cells = list(csv.reader(io.StringIO((run.out / "report.csv").read_text(encoding="utf-8"), newline="")))
    for name in hostile:
        assert any(row[1] == "'" + name for row in cells if row[0] == "namespace"), name
    assert not any(cell.startswith(("=", "@", "+")) for row in cells for cell in row)


def test_namespace_names_are_escaped_in_the_namespace_tables(tmp_path: Path) -> None:
    hostile = ("<script>alert(1)</script>", "a|b\n# heading")
    run = _run(tmp_path, answer=week(hostile))
    assert run.exit_code == 0, run.stderr
    markdown = (run.out / "report.md").read_text(encoding="utf-8")
    assert "<script" not in markdown and "\n# heading" not in markdown
    for name in hostile:
        assert f"| {markdown_text(name)} | {markdown_text(name)} | NVIDIA A100-SXM4-80GB " in markdown
    page = (run.out / "report.html").read_text(encoding="utf-8")
    assert page.count("<script>") == 1 and "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in page


def test_daily_trends_are_drawn_in_report_html_and_written_as_svg_files_report_md_links(tmp_path: Path) -> None:
    run = _run(tmp_path, *PRICES)
    assert run.exit_code == 0, run.stderr
    markdown = (run.out / "report.md").read_text(encoding="utf-8")
    page = (run.out / "report.html").read_text(encoding="utf-8")
    for chart in ("utilization-trend", "wait-trend"):
        svg = (run.out / f"{chart}.svg").read_text(encoding="utf-8")
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
        assert f"]({chart}.svg)" in markdown
        assert f'<figure class="chart" id="{chart}">' in page
    drawn = page.count('<figure class="chart"')
    assert f'data-charts="{drawn}"' in page
    report = _json(run)
    daily = _by_name(report["teams"], "team-ml")["daily"]
    assert daily["utilization_percent"] == [pytest.approx(60)]
    assert daily["wait_p50_s"] == [pytest.approx(60)]  # the 5th of 10 admissions closes the 60 s bucket
    assert report["trend_day_ends"] == [report["window"]["end"]]


def test_a_trend_bucket_without_a_bound_names_the_query(tmp_path: Path) -> None:
    def no_bound(path: str, query: str) -> tuple[int, bytes]:
        if path.endswith("/query_range") and BUCKETS in query:
            return 200, matrix(({"cluster_queue": "team-ml"}, ["1"]))
        return every_series_present(path, query)

    run = _run(tmp_path, answer=no_bound)
    assert run.exit_code == 3
    assert "a series with no 'le' label for wait_buckets_daily" in run.assert_one_error_line()


def test_previous_report_gives_a_week_over_week_section(tmp_path: Path) -> None:
    first = _run(tmp_path, *PRICES, out="first")
    assert first.exit_code == 0, first.stderr
    previous = _json(first)
    ml = _by_name(previous["teams"], "team-ml")
    ml["utilization"]["average_percent"] = 80.0
    ml["verdict"]["quadrant"] = "buy"
    previous["teams"].append({**ml, "name": "<b>gone</b>"})
    (tmp_path / "previous.json").write_text(json.dumps(previous), encoding="utf-8")

    run = _run(tmp_path, *PRICES, "--previous", str(tmp_path / "previous.json"))
    assert run.exit_code == 0, run.stderr
    comparison = _json(run)["week_over_week"]
    now = _by_name(comparison["teams"], "team-ml")
    assert (now["utilization_before_percent"], now["utilization_now_percent"]) == (80, pytest.approx(60))
    assert (now["verdict_before"], now["verdict_now"]) == (
        "buy",
        _by_name(_json(run)["teams"], "team-ml")["verdict"]["quadrant"],
    )
    assert now["wait_p95_before_s"] == now["wait_p95_now_s"]
    gone = _by_name(comparison["teams"], "<b>gone</b>")
    assert gone["utilization_now_percent"] is None and gone["verdict_now"] is None
    assert comparison["cluster"]["utilization_before_percent"] == previous["cluster"]["utilization_average_percent"]
    markdown = (run.out / "report.md").read_text(encoding="utf-8")
    assert "## Week over week" in markdown
    assert "| team-ml | 80.0% / 60.0% |" in markdown
    assert f"| {markdown_text('<b>gone</b>')} |" in markdown and "<b>" not in markdown
    page = (run.out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Week over week</h2>" in page and "&lt;b&gt;gone&lt;/b&gt;" in page and "<b>gone" not in page


def _valid_previous() -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "window": {"start": 0, "end": 3600},
        "cluster": {"utilization_average_percent": 10},
        "teams": [{"name": "a", "utilization": {"average_percent": 5}, "verdict": {"quadrant": "tune"}}],
    }


def _changed(path: tuple[str | int, ...], value: object) -> bytes:
    body: Any = _valid_previous()
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("content", "fault"),
    [
        (b"{", "is not JSON"),
        (b'{"schemaVersion": NaN}', "is not JSON: NaN is not JSON"),
        (b"[" * 200_000 + b"]" * 200_000, "is not JSON: nested too deeply"),
        (b"\xff\xfe", "is not JSON"),
        (b"[]", "the document is [], not an object"),
        (_changed(("schemaVersion",), 2), "schemaVersion is 2, not 1"),
        (_changed(("schemaVersion",), True), "schemaVersion is True, not 1"),
        (_changed(("teams",), {"a": 1}), "teams is {'a': 1}, not a list"),
        (_changed(("teams", 0, "utilization", "average_percent"), "high"), "teams[0].utilization is 'high'"),
        (_changed(("teams", 0, "verdict"), "buy"), "teams[0].verdict is 'buy', not an object"),
        (_changed(("teams", 0, "name"), 7), "teams[0].name is 7, not a string"),
        (_changed(("teams", 0, "idle_cost"), {"dollars": {"night": "$3"}}), "teams[0].idle_cost.dollars.'night'"),
        (_changed(("window",), None), "window is None, not an object"),
        (_changed(("cluster", "utilization_average_percent"), 1e400), "is not JSON"),
    ],
)
def test_a_previous_report_of_another_shape_is_one_line_before_any_query(
    content: bytes, fault: str, tmp_path: Path
) -> None:
    previous = tmp_path / "previous.json"
    previous.write_bytes(content)
    with serving(week()) as prometheus:
        run = run_report("--prometheus", prometheus.url, "--previous", str(previous), out=tmp_path / "out")
        assert prometheus.queries == []
    assert run.exit_code == 2, run.stderr
    line = run.assert_one_error_line()
    assert f"--previous {previous}" in line and fault in line, line


def test_a_previous_report_that_repeats_a_team_or_is_too_large_or_missing_is_refused(tmp_path: Path) -> None:
    repeated = _valid_previous()
    repeated["teams"] = repeated["teams"] * 2
    cases = {
        "repeated.json": (json.dumps(repeated).encode(), "teams[1].name 'a' repeats an earlier team's"),
        "missing.json": (None, "cannot be read"),
        "large.json": (b"", "is larger than 64 MiB"),
    }
    for name, (content, fault) in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        if name == "large.json":
            with path.open("r+b") as file:
                file.truncate((64 << 20) + 1)  # sparse: costs no disk
        run = run_report("--prometheus", "http://127.0.0.1:9", "--previous", str(path), out=tmp_path / "out")
        assert run.exit_code == 2, run.stderr
        assert fault in run.assert_one_error_line(), name
