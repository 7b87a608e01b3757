"""Admission ETAs, offline: runtimes from the best source in order, the history's bounded persisted form, the
engine replayed forward from a running state, and ``kuota simulate``'s per-submission predictions."""

from __future__ import annotations

import gc
import json
import time

import pytest

from kuota.durations import DurationError
from kuota.engine.decoding import parse_object
from kuota.engine.flavor_assignment import PodSetAssignment
from kuota.engine.model import ApiObject, Workload
from kuota.simulator.errors import HistoryFormatError
from kuota.simulator.eta_replay import accuracy, eta_summary, predictions
from kuota.simulator.forecast import DEFAULT_HORIZON_SECONDS, Pending, Running, forecast
from kuota.simulator.replay import replay
from kuota.simulator.runtimes import (
    MAX_SHAPES,
    RING_SIZE,
    Runtime,
    RuntimeHistory,
    RuntimeSource,
    annotated_runtime,
    declared_runtime,
    queued_runtime,
    remaining_runtime,
    shape_of,
)
from kuota.simulator.workload_reading import SimulatedWorkload
from tests.unit.engine.builders import flavor, gpu_queue, local_queue, workload


def _objects(*queues: tuple[str, int]) -> list[ApiObject]:
    objects = [parse_object(flavor("gpu"))]
    for name, gpus in queues:
        objects += [parse_object(gpu_queue(name, gpus, cohort=None)), parse_object(local_queue(name, name))]
    return objects


def _limited(base: Workload, seconds: int) -> Workload:
    return Workload(
        base.namespace, base.name, base.queue_name, base.pod_sets, base.created, max_execution_seconds=seconds
    )


def test_runtimes_come_from_max_execution_then_the_annotation_then_the_history() -> None:
    plain = workload("research", "a", 2)
    limited = _limited(plain, 600)
    annotated = annotated_runtime("1h30m")
    assert annotated == Runtime(5400.0, RuntimeSource.ANNOTATION)
    assert declared_runtime(limited, annotated) == Runtime(600.0, RuntimeSource.MAX_EXECUTION)
    assert declared_runtime(plain, annotated) == annotated
    assert declared_runtime(plain, None) is None
    with pytest.raises(DurationError, match="'soon' is not a duration"):
        annotated_runtime("soon")

    history = RuntimeHistory()
    assert history.remaining("research/q", 2, 0.0) is None
    assert history.queued("research/q", 2) is None
    for finished_at, seconds in enumerate((100.0, 200.0)):
        history.record("research/q", 8, seconds, float(finished_at))
    # Two 8-GPU runs are too few for the 2-GPU shape's own ring: the whole queue's history stands in.
    assert history.remaining("research/q", 2, 0.0) == Runtime(150.0, RuntimeSource.HISTORY, 2, "research/q *")
    for finished_at, seconds in enumerate((30.0, 40.0, 50.0), start=10):
        history.record("research/q", 3, seconds, float(finished_at))
    assert history.remaining("research/q", 2, 0.0) == Runtime(40.0, RuntimeSource.HISTORY, 3, "research/q gpus-2")
    # Running for 45 s already: the median of the longer runs, less what is done; past them all, half again.
    assert history.remaining("research/q", 2, 45.0).seconds == 5.0  # type: ignore[union-attr]
    assert history.remaining("research/q", 2, 60.0).seconds == 30.0  # type: ignore[union-attr]
    # One long run among short ones: a job just started is still expected to run the median, but each job
    # yet to start brings the mean, what a queue of them adds up to.
    history.record("research/q", 2, 400.0, 20.0)
    assert history.remaining("research/q", 2, 0.0) == Runtime(45.0, RuntimeSource.HISTORY, 4, "research/q gpus-2")
    assert history.queued("research/q", 2) == Runtime(130.0, RuntimeSource.HISTORY, 4, "research/q gpus-2")
    plain = workload("research", "b", 2)
    assert queued_runtime(plain, None, history) == history.queued("research/q", 2)
    assert queued_runtime(plain, annotated, history) == annotated
    assert remaining_runtime(plain, annotated, history, 600.0) == Runtime(4800.0, RuntimeSource.ANNOTATION)
    assert remaining_runtime(plain, None, history, 45.0) == history.remaining("research/q", 2, 45.0)
    assert (shape_of(0), shape_of(1), shape_of(7), shape_of(8)) == ("gpus-0", "gpus-1", "gpus-4", "gpus-8")


def test_the_history_round_trips_through_its_annotation_and_stays_bounded() -> None:
    history = RuntimeHistory()
    for index in range(3 * RING_SIZE):
        history.record("research/q", 1 << (index % (MAX_SHAPES + 3)), 60.0 + index, 1000.0 + index)
    text = history.to_json("research/q")
    assert len(text) < 25_000
    restored = RuntimeHistory()
    restored.load_json("research/q", text)
    assert restored.to_json("research/q") == text
    assert restored.remaining("research/q", 1, 0.0) == history.remaining("research/q", 1, 0.0)
    # A finished Workload seen again after a restart is not counted twice.
    last = 3 * RING_SIZE - 1
    assert not restored.record("research/q", 1 << (last % (MAX_SHAPES + 3)), 60.0 + last, 1000.0 + last)
    # Shapes beyond 2**20 GPUs share the last ring: 21 rings, every record kept.
    assert restored.samples("research/q") == 3 * RING_SIZE
    assert len(json.loads(text)["shapes"]) == 21 <= MAX_SHAPES

    one_ring = RuntimeHistory()
    for index in range(100):
        one_ring.record("research/q", 1, float(index), float(index))
    assert one_ring.samples("research/q") == RING_SIZE

    for broken, why in (
        ("{", "Expecting"),
        ('{"v": 2, "shapes": {}}', "version 2"),
        ('{"v": 1, "shapes": {"big": []}}', "gpus-N"),
        ('{"v": 1, "shapes": {"gpus-1": [[1, -5]]}}', "holds no runtime"),
    ):
        with pytest.raises(HistoryFormatError, match=why):
            RuntimeHistory().load_json("research/q", broken)


def test_the_forward_replay_finishes_running_work_at_its_expected_end_and_admits_the_queue() -> None:
    objects = _objects(("research", 8))
    running = Running(
        workload("research", "big", 8),
        "research",
        (PodSetAssignment("main", {"nvidia.com/gpu": "gpu"}, 1, {"nvidia.com/gpu": 8}),),
        admitted_at=100.0,
        remaining=Runtime(3600.0, RuntimeSource.HISTORY, 40, "research/q gpus-8"),
    )
    half = Pending(workload("research", "half", 4, at=1.0), Runtime(1800.0, RuntimeSource.ANNOTATION))
    full = Pending(workload("research", "full", 8, at=2.0), None)
    after = Pending(workload("research", "after", 8, at=3.0), None)
    etas = forecast(objects, [running], [half, full, after], 1000.0)
    assert etas["research/half"].at == 1000.0 + 3600.0
    assert etas["research/half"].runtime_sources == (("history", 1),)
    assert etas["research/half"].similar_jobs == 40
    assert etas["research/full"].at == 1000.0 + 3600.0 + 1800.0
    assert dict(etas["research/full"].runtime_sources) == {"history": 1, "annotation": 1}
    # "full" has no known runtime: nothing behind it gets an ETA.
    assert "research/after" not in etas
    assert etas["research/full"].as_json()["inSeconds"] == 5400
    # Asked for one workload, the replay stops at it.
    assert list(forecast(objects, [running], [half, full, after], 1000.0, wanted=["research/half"])) == [
        "research/half"
    ]


def _running_one_gpu(name: str, seconds: float | None) -> Running:
    return Running(
        workload("research", name, 1),
        "research",
        (PodSetAssignment("main", {"nvidia.com/gpu": "gpu"}, 1, {"nvidia.com/gpu": 1}),),
        admitted_at=0.0,
        remaining=None if seconds is None else Runtime(seconds, RuntimeSource.ANNOTATION),
    )


def test_recent_submissions_are_expected_again_and_overtake_a_job_that_does_not_fit() -> None:
    objects = _objects(("research", 2))
    running = [_running_one_gpu("a", 100.0)]
    big = Pending(workload("research", "big", 2, at=-300.0), Runtime(10.0, RuntimeSource.ANNOTATION))
    hour = Runtime(100.0, RuntimeSource.ANNOTATION)
    # Nothing new arriving, "big" starts when "a" ends.
    assert forecast(objects, running, [big], 0.0, wanted=["research/big"])["research/big"].at == 100.0
    # A one-GPU job submitted 150 s ago comes again 50 s from now (the window is 200 s), takes the GPU "a"
    # leaves free, as BestEffortFIFO lets it, and "big" starts when that copy ends.
    once = [Pending(workload("research", "small", 1, at=-150.0), hour)]
    etas = forecast(objects, running, [big], 0.0, wanted=["research/big"], recent=once, window=200.0)
    assert etas["research/big"].at == 150.0 and not etas["research/big"].beyond_horizon
    # Two of them, 50 s apart, each running 160 s: one GPU is busy for ever, and "big" is not expected within
    # the horizon.
    longer = Runtime(160.0, RuntimeSource.ANNOTATION)
    twice = [
        Pending(workload("research", name, 1, at=at), longer) for name, at in (("small", -150.0), ("other", -100.0))
    ]
    etas = forecast(objects, running, [big], 0.0, recent=twice, window=200.0, horizon=1000.0)
    assert etas["research/big"].beyond_horizon and etas["research/big"].at == 1000.0
    # Submissions older than the window, or after now, or of unknown runtime, are not expected again.
    stale = [
        Pending(workload("research", "old", 1, at=-250.0), hour),
        Pending(workload("research", "x", 1, at=5.0), hour),
        Pending(workload("research", "unknown", 1, at=-150.0), None),
    ]
    assert forecast(objects, running, [big], 0.0, recent=stale, window=200.0)["research/big"].at == 100.0
    # An admitted job of unknown runtime may be what "big" waits on at the horizon: no ETA at all then.
    endless = [*running, _running_one_gpu("endless", None)]
    assert "research/big" not in forecast(objects, endless, [big], 0.0, recent=twice, window=200.0, horizon=1000.0)


def test_a_recomputation_for_thousands_pending_over_hundreds_of_queues_is_bounded() -> None:
    queues = [(f"team-{index:03d}", 8) for index in range(200)]
    objects = _objects(*queues)
    pending = [
        Pending(workload(name, f"job-{index}", 1 + index % 8, at=float(index)), Runtime(600.0, RuntimeSource.HISTORY))
        for index in range(2000)
        for name in (queues[index % len(queues)][0],)
    ]
    gc.disable()
    try:
        started = time.thread_time()
        etas = forecast(objects, [], pending, 0.0)
        spent = time.thread_time() - started
    finally:
        gc.enable()
    assert len(etas) == len(pending)
    assert spent < 2.0, f"{spent:.2f} s CPU for 2,000 pending workloads over 200 ClusterQueues"


def test_simulate_predicts_at_each_submission_from_the_stream_history_alone() -> None:
    objects = _objects(("research", 4))
    arrivals = [
        SimulatedWorkload(workload("research", f"job-{index}", 4, at=index * 10.0), index * 10.0, 100.0)
        for index in range(6)
    ]
    result = replay(objects, arrivals)
    made = {p.key: p for p in predictions(objects, arrivals, result)}
    # job-0 is admitted at once; job-1 waits for it, whose runtime is unknown: no history yet, no ETA.
    assert made["research/job-0"].predicted_wait == 0.0 == made["research/job-0"].actual_wait
    assert made["research/job-1"].eta is None
    assert made["research/job-1"].actual_start == 100.0
    # By job-5's submission (t=50) nothing has finished either; the stream's runtime is learnt from t=100 on.
    assert made["research/job-5"].baseline_wait is None
    later = [SimulatedWorkload(workload("research", "late", 4, at=250.0), 250.0, 100.0)]
    result = replay(objects, arrivals + later)
    late = {p.key: p for p in predictions(objects, arrivals + later, result)}["research/late"]
    assert late.actual_start == 600.0
    assert late.predicted_wait == late.actual_wait == 350.0
    assert late.eta is not None and late.eta.similar_jobs == 2
    assert late.baseline_wait == 3 * 100.0
    assert json.dumps(late.eta.as_json())


def test_each_cohort_tree_is_replayed_apart_with_the_same_decisions_and_its_own_sources() -> None:
    objects = [
        parse_object(flavor("gpu")),
        parse_object(gpu_queue("lender", 8, cohort="pool")),
        parse_object(gpu_queue("borrower", 0, cohort="pool")),
        parse_object(gpu_queue("alone", 8, cohort=None)),
        *(parse_object(local_queue(name, name)) for name in ("lender", "borrower", "alone")),
    ]
    running = [
        Running(
            workload(name, "busy", 8),
            name,
            (PodSetAssignment("main", {"nvidia.com/gpu": "gpu"}, 1, {"nvidia.com/gpu": 8}),),
            0.0,
            Runtime(seconds, RuntimeSource.ANNOTATION),
        )
        for name, seconds in (("lender", 100.0), ("alone", 500.0))
    ]
    pending = [
        Pending(workload("borrower", "borrows", 8, at=1.0), None),  # only the lender's idle quota fits it
        Pending(workload("alone", "next", 8, at=1.0), None),
        Pending(workload("nowhere", "lost", 1, at=1.0, queue="missing"), None),
    ]
    etas = forecast(objects, running, pending, 0.0)
    assert (etas["borrower/borrows"].at, etas["alone/next"].at) == (100.0, 500.0)
    assert etas["borrower/borrows"].runtime_sources == etas["alone/next"].runtime_sources == (("annotation", 1),)
    assert "nowhere/lost" not in etas
    assert list(forecast(objects, running, pending, 0.0, wanted=["alone/next"])) == ["alone/next"]


def test_the_summary_names_the_horizon_the_forecast_ran_to() -> None:
    day = 86400.0
    objects = _objects(("research", 4))
    arrivals = [
        SimulatedWorkload(workload("research", "first", 4), 0.0, 100.0),
        SimulatedWorkload(workload("research", "long", 4, at=200.0, max_seconds=int(40 * day)), 200.0, 40 * day),
        SimulatedWorkload(workload("research", "behind", 4, at=210.0), 210.0, 100.0),
    ]
    made = list(predictions(objects, arrivals, replay(objects, arrivals, 35 * day)))
    behind = made[-1].eta
    assert behind is not None and behind.beyond_horizon and behind.at == 210.0 + DEFAULT_HORIZON_SECONDS
    summary = eta_summary(accuracy(made), len(made))
    assert "3 predicted at submission, 1 compared with the replay, 1 of them beyond the 30.0d horizon" in summary
