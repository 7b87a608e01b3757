from __future__ import annotations

from kuota.report.figures.levers import (
    HOURS_PER_MONTH,
    Effort,
    Lever,
    LeverItem,
    QueueLeverInputs,
    cluster_levers,
    per_month,
    priced,
    queue_levers,
    ranked,
)
from kuota.report.figures.verdicts import (
    Quadrant,
    Thresholds,
    Verdict,
    decide,
    moved_by,
    placed,
    settle_with_whatif,
)

RULES = Thresholds(low_utilization_percent=50, long_wait_s=1800)


def test_low_utilization_and_long_queue_is_tune() -> None:
    assert decide(30.0, 4000.0, 0.0, RULES).quadrant is Quadrant.TUNE


def test_high_utilization_and_long_queue_is_buy() -> None:
    assert decide(80.0, 4000.0, 0.1, RULES).quadrant is Quadrant.BUY


def test_short_queue_quadrants() -> None:
    assert decide(30.0, 60.0, None, RULES).quadrant is Quadrant.OVER_PROVISIONED
    assert decide(80.0, 60.0, None, RULES).quadrant is Quadrant.HEALTHY


def test_long_queue_waiting_while_quota_idles_elsewhere_is_tune_even_when_busy() -> None:
    verdict = decide(80.0, 4000.0, 0.9, RULES)
    assert verdict.quadrant is Quadrant.TUNE
    assert "90%" in verdict.reason


def test_missing_data_is_unknown_and_says_so() -> None:
    assert decide(None, None, None, RULES).quadrant is Quadrant.UNKNOWN
    verdict = decide(None, 4000.0, 0.1, RULES)
    assert verdict.quadrant is Quadrant.UNKNOWN
    assert "missing data" in verdict.reason


def test_thresholds_are_stated_in_the_reason() -> None:
    reason = decide(30.0, 4000.0, 0.0, Thresholds(low_utilization_percent=40, long_wait_s=3600)).reason
    assert "40%" in reason and "60 min" in reason


def test_whatif_turns_buy_into_tune_only_when_borrowing_cures_the_wait() -> None:
    buy = decide(80.0, 4000.0, 0.1, RULES)
    assert settle_with_whatif(buy, 900.0, RULES).quadrant is Quadrant.TUNE
    assert settle_with_whatif(buy, 3000.0, RULES).quadrant is Quadrant.BUY
    assert settle_with_whatif(buy, None, RULES).quadrant is Quadrant.BUY


def test_the_figures_alone_place_a_point_in_the_tables_quadrant() -> None:
    assert placed(30.0, 4000.0, RULES) is Quadrant.TUNE
    assert placed(80.0, 4000.0, RULES) is Quadrant.BUY
    assert placed(30.0, 60.0, RULES) is Quadrant.OVER_PROVISIONED
    assert placed(80.0, 1800.0, RULES) is Quadrant.HEALTHY, "a wait at the threshold is not long"
    assert placed(50.0, 4000.0, RULES) is Quadrant.BUY, "utilization at the threshold is not low"


def test_a_verdict_moved_out_of_its_quadrant_says_which_rule_moved_it() -> None:
    buy = decide(80.0, 4000.0, 0.1, RULES)
    assert moved_by(buy, Quadrant.BUY) is None
    assert moved_by(settle_with_whatif(buy, 900.0, RULES), Quadrant.BUY) == "borrowing fixes it in the what-if"
    assert moved_by(decide(80.0, 4000.0, 0.9, RULES), Quadrant.BUY) == "idle quota elsewhere, borrow"
    assert moved_by(decide(30.0, 4000.0, 0.9, RULES), Quadrant.TUNE) is None
    worst = Verdict(Quadrant.BUY, "... (the p95 wait is the worst ClusterQueue's, research)")
    assert moved_by(worst, Quadrant.HEALTHY) == "judged by its worst queue"
    assert moved_by(Verdict(Quadrant.TUNE, "some other rule"), Quadrant.BUY) == "see its reason"


def _queue(**changes: object) -> QueueLeverInputs:
    base: dict[str, object] = dict(
        long_queue=True, waiting_while_idle_hours=2.0, reclaimable_gpu_hours=5.0, cohort=None, preemptions=None
    )
    base.update(changes)
    return QueueLeverInputs(**base)  # type: ignore[arg-type]


def test_levers_ranked_by_dollars_then_gpu_hours_then_the_rest() -> None:
    levers = ranked(priced(lever, 2.0, 168.0) for lever in queue_levers(_queue(), RULES))
    assert [lever.name for lever in levers] == [
        "borrowing in a cohort",  # 2 h x 8 GPUs = 16
        "preemption (reclaimWithinCohort)",  # 5
    ]
    assert levers[0].dollars == 32.0 and levers[0].dollars_per_month == 32.0 * HOURS_PER_MONTH / 168
    assert priced(Lever("unquantified", None, ""), 2.0, 168.0).dollars is None, "no GPU-hours, no price"
    lacking = priced(Lever("spot", 10.0, "", missing="a spot price"), 2.0, 168.0)
    assert lacking.dollars is None, "a lever lacking its own price is not priced at the full one"
    unpriced = Lever("unpriced", 1000.0, "", missing="a price")
    cheap = Lever("cheap", 1.0, "", dollars=1.0, dollars_per_month=per_month(1.0, 168.0))
    assert [lv.name for lv in ranked([unpriced, cheap])] == ["cheap", "unpriced"], "dollars rank above GPU-hours"


def test_no_queue_levers_without_a_long_queue() -> None:
    assert queue_levers(_queue(long_queue=False), RULES) == []


def test_the_cluster_sums_each_lever_over_its_teams_and_keeps_the_largest_items() -> None:
    def lever(team: str, dollars: float) -> Lever:
        item = LeverItem(team, f"pod-{team}", dollars / 2, dollars, "idle")
        return Lever("stop idle holders", dollars / 2, "", dollars, dollars * 2, Effort.SETTING, (item,))

    summed = cluster_levers([("a", [lever("a", 10.0)]), ("b", [lever("b", 30.0)])])
    assert len(summed) == 1
    assert (summed[0].dollars, summed[0].dollars_per_month, summed[0].gpu_hours) == (40.0, 80.0, 20.0)
    assert [item.namespace for item in summed[0].items] == ["b", "a"]
    assert summed[0].evidence == "indicated for 2 team(s): a, b"


def test_a_short_long_wait_threshold_reads_in_seconds_not_as_zero_minutes() -> None:
    reason = decide(80.0, 75.0, 0.0, Thresholds(low_utilization_percent=40, long_wait_s=10)).reason
    assert "p95 wait 75 s > 10 s" in reason, reason
