"""``POST /convert``: ConversionReviews answered in order, malformed ones refused with a Failure and a message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from kuota.webhook.conversion import endpoint
from kuota.webhook.conversion.endpoint import add_conversion_route
from kuota.webhook.conversion.kinds import V1BETA1, V1BETA2

AiohttpClient = Any
MAX_BODY = 64 * 1024


def _review(request: Any) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}


def _queue(name: str, cohort: str) -> dict[str, Any]:
    return {"apiVersion": V1BETA1, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {"cohort": cohort}}


@pytest.fixture
async def client(aiohttp_client: AiohttpClient) -> TestClient[Any, Any]:
    app = web.Application(client_max_size=MAX_BODY)
    add_conversion_route(app)
    served: TestClient[Any, Any] = await aiohttp_client(app)
    return served


async def _post(client: TestClient[Any, Any], body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with client.post("/convert", data=data, headers={"Content-Type": "application/json"}) as answer:
        return answer.status, await answer.json(content_type=None)


async def test_objects_come_back_converted_in_order_with_the_uid(client: TestClient[Any, Any]) -> None:
    request = {"uid": "u-1", "desiredAPIVersion": V1BETA2, "objects": [_queue("a", "pool-a"), _queue("b", "pool-b")]}
    status, body = await _post(client, _review(request))
    assert status == 200
    assert body["apiVersion"] == "apiextensions.k8s.io/v1" and body["kind"] == "ConversionReview"
    response = body["response"]
    assert response["uid"] == "u-1" and response["result"] == {"status": "Success"}
    assert [(o["apiVersion"], o["metadata"]["name"], o["spec"]) for o in response["convertedObjects"]] == [
        (V1BETA2, "a", {"cohortName": "pool-a"}),
        (V1BETA2, "b", {"cohortName": "pool-b"}),
    ]


MALFORMED = {
    "not JSON": (b"{not json", "", "request body is not JSON"),
    "NaN is not JSON": (b'{"a": NaN}', "", "NaN is not a JSON number"),
    "nested too deeply": (b"[" * 20_000 + b"]" * 20_000, "", "nested too deeply"),
    "an array": ([], "", "must be a JSON object"),
    "an AdmissionReview": (
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
        "",
        "conversionReviewVersions: [v1]",
    ),
    "v1beta1 ConversionReview": (
        {"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview", "request": {}},
        "",
        "expected apiVersion apiextensions.k8s.io/v1",
    ),
    "no request": (_review(None), "", "request must be an object"),
    "no uid": (_review({"desiredAPIVersion": V1BETA2, "objects": []}), "", "uid must be a non-empty string"),
    "no desired version": (_review({"uid": "u-2", "objects": []}), "u-2", "desiredAPIVersion must be"),
    "objects not an array": (
        _review({"uid": "u-3", "desiredAPIVersion": V1BETA2, "objects": {}}),
        "u-3",
        "objects must be an array",
    ),
    "an object that is not an object": (
        _review({"uid": "u-4", "desiredAPIVersion": V1BETA2, "objects": [_queue("a", "p"), 7]}),
        "u-4",
        "objects[1] must be an object",
    ),
    "an unknown desired version": (
        _review({"uid": "u-5", "desiredAPIVersion": "kueue.x-k8s.io/v2", "objects": [_queue("a", "p")]}),
        "u-5",
        "cannot convert ClusterQueue a to kueue.x-k8s.io/v2: desiredAPIVersion",
    ),
    "an unconvertible object": (
        _review(
            {
                "uid": "u-6",
                "desiredAPIVersion": V1BETA2,
                "objects": [{**_queue("b", "p"), "spec": {"cohort": "p", "cohortName": "q"}}],
            }
        ),
        "u-6",
        "cannot convert ClusterQueue b to kueue.x-k8s.io/v1beta2: ClusterQueue has both spec.cohort",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_a_malformed_review_gets_a_failure_naming_the_problem(client: TestClient[Any, Any], case: str) -> None:
    body, uid, message = MALFORMED[case]
    status, answer = await _post(client, body)
    assert status == 200
    assert answer["kind"] == "ConversionReview"
    response = answer["response"]
    assert response["uid"] == uid
    assert response["convertedObjects"] == []
    assert response["result"]["status"] == "Failure"
    assert message in response["result"]["message"]
    assert "Traceback" not in response["result"]["message"]


async def test_a_body_over_the_cap_is_refused_with_413(client: TestClient[Any, Any]) -> None:
    objects = [_queue(f"q{i}", "p" * 200) for i in range(400)]
    data = json.dumps(_review({"uid": "u-7", "desiredAPIVersion": V1BETA2, "objects": objects})).encode()
    assert len(data) > MAX_BODY
    async with client.post("/convert", data=data, headers={"Content-Type": "application/json"}) as answer:
        assert answer.status == 413


async def test_a_bug_is_logged_and_answered_as_a_failure_not_a_500(
    client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(request: object) -> list[dict[str, Any]]:
        raise KeyError("spec")

    monkeypatch.setattr(endpoint, "convert_all", broken)
    status, answer = await _post(client, _review({"uid": "u-8", "desiredAPIVersion": V1BETA2, "objects": []}))
    assert status == 200
    assert answer["response"]["uid"] == "u-8"
    assert answer["response"]["result"] == {
        "status": "Failure",
        "message": "kuota's conversion webhook failed; see the manager log (uid u-8)",
    }
    assert "KeyError" in caplog.text
