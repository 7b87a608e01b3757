from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kuota.report.errors import ReportInputError
from kuota.report.figures.prices import parse_price
from kuota.report.figures.window import HourClass, Window, WorkHours, parse_end, whole_seconds
from kuota.report.sources.queue_config import namespace_queues

MONDAY = int(datetime(2026, 9, 28, tzinfo=UTC).timestamp())


def test_durations_and_their_errors() -> None:
    assert whole_seconds("7d", "--window") == 604800
    assert whole_seconds("1m", "--resolution") == 60
    with pytest.raises(ReportInputError, match="--window '7 days' is not a duration"):
        whole_seconds("7 days", "--window")


def test_end_is_floored_to_the_resolution_and_needs_a_zone() -> None:
    assert parse_end("2026-10-05T00:00:59Z", 60, datetime.now(UTC)) == MONDAY + 7 * 86400
    assert parse_end(str(MONDAY + 61), 60, datetime.now(UTC)) == MONDAY + 60
    with pytest.raises(ReportInputError, match="no time zone"):
        parse_end("2026-10-05T00:00:00", 60, datetime.now(UTC))


def test_window_must_be_whole_hours_and_resolution_must_divide_an_hour() -> None:
    with pytest.raises(ReportInputError, match="whole number of hours"):
        Window.build(5400, MONDAY, 60, WorkHours())
    with pytest.raises(ReportInputError, match="must divide an hour"):
        Window.build(3600, MONDAY, 7 * 60, WorkHours())


def test_a_window_under_an_hour_is_one_bucket_of_its_own_length() -> None:
    window = Window.build(240, MONDAY + 600, 2, WorkHours())
    assert (window.start, window.bucket_s, window.hours) == (MONDAY + 360, 240, 1)
    assert window.hour_ends() == [MONDAY + 600]
    assert window.hour_class(0) is HourClass.NIGHT  # Monday 00:06 UTC
    assert Window.build(7200, MONDAY, 60, WorkHours()).hour_ends() == [MONDAY - 3600, MONDAY]
    with pytest.raises(ReportInputError, match="whole number of --resolution 60 s"):
        Window.build(90, MONDAY, 60, WorkHours())


def test_hours_are_classed_by_the_local_clock() -> None:
    window = Window.build(7 * 86400, MONDAY + 7 * 86400, 60, WorkHours(9, 19, "Europe/Berlin"))
    assert window.hour_class(7) is HourClass.WORKDAY  # 07:00 UTC = 09:00 in Berlin (summer time)
    assert window.hour_class(6) is HourClass.NIGHT
    assert window.hour_class(5 * 24 + 12) is HourClass.WEEKEND
    assert window.hour_of_week(0) == 2  # Monday 02:00 Berlin


def test_unknown_time_zone_is_named() -> None:
    with pytest.raises(ReportInputError, match="Mars/Olympus"):
        WorkHours.parse("9-19", "Mars/Olympus")


def test_price_presets_are_per_gpu_hour() -> None:
    assert parse_price("p5.48xlarge").per_gpu_hour == pytest.approx(55.04 / 8)
    assert parse_price("p4d.24xlarge").per_gpu_hour == pytest.approx(21.96 / 8)
    assert parse_price("3.5").per_gpu_hour == 3.5
    with pytest.raises(ReportInputError, match=r"p5\.48xlarge"):
        parse_price("cheap")


def test_localqueues_map_namespaces_to_cluster_queues(tmp_path: Path) -> None:
    objects = [
        {"kind": "LocalQueue", "metadata": {"name": "a", "namespace": "ml"}, "spec": {"clusterQueue": "team-ml"}},
        {"kind": "ClusterQueue", "metadata": {"name": "team-ml"}},
    ]
    assert namespace_queues(objects) == {"ml": "team-ml"}
    clash = [
        *objects,
        {"kind": "LocalQueue", "metadata": {"name": "b", "namespace": "ml"}, "spec": {"clusterQueue": "other"}},
    ]
    with pytest.raises(ReportInputError, match="namespace ml has LocalQueues for ClusterQueues team-ml and other"):
        namespace_queues(clash)
