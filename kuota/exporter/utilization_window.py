"""Per-process SM utilization averaged over a trailing window, so a scrape sees bursts between scrapes.

The sampler reads NVML every second (by default) and adds each tick here; a scrape every 15-30 s reports
the time-weighted mean over the window instead of whatever the last second happened to be. A tick in which
a device was idle (NVML's NOT_FOUND) counts as 0 % for every process; a tick that failed is left out of the
denominator; a device with no ticks in the window has no figure at all.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class _Tick:
    end: float
    duration: float
    sm_percent: Mapping[int, float]


class UtilizationWindow:
    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._ticks: dict[str, deque[_Tick]] = {}

    def add(self, device_uuid: str, end: float, duration: float, sm_percent: Mapping[int, float]) -> None:
        ticks = self._ticks.setdefault(device_uuid, deque())
        ticks.append(_Tick(end=end, duration=max(duration, 0.0), sm_percent=dict(sm_percent)))
        self._expire(ticks, end)

    def _expire(self, ticks: deque[_Tick], now: float) -> None:
        while ticks and ticks[0].end <= now - self._seconds:
            ticks.popleft()

    def means(self, now: float) -> dict[str, dict[int, float]]:
        """{device UUID: {pid: mean SM %}} for devices with at least one tick in the window."""
        result: dict[str, dict[int, float]] = {}
        for device_uuid, ticks in list(self._ticks.items()):
            self._expire(ticks, now)
            if not ticks:
                del self._ticks[device_uuid]
                continue
            # Ticks without a measurable duration (clock steps) weigh one each rather than nothing.
            weights = [tick.duration for tick in ticks]
            if sum(weights) <= 0:
                weights = [1.0] * len(ticks)
            total = sum(weights)
            weighted: dict[int, float] = {}
            for tick, weight in zip(ticks, weights, strict=True):
                for pid, percent in tick.sm_percent.items():
                    weighted[pid] = weighted.get(pid, 0.0) + percent * weight
            result[device_uuid] = {pid: value / total for pid, value in weighted.items()}
        return result

    def pids(self) -> set[int]:
        """Every pid still contributing to some window (its pod must stay resolvable until it drops out)."""
        return {pid for ticks in self._ticks.values() for tick in ticks for pid in tick.sm_percent}
