"""Week over week (``--previous``): this report's teams and cluster beside an earlier report's (pure).

:func:`~kuota.report.sources.previous_report.read_previous` reads the earlier report.json into a
:class:`PreviousReport`; :func:`compare` matches its teams with this report's by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kuota.report.figures.schema import Change, ClusterReport, IdleCost, TeamReport, WeekOverWeek


@dataclass(frozen=True)
class PreviousFigures:
    utilization_percent: float | None
    wait_p50_s: float | None
    wait_p95_s: float | None
    idle_cost_dollars: float | None  # the idle-held cost over every hour class
    verdict: str | None


@dataclass(frozen=True)
class PreviousReport:
    window: str  # as that report described it
    cluster: PreviousFigures
    teams: Mapping[str, PreviousFigures]


def _idle_cost_total(cost: IdleCost | None) -> float | None:
    return None if cost is None else sum(cost.dollars.values())


def _change(name: str, before: PreviousFigures | None, now: TeamReport | ClusterReport | None) -> Change:
    if isinstance(now, ClusterReport):
        utilization = now.utilization_average_percent
    else:
        utilization = now.utilization.average_percent if now is not None and now.utilization else None
    queue = now.queueing if now is not None else None
    return Change(
        name=name,
        utilization_before_percent=before.utilization_percent if before else None,
        utilization_now_percent=utilization,
        wait_p50_before_s=before.wait_p50_s if before else None,
        wait_p50_now_s=queue.wait_p50_s if queue else None,
        wait_p95_before_s=before.wait_p95_s if before else None,
        wait_p95_now_s=queue.wait_p95_s if queue else None,
        idle_cost_before_dollars=before.idle_cost_dollars if before else None,
        idle_cost_now_dollars=_idle_cost_total(now.idle_cost) if now is not None else None,
        verdict_before=before.verdict if before else None,
        verdict_now=now.verdict.quadrant.value if now is not None else None,
    )


def compare(previous: PreviousReport, teams: Sequence[TeamReport], cluster: ClusterReport) -> WeekOverWeek:
    """This report's teams and cluster beside the previous report's, matched by team name."""
    now = {team.name: team for team in teams}
    gone = [name for name in previous.teams if name not in now]
    return WeekOverWeek(
        previous_window=previous.window,
        cluster=_change("cluster", previous.cluster, cluster),
        teams=tuple(_change(t.name, previous.teams.get(t.name), t) for t in teams)
        + tuple(_change(name, previous.teams[name], None) for name in gone),
    )
