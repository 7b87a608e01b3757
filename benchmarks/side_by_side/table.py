"""The one table the benchmark prints: each measure for the floor (``kuota simulate``), kuota and Kueue, the
kuota/Kueue ratio, how far each live controller is from the floor, and the target the issue sets. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from benchmarks.side_by_side.measures import RunFigures


@dataclass(frozen=True, slots=True)
class ManagerUsage:
    """What the manager process cost: CPU seconds (user+system), peak RSS, and requests it sent the API."""

    cpu_seconds: float
    peak_rss_mib: float
    apiserver_requests: int


@dataclass(frozen=True, slots=True)
class SystemResult:
    figures: RunFigures
    usage: ManagerUsage


class Target(Enum):
    """What kuota's figure must be next to Kueue's (issue 8)."""

    AT_MOST_HALF = "kuota <= 0.5x Kueue"
    HIGHER = "kuota > Kueue"
    LOWER = "kuota < Kueue"
    NONE = ""

    def met(self, kuota: float, kueue: float) -> bool | None:
        if self is Target.AT_MOST_HALF:
            return kuota <= 0.5 * kueue
        if self is Target.HIGHER:
            return kuota > kueue
        if self is Target.LOWER:
            return kuota < kueue
        return None


@dataclass(frozen=True, slots=True)
class Row:
    measure: str
    unit: str
    floor: float | None
    kuota: float | None
    kueue: float | None
    target: Target = Target.NONE

    @property
    def ratio(self) -> float | None:
        if self.kuota is None or self.kueue is None or self.kueue == 0:
            return None
        return self.kuota / self.kueue

    @property
    def verdict(self) -> str:
        if self.kuota is None or self.kueue is None or self.target is Target.NONE:
            return ""
        return "met" if self.target.met(self.kuota, self.kueue) else "MISSED"


def comparison_rows(
    class_order: Sequence[str], floor: RunFigures, kuota: SystemResult | None, kueue: SystemResult | None
) -> list[Row]:
    """The rows in print order; a system that was not run reads '-' everywhere."""

    def figure(name: str, unit: str, read: Callable[[RunFigures], float | None], target: Target) -> Row:
        return Row(
            name,
            unit,
            read(floor),
            read(kuota.figures) if kuota else None,
            read(kueue.figures) if kueue else None,
            target,
        )

    def usage(name: str, unit: str, read: Callable[[ManagerUsage], float], target: Target) -> Row:
        return Row(
            name,
            unit,
            None,
            read(kuota.usage) if kuota else None,
            read(kueue.usage) if kueue else None,
            target,
        )

    rows = [
        figure("workloads finished", "", lambda f: float(f.finished), Target.NONE),
        figure("wall time", "s", lambda f: f.wall_seconds, Target.AT_MOST_HALF),
    ]
    for name in class_order:
        rows.append(figure(f"mean time to admission, {name}", "s", _class_read(name, "mean"), Target.AT_MOST_HALF))
        rows.append(figure(f"p95 time to admission, {name}", "s", _class_read(name, "p95"), Target.NONE))
    rows += [
        figure("utilization (cpu held / quota)", "%", lambda f: 100 * f.utilization, Target.HIGHER),
        figure("admissions per second", "/s", lambda f: f.admissions_per_second, Target.NONE),
        figure("re-admissions after preemption", "", lambda f: float(f.evictions), Target.NONE),
        usage("manager CPU (user+system)", "s", lambda u: u.cpu_seconds, Target.NONE),
        usage("manager peak RSS (VmHWM)", "MiB", lambda u: u.peak_rss_mib, Target.LOWER),
        usage("apiserver requests by the manager", "", lambda u: float(u.apiserver_requests), Target.NONE),
    ]
    return rows


def _class_read(name: str, which: str) -> Callable[[RunFigures], float | None]:
    def read(figures: RunFigures) -> float | None:
        figures_of_class = figures.classes.get(name)
        if figures_of_class is None:
            return None
        return figures_of_class.mean_to_admission if which == "mean" else figures_of_class.p95_to_admission

    return read


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("s", "/s", "%"):
        return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
    return f"{value:.1f}" if unit == "MiB" else f"{value:.0f}"


def _gap(live: float | None, floor: float | None, unit: str) -> str:
    if live is None or floor is None:
        return "-"
    return f"{live - floor:+.2f}" if unit in ("s", "/s", "%") else f"{live - floor:+.0f}"


def render(rows: Sequence[Row]) -> str:
    header = ("measure", "unit", "floor", "kuota", "Kueue", "kuota/Kueue", "kuota-floor", "Kueue-floor", "target")
    lines = [header]
    for row in rows:
        ratio = row.ratio
        target = f"{row.target.value}: {row.verdict}" if row.verdict else ""
        lines.append(
            (
                row.measure,
                row.unit,
                _number(row.floor, row.unit),
                _number(row.kuota, row.unit),
                _number(row.kueue, row.unit),
                "-" if ratio is None else f"{ratio:.2f}",
                _gap(row.kuota, row.floor, row.unit),
                _gap(row.kueue, row.floor, row.unit),
                target,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rendered = []
    for index, line in enumerate(lines):
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [cell.rjust(width) for cell, width in zip(line[2:-1], widths[2:-1], strict=True)]
        cells.append(line[-1])
        rendered.append("  ".join(cells).rstrip())
        if index == 0:
            rendered.append("-" * len(rendered[0]))
    return "\n".join(rendered) + "\n"
