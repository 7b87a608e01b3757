"""The visibility API's order, positions, windows and shapes, checked against the order the engine admits in."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.engine.decoding import parse_object
from kuota.engine.quota_engine import Admission, QuotaEngine
from kuota.webhook.visibility.errors import BadQueryError
from kuota.webhook.visibility.pending import (
    DEFAULT_LIMIT,
    QueuedWorkload,
    Window,
    cluster_queue_of,
    cluster_queue_order,
    cluster_queue_window,
    local_queue_window,
    parse_window,
    summary,
)
from tests.examples import examples
from tests.unit.engine.builders import engine_with, gpu_queue, local_queue, workload


def _engine() -> QuotaEngine:
    """ClusterQueue research (1 GPU) behind LocalQueues research/q and research/other."""
    engine = engine_with(gpu_queue("research", 1, cohort=None))
    engine.apply(parse_object(local_queue("research", "research", "other")))
    return engine


def _submit_mixed(engine: QuotaEngine) -> None:
    for name, at, priority, queue in (
        ("old-low", 1.0, 0, "q"),
        ("new-high", 5.0, 100, "other"),
        ("mid-low", 3.0, 0, "other"),
        ("old-high", 2.0, 100, "q"),
        ("newest-low", 9.0, 0, "q"),
        ("same-time-b", 4.0, 50, "q"),
        ("same-time-a", 4.0, 50, "other"),
    ):
        engine.submit(workload("research", name, at=at, priority=priority, queue=queue))


def _names(order: list[QueuedWorkload]) -> list[str]:
    return [w.name for w in order]


def test_the_listed_order_is_the_order_the_engine_admits_in() -> None:
    engine = _engine()
    _submit_mixed(engine)
    now = 10.0
    admissions: list[str] = []
    while order := cluster_queue_order(engine, "research"):
        assert [w.position_in_cluster_queue for w in order] == list(range(len(order)))
        decisions = engine.schedule(now)
        admitted = [d.workload for d in decisions if isinstance(d, Admission)]
        assert admitted == [f"research/{order[0].name}"], f"listed {_names(order)}, admitted {admitted}"
        admissions.append(order[0].name)
        engine.finish(admitted[0])  # the next one fits once the GPU is free again
        now += 1
    assert admissions == ["old-high", "new-high", "same-time-a", "same-time-b", "old-low", "mid-low", "newest-low"]


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, 10, 100]), st.integers(0, 5), st.sampled_from(["q", "other"]), st.integers(1, 2)),
        min_size=1,
        max_size=12,
    )
)
def test_any_mix_is_admitted_in_the_listed_order(shapes: list[tuple[int, int, str, int]]) -> None:
    """Priorities, creation times (ties included), LocalQueues and sizes at random, in a 2-GPU queue: whenever
    the engine admits, it admits the first listed workloads that fit, in listed order."""
    engine = engine_with(gpu_queue("research", 2, cohort=None))
    engine.apply(parse_object(local_queue("research", "research", "other")))
    sizes: dict[str, int] = {}
    for index, (priority, at, queue, gpus) in enumerate(shapes):
        engine.submit(workload("research", f"w{index}", gpus, at=float(at), priority=priority, queue=queue))
        sizes[f"w{index}"] = gpus
    now = 10.0
    while order := cluster_queue_order(engine, "research"):
        admitted = [d.workload for d in engine.schedule(now) if isinstance(d, Admission)]
        # BestEffortFIFO: in listed order, each one that fits what is still free is admitted.
        free, expected = 2, []
        for queued in order:
            if sizes[queued.name] <= free:
                expected.append(f"research/{queued.name}")
                free -= sizes[queued.name]
        assert admitted == expected, f"listed {_names(order)}"
        for key in admitted:
            engine.finish(key)
        now += 1


def test_a_head_that_does_not_fit_keeps_its_place_while_the_ones_behind_it_are_admitted() -> None:
    engine = _engine()
    engine.submit(workload("research", "too-big", 2, at=1.0, priority=100))  # 2 GPUs of a 1-GPU queue
    engine.submit(workload("research", "small", at=2.0))
    order = cluster_queue_order(engine, "research")
    assert order is not None and _names(order) == ["too-big", "small"]
    assert [d.workload for d in engine.schedule(3.0) if isinstance(d, Admission)] == ["research/small"]
    after = cluster_queue_order(engine, "research")
    assert after is not None and _names(after) == ["too-big"]  # set aside, still pending, still listed
    assert after[0].priority == 100 and after[0].local_queue == "q"


def test_admitted_finished_and_unknown_queues_are_not_listed() -> None:
    engine = _engine()
    _submit_mixed(engine)
    engine.schedule(10.0)
    order = cluster_queue_order(engine, "research")
    assert order is not None and "old-high" not in _names(order) and len(order) == 6
    assert cluster_queue_order(engine, "missing") is None
    assert cluster_queue_of(engine, "research", "other") == "research"
    assert cluster_queue_of(engine, "research", "missing") is None
    assert cluster_queue_of(engine, "elsewhere", "q") is None


def test_cluster_queue_windows_keep_positions_in_the_cluster_queue_and_each_local_queue() -> None:
    engine = _engine()
    _submit_mixed(engine)
    order = cluster_queue_order(engine, "research")
    assert order is not None
    full = cluster_queue_window(order, Window())
    expected = [
        ("old-high", 0, 0),
        ("new-high", 1, 0),
        ("same-time-a", 2, 1),
        ("same-time-b", 3, 1),
        ("old-low", 4, 2),
        ("mid-low", 5, 2),
        ("newest-low", 6, 3),
    ]
    assert [
        (e.workload.name, e.workload.position_in_cluster_queue, e.position_in_local_queue) for e in full
    ] == expected
    middle = cluster_queue_window(order, Window(offset=2, limit=3))
    assert [(e.workload.name, e.position_in_local_queue) for e in middle] == [
        ("same-time-a", 1),
        ("same-time-b", 1),
        ("old-low", 2),
    ]
    assert cluster_queue_window(order, Window(offset=7, limit=3)) == []


def test_local_queue_windows_count_offsets_within_the_local_queue() -> None:
    engine = _engine()
    _submit_mixed(engine)
    order = cluster_queue_order(engine, "research")
    assert order is not None
    own = local_queue_window(order, "research", "q", Window(offset=1, limit=2))
    assert [(e.workload.name, e.workload.position_in_cluster_queue, e.position_in_local_queue) for e in own] == [
        ("same-time-b", 3, 1),
        ("old-low", 4, 2),
    ]
    assert local_queue_window(order, "elsewhere", "q", Window()) == []


def test_limit_and_offset_are_read_as_kueue_reads_them() -> None:
    assert parse_window({}) == Window(0, DEFAULT_LIMIT)
    assert parse_window({"limit": "0", "offset": "3"}) == Window(3, DEFAULT_LIMIT)
    assert parse_window({"limit": "2"}) == Window(0, 2)
    with pytest.raises(BadQueryError, match=r"limit='ten' is not an integer"):
        parse_window({"limit": "ten"})
    with pytest.raises(BadQueryError, match=r"offset=-1 is negative"):
        parse_window({"offset": "-1"})


def test_the_summary_has_kueues_shape_with_owner_references_and_the_extra_fields() -> None:
    engine = _engine()
    engine.submit(workload("research", "job-a-1", at=1.0, priority=7))
    order = cluster_queue_order(engine, "research")
    assert order is not None
    metadata = {
        "research/job-a-1": {
            "name": "job-a-1",
            "creationTimestamp": "2026-12-02T05:00:00Z",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "job-a", "uid": "u-1", "controller": True}
            ],
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        }
    }
    extra = {"research/job-a-1": {"admissionEstimate": {"inSeconds": 60}}}
    answer = summary("v1beta1", cluster_queue_window(order, Window()), metadata.get, extra.get)
    assert answer == {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta1",
        "metadata": {},
        "items": [
            {
                "metadata": {
                    "name": "job-a-1",
                    "namespace": "research",
                    "creationTimestamp": "2026-12-02T05:00:00Z",
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-a", "uid": "u-1"}],
                },
                "priority": 7,
                "localQueueName": "q",
                "positionInClusterQueue": 0,
                "positionInLocalQueue": 0,
                "admissionEstimate": {"inSeconds": 60},
            }
        ],
    }
