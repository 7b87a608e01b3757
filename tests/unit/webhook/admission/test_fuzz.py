"""Thousands of malformed and hostile AdmissionReviews: every answer is well-formed and the server stays up.

One aiohttp server for the whole module (started on a private event loop, since hypothesis drives a
synchronous test body); every example is posted to every review endpoint.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.webhook.admission.kueue_validation import KUEUE_OBJECT_KINDS
from tests.examples import examples
from tests.unit.webhook.admission.conftest import make_app
from tests.unit.webhook.admission.static_facts import StaticClusterFacts

PATHS = ["/mutate-batch-v1-job", "/validate-batch-v1-job"] + [kind.path for kind in KUEUE_OBJECT_KINDS]
FACTS = StaticClusterFacts(
    local_queues={("research", "default")}, priority_classes={"default"}, admitted_jobs={("research", "u1")}
)

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
labels = st.dictionaries(
    st.sampled_from(["kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class", "a/b~c", ""]) | st.text(max_size=8),
    st.text(max_size=12) | json_values,
    max_size=3,
)
jobs = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.just("batch/v1") | json_values,
        "kind": st.just("Job") | json_values,
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "name": st.text(max_size=12) | json_values,
                "uid": st.sampled_from(["u1", "u2"]) | json_values,
                "labels": labels | json_values,
            },
        )
        | json_values,
        "spec": st.fixed_dictionaries({}, optional={"suspend": st.booleans() | json_values}) | json_values,
    },
)
kinds = (
    st.sampled_from(
        [
            {"group": "batch", "version": "v1", "kind": "Job"},
            {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ClusterQueue"},
            {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "LocalQueue"},
            {"group": "", "version": "v1", "kind": "Pod"},
        ]
    )
    | json_values
)
requests = st.fixed_dictionaries(
    {"uid": st.text(min_size=1, max_size=10)},
    optional={
        "kind": kinds,
        "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"]) | json_values,
        "namespace": st.sampled_from(["research", "kube-system"]) | json_values,
        "name": st.text(max_size=10) | json_values,
        "userInfo": st.fixed_dictionaries(
            {},
            optional={
                "username": st.sampled_from(["alice", "system:serviceaccount:kuota-system:kuota-manager"])
                | json_values,
                "groups": st.lists(st.text(max_size=8), max_size=2) | json_values,
            },
        )
        | json_values,
        "object": jobs | json_values,
        "oldObject": jobs | json_values,
        "dryRun": st.booleans() | json_values,
    },
)
envelopes = st.fixed_dictionaries(
    {"request": requests | json_values},
    optional={
        "apiVersion": st.just("admission.k8s.io/v1") | json_values,
        "kind": st.just("AdmissionReview") | json_values,
    },
)
well_addressed = st.fixed_dictionaries(
    {
        "apiVersion": st.just("admission.k8s.io/v1"),
        "kind": st.just("AdmissionReview"),
        "request": requests,
    }
)


class _Harness:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = TestServer(make_app(FACTS))
        self.loop.run_until_complete(self.server.start_server())
        self.session = self.loop.run_until_complete(self._open_session())

    @staticmethod
    async def _open_session() -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        async def send() -> tuple[int, bytes]:
            async with self.session.post(self.server.make_url(path), data=body) as answer:
                return answer.status, await answer.read()

        return self.loop.run_until_complete(send())

    def healthy(self) -> bool:
        async def probe() -> int:
            async with self.session.get(self.server.make_url("/healthz")) as answer:
                return answer.status

        return self.loop.run_until_complete(probe()) == 200

    def close(self) -> None:
        self.loop.run_until_complete(self.session.close())
        self.loop.run_until_complete(self.server.close())
        self.loop.close()


@pytest.fixture(scope="module")
def harness() -> Iterator[_Harness]:
    running = _Harness()
    yield running
    running.close()


def _check_answer(status: int, raw: bytes, sent: Any) -> None:
    assert status in (200, 400, 413), (status, raw[:200])
    body = json.loads(raw)
    if status != 200:
        assert isinstance(body["error"], str)
        assert body["error"]
        return
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    answer = body["response"]
    assert answer["uid"] == sent["request"]["uid"]
    assert isinstance(answer["allowed"], bool)
    if not answer["allowed"]:
        assert isinstance(answer["status"]["message"], str)
        assert answer["status"]["message"]
        assert answer["status"]["code"] in (400, 403, 422)
    if "patch" in answer:
        assert answer["patchType"] == "JSONPatch"
        operations = json.loads(base64.b64decode(answer["patch"]))
        assert all(operation["path"].startswith("/") for operation in operations)


SETTINGS = settings(
    max_examples=examples(1000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(document=envelopes, path=st.sampled_from(PATHS))
def test_any_json_envelope_gets_a_well_formed_answer(harness: _Harness, document: Any, path: str) -> None:
    status, raw = harness.post(path, json.dumps(document).encode())
    _check_answer(status, raw, document)


@SETTINGS
@given(document=well_addressed, path=st.sampled_from(PATHS))
def test_a_review_with_a_uid_is_always_answered_as_a_review(harness: _Harness, document: Any, path: str) -> None:
    status, raw = harness.post(path, json.dumps(document).encode())
    assert status == 200, raw[:300]
    _check_answer(status, raw, document)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_arbitrary_bytes_get_a_400_and_never_a_500(harness: _Harness, body: bytes) -> None:
    status, raw = harness.post("/validate-batch-v1-job", body)
    assert status in (200, 400), raw[:200]


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 30_000,
        b'{"a":' * 10_000,
        b"1" * 20_000,
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":NaN}}',
        "\ud800".encode("utf-8", "surrogatepass"),
    ],
    ids=["deep-array", "deep-object", "huge-number", "nan", "lone-surrogate"],
)
def test_hostile_bodies_get_a_precise_400(harness: _Harness, body: bytes) -> None:
    status, raw = harness.post("/mutate-batch-v1-job", body)
    assert status == 400, raw[:200]
    assert json.loads(raw)["error"]


def test_the_server_is_still_up_after_the_fuzzing(harness: _Harness) -> None:
    assert harness.healthy()
