"""The one table the benchmark prints: each measure for the floor (``kuota simulate``), kuota and Kueue, the
kuota/Kueue ratio, how far each live controller is from the floor, and the target the issue sets. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from benchmarks.side_by_side.measures import RunFigures


@dataclass(frozen=True, slots=True)
class ManagerUsage:
    """What the manager process cost: CPU seconds (user+system), peak RSS, requests it sent the API and how many
    of them were writes (create, update, patch, delete)."""

    cpu_seconds: float
    peak_rss_mib: float
    apiserver_requests: int
    apiserver_writes: int


@dataclass(frozen=True, slots=True)
class SystemResult:
    figures: RunFigures
    usage: ManagerUsage


class Relation(Enum):
    AT_MOST = "<="
    HIGHER = ">"
    LOWER = "<"


@dataclass(frozen=True, slots=True)
class Target:
    """What kuota's figure must be next to Kueue's (issue 33's targets): at most ``factor`` x Kueue's, above or
    below it; or, with ``of_workloads``, at most that share of the workloads run (re-admissions)."""

    relation: Relation | None = None
    factor: float = 1.0
    of_workloads: float | None = None

    @property
    def label(self) -> str:
        if self.of_workloads is not None:
            return f"kuota <= {self.of_workloads:.0%} of workloads"
        if self.relation is None:
            return ""
        if self.relation is Relation.AT_MOST:
            return f"kuota <= {self.factor:g}x Kueue"
        return f"kuota {self.relation.value} Kueue"

    def met(self, kuota: float, kueue: float, workloads: int = 0) -> bool | None:
        if self.of_workloads is not None:
            return kuota <= self.of_workloads * workloads
        if self.relation is Relation.AT_MOST:
            return kuota <= self.factor * kueue
        if self.relation is Relation.HIGHER:
            return kuota > kueue
        if self.relation is Relation.LOWER:
            return kuota < kueue
        return None


NO_TARGET = Target()
HIGHER = Target(Relation.HIGHER)
LOWER = Target(Relation.LOWER)


def at_most(factor: float) -> Target:
    return Target(Relation.AT_MOST, factor)


@dataclass(frozen=True, slots=True)
class Row:
    measure: str
    unit: str
    floor: float | None
    kuota: float | None
    kueue: float | None
    target: Target = NO_TARGET
    workloads: int = 0  # kuota's, for a target counted in workloads

    @property
    def ratio(self) -> float | None:
        if self.kuota is None or self.kueue is None or self.kueue == 0:
            return None
        return self.kuota / self.kueue

    @property
    def verdict(self) -> str:
        if self.kuota is None or self.kueue is None or self.target == NO_TARGET:
            return ""
        return "met" if self.target.met(self.kuota, self.kueue, self.workloads) else "MISSED"


def comparison_rows(
    class_order: Sequence[str], floor: RunFigures, kuota: SystemResult | None, kueue: SystemResult | None
) -> list[Row]:
    """The rows in print order; a system that was not run reads '-' everywhere."""

    workloads = kuota.figures.workloads if kuota else 0

    def figure(name: str, unit: str, read: Callable[[RunFigures], float | None], target: Target) -> Row:
        return Row(
            name,
            unit,
            read(floor),
            read(kuota.figures) if kuota else None,
            read(kueue.figures) if kueue else None,
            target,
            workloads,
        )

    def usage(name: str, unit: str, read: Callable[[SystemResult], float | None], target: Target) -> Row:
        return Row(name, unit, None, read(kuota) if kuota else None, read(kueue) if kueue else None, target)

    rows = [
        figure("workloads finished", "", lambda f: float(f.finished), NO_TARGET),
        figure("wall time", "s", lambda f: f.wall_seconds, at_most(0.4)),
    ]
    for name in class_order:
        rows.append(figure(f"mean time to admission, {name}", "s", _class_read(name, "mean"), at_most(0.4)))
        rows.append(figure(f"p95 time to admission, {name}", "s", _class_read(name, "p95"), at_most(0.5)))
    rows += [
        figure("utilization (cpu held / quota)", "%", lambda f: 100 * f.utilization, HIGHER),
        figure("admissions per second", "/s", lambda f: f.admissions_per_second, NO_TARGET),
        figure("re-admissions after preemption", "", lambda f: float(f.evictions), Target(of_workloads=0.01)),
        usage("manager CPU (user+system)", "s", lambda r: r.usage.cpu_seconds, at_most(0.4)),
        usage("manager CPU per admission", "ms", lambda r: _per_admission(r, 1000 * r.usage.cpu_seconds), NO_TARGET),
        usage("manager peak RSS (VmHWM)", "MiB", lambda r: r.usage.peak_rss_mib, LOWER),
        usage("apiserver requests by the manager", "", lambda r: float(r.usage.apiserver_requests), at_most(1.0)),
        usage(
            "apiserver requests per admission",
            "/adm",
            lambda r: _per_admission(r, float(r.usage.apiserver_requests)),
            NO_TARGET,
        ),
        usage("apiserver writes by the manager", "", lambda r: float(r.usage.apiserver_writes), NO_TARGET),
        usage(
            "apiserver writes per admission",
            "/adm",
            lambda r: _per_admission(r, float(r.usage.apiserver_writes)),
            NO_TARGET,
        ),
    ]
    return rows


def _per_admission(result: SystemResult, total: float) -> float | None:
    return total / result.figures.admissions if result.figures.admissions else None


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
    return f"{value:.1f}" if unit in ("MiB", "ms", "/adm") else f"{value:.0f}"


def _gap(live: float | None, floor: float | None, unit: str) -> str:
    if live is None or floor is None:
        return "-"
    return f"{live - floor:+.2f}" if unit in ("s", "/s", "%") else f"{live - floor:+.0f}"


def render(rows: Sequence[Row]) -> str:
    header = ("measure", "unit", "floor", "kuota", "Kueue", "kuota/Kueue", "kuota-floor", "Kueue-floor", "target")
    lines = [header]
    for row in rows:
        ratio = row.ratio
        target = f"{row.target.label}: {row.verdict}" if row.verdict else ""
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
