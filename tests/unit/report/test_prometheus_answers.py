"""Malformed Prometheus answers, from a fake Prometheus on loopback: each is exit 3 with one line naming the
query and what was wrong, never a traceback; NaN where a figure may lack data is "no data", said in a note."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kuota.report.sources import prometheus_api
from tests.unit.report.conftest import Answer, every_series_present, matrix, run_report, serving, vector

PRESENCE = "count(count_over_time("
BUCKETS = "increase(kueue_admission_wait_time_seconds_bucket"


def _on(marker: str, path_end: str, answer: tuple[int, bytes] | str) -> Answer:
    """``answer`` for the queries holding ``marker`` on ``path_end``; every series present otherwise."""

    def respond(path: str, query: str) -> tuple[int, bytes] | str:
        return answer if marker in query and path.endswith(path_end) else every_series_present(path, query)

    return respond


def _success(data: object) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


MALFORMED = {
    "result-not-a-list": (
        _on(PRESENCE, "/query", (200, _success({"resultType": "vector", "result": {"a": 1}}))),
        "'result' a dict {'a': 1}, not a list of series",
    ),
    "value-not-a-number": (
        _on(PRESENCE, "/query", (200, vector(({}, "many")))),
        "series 0: value 'many', not a number",
    ),
    "value-not-a-string": (
        _on(PRESENCE, "/query", (200, _success({"resultType": "vector", "result": [{"metric": {}, "value": [1, 2]}]}))),
        'series 0: value 2, not a string such as "1.5"',
    ),
    "value-pair-missing": (
        _on(PRESENCE, "/query", (200, _success({"resultType": "vector", "result": [{"metric": {}}]}))),
        "series 0 without 'value'",
    ),
    "values-missing": (
        _on("namespace", "/query_range", (200, _success({"resultType": "matrix", "result": [{"metric": {}}]}))),
        "series 0's 'values' missing, not a list of [time, \"value\"] pairs",
    ),
    "time-not-a-number": (
        _on(
            "namespace",
            "/query_range",
            (200, _success({"resultType": "matrix", "result": [{"metric": {}, "values": [["t", "1"]]}]})),
        ),
        "series 0 point 0: time 't', not Unix seconds",
    ),
    "labels-not-strings": (
        _on(
            PRESENCE,
            "/query",
            (200, _success({"resultType": "vector", "result": [{"metric": {"a": 1}, "value": [1, "1"]}]})),
        ),
        "series 0's label value 1, not a string",
    ),
    "wrong-result-type": (
        _on(PRESENCE, "/query", (200, _success({"resultType": "string", "result": [1, "x"]}))),
        "resultType 'string', not vector or scalar",
    ),
    "scalar-not-a-pair": (
        _on(PRESENCE, "/query", (200, _success({"resultType": "scalar", "result": "7"}))),
        "series 0: a str '7', not a [time, \"value\"] pair",
    ),
    "no-data": (
        _on(PRESENCE, "/query", (200, b'{"status": "success"}')),
        "'data' missing, not an object",
    ),
    "not-json": (
        _on(PRESENCE, "/query", (200, b"<html>\n<body>Grafana</body>\n</html>")),
        "something that is not a JSON object (<html> <body>Grafana</body> </html>)",
    ),
    "deep-nesting": (
        _on(PRESENCE, "/query", (200, b"[" * 200_000)),
        "something that is not a JSON object",
    ),
    "nan-literal": (
        _on(PRESENCE, "/query", (200, b'{"status": "success", "data": NaN}')),
        "something that is not a JSON object",
    ),
    "huge-value": (
        _on(PRESENCE, "/query", (200, vector(({}, "1e300")))),
        "value '1e300', beyond any figure the report reads (1e-200 to 1e+15)",
    ),
    "nan-count": (
        _on(PRESENCE, "/query", (200, vector(({}, "NaN")))),
        "answered NaN for presence.",
    ),
    "infinite-gauge": (
        _on("kuota_gpu_allocated{", "/query_range", (200, matrix(({"namespace": "ml"}, ["1", "+Inf", "1"])))),
        "answered +Inf for pod_allocated_hourly",
    ),
    "bucket-without-bound": (
        _on(BUCKETS, "/query", (200, vector(({"cluster_queue": "a", "le": "soon"}, "1")))),
        "a series with le='soon', not a bucket bound for wait_buckets",
    ),
    "multi-line-error": (
        _on(PRESENCE, "/query", (503, b'{"status": "error", "errorType": "internal", "error": "disk\\nfull\\n"}')),
        "answered HTTP 503 for query",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_answer_is_exit_3_with_one_line_naming_the_query_and_the_fault(case: str, tmp_path: Path) -> None:
    answer, fault = MALFORMED[case]
    with serving(answer) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 3, run.stderr
    line = run.assert_one_error_line()
    assert fault in line
    assert "query '" in line or "(query '" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "chunked"])
def test_an_answer_over_the_size_limit_is_refused_while_it_is_read(
    streamed: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(prometheus_api, "MAX_ANSWER_BYTES", 4096)
    big = "stream" if streamed else (200, b" " * 10_000 + vector())
    with serving(_on(PRESENCE, "/query", big)) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 3, run.stderr
    assert "with more than 4096 bytes, more than the report reads for one query" in run.assert_one_error_line()


def test_an_unreachable_prometheus_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = run_report("--prometheus", f"http://127.0.0.1:{port}", out=tmp_path / "out")
    assert run.exit_code == 3
    line = run.assert_one_error_line()
    assert f"Prometheus at http://127.0.0.1:{port} did not answer" in line
    assert "check --prometheus and that the server is up" in line


def test_a_prometheus_that_never_answers_times_out_naming_the_query(tmp_path: Path) -> None:
    with serving(_on(PRESENCE, "/query", "hang")) as prometheus:
        run = run_report("--prometheus", prometheus.url, "--timeout", "0.5", out=tmp_path / "out")
    assert run.exit_code == 3
    line = run.assert_one_error_line()
    assert "did not answer query 'count(count_over_time(" in line and "within 0.5 s" in line


def test_a_url_that_is_not_http_is_bad_input_before_any_query(tmp_path: Path) -> None:
    run = run_report("--prometheus", "ftp://prometheus:9090", out=tmp_path / "out")
    assert run.exit_code == 2
    assert "--prometheus 'ftp://prometheus:9090' is not an http(s) URL" in run.assert_one_error_line()


def test_nan_in_gpu_hours_is_no_data_for_that_hour_and_said_in_a_note(tmp_path: Path) -> None:
    allocated = (200, matrix(({"namespace": "ml"}, ["NaN", "1", "2"])))
    with serving(_on("kuota_gpu_allocated{", "/query_range", allocated)) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 0, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    ml = next(team for team in report["teams"] if team["name"] == "ml")
    assert ml["utilization"]["allocated_gpu_hours"] == 3.0
    assert "Prometheus answered NaN for 1 point(s) of pod_allocated_hourly: they count as no data." in (report["notes"])
