"""The report window: which hours are measured, at what resolution, how hours are classed, and its trend days.

Every figure is computed over the hours ``(start + (k-1)h, start + kh]`` for k = 1..hours, so the window must
be a whole number of hours and the resolution must divide an hour: then hourly sums add up exactly to window
totals. A window shorter than an hour (a first look at a new cluster, a test run) is one bucket of its own
length, which the resolution must divide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kuota.durations import DurationError, parse_duration
from kuota.report.errors import ReportInputError

HOUR_S = 3600
HOURS_PER_WEEK = 168
DAY_S = 86400
# Prometheus answers at most 11,000 points per series: 366 days of hourly points is 8,784.
MAX_WINDOW_S = 366 * 86400
MAX_DURATION_S = 100 * 365 * 86400


def whole_seconds(text: str, flag: str) -> int:
    """``"7d"`` -> 604800: a duration (:mod:`kuota.durations`) of whole seconds, from one to ``MAX_DURATION_S``."""
    try:
        seconds = parse_duration(text)
    except DurationError as error:
        raise ReportInputError(f"{flag} {error}") from error
    if not 1 <= seconds <= MAX_DURATION_S or seconds != int(seconds):
        raise ReportInputError(
            f"{flag} {text!r} is not a whole number of seconds from 1s to {MAX_DURATION_S // (365 * 86400)} years: "
            "e.g. 7d, 36h, 1m"
        )
    return int(seconds)


def parse_end(text: str | None, resolution_s: int, now: datetime) -> int:
    """The window's end as Unix seconds: RFC 3339 or Unix seconds, else ``now``; floored to the resolution."""
    if text is None:
        moment = now
    elif re.fullmatch(r"\d+(\.\d+)?", text):
        try:
            moment = datetime.fromtimestamp(float(text), tz=UTC)
        except (OverflowError, OSError, ValueError) as error:
            raise ReportInputError(f"--end {text!r} is past any date a clock can give (year 9999)") from error
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError as error:
            raise ReportInputError(
                f"--end {text!r} is neither RFC 3339 (2026-10-05T00:00:00Z) nor Unix seconds"
            ) from error
        if moment.tzinfo is None:
            raise ReportInputError(f"--end {text!r} has no time zone: add Z or an offset such as +02:00")
    seconds = int(moment.timestamp())
    return seconds - seconds % resolution_s


class HourClass(StrEnum):
    WORKDAY = "workday"
    NIGHT = "night"
    WEEKEND = "weekend"


@dataclass(frozen=True)
class WorkHours:
    """Working hours on Monday to Friday, ``first`` inclusive to ``last`` exclusive, in ``timezone``."""

    first: int = 9
    last: int = 19
    timezone: str = "UTC"

    @classmethod
    def parse(cls, text: str, timezone: str) -> WorkHours:
        match = re.fullmatch(r"(\d{1,2})-(\d{1,2})", text.strip())
        if match is None or not 0 <= int(match.group(1)) < int(match.group(2)) <= 24:
            raise ReportInputError(f"--work-hours {text!r} must be FIRST-LAST in 0..24 with FIRST < LAST, e.g. 9-19")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise ReportInputError(f"--timezone {timezone!r} is not an IANA time zone (e.g. Europe/Berlin)") from error
        return cls(int(match.group(1)), int(match.group(2)), timezone)


@dataclass(frozen=True)
class Window:
    start: int  # Unix seconds, exclusive
    end: int  # Unix seconds, inclusive
    resolution_s: int
    work_hours: WorkHours

    @classmethod
    def build(cls, length_s: int, end: int, resolution_s: int, work_hours: WorkHours) -> Window:
        if length_s <= 0 or (length_s > HOUR_S and length_s % HOUR_S):
            raise ReportInputError(
                f"--window must be a whole number of hours, or shorter than an hour, got {length_s} s"
            )
        if length_s > MAX_WINDOW_S:
            raise ReportInputError(
                f"--window {length_s // 86400} days is longer than {MAX_WINDOW_S // 86400} days, the longest "
                "Prometheus answers in hourly points"
            )
        if resolution_s <= 0 or HOUR_S % resolution_s:
            raise ReportInputError(f"--resolution must divide an hour (e.g. 15s, 30s, 1m, 5m), got {resolution_s} s")
        if length_s % resolution_s:
            raise ReportInputError(
                f"--window {length_s} s, shorter than an hour, must be a whole number of --resolution {resolution_s} s"
            )
        return cls(end - length_s, end, resolution_s, work_hours)

    @property
    def length_s(self) -> int:
        return self.end - self.start

    @property
    def bucket_s(self) -> int:
        """An hour, or the whole window when it is shorter."""
        return min(HOUR_S, self.length_s)

    @property
    def hours(self) -> int:
        """The number of hour buckets (one for a window shorter than an hour)."""
        return self.length_s // self.bucket_s

    def hour_ends(self) -> list[int]:
        """The evaluation time of each hour bucket (its inclusive end)."""
        return [self.start + self.bucket_s * (k + 1) for k in range(self.hours)]

    def _local_start(self, hour_index: int) -> datetime:
        moment = datetime.fromtimestamp(self.start + self.bucket_s * hour_index, tz=UTC)
        return moment.astimezone(ZoneInfo(self.work_hours.timezone))

    def hour_class(self, hour_index: int) -> HourClass:
        """Workday, night or weekend, by the local clock at the start of the hour bucket."""
        local = self._local_start(hour_index)
        if local.weekday() >= 5:
            return HourClass.WEEKEND
        if self.work_hours.first <= local.hour < self.work_hours.last:
            return HourClass.WORKDAY
        return HourClass.NIGHT

    def hour_of_week(self, hour_index: int) -> int:
        """0 = Monday 00:00-01:00 local, 167 = Sunday 23:00-24:00."""
        local = self._local_start(hour_index)
        return local.weekday() * 24 + local.hour

    def describe(self) -> str:
        fmt = "%Y-%m-%d %H:%M UTC"
        start = datetime.fromtimestamp(self.start, tz=UTC).strftime(fmt)
        end = datetime.fromtimestamp(self.end, tz=UTC).strftime(fmt)
        return f"{start} to {end} ({timedelta(seconds=self.length_s)})"


def trend_day_s(window_s: int) -> int:
    """The span of one trend point: a day, or the whole window when it is shorter."""
    return min(DAY_S, window_s)


def trend_day_ends(window: Window) -> list[int]:
    """The ends of the trend's days, oldest first: whole days back from the window's end (hours before the first
    whole day are in no trend point), or the whole window when it is shorter than a day."""
    day_s = trend_day_s(window.length_s)
    days = window.length_s // day_s
    return [window.end - day_s * (days - 1 - k) for k in range(days)]
