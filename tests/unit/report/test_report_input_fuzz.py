"""Hostile inputs to the report's readers, generated: Prometheus answers (random JSON shapes, missing keys,
values that are not numbers, NaN, huge numbers, deep nesting) and ``--workloads`` dumps and items.

Rules: a reader raises nothing but the report's documented errors (``ReportError`` subclasses, see
``kuota.report.errors``); what it accepts yields finite figures (report.json is strict JSON, without NaN or
an infinity outside histogram bounds) and records ``kuota simulate`` replays; and each input is done within
``BOUND_S``, timed around the code under test only (Hypothesis' own generation is not counted).
"""

from __future__ import annotations

import asyncio
import gc
import html
import io
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import markdown_it
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.report.errors import PrometheusError, ReportInputError
from kuota.report.figures.prices import parse_price
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import Thresholds
from kuota.report.figures.window import Window, WorkHours
from kuota.report.sources.collection import collect
from kuota.report.sources.prometheus_api import PrometheusClient, answer_data, instant_samples, range_series
from kuota.report.sources.workload_dump import read_stream
from kuota.report.sources.workload_history import (
    NOT_A_WORKLOAD,
    job_history,
    read_workloads,
    with_known_priority_classes,
)
from kuota.report.writers import json_file, markdown_file
from kuota.report.writers.markdown_file import markdown_text
from kuota.simulator.workload_reading import convert_lines
from tests.examples import examples

# Generous for inputs of this size (a few kB; a typical one takes well under a millisecond, a whole
# collect-and-report a few milliseconds), and far below what a parse of unbounded cost would take.
BOUND_S = 0.05
END = 1_790_006_400
WINDOW = Window.build(3 * 3600, END, 60, WorkHours())
HOUR_ENDS = WINDOW.hour_ends()
URL = "http://prometheus.test"
FUZZ = settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
T = TypeVar("T")


def _timed(run: Callable[[], T]) -> tuple[T | None, BaseException | None, float]:
    """(result, the documented error it raised, seconds); any other exception propagates.

    Seconds are the least of up to four runs, with the collector paused: the cost of the input itself, not of
    this machine's other work or of collecting the test process' heap. A parse of unbounded cost is slow
    every time."""
    elapsed = math.inf
    for _ in range(4):
        gc.disable()
        started = time.perf_counter()
        try:
            result, error = run(), None
        except (PrometheusError, ReportInputError) as raised:
            result, error = None, raised
        finally:
            elapsed = min(elapsed, time.perf_counter() - started)
            gc.enable()
        if elapsed <= BOUND_S:
            break
    return result, error, elapsed


# ---- hostile JSON, in general

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**200)
    | st.floats()  # NaN and infinities included: json.dumps writes them as NaN / Infinity literals
    | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)


def _deep(opening: bytes, closing: bytes) -> st.SearchStrategy[bytes]:
    return st.integers(min_value=500, max_value=100_000).map(lambda n: opening * n + closing * n)


def _dumps(value: object) -> bytes:
    return json.dumps(value).encode()


RAW = st.one_of(
    st.binary(max_size=300),
    JSON.map(_dumps),
    _deep(b"[", b"]"),
    _deep(b'{"a":', b"}"),
    st.integers(min_value=4300, max_value=20_000).map(lambda n: b'{"status": "success", "data": ' + b"7" * n + b"}"),
    st.sampled_from([b"", b"null", b"NaN", b"Infinity", b'{"status": "success", "data": {"result": -Infinity}}']),
)

# ---- Prometheus answers: the documented shapes, with any part of them hostile

LABEL_KEYS = st.sampled_from(["namespace", "pod", "cluster_queue", "le", "cohort", "reason", "exported_namespace"])
LABEL_VALUES = st.sampled_from(
    ["ml", "team-a", "q", "+Inf", "0.5", "60", "NaN", "-Inf", "1e400", "-1", "0", "abc", "", "$\\foo{$", "<b>"]
) | st.text(max_size=10)
LABELS = st.dictionaries(LABEL_KEYS | st.text(max_size=6), LABEL_VALUES, max_size=4) | JSON
VALUES = (
    st.sampled_from(["0", "1", "1", "2.5", "12", "3600", "NaN", "+Inf", "-Inf", "-5", "1e15", "1e16", "1e-300"])
    | st.sampled_from(["abc", "", " 1 ", "0x10", "1_0", "1e400", "nan", "infinity", "9" * 5000])
    | st.floats().map(repr)
    | SCALARS
)
TIMES = st.sampled_from(HOUR_ENDS) | st.integers() | st.floats() | SCALARS
PAIRS = st.tuples(TIMES, VALUES).map(list) | st.lists(SCALARS, max_size=3) | SCALARS


def _answer(result: st.SearchStrategy[Any], kind: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    data = st.fixed_dictionaries({}, optional={"resultType": kind, "result": result}) | JSON
    document = st.fixed_dictionaries(
        {"status": st.just("success")},
        optional={"data": data, "error": st.text(max_size=20) | SCALARS, "errorType": st.text(max_size=8)},
    ) | st.fixed_dictionaries({"status": SCALARS | st.just("error")}, optional={"data": data, "error": JSON})
    return document.map(lambda d: json.dumps(d).encode())


SAMPLES = st.lists(st.fixed_dictionaries({}, optional={"metric": LABELS, "value": PAIRS}), max_size=4)
SERIES = st.lists(
    st.fixed_dictionaries({}, optional={"metric": LABELS, "values": st.lists(PAIRS, max_size=4) | SCALARS}), max_size=4
)
KINDS = st.sampled_from(["vector", "matrix", "scalar", "string"]) | SCALARS
INSTANT_ANSWERS = _answer(SAMPLES | PAIRS | JSON, KINDS)
RANGE_ANSWERS = _answer(SERIES | JSON, KINDS)


@FUZZ
@given(body=INSTANT_ANSWERS | RANGE_ANSWERS | RAW, status=st.sampled_from([200, 400, 422, 503]), instant=st.booleans())
def test_any_prometheus_answer_parses_or_is_a_prometheus_error(body: bytes, status: int, instant: bool) -> None:
    def parse() -> object:
        data = answer_data(status, body, URL, "up")
        return instant_samples(data, URL, "up") if instant else range_series(data, URL, "up")

    _, error, elapsed = _timed(parse)
    assert elapsed <= BOUND_S, f"{elapsed * 1000:.1f} ms for a {len(body)}-byte answer"
    if error is not None:
        assert "\n" not in str(error), "one line on stderr"


# ---- the collection and the report over answers that are mostly plausible, sometimes hostile


SANE_VALUES = st.sampled_from(["1", "0", "2", "0.5", "12", "300", "4", "8"])
# where a plausible answer meets the edges of a value: NaN (no data in a gauge, an error in a count), infinities
EDGE_VALUES = st.sampled_from(["NaN", "+Inf", "-Inf", "1e15", "-1e15", "1e-200", "-3", "0"])
NAMES = st.sampled_from(["ml", "web", "q", "p1", "$\\foo{$", "<b>x</b>"])
SANE_LABELS = st.fixed_dictionaries(
    {"le": st.sampled_from(["60", "300", "1800", "+Inf", "+Inf"])},  # every bucket has one; other series ignore it
    optional={
        "namespace": NAMES,
        "pod": NAMES,
        "cluster_queue": NAMES,
        "preempting_cluster_queue": NAMES,
        "cohort": NAMES,
        "reason": NAMES,
    },
)


def _vector(values: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return st.lists(st.tuples(SANE_LABELS, values), max_size=3).map(
        lambda samples: _dumps(
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": m, "value": [END, v]} for m, v in samples]},
            }
        )
    )


def _matrix(values: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    points = st.lists(st.tuples(st.sampled_from(HOUR_ENDS), values), max_size=3)
    return st.lists(st.tuples(SANE_LABELS, points), max_size=3).map(
        lambda series: _dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [{"metric": m, "values": [[t, v] for t, v in p]} for m, p in series],
                },
            }
        )
    )


PLAUSIBLE_INSTANT, PLAUSIBLE_RANGE = _vector(SANE_VALUES), _matrix(SANE_VALUES)


class _Scripted(PrometheusClient):
    """Answers from lists drawn beforehand, in the order the queries come: no HTTP, nothing generated while
    the collection is timed."""

    def __init__(self, instant: list[bytes], ranged: list[bytes]) -> None:
        super().__init__(URL, 5.0)
        self._answers = {"/api/v1/query": iter(instant), "/api/v1/query_range": iter(ranged)}

    async def _fetch(self, path: str, params: Mapping[str, str]) -> tuple[int, bytes]:
        empty = b'{"status": "success", "data": {"resultType": "vector", "result": []}}'
        return 200, next(self._answers[path], empty.replace(b"vector", b"matrix") if "range" in path else empty)


def _non_finite_paths(value: object, path: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite_paths(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite_paths(item, f"{path}[{index}]")
    elif (isinstance(value, float) and not math.isfinite(value)) or value in ("+Inf", "-Inf"):
        yield path


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"{name} in report.json")


def _script(
    plausible: st.SearchStrategy[bytes], hostile: st.SearchStrategy[bytes], size: int
) -> st.SearchStrategy[list[bytes]]:
    """``size`` answers in query order, plausible but for at most two hostile ones anywhere: so the hostile
    answer meets every stage of the collection, not only the first queries."""
    return st.builds(
        lambda answers, swaps: [swaps.get(i, answer) for i, answer in enumerate(answers)],
        st.lists(plausible, min_size=size, max_size=size),
        st.dictionaries(st.integers(min_value=0, max_value=size - 1), hostile, max_size=2),
    )


@settings(FUZZ, max_examples=examples(100))  # each example draws 34 answers: generating them is most of the test's time
@given(
    # 11 presence queries, then up to 12 more instant ones; up to 9 range queries
    instant=_script(PLAUSIBLE_INSTANT, _vector(SANE_VALUES | EDGE_VALUES) | INSTANT_ANSWERS, 24),
    ranged=_script(PLAUSIBLE_RANGE, _matrix(SANE_VALUES | EDGE_VALUES) | RANGE_ANSWERS, 10),
)
def test_the_report_over_any_answers_has_finite_figures_or_is_a_prometheus_error(
    instant: list[bytes], ranged: list[bytes]
) -> None:
    def report() -> tuple[str, str]:
        measurements = asyncio.run(collect(_Scripted(instant, ranged), WINDOW, 5.0, 8, lambda _: None))
        built = build_report(
            measurements, window=WINDOW, thresholds=Thresholds(), price=parse_price("7"), namespace_queues={}
        )
        return json_file.render(built), markdown_file.render(built)

    rendered, _, elapsed = _timed(report)
    assert elapsed <= BOUND_S, f"{elapsed * 1000:.1f} ms for one report"
    if rendered is not None:
        document = json.loads(rendered[0], parse_constant=_refuse_constant)
        # +Inf is only ever a histogram bucket's upper bound
        assert [p for p in _non_finite_paths(document) if ".wait_buckets[" not in p] == []


# ---- --workloads: items and whole dumps

START = END - 3 * 3600


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).isoformat().replace("+00:00", "Z")


TIMESTAMPS = st.integers(min_value=START - 3600, max_value=END + 3600).map(_iso) | st.sampled_from(
    [
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-10-01T00:00:00",
        "",
        "2026-10-01",
        "9" * 100,
        "2026-10-01T00:00:00+25:00",
    ]
)
QUANTITIES = st.sampled_from(
    ["8", "1", "0", "500m", "1e3", "1Gi", "-1", "1e400", "9" * 100, "abc", "1.5", "2E1"]
) | st.integers(min_value=-(2**70), max_value=2**70)
WHOLES = st.integers(min_value=-3, max_value=2**40) | st.sampled_from(["500m", "2", 1.5, True])


IN_WINDOW = st.integers(min_value=START, max_value=END - 1)
VALID_QUANTITIES = st.sampled_from(["1", "8", "0", "500m", "1e3", "2Gi", "1.5", str(2**63 - 1)]) | st.integers(0, 64)
TOLERATION = st.fixed_dictionaries(
    {"key": st.sampled_from(["nvidia.com/gpu", "spot"]), "operator": st.sampled_from(["Exists", "Equal"])},
    optional={"effect": st.sampled_from(["NoSchedule", "NoExecute", ""]), "tolerationSeconds": st.integers(0, 600)},
)


@st.composite
def _valid_workload(draw: st.DrawFn) -> dict[str, Any]:
    """A Workload as the API server writes one: admitted in the window, maybe finished, maybe failed."""
    created = draw(IN_WINDOW)
    admitted = created + draw(st.integers(0, 3600))
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": _iso(admitted)}]
    if draw(st.booleans()):
        reason = draw(st.sampled_from(["Succeeded", "Failed", "Deactivated"]))
        conditions.append(
            {"type": "Finished", "status": "True", "reason": reason, "lastTransitionTime": _iso(admitted + 600)}
        )
    requests = draw(st.dictionaries(st.sampled_from(["nvidia.com/gpu", "cpu", "memory"]), VALID_QUANTITIES, max_size=3))
    return {
        "apiVersion": draw(st.sampled_from(["kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"])),
        "kind": "Workload",
        "metadata": {
            "name": draw(st.sampled_from(["a", "b", "c", "d"])),
            "namespace": draw(st.sampled_from(["ml", "web"])),
            "creationTimestamp": _iso(created),
        },
        "spec": {
            "queueName": "default",
            "priorityClassRef": {"name": draw(st.sampled_from(["low", "high"]))},
            "maximumExecutionTimeSeconds": draw(st.none() | st.integers(1, 86400)),
            "podSets": [
                {
                    "name": "main",
                    "count": draw(st.integers(1, 8)),
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": requests}}],
                            "nodeSelector": draw(
                                st.dictionaries(st.sampled_from(["gpu", "zone"]), st.text(max_size=4))
                            ),
                            "tolerations": draw(st.lists(TOLERATION, max_size=2)),
                        }
                    },
                }
            ],
        },
        "status": {"conditions": conditions},
    }


# where a mutation lands: every field the history reads, and the objects that hold them
FIELDS = [
    ("kind",),
    ("apiVersion",),
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "creationTimestamp"),
    ("spec",),
    ("spec", "queueName"),
    ("spec", "priorityClassRef"),
    ("spec", "maximumExecutionTimeSeconds"),
    ("spec", "podSets"),
    ("spec", "podSets", 0),
    ("spec", "podSets", 0, "count"),
    ("spec", "podSets", 0, "name"),
    ("spec", "podSets", 0, "template"),
    ("spec", "podSets", 0, "template", "spec"),
    ("spec", "podSets", 0, "template", "spec", "containers"),
    ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests"),
    ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"),
    ("spec", "podSets", 0, "template", "spec", "nodeSelector"),
    ("spec", "podSets", 0, "template", "spec", "nodeSelector", "gpu"),
    ("spec", "podSets", 0, "template", "spec", "tolerations"),
    ("spec", "podSets", 0, "template", "spec", "tolerations", 0),
    ("spec", "podSets", 0, "template", "spec", "tolerations", 0, "operator"),
    ("spec", "podSets", 0, "template", "spec", "tolerations", 0, "weird"),
    ("status",),
    ("status", "conditions"),
    ("status", "conditions", 0),
    ("status", "conditions", 0, "lastTransitionTime"),
    ("status", "conditions", 1, "reason"),
]
DELETE = object()
HOSTILE_FIELDS = TIMESTAMPS | QUANTITIES | WHOLES | JSON | st.just(DELETE)


def _at(holder: Any, step: Any) -> Any:
    if isinstance(step, int):
        return holder[step] if isinstance(holder, list) and step < len(holder) else None
    return holder.get(step) if isinstance(holder, dict) else None


def _mutated_item(item: dict[str, Any], mutations: list[tuple[tuple[Any, ...], object]]) -> object:
    """``item`` with each path set to its value (or deleted), where the path still leads somewhere."""
    for path, value in mutations:
        holder: Any = item
        for step in path[:-1]:
            holder = _at(holder, step)
        last = path[-1]
        if isinstance(holder, dict) and isinstance(last, str):
            if value is DELETE:
                holder.pop(last, None)
            else:
                holder[last] = value
        elif isinstance(holder, list) and isinstance(last, int) and last < len(holder):
            if value is DELETE:
                del holder[last]
            else:
                holder[last] = value
    return item


WORKLOADS = st.builds(
    _mutated_item, _valid_workload(), st.lists(st.tuples(st.sampled_from(FIELDS), HOSTILE_FIELDS), max_size=2)
)
ITEMS = st.lists(WORKLOADS | WORKLOADS | WORKLOADS | JSON, max_size=6)


@FUZZ
@given(items=ITEMS)
def test_any_workload_items_are_read_or_counted_out_and_what_is_read_replays(items: list[Any]) -> None:
    def read() -> list[Any]:
        history = job_history(read_workloads(items), START, END)
        records = with_known_priority_classes(history, set()).records
        # the what-if's reader is strict: every record the history keeps must be one it replays
        return list(convert_lines(((f"record {i}", r) for i, r in enumerate(records)), {}))

    _, error, elapsed = _timed(read)
    assert error is None, "a bad item is counted out, never an error of the whole file"
    assert elapsed <= BOUND_S, f"{elapsed * 1000:.1f} ms for {len(items)} items"


def _without_nan(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_without_nan(v) for v in value.values())
    if isinstance(value, list):
        return all(_without_nan(v) for v in value)
    return True


@FUZZ
@given(
    items=ITEMS.filter(_without_nan),
    extra=st.dictionaries(st.sampled_from(["apiVersion", "kind", "metadata"]), JSON.filter(_without_nan), max_size=3),
    indent=st.sampled_from([None, 0, 2, 4]),
    chunk=st.integers(min_value=1, max_value=64),
)
def test_a_dump_streamed_in_any_chunks_reads_as_its_items_decoded_whole(
    items: list[Any], extra: dict[str, Any], indent: int | None, chunk: int
) -> None:
    text = json.dumps({**extra, "items": items}, indent=indent)
    streamed, error, elapsed = _timed(lambda: read_stream(io.StringIO(text), "fuzz", chunk_chars=chunk))
    assert elapsed <= BOUND_S, f"{elapsed * 1000:.1f} ms for {len(text)} characters"
    whole = read_workloads(items)
    if whole.items and whole.skipped.get(NOT_A_WORKLOAD) == whole.items:
        assert isinstance(error, ReportInputError) and "holds no kueue.x-k8s.io Workload" in str(error)
    else:
        assert streamed == whole


def _mutated(text: str, cut: int, insert: str) -> str:
    at = cut % (len(text) + 1)
    return text[:at] + insert + text[at:]


DUMP_BYTES = st.one_of(
    RAW,
    st.builds(
        lambda items, cut, insert: _mutated(json.dumps({"items": items}), cut, insert).encode("utf-8", "surrogatepass"),
        ITEMS,
        st.integers(min_value=0),
        st.sampled_from(["", ",", "]", "}", '"', "NaN", "\\", "\x00", "\ufeff", "\ud800"]),
    ),
    st.builds(lambda body: b'{"items": [' + body + b"]}", RAW),
)


@FUZZ
@given(data=DUMP_BYTES, chunk=st.integers(min_value=1, max_value=64))
def test_any_bytes_as_a_dump_read_or_are_one_input_error(data: bytes, chunk: int) -> None:
    def read() -> object:
        stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
        return read_stream(stream, "--workloads fuzz.json", chunk_chars=chunk)

    _, error, elapsed = _timed(read)
    assert elapsed <= BOUND_S, f"{elapsed * 1000:.1f} ms for {len(data)} bytes"
    if error is not None:
        assert "\n" not in str(error) and str(error).startswith("--workloads fuzz.json ")


# ---- report.md: a label renders as the characters it has


# every character but controls, separators of lines and bidirectional overrides, which markdown_text replaces
SHOWABLE = st.characters(
    blacklist_categories=("Cc", "Cs", "Zl", "Zp"),
    blacklist_characters="\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
)


@settings(max_examples=examples(300), deadline=None)
@given(label=st.text(SHOWABLE) | st.text(st.sampled_from("\\`*_{}[]()#+-.!|~$<>&:;/ x\t")))
def test_a_label_through_markdown_text_renders_as_its_own_characters(label: str) -> None:

    shown = markdown_text(label)
    assert "\n" not in shown and "<" not in shown and ">" not in shown
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).render(f"x{shown}x")
    assert html.unescape(rendered.removeprefix("<p>").removesuffix("</p>\n")) == f"x{label.replace(chr(9), ' ')}x"
