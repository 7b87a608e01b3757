"""The loads and the floor: the scaled harness, the Job form of a harness workload, the simulate replay as
timelines, and the agreement scenario's expected decisions (by hand, from docs/architecture.md)."""

from __future__ import annotations

import pytest

from benchmarks.side_by_side import agreement, kinds
from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.floor import floor_timelines, history_timeline
from benchmarks.side_by_side.plans import job_plan, scaled_spec, total_quota_cpu, workload_plan
from kuota.engine import TopologyAssignment
from kuota.simulator.replay import AdmissionRecord, EvictionRecord, WorkloadHistory
from kuota.webhook.topology_assignment import encode
from tests.cluster import RUN_SECONDS_ANNOTATION


def test_scaling_multiplies_every_class_count_and_keeps_at_least_one() -> None:
    spec = scaled_spec(0.01, seed=0)
    assert [(c.name, c.count) for c in spec.classes] == [("small", 4), ("medium", 1), ("large", 1)]
    assert (spec.cohorts, spec.queues_per_cohort) == (5, 6)
    assert total_quota_cpu(spec) == 600


@pytest.mark.parametrize("scale", [0.0, 1.5])
def test_a_scale_outside_zero_to_one_is_refused(scale: float) -> None:
    with pytest.raises(MeasureError, match="--scale"):
        scaled_spec(scale, seed=0)


def test_workload_and_job_plans_carry_the_same_arrivals() -> None:
    spec = scaled_spec(0.02, seed=0, cohorts=1, queues_per_cohort=2)
    workloads, jobs = workload_plan(spec), job_plan(spec)
    assert [(p.key, p.submit_at, p.cpu, p.runtime) for p in workloads] == [
        (p.key, p.submit_at, p.cpu, p.runtime) for p in jobs
    ]
    assert workloads[0].manifest["kind"] == "Workload"
    job = jobs[0].manifest
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == workloads[0].manifest["spec"]["queueName"]
    assert job["spec"]["template"]["metadata"]["annotations"][RUN_SECONDS_ANNOTATION] == str(jobs[0].runtime)
    assert "suspend" not in job["spec"]  # the controller's webhook suspends it


def test_a_replayed_history_becomes_holds_paired_with_their_evictions() -> None:
    history = WorkloadHistory("w", "ns", submit_at=1.0, duration=2.0, remaining=0.0)
    history.admissions = [AdmissionRecord(2.0, {}, False, 0, 1.0, {}), AdmissionRecord(5.0, {}, False, 0, 1.0, {})]
    history.evictions = [EvictionRecord(3.0, "Preempted", "ns/x", "InCohortReclamation")]
    history.finished_at = 6.0
    timeline = history_timeline(history, "small", 1.0)
    assert timeline.holds == [(2.0, 3.0), (5.0, 6.0)]
    assert timeline.time_to_admission == 4.0


def test_the_floor_admits_and_finishes_every_harness_workload() -> None:
    spec = scaled_spec(0.02, seed=0, cohorts=1, queues_per_cohort=2)
    timelines = floor_timelines(spec)
    assert len(timelines) == spec.total_workloads
    assert all(t.finished_at is not None for t in timelines)


def _names(snapshot: agreement.Snapshot) -> list[str]:
    return sorted(key.split("/", 1)[1] for key in snapshot)


HELD = ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "p-0", "y-1", "z-0"]  # the other trees' holders after phase 9


def test_the_agreement_scenario_floor_matches_the_hand_derived_decisions() -> None:
    snapshots = [_names(s) for s in agreement.floor_snapshots()]
    expected = [
        ["a-0", "a-1", "a-2", "a-3"],  # a borrows 10 of the idle cohort
        ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1"],  # b within nominal, from what a leaves
        ["a-2", "a-3", "b-0", "b-1", "c-0"],  # c reclaims: a's two lowest priorities go
        ["a-2", "a-3", "b-1", "b-2", "c-0"],  # b-2 would borrow, so it preempts inside b: b-0 goes
        ["a-1", "a-2", "a-3", "b-0", "b-1", "b-2"],  # 10 free: b-0 (100) and a-1 (11) before a-0 (10)
        ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1"],  # a borrows up to its limit of 10
        # The nested tree beside it (the flat cohort's six stay as they are):
        ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "x-0", "y-0", "y-1"],  # the nested tree is full
        ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "p-0", "y-0", "y-1"],  # x-0 (310) goes, not y (305, 306)
        ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "p-0", "y-1", "z-0"],  # y-0, the lower of y's, goes
        # The kinds cohort (the nine above stay as they are):
        [*HELD, "js-0", "rj-0"],  # m holds 15: its nominal 10 and 5 borrowed
        [*HELD, "js-0", "rj-0", "s-0"],  # n's other 5: the cohort is full
        [*HELD, "pg-0", "rj-0", "s-0"],  # pg-0 reclaims from m: the JobSet (405) goes, not the RayJob (410)
        [*HELD, "js-0", "pg-0", "rj-0"],  # s-0's 5 free: the JobSet borrows them again
    ]
    assert snapshots == [sorted(names) for names in expected]


def test_comparison_lists_each_workload_held_under_only_some_controllers() -> None:
    floor: list[agreement.Snapshot] = [{"agree-a/a-0": (), "agree-b/b-0": ()}]
    kueue: list[agreement.Snapshot] = [{"agree-a/a-0": (), "agree-b/b-1": ()}]
    (comparison,) = agreement.compare(agreement.SCENARIO[:1], floor, floor, kueue)
    assert not comparison.agree
    assert comparison.differences() == [
        "agree-b/b-0 holds quota under floor, kuota only",
        "agree-b/b-1 holds quota under Kueue only",
    ]
    assert "DIFFERENT" in agreement.render([comparison])


def test_comparison_needs_one_snapshot_per_phase() -> None:
    with pytest.raises(MeasureError, match="one snapshot per phase"):
        agreement.compare(agreement.SCENARIO, [], [], [])


def test_the_checks_scenario_floor_times_out_retries_rejects_and_admits_by_hand() -> None:
    snapshots = [_names(s) for s in agreement.floor_snapshots(agreement.CHECKS)]
    assert snapshots == [
        ["stuck-0"],  # admitted; its pod is never ready
        ["wait-0"],  # stuck-0 timed out and backs off 600 s; wait-0 took r's quota
        ["chk-0", "wait-0"],  # chk-0 reserved k's quota, its check Pending; chk-1 waits
        ["chk-0", "wait-0"],  # chk-0's Retry evicted it, requeued at once: it reserved again, ahead of chk-1
        ["chk-1", "wait-0"],  # chk-0's Rejected deactivated it; chk-1 reserved, ahead of chk-2
        ["chk-1", "wait-0"],  # chk-1's Ready admitted it
    ]


def test_the_timeout_phase_lasts_past_the_timeout_in_simulated_time() -> None:
    instants = agreement.phase_instants(agreement.CHECKS_PHASES)
    waiting = agreement.CHECKS_PHASES[1]
    assert waiting.lasts >= agreement.PODS_READY_TIMEOUT
    assert instants[2] - instants[1] == waiting.lasts + agreement.PHASE_SPACING
    assert agreement.phase_instants(agreement.SCENARIO) == [i * agreement.PHASE_SPACING for i in range(13)]


def test_a_check_answered_on_a_workload_holding_nothing_is_refused() -> None:
    phases = (
        *agreement.CHECKS_PHASES[2:3],
        agreement.Phase("chk-1, while chk-0 holds the quota", answer=(("chk-1", "Ready"),)),
    )
    scenario = agreement.Scenario(phases, tuple(agreement.checks_objects(phases)), agreement.CHECKS_CONFIGURATION)
    with pytest.raises(MeasureError, match="chk-1 holds no quota for its check to answer, in phase 2"):
        agreement.floor_snapshots(scenario)


def test_answers_a_workload_line_cannot_declare_are_refused() -> None:
    """One delay after each reservation, Retries first, then Rejected or Ready: a second answer after a Ready, or
    after a longer wait than the first, has no line."""
    reserved, retried = agreement.CHECKS_PHASES[2:4]
    late = agreement.Phase("chk-0 again, later", answer=(("chk-0", "Rejected"),), lasts=15.0)
    for phases, answer in (
        ((reserved, agreement.Phase("ready", answer=(("chk-0", "Ready"),)), retried), "Retry in phase 3"),
        ((reserved, retried, agreement.Phase("wait", lasts=15.0), late), "Rejected in phase 4"),
    ):
        scenario = agreement.Scenario(phases, tuple(agreement.checks_objects(phases)), agreement.CHECKS_CONFIGURATION)
        with pytest.raises(MeasureError, match=f"chk-0's check answers {answer}, which its line cannot declare"):
            agreement.floor_snapshots(scenario)


def test_a_job_whose_pod_is_never_ready_selects_a_node_label_no_node_has() -> None:
    stuck = kinds.job("s", "ns", "q", "p1", 5, schedulable=False)["spec"]["template"]["spec"]
    running = kinds.job("r", "ns", "q", "p1", 5, schedulable=True)["spec"]["template"]["spec"]
    assert stuck["nodeSelector"] == kinds.NO_NODE_SELECTOR and "nodeSelector" not in running
    # the fake nodes are tainted for their GPUs: a pod that runs tolerates that
    assert running["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert stuck["containers"][0]["resources"]["requests"] == {"cpu": "5"}


def _on(*pods: tuple[str, int]) -> agreement.Placement:
    """One pod set, main, with these pods per node."""
    return (("main", tuple(pods)),)


def test_the_topology_scenario_floor_places_each_gang_where_only_it_fits() -> None:
    """Nodes h100-0 and h100-1 in rack r1, h100-2 in r2, 8 GPUs each: each gang has one place only."""
    snapshots = [{key.split("/", 1)[1]: placed for key, placed in s.items()} for s in agreement.floor_snapshots(
        agreement.TOPOLOGY
    )]  # fmt: skip
    spread = _on(("h100-0", 1), ("h100-1", 1), ("h100-2", 1))
    assert snapshots == [
        {"t-a": spread},  # no rack holds 3 x 8: preferred, it spans both
        {"t-a": spread},  # t-b requires a rack: none has room
        {"t-b": _on(("h100-0", 1), ("h100-1", 1)), "t-c": _on(("h100-2", 1))},  # r1 the only rack of 16
        {"t-c": _on(("h100-2", 1)), "t-d": _on(("h100-0", 2), ("h100-1", 2))},  # t-b, admitted late, finished
        {"t-d": _on(("h100-0", 2), ("h100-1", 2)), "t-e": _on(("h100-2", 2))},  # one node of 8 free
    ]
    comparisons = agreement.compare(agreement.TOPOLOGY_PHASES, *[agreement.floor_snapshots(agreement.TOPOLOGY)] * 3)
    assert "    t-d main: h100-0 x2, h100-1 x2\n" in agreement.render(comparisons)


def test_a_placement_is_read_from_either_encoding_of_the_topology_assignment() -> None:
    hosts = TopologyAssignment(("kubernetes.io/hostname",), ((("h100-0",), 2), (("h100-1",), 1)))
    slices = encode(hosts)
    domains = {"levels": ["kubernetes.io/hostname"], "domains": [{"values": ["h100-0"], "count": 2},
                                                                {"values": ["h100-1"], "count": 1}]}  # fmt: skip
    for raw in (slices, domains):
        assigned = [{"name": "workers", "topologyAssignment": raw}, {"name": "driver", "count": 1}]
        workload = {"status": {"admission": {"podSetAssignments": assigned}}}
        assert agreement.placement(workload) == (("workers", (("h100-0", 2), ("h100-1", 1))),)
    assert agreement.placement({"status": {"admission": {"podSetAssignments": [{"name": "main"}]}}}) == ()


def test_comparison_lists_each_holder_whose_pods_go_elsewhere() -> None:
    floor: list[agreement.Snapshot] = [{"agree-t/t-a": _on(("h100-0", 1))}]
    kueue: list[agreement.Snapshot] = [{"agree-t/t-a": _on(("h100-1", 1))}]
    (comparison,) = agreement.compare(agreement.TOPOLOGY_PHASES[:1], floor, floor, kueue)
    assert not comparison.agree
    assert comparison.differences() == [
        "agree-t/t-a places its pods differently: floor main: h100-0 x1; kuota main: h100-0 x1; Kueue main: h100-1 x1"
    ]


def test_a_finish_of_a_workload_holding_nothing_is_refused() -> None:
    phases = (*agreement.TOPOLOGY_PHASES[:2], agreement.Phase("t-b finishes while it waits", finish=("t-b",)))
    scenario = agreement.Scenario(
        phases, tuple(agreement.topology_objects(phases)), node_labels=agreement.TOPOLOGY.node_labels
    )
    with pytest.raises(MeasureError, match="t-b holds no quota for its finish, in phase 3"):
        agreement.floor_snapshots(scenario)
