import pytest

from kuota.exporter.utilization_window import UtilizationWindow


def test_a_burst_between_scrapes_shows_in_the_window_mean() -> None:
    window = UtilizationWindow(seconds=30)
    for second in range(30):
        window.add("GPU-a", end=1000 + second, duration=1.0, sm_percent={7: 90.0} if second < 3 else {})
    assert window.means(now=1029.5)["GPU-a"][7] == pytest.approx(9.0)


def test_idle_ticks_count_as_zero_and_a_device_without_ticks_has_no_figure() -> None:
    window = UtilizationWindow(seconds=10)
    window.add("GPU-a", end=100, duration=1.0, sm_percent={})
    window.add("GPU-a", end=101, duration=1.0, sm_percent={7: 50.0})
    means = window.means(now=101)
    assert means == {"GPU-a": {7: 25.0}}
    assert "GPU-b" not in means


def test_ticks_older_than_the_window_expire_with_their_pids() -> None:
    window = UtilizationWindow(seconds=5)
    window.add("GPU-a", end=100, duration=1.0, sm_percent={7: 80.0})
    assert window.pids() == {7}
    assert window.means(now=106) == {}
    assert window.pids() == set()


def test_ticks_are_weighted_by_their_duration() -> None:
    window = UtilizationWindow(seconds=60)
    window.add("GPU-a", end=100, duration=3.0, sm_percent={1: 100.0})
    window.add("GPU-a", end=101, duration=1.0, sm_percent={1: 0.0})
    assert window.means(now=101)["GPU-a"][1] == pytest.approx(75.0)
