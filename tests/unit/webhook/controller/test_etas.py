"""The controller's admission ETAs: replayed forward from its engine and views, worded for the pending
message, the runtime history kept on the LocalQueues (round trip through the annotation), and a recomputation
that never runs twice at once."""

from __future__ import annotations

import asyncio
import datetime
import gc
import json
import warnings
from typing import Any, cast

import pytest

from kuota.engine.decoding import parse_workload
from kuota.engine.model import Configuration
from kuota.kube.client import ApiResponse, KubeApi
from kuota.simulator.forecast import Eta
from kuota.simulator.runtimes import Runtime, annotated_runtime
from kuota.webhook.controller import etas
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import ApiWriter
from kuota.webhook.controller.etas import ETA_ANNOTATION, HISTORY_ANNOTATION, EtaBook, phrase
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.state import ControllerState, compact_workload
from tests.unit.engine.builders import engine_with, gpu_queue

START = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC).timestamp()
NOW = START + 3600.0


class _Api:
    """A KubeApi stand-in that answers every PATCH with the patched object at a newer resourceVersion."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> ApiResponse:
        self.patches.append((path, body))
        name = path.rsplit("/", 1)[1]
        obj = json.loads(json.dumps(self.objects.get(name) or {"metadata": {"name": name}}))
        annotations = obj["metadata"].setdefault("annotations", {})
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        obj["metadata"]["resourceVersion"] = "100"
        return ApiResponse(method, path, 200, json.dumps(obj).encode())


def _workload(
    name: str,
    gpus: int,
    *,
    annotations: dict[str, str] | None = None,
    reserved_at: float | None = None,
    finished_at: float | None = None,
) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {}}}
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "namespace": "research",
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "5",
            "creationTimestamp": status.rfc3339(START),
            "annotations": annotations or {},
        },
        "spec": {
            "queueName": "q",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
        "status": {"conditions": []},
    }
    if reserved_at is not None:
        obj["status"]["admission"] = {
            "clusterQueue": "research",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 1,
                    "flavors": {"nvidia.com/gpu": "gpu"},
                    "resourceUsage": {"nvidia.com/gpu": str(gpus)},
                }
            ],
        }
        obj["status"]["conditions"].append(
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": status.rfc3339(reserved_at)}
        )
    if finished_at is not None:
        obj["status"]["conditions"].append(
            {"type": "Finished", "status": "True", "lastTransitionTime": status.rfc3339(finished_at)}
        )
    return obj


def _book(*objects: dict[str, Any], local_queues: list[dict[str, Any]] | None = None) -> tuple[EtaBook, _Api]:
    state = ControllerState(Configuration(), clock=lambda: NOW)
    state.engine = engine_with(gpu_queue("research", 8, cohort=None))
    for obj in objects:
        key = f"research/{obj['metadata']['name']}"
        state.workloads.observe(key, compact_workload(obj))
        if status.is_true(obj, "Finished"):
            continue
        parsed = state.parsed[key] = parse_workload(obj, {})  # as the controller's sync keeps it
        pod_sets = status.admitted_pod_sets(obj)
        if pod_sets is None:
            state.engine.submit(parsed)
        else:
            state.engine.restore_admitted(parsed, "research", pod_sets, status.quota_reserved_at(obj) or 0.0)
    api = _Api({obj["metadata"]["name"]: obj for obj in (*objects, *(local_queues or []))})
    reporter = ApiWriter(cast(KubeApi, api), ControllerMetrics(), attempts=1)
    return EtaBook(state, reporter, local_queues), api


def test_a_pending_workload_gets_the_eta_its_forward_replay_gives_with_where_the_runtimes_came_from() -> None:
    running = _workload("running", 8, annotations={"kuota.dev/expected-runtime": "2h"}, reserved_at=START)
    book, _ = _book(running, _workload("waiting", 4))
    asyncio.run(book.recompute())
    eta = book.eta_of("research/waiting")
    assert eta is not None
    assert eta.at == START + 7200.0  # the running one, declared 2 h from its admission, then this one
    assert eta.runtime_sources == (("annotation", 1),)
    assert book.phrase("research/waiting") == "expected to start in about 1 h, from 1 declared runtime"
    assert book.eta_of("research/running") is None
    assert book.head_etas() == {"research": eta}


def test_runtimes_come_from_max_execution_before_the_annotation_before_the_history() -> None:
    finished = [
        _workload(f"done-{index}", 8, reserved_at=START - 4000.0 - index, finished_at=START - 1000.0 - index)
        for index in range(3)
    ]
    limited = _workload("limited", 8, annotations={"kuota.dev/expected-runtime": "9h"}, reserved_at=START)
    limited["spec"]["maximumExecutionTimeSeconds"] = 5400
    book, _ = _book(*finished, limited, _workload("waiting", 8))
    asyncio.run(book.recompute())
    eta = book.eta_of("research/waiting")
    assert eta is not None and eta.at == START + 5400.0 and eta.runtime_sources == (("maxExecutionTimeSeconds", 1),)

    plain = _workload("plain", 8, reserved_at=NOW - 2970.0)
    book, _ = _book(*finished, plain, _workload("waiting", 8))
    asyncio.run(book.recompute())
    eta = book.eta_of("research/waiting")
    assert eta is not None and eta.at == NOW + 30.0  # the 3 similar jobs each ran 3000 s
    assert (eta.runtime_sources, eta.similar_jobs) == ((("history", 1),), 3)
    assert book.phrase("research/waiting") == "expected to start within a minute, from 3 similar jobs"


def test_a_running_workload_is_expected_to_run_the_median_and_one_yet_to_start_the_mean() -> None:
    runtimes = (600.0, 600.0, 6000.0)  # median 600 s, mean 2400 s
    finished = [
        _workload(f"done-{index}", 8, reserved_at=START - 9000.0 - index, finished_at=START - 9000.0 - index + seconds)
        for index, seconds in enumerate(runtimes)
    ]
    book, _ = _book(*finished, _workload("running", 8, reserved_at=NOW), _workload("ahead", 8), _workload("next", 8))
    asyncio.run(book.recompute())
    ahead, behind = book.eta_of("research/ahead"), book.eta_of("research/next")
    assert ahead is not None and ahead.at == NOW + 600.0
    assert behind is not None and behind.at == NOW + 600.0 + 2400.0
    assert behind.similar_jobs == 3


def test_a_snapshot_decodes_no_kept_copy_and_parses_an_annotation_again_only_once_it_changes(
    monkeypatch: Any,
) -> None:
    running = _workload("running", 8, annotations={"kuota.dev/expected-runtime": "2h"}, reserved_at=START)
    book, _ = _book(running, _workload("waiting", 4))
    decoded: list[str] = []
    parsed: list[str] = []
    view = book._state.workloads
    load = view.get

    def counting_get(key: str) -> dict[str, Any] | None:
        decoded.append(key)
        return load(key)

    def counting_parse(text: str) -> Runtime:
        parsed.append(text)
        return annotated_runtime(text)

    monkeypatch.setattr(view, "get", counting_get)
    monkeypatch.setattr(etas, "annotated_runtime", counting_parse)
    asyncio.run(book.recompute())
    assert (decoded, parsed) == ([], ["2h"])
    asyncio.run(book.recompute())
    assert (decoded, parsed) == ([], ["2h"])  # nothing moved: nothing parsed again, the same ETA
    eta = book.eta_of("research/waiting")
    assert eta is not None and eta.at == START + 7200.0

    longer = _workload("running", 8, annotations={"kuota.dev/expected-runtime": "3h"}, reserved_at=START)
    longer["metadata"]["resourceVersion"] = "6"
    view.observe("research/running", compact_workload(longer))
    asyncio.run(book.recompute())
    assert (decoded, parsed) == ([], ["2h", "3h"])
    eta = book.eta_of("research/waiting")
    assert eta is not None and eta.at == START + 3 * 3600.0  # the new annotation, read from the new version


def test_the_runtime_history_survives_a_restart_through_the_localqueue_annotation() -> None:
    done = _workload("done", 8, reserved_at=START - 1800.0, finished_at=START - 600.0)
    book, api = _book(done, _workload("waiting", 8, annotations={}))
    asyncio.run(book.recompute())
    asyncio.run(book.publish())
    written = [body for path, body in api.patches if "/localqueues/q" in path]
    assert len(written) == 1
    persisted = written[0]["metadata"]["annotations"][HISTORY_ANNOTATION]
    assert json.loads(persisted)["shapes"] == {"gpus-8": [[START - 600.0, 1200.0]]}

    local_queue = {"metadata": {"namespace": "research", "name": "q", "annotations": {HISTORY_ANNOTATION: persisted}}}
    restarted, api = _book(done, local_queues=[local_queue])
    assert restarted.history.samples("research/q") == 1
    asyncio.run(restarted.recompute())  # sees the same finished Workload again: not counted twice
    asyncio.run(restarted.publish())
    assert restarted.history.samples("research/q") == 1
    assert not [path for path, _ in api.patches if "/localqueues/" in path]

    broken = {"metadata": {"namespace": "research", "name": "q", "annotations": {HISTORY_ANNOTATION: "{"}}}
    assert _book(local_queues=[broken])[0].history.samples("research/q") == 0


def test_the_eta_annotation_is_written_for_long_waits_and_removed_once_admitted() -> None:
    running = _workload("running", 8, annotations={"kuota.dev/expected-runtime": "3h"}, reserved_at=START)
    book, api = _book(running, _workload("waiting", 8))
    asyncio.run(book.recompute())
    asyncio.run(book.publish())
    assert [body["metadata"]["annotations"] for path, body in api.patches if path.endswith("/waiting")] == [
        {ETA_ANNOTATION: status.rfc3339(START + 3 * 3600.0)}
    ]
    asyncio.run(book.publish())  # unchanged: not written again
    assert len(api.patches) == 1
    engine = book._state.engine
    engine.finish("research/running")
    assert [decision.workload for decision in engine.schedule(NOW)] == ["research/waiting"]
    asyncio.run(book.recompute())  # admitted now: no ETA, and the annotation goes
    asyncio.run(book.publish())
    assert api.patches[-1][1]["metadata"]["annotations"] == {ETA_ANNOTATION: None}


def test_a_recomputation_never_starts_while_one_runs() -> None:
    book, _ = _book(_workload("waiting", 4))

    async def twice() -> None:
        await asyncio.gather(book.recompute(), book.recompute())

    asyncio.run(twice())
    assert book.recomputations == 1
    asyncio.run(book.recompute())
    assert book.recomputations == 2
    book.interval = 0
    asyncio.run(asyncio.wait_for(book.run(), 1.0))  # off: returns at once


def test_recomputations_keep_to_a_share_of_one_core_however_large_the_backlog() -> None:
    book, _ = _book(*(_workload(f"waiting-{i}", 4) for i in range(40)))
    assert book.cpu_seconds == 0.0
    asyncio.run(book.recompute())
    assert book.cpu_seconds > 0.0  # the replay's own CPU time, measured in its thread
    assert etas.wait_after(5.0, 0.01) == 5.0  # a cheap replay: every interval
    assert etas.wait_after(5.0, 2.0) == 2.0 / etas._CPU_SHARE  # an expensive one: coarsened to the share
    assert etas.wait_after(5.0, 2.0) > etas.wait_after(5.0, 1.0) > 5.0


def test_the_last_day_of_submissions_is_expected_again_and_a_job_it_keeps_overtaking_is_told_so() -> None:
    small = _workload("small", 1, annotations={"kuota.dev/expected-runtime": "30h"}, reserved_at=START)
    done = _workload("done", 1, reserved_at=START, finished_at=START + 600.0)
    old = _workload("old", 1, reserved_at=START - 2 * 86400.0, finished_at=START - 86400.0)
    old["metadata"]["creationTimestamp"] = status.rfc3339(START - 2 * 86400.0)
    inactive = _workload("inactive", 1)
    inactive["spec"]["active"] = False
    book, _ = _book(small, done, old, _workload("big", 8), inactive)
    # Submitted within the last 24 hours, whatever became of them: the running, the finished, the pending,
    # the deactivated (as kuota simulate counts every submission of the stream).
    assert sorted(item.workload.name for item in book.snapshot(NOW).recent) == ["big", "done", "inactive", "small"]
    asyncio.run(book.recompute())
    # A copy of "small" arrives every day and runs 30 h: one GPU is always taken, and "big" needs all 8.
    assert book.eta_of("research/big") is None
    assert book.phrase("research/big") == (
        "not expected to start within 30 days, from 2 similar jobs and 29 declared runtimes"
    )
    assert book.head_etas() == {}


def test_the_pending_message_words_the_wait_and_its_basis() -> None:
    def worded(seconds: float, sources: tuple[tuple[str, int], ...] = (), similar: int = 0) -> str:
        return phrase(Eta(NOW + seconds, NOW, sources, similar), NOW)

    assert worded(20) == "expected to start within a minute"
    assert worded(7 * 60, (("history", 3),), 40) == "expected to start in about 7 min, from 40 similar jobs"
    assert worded(42 * 60) == "expected to start in about 40 min"
    assert worded(2 * 3600 + 100, (("history", 2), ("annotation", 1)), 1) == (
        "expected to start in about 2 h, from 1 similar job and 1 declared runtime"
    )
    assert worded(5 * 86400, (("maxExecutionTimeSeconds", 4),)) == (
        "expected to start in about 5 days, from 4 declared runtimes"
    )
    beyond = Eta(NOW + 30 * 86400, NOW, (("history", 9),), 32, beyond_horizon=True)
    assert phrase(beyond, NOW + 600) == "not expected to start within 30 days, from 32 similar jobs"


async def test_eta_annotations_wait_for_decision_writes_and_skip_a_workload_decided_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(etas, "_LONGEST_WAIT_FOR_DECISIONS", 0.3)
    running = _workload("running", 8, annotations={"kuota.dev/expected-runtime": "3h"}, reserved_at=START)
    declared = {"kuota.dev/expected-runtime": "1h"}
    book, api = _book(
        running, _workload("waiting", 8, annotations=declared), _workload("decided", 8, annotations=declared)
    )
    state = book._state
    await book.recompute()
    state.writing_started(["research/elsewhere"])  # a decision write in flight, as the DecisionWriter records one
    publishing = asyncio.ensure_future(book.publish())
    await asyncio.sleep(0.1)
    assert api.patches == []  # the round waits for the decision write
    state.writing_started(["research/decided"])  # another decision write begun, on one the round planned,
    state.writing_done("research/elsewhere")  # and the first one done
    await publishing  # it went after waiting its longest, while that write was still in flight
    assert [path.rsplit("/", 1)[1] for path, _ in api.patches] == ["waiting"]
    state.writing_done("research/decided")
    await book.publish()  # the next round writes the one it skipped
    assert [path.rsplit("/", 1)[1] for path, _ in api.patches] == ["waiting", "decided"]


async def test_a_cancelled_round_closes_the_writes_it_never_started() -> None:
    running = _workload("running", 8, annotations={"kuota.dev/expected-runtime": "3h"}, reserved_at=START)
    declared = {"kuota.dev/expected-runtime": "1h"}
    book, api = _book(running, *(_workload(f"waiting-{i}", 8, annotations=declared) for i in range(6)))
    await book.recompute()
    book._state.writing_started(["research/elsewhere"])  # decisions never stop: the round waits on its first batch
    publishing = asyncio.ensure_future(book.publish())
    await asyncio.sleep(0.05)
    publishing.cancel()
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        await asyncio.wait([publishing])
        assert publishing.cancelled()
        del publishing
        gc.collect()  # an unstarted write never closed says "coroutine ... was never awaited" as it goes
    assert [str(warning.message) for warning in told] == []
    assert api.patches == []
