"""The buy-versus-tune rules: the quadrant verdict (pure functions of figures; the levers are ``levers``).

Quadrant (thresholds are parameters, printed in every report):

=================  ===================  ==================
                   short queue          long queue
=================  ===================  ==================
low utilization    over-provisioned     tune
high utilization   healthy              buy
=================  ===================  ==================

A long queue whose waiting mostly happened while idle quota sat elsewhere is a scheduling problem whatever
the utilization, so it is "tune" too: new GPUs would idle the same way. The what-if, when it ran, has the
last word on "buy": if borrowing alone brings the p95 wait under the threshold, the verdict is "tune".
So a verdict can differ from the quadrant its two figures place it in (:func:`placed`); the reason then holds
the phrase of the rule that moved it, and :func:`moved_by` names that rule in a few words (for a chart's label).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Quadrant(StrEnum):
    TUNE = "tune"
    BUY = "buy"
    OVER_PROVISIONED = "over-provisioned"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Thresholds:
    low_utilization_percent: float = 50.0
    long_wait_s: float = 1800.0
    idle_percent: float = 5.0
    idle_holder_hours: float = 2.0
    idle_elsewhere_gpus: int = 8
    waiting_while_idle_share: float = 0.5
    right_size_percent: float = 30.0  # a pod whose p95 SM use is at most this may fit a smaller GPU


@dataclass(frozen=True)
class Verdict:
    quadrant: Quadrant
    reason: str


# phrases of the reasons a verdict moved from the quadrant its figures place it in, and what each means
IDLE_ELSEWHERE = "borrowing, not buying"
CURED_BY_BORROWING = "replayed with borrowing across the cohort"
WORST_QUEUE = "the p95 wait is the worst ClusterQueue's"
WHATIF_WITHHELD = "the what-if is withheld"
_MOVED_BY = (
    (CURED_BY_BORROWING, "borrowing fixes it in the what-if"),
    (IDLE_ELSEWHERE, "idle quota elsewhere, borrow"),
    (WORST_QUEUE, "judged by its worst queue"),
)


def _hours(seconds: float) -> str:
    """A wait for people: seconds under 90 s (a 0 would hide a short --long-wait), minutes, then hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def placed(utilization_percent: float, wait_p95_s: float, thresholds: Thresholds) -> Quadrant:
    """The quadrant of the table above that the two figures alone place a team (or the cluster) in."""
    long = wait_p95_s > thresholds.long_wait_s
    low = utilization_percent < thresholds.low_utilization_percent
    if long:
        return Quadrant.TUNE if low else Quadrant.BUY
    return Quadrant.OVER_PROVISIONED if low else Quadrant.HEALTHY


def moved_by(verdict: Verdict, quadrant: Quadrant) -> str | None:
    """Why ``verdict`` is not ``quadrant`` (where its figures place it), in a few words; None when it is."""
    if verdict.quadrant is quadrant:
        return None
    return next((short for phrase, short in _MOVED_BY if phrase in verdict.reason), "see its reason")


def decide(
    utilization_percent: float | None,
    wait_p95_s: float | None,
    waiting_while_idle_share: float | None,
    thresholds: Thresholds,
) -> Verdict:
    """The quadrant for one team or the cluster; ``waiting_while_idle_share`` is of its waiting time."""
    if wait_p95_s is None:
        return Verdict(Quadrant.UNKNOWN, "no admission waits were recorded in the window (missing data)")
    long = wait_p95_s > thresholds.long_wait_s
    wait_text = f"p95 wait {_hours(wait_p95_s)} {'>' if long else '<='} {_hours(thresholds.long_wait_s)}"
    low = None if utilization_percent is None else utilization_percent < thresholds.low_utilization_percent
    util_text = (
        "utilization unknown (missing data)"
        if utilization_percent is None
        else f"utilization {utilization_percent:.1f}% {'<' if low else '>='} {thresholds.low_utilization_percent:g}%"
    )
    if long:
        if low:
            return Verdict(Quadrant.TUNE, f"{util_text} and {wait_text}: a scheduling problem")
        share = waiting_while_idle_share
        if share is not None and share >= thresholds.waiting_while_idle_share:
            return Verdict(
                Quadrant.TUNE,
                f"{wait_text}, but in {share:.0%} of the waiting time at least "
                f"{thresholds.idle_elsewhere_gpus} GPUs of quota sat idle elsewhere ({util_text}): {IDLE_ELSEWHERE}",
            )
        if low is None:
            return Verdict(Quadrant.UNKNOWN, f"{wait_text}; {util_text}")
        return Verdict(Quadrant.BUY, f"{util_text} and {wait_text}: the GPUs are busy and work still waits")
    if low is None:
        return Verdict(Quadrant.UNKNOWN, f"{wait_text}; {util_text}")
    if low:
        return Verdict(Quadrant.OVER_PROVISIONED, f"{util_text} and {wait_text}: quota to lend or give back")
    return Verdict(Quadrant.HEALTHY, f"{util_text} and {wait_text}")


def settle_with_whatif(
    verdict: Verdict, borrowing_p95_s: float | None, thresholds: Thresholds, withheld: str | None = None
) -> Verdict:
    """A "buy" that borrowing alone cures in the replay becomes "tune", unless the what-if is ``withheld`` (why:
    its replay of the current queues is off the measured week, :mod:`~kuota.report.figures.calibration`)."""
    cured = borrowing_p95_s is not None and borrowing_p95_s <= thresholds.long_wait_s
    if verdict.quadrant is Quadrant.BUY and borrowing_p95_s is not None and cured:
        if withheld is not None:
            return Verdict(
                verdict.quadrant,
                f"{verdict.reason}; borrowing across the cohort brings the p95 wait to {_hours(borrowing_p95_s)} "
                f"in the what-if, but {WHATIF_WITHHELD}: {withheld}",
            )
        return Verdict(
            Quadrant.TUNE,
            f"{verdict.reason}; yet {CURED_BY_BORROWING} the p95 wait is "
            f"{_hours(borrowing_p95_s)}, under the threshold",
        )
    return verdict
