"""Fuzzing the parsers every hostile object goes through: the quantity parser and the Workload parser.

Whatever they are given, they raise only their documented error (QuantityError, InvalidObjectError), and each
input is decided in bounded time: a parse runs on the webhook's event loop and in the controller's sync loop,
so one slow input would stall every other review or decision.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.engine.decoding import parse_object, parse_workload, validate_workload
from kuota.engine.errors import InvalidObjectError, QuantityError
from kuota.engine.quantities import LARGEST_AMOUNT, parse_amount, parse_quantity
from tests.examples import examples

# Generous for the pure-Python build on a slow machine; the hostile inputs once took 30 s.
_BOUND_SECONDS = 0.05

_SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "E", "n", "u", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "x", "e"]
_quantity_like = st.builds(
    lambda sign, whole, point, fraction, suffix, exponent: f"{sign}{whole}{point}{fraction}{suffix}{exponent}",
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", max_size=80),
    st.sampled_from(["", "."]),
    st.text("0123456789", max_size=80),
    st.sampled_from(_SUFFIXES),
    st.one_of(
        st.just(""),
        st.integers(-(10**9), 10**9).map(lambda n: f"e{n}"),
        st.text("0123456789+-", max_size=12).map(lambda t: f"E{t}"),
    ),
)
_hostile_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | _quantity_like,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


def _timed(call: Callable[[], object]) -> float:
    """CPU seconds ``call`` spends: the work an input costs, not how busy the test machine is (nor a garbage
    collection of the fuzzer's own heap that happens to fall inside)."""
    gc.disable()
    try:
        started = time.thread_time()
        call()
        return time.thread_time() - started
    finally:
        gc.enable()


def _parse_or_refuse(text: object) -> None:
    try:
        amount = parse_amount(text)
    except QuantityError:
        return
    assert abs(amount) <= LARGEST_AMOUNT


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_quantity_like, st.text(max_size=200), _hostile_values))
def test_the_quantity_parser_only_raises_quantity_error_and_answers_in_bounded_time(text: object) -> None:
    assert _timed(lambda: _parse_or_refuse(text)) <= _BOUND_SECONDS


@given(st.integers(-(2**63) + 1, 2**63 - 1), st.sampled_from([("", 1), ("m", Fraction(1, 1000)), ("Ki", 1024)]))
def test_every_int64_quantity_parses_exactly(number: int, suffix: tuple[str, Fraction | int]) -> None:
    text, scale = suffix
    if abs(number * scale) <= LARGEST_AMOUNT:
        assert parse_amount(f"{number}{text}") == number * scale


def test_a_huge_exponent_is_refused_at_once_not_computed() -> None:
    for text in ("1e20000000", "1e999999", "1e-20000000", "9" * 5000, "0." + "0" * 5000 + "1"):
        started = time.thread_time()
        try:
            parse_quantity("cpu", text)
        except QuantityError as error:
            assert "exponent" in str(error) or "digits" in str(error)
            assert len(str(error)) < 200, "the message quotes the text cut short"
        else:
            raise AssertionError(f"{text[:20]} was accepted")
        assert time.thread_time() - started < _BOUND_SECONDS


def test_a_quantity_beyond_int64_is_refused_as_kubernetes_cannot_count_it() -> None:
    assert parse_amount("9223372036854775807") == LARGEST_AMOUNT
    for text in ("9223372036854775808", "8Ei", "1e19", "10E"):
        try:
            parse_amount(text)
        except QuantityError as error:
            assert "too large" in str(error)
        else:
            raise AssertionError(f"{text} was accepted")


def _workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-a-1", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "queueName": "team-a",
            "priority": 10,
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": 1}}}
                            ],
                            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
                            "overhead": {"cpu": "100m"},
                            "nodeSelector": {"gpu": "h100"},
                            "tolerations": [{"key": "gpu", "operator": "Exists"}],
                            "affinity": {"nodeAffinity": {}},
                        }
                    },
                }
            ],
        },
    }


# Every place a hostile or careless writer of a Workload (preserve-unknown-fields below podSets) can put a value.
_PATHS: list[tuple[str | int, ...]] = [
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "creationTimestamp"),
    ("spec",),
    ("spec", "queueName"),
    ("spec", "priority"),
    ("spec", "active"),
    ("spec", "priorityClassRef"),
    ("spec", "maximumExecutionTimeSeconds"),
    ("spec", "podSets"),
    ("spec", "podSets", 0),
    ("spec", "podSets", 0, "count"),
    ("spec", "podSets", 0, "minCount"),
    ("spec", "podSets", 0, "template"),
    ("spec", "podSets", 0, "template", "spec"),
    ("spec", "podSets", 0, "template", "spec", "containers"),
    ("spec", "podSets", 0, "template", "spec", "containers", 0),
    ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources"),
    ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests"),
    ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests", "cpu"),
    ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "limits"),
    ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    ("spec", "podSets", 0, "template", "spec", "initContainers"),
    ("spec", "podSets", 0, "template", "spec", "overhead"),
    ("spec", "podSets", 0, "template", "spec", "overhead", "cpu"),
    ("spec", "podSets", 0, "template", "spec", "nodeSelector"),
    ("spec", "podSets", 0, "template", "spec", "tolerations"),
    ("spec", "podSets", 0, "template", "spec", "tolerations", 0),
    ("spec", "podSets", 0, "template", "spec", "affinity"),
    ("spec", "podSets", 0, "template", "spec", "affinity", "nodeAffinity"),
]


def _planted(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    """A valid Workload with ``value`` (shared, not copied: a fresh object each time) at ``path``."""
    obj = _workload()
    parent: Any = obj
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return obj


def _parse(obj: object) -> None:
    try:
        parse_workload(obj, {"high": 1000})
    except InvalidObjectError as error:
        assert error.errors, "a refusal names at least one field"
        assert all(len(str(field)) < 1000 for field in error.errors)
    errors = validate_workload(obj)
    assert isinstance(errors, list)


@settings(max_examples=examples(800), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_PATHS), _hostile_values)
def test_the_workload_parser_only_raises_invalid_object_and_answers_in_bounded_time(
    path: tuple[str | int, ...], value: object
) -> None:
    obj = _planted(path, value)
    assert _timed(lambda: _parse(obj)) <= _BOUND_SECONDS


@settings(max_examples=examples(200), deadline=None)
@given(_hostile_values)
def test_the_workload_parser_refuses_any_top_level_value(value: object) -> None:
    assert _timed(lambda: _parse(value)) <= _BOUND_SECONDS


def test_the_reported_malformed_workloads_are_refused_with_the_field_named() -> None:
    resources = ("spec", "podSets", 0, "template", "spec", "containers", 0, "resources")
    cases: list[tuple[tuple[str | int, ...], object, str]] = [
        ((*resources, "requests"), "abc", "resources.requests"),
        ((*resources, "limits"), ["nvidia.com/gpu", 1], "resources.limits"),
        (("spec", "podSets", 0, "template", "spec", "overhead"), [["cpu", "1"]], "spec.overhead"),
        ((*resources, "requests", "cpu"), "9" * 5000, "resources.requests.cpu"),
    ]
    for path, value, field in cases:
        try:
            parse_workload(_planted(path, value))
        except InvalidObjectError as error:
            assert field in str(error), str(error)
        else:
            raise AssertionError(f"{path} = {value!r:.40} was accepted")


def test_a_hundred_thousand_deep_list_in_a_workload_is_refused_without_recursion() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    obj = _planted(("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests"), deep)
    assert _timed(lambda: _parse(obj)) <= _BOUND_SECONDS


def test_a_configuration_object_of_any_shape_is_refused_in_one_bounded_line() -> None:
    """``kind`` or a name nested 5,000 deep (or an aliased YAML bomb) was once str()-ed into the message."""
    deep: list[Any] = []
    for _ in range(5_000):
        deep = [deep]
    for obj in (
        {"apiVersion": "v1", "kind": deep},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": deep}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "x"},
            "spec": {"a\nb": 1},
        },
    ):
        try:
            parse_object(obj)
        except InvalidObjectError as error:
            assert "\n" not in str(error) and len(str(error)) < 600, str(error)
        else:
            raise AssertionError(f"{obj} was accepted")
