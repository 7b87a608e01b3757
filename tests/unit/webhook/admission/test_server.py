"""The AdmissionReview server: envelopes, denials, body cap, health and readiness."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from kuota.webhook.admission.reviews import AdmissionRequest, Verdict
from kuota.webhook.admission.server import ReadinessCheck
from tests.paths import GUIDE
from tests.unit.webhook.admission.conftest import job_request, make_app, review
from tests.unit.webhook.admission.static_facts import StaticClusterFacts

AiohttpClient = Any


def _job(labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"generateName": "train-", "namespace": "research"}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": {}}}


async def _post(client: TestClient[Any, Any], path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with client.post(path, data=data, headers={"Content-Type": "application/json"}) as answer:
        return answer.status, await answer.json(content_type=None)


async def test_mutation_answers_with_a_base64_json_patch(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app(StaticClusterFacts(local_queues={("research", "default")})))
    status, body = await _post(client, "/mutate-batch-v1-job", job_request(_job()))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == "uid-1"
    assert body["response"]["allowed"] is True
    assert body["response"]["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(body["response"]["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"kueue.x-k8s.io/queue-name": "default"}},
        {"op": "add", "path": "/spec/suspend", "value": True},
    ]


async def test_a_body_that_is_not_json_gets_400_with_the_reason(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    status, body = await _post(client, "/validate-batch-v1-job", b"{not json")
    assert status == 400
    assert body["error"].startswith("request body is not JSON")


async def test_a_review_without_uid_gets_400(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    status, body = await _post(client, "/validate-batch-v1-job", review({"kind": {}}))
    assert status == 400
    assert "uid" in body["error"]


async def test_wrong_review_version_is_named(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    old = {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "x"}}
    status, body = await _post(client, "/validate-batch-v1-job", old)
    assert status == 400
    assert "admissionReviewVersions: [v1]" in body["error"]


async def test_a_bad_field_with_a_uid_is_a_well_formed_denial(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    request = job_request(_job(), operation="PATCH")
    status, body = await _post(client, "/validate-batch-v1-job", request)
    assert status == 200
    assert body["response"] == {
        "uid": "uid-1",
        "allowed": False,
        "status": {
            "code": 400,
            "message": "request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got 'PATCH'",
            "reason": "BadRequest",
        },
    }


async def test_a_missing_object_field_is_denied_with_its_path(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    job = _job()
    job["spec"] = "nope"
    status, body = await _post(client, "/mutate-batch-v1-job", job_request(job))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"].startswith("request.object.spec must be an object")


async def test_bodies_over_the_cap_are_refused_before_parsing(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    async with client.post("/validate-batch-v1-job", data=b"x" * (65 * 1024)) as answer:
        assert answer.status == 413


async def test_a_failing_rule_is_logged_and_answered_as_a_denial_not_a_500(
    aiohttp_client: AiohttpClient, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(request: AdmissionRequest) -> Verdict:
        raise RuntimeError(f"bug while reviewing {request.uid}")

    client = await aiohttp_client(make_app(**{"/broken": broken}))
    status, body = await _post(client, "/broken", job_request(_job()))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 500
    assert "see the manager log" in body["response"]["status"]["message"]
    assert "bug while reviewing uid-1" in caplog.text


async def test_readyz_lists_what_is_missing_until_everything_is_ready(aiohttp_client: AiohttpClient) -> None:
    state = {"certificates": False, "caches": False}
    checks = (
        ReadinessCheck("certificates not loaded", lambda: state["certificates"]),
        ReadinessCheck("caches not synced", lambda: state["caches"]),
    )
    client = await aiohttp_client(make_app(readiness=checks))
    async with client.get("/healthz") as answer:
        assert (answer.status, await answer.text()) == (200, "ok")
    async with client.get("/readyz") as answer:
        assert (answer.status, await answer.text()) == (503, "not ready: certificates not loaded; caches not synced")
    state["certificates"] = True
    state["caches"] = True
    async with client.get("/readyz") as answer:
        assert answer.status == 200


def _queue_review(obj: dict[str, Any]) -> dict[str, Any]:
    return review(
        {
            "uid": "cq-1",
            "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": obj["kind"]},
            "operation": "CREATE",
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"].get("namespace", ""),
            "object": obj,
        }
    )


async def test_the_guides_queueing_objects_pass_the_engine_validator(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    for name, path in [
        ("clusterqueue-research.yaml", "/validate-kueue-x-k8s-io-v1beta2-clusterqueue"),
        ("localqueue-research.yaml", "/validate-kueue-x-k8s-io-v1beta2-localqueue"),
        ("resourceflavor-h100-ondemand.yaml", "/validate-kueue-x-k8s-io-v1beta2-resourceflavor"),
    ]:
        obj = yaml.safe_load((GUIDE / name).read_text())
        status, body = await _post(client, path, _queue_review(obj))
        assert (status, body["response"]["allowed"]) == (200, True), (name, body)


async def test_borrowing_limit_without_cohort_is_refused_by_the_engine_validator(
    aiohttp_client: AiohttpClient,
) -> None:
    client = await aiohttp_client(make_app())
    obj = yaml.safe_load((GUIDE / "clusterqueue-research.yaml").read_text())
    del obj["spec"]["cohortName"]
    status, body = await _post(client, "/validate-kueue-x-k8s-io-v1beta2-clusterqueue", _queue_review(obj))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 422
    assert body["response"]["status"]["message"] == (
        "ClusterQueue research is invalid: spec.resourceGroups[0].flavors[0].resources[2].borrowingLimit: "
        "must be unset when cohortName is empty"
    )


async def test_a_cohort_sent_to_the_cluster_queue_endpoint_is_denied(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "c"}, "spec": {}}
    status, body = await _post(client, "/validate-kueue-x-k8s-io-v1beta2-clusterqueue", _queue_review(cohort))
    assert status == 200
    assert (
        "reviews kueue.x-k8s.io/v1beta2 ClusterQueue, got kueue.x-k8s.io/v1beta2 Cohort"
        in (body["response"]["status"]["message"])
    )
