"""The controller's write path: which answers are retried, which mean "re-read and decide again", and the typed
Kubernetes error each failure is raised from."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import (
    AlreadyExistsError,
    ApiUnreachableError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    UnavailableError,
)
from kuota.webhook.controller.api_writes import LEASES, WORKLOADS, ApiWriter
from kuota.webhook.controller.errors import ApiWriteError, StaleObjectError
from kuota.webhook.controller.metrics import ControllerMetrics


class _Answers:
    """A KubeApi stand-in that gives the prepared answers in turn (an exception is raised instead)."""

    def __init__(self, *answers: int | bytes | Exception) -> None:
        self.answers = list(answers)
        self.requests = 0

    async def request(self, method: str, path: str, **_: Any) -> ApiResponse:
        self.requests += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, bytes):
            return ApiResponse(method, path, 200, answer)
        body = b'{"kind": "Status", "reason": "AlreadyExists"}' if answer == 4090 else b""
        return ApiResponse(method, path, 409 if answer == 4090 else answer, body)


def _writer(api: _Answers, metrics: ControllerMetrics | None = None) -> ApiWriter:
    return ApiWriter(cast(KubeApi, api), metrics or ControllerMetrics(), attempts=3)


@pytest.mark.parametrize(("status", "cause"), [(404, NotFoundError), (409, ConflictError), (4090, AlreadyExistsError)])
async def test_a_gone_or_changed_object_is_stale_and_never_retried(status: int, cause: type) -> None:
    api = _Answers(status)
    with pytest.raises(StaleObjectError) as raised:
        await _writer(api).merge_patch(WORKLOADS, "research", "job-a", {"status": {}}, "status")
    assert type(raised.value.__cause__) is cause
    assert api.requests == 1


async def test_a_refusal_is_not_retried_and_says_why() -> None:
    api = _Answers(403)
    with pytest.raises(ApiWriteError) as raised:
        await _writer(api).create(WORKLOADS, "research", {"metadata": {"name": "job-a"}})
    assert not isinstance(raised.value, StaleObjectError)
    assert isinstance(raised.value.__cause__, ForbiddenError)
    assert "HTTP 403" in str(raised.value)
    assert api.requests == 1


async def test_an_unavailable_or_unreachable_server_is_retried() -> None:
    metrics = ControllerMetrics()
    api = _Answers(503, ApiUnreachableError("PATCH …: timed out", "timed out"), b'{"kind": "Lease"}')
    written = await _writer(api, metrics).merge_patch(LEASES, "kuota-system", "kuota", {"spec": {}})
    assert written == {"kind": "Lease"}
    assert api.requests == 3
    samples = {
        sample.labels["code"]
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "kuota_api_write_duration_seconds_count"
    }
    assert samples == {"503", "0", "200"}


async def test_giving_up_is_raised_from_the_last_cause() -> None:
    api = _Answers(429, 500, 502)
    with pytest.raises(ApiWriteError, match="gave up after 3 attempts") as raised:
        await _writer(api).merge_patch(WORKLOADS, "research", "job-a", {"status": {}}, "status")
    assert isinstance(raised.value.__cause__, UnavailableError)


async def test_a_read_of_a_gone_object_is_none_and_of_a_changed_one_stale() -> None:
    assert await _writer(_Answers(404)).get(WORKLOADS, "research", "job-a") is None
    with pytest.raises(StaleObjectError):
        await _writer(_Answers(409)).get(WORKLOADS, "research", "job-a")
