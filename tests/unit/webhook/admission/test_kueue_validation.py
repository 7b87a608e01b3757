"""Validation of Kueue's objects through the admission app: hostile quantities answered at once, Workloads
written by anyone but kuota checked as the engine will read them."""

from __future__ import annotations

import json
import time
from typing import Any

import yaml
from aiohttp.test_utils import TestClient

from tests.paths import GUIDE
from tests.unit.webhook.admission.conftest import KUOTA_USER, make_app, review

AiohttpClient = Any
WORKLOAD_PATH = "/validate-kueue-x-k8s-io-v1beta2-workload"


def _request(obj: dict[str, Any], username: str = "alice") -> dict[str, Any]:
    return review(
        {
            "uid": "uid-1",
            "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": obj["kind"]},
            "operation": "CREATE",
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"].get("namespace", ""),
            "userInfo": {"username": username, "groups": ["system:authenticated"]},
            "object": obj,
        }
    )


async def _answer(client: TestClient[Any, Any], path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with client.post(path, data=json.dumps(body).encode()) as answer:
        assert answer.status == 200
        response: dict[str, Any] = (await answer.json())["response"]
        return response


def _workload(requests: object) -> dict[str, Any]:
    container = {"name": "main", "image": "trainer", "resources": {"requests": requests}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "handmade", "namespace": "research"},
        "spec": {
            "queueName": "research-queue",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


async def test_a_workload_someone_else_writes_is_refused_naming_the_field(aiohttp_client: AiohttpClient) -> None:
    client = await aiohttp_client(make_app())
    answer = await _answer(client, WORKLOAD_PATH, _request(_workload("abc")))
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    assert answer["status"]["message"] == (
        "Workload research/handmade is invalid: spec.podSets[0].template.spec.containers[0].resources.requests: "
        'Invalid value: "str": must be an object of quantities'
    )
    assert (await _answer(client, WORKLOAD_PATH, _request(_workload({"nvidia.com/gpu": "1"}))))["allowed"] is True


async def test_kuotas_own_workloads_skip_the_review(aiohttp_client: AiohttpClient) -> None:
    """The controller makes Workloads from Jobs it has read already; reviewing them again would only delay it."""
    client = await aiohttp_client(make_app())
    answer = await _answer(client, WORKLOAD_PATH, _request(_workload("abc"), username=KUOTA_USER))
    assert answer["allowed"] is True


async def test_a_huge_exponent_in_a_local_queue_is_refused_at_once(aiohttp_client: AiohttpClient) -> None:
    """A tenant allowed to create LocalQueues once stalled every review for 30 s with this weight."""
    client = await aiohttp_client(make_app())
    local_queue = yaml.safe_load((GUIDE / "localqueue-research.yaml").read_text())
    local_queue["spec"]["fairSharing"] = {"weight": "1e20000000"}
    cluster_queue = yaml.safe_load((GUIDE / "clusterqueue-research.yaml").read_text())
    cluster_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "9" * 5000
    for obj, field in ((local_queue, "spec.fairSharing.weight"), (cluster_queue, "nominalQuota")):
        started = time.perf_counter()
        answer = await _answer(client, f"/validate-kueue-x-k8s-io-v1beta2-{obj['kind'].lower()}", _request(obj))
        assert time.perf_counter() - started < 1.0
        assert (answer["allowed"], answer["status"]["code"]) == (False, 422)
        assert field in answer["status"]["message"]
        assert len(answer["status"]["message"]) < 400, "the hostile text is quoted cut short"
