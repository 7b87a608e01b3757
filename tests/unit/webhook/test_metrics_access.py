"""The secure /metrics check over a stand-in API server: who gets 401, 403, 503 or the metrics, what is asked of
the API server, and for how long its answers are reused. The real API server's answers: the integration test
tests/integration/manager_lifecycle/test_metrics_auth.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import ApiUnreachableError
from kuota.webhook.access_reviews import SUBJECT_ACCESS_REVIEWS, CacheTimes
from kuota.webhook.metrics_access import TOKEN_REVIEWS, MetricsAccess

READER = {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u-1", "groups": ["system:authenticated"]}


class _ApiServer:
    """Answers TokenReviews for the tokens it knows and SubjectAccessReviews for the users it allows."""

    def __init__(self) -> None:
        self.users = {"reader-token": READER, "other-token": {**READER, "username": "someone", "uid": "u-2"}}
        self.allowed = {READER["username"]}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.down = False

    async def request(self, method: str, path: str, *, body: dict[str, Any], **_: Any) -> ApiResponse:
        assert method == "POST"
        self.requests.append((path, body))
        if self.down:
            raise ApiUnreachableError(f"POST {path}: no answer (connection refused)", "connection refused")
        if path == TOKEN_REVIEWS:
            user = self.users.get(body["spec"]["token"])
            status: dict[str, Any] = {"authenticated": True, "user": user} if user else {"authenticated": False}
        else:
            assert path == SUBJECT_ACCESS_REVIEWS
            status = {"allowed": body["spec"]["user"] in self.allowed}
        return ApiResponse(method, path, 201, json.dumps({**body, "status": status}).encode())


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> _ApiServer:
    return _ApiServer()


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
async def client(api: _ApiServer, clock: _Clock) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    access = MetricsAccess(cast(KubeApi, api), CacheTimes(authenticated=60, allowed=300, denied=30), clock)
    app = web.Application(middlewares=[access.guard])

    async def metrics(request: web.Request) -> web.Response:
        del request
        return web.Response(text="kueue_build_info 1\n")

    app.router.add_get("/metrics", metrics)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def _get(client: TestClient[web.Request, web.Application], token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with client.get("/metrics", headers=headers) as reply:
        return reply.status, await reply.text()


async def test_no_token_is_401_without_asking_the_api_server(
    client: TestClient[web.Request, web.Application], api: _ApiServer
) -> None:
    assert (await _get(client, None))[0] == 401
    async with client.get("/metrics", headers={"Authorization": "Basic dXNlcjpwdw=="}) as reply:
        assert reply.status == 401
    assert api.requests == []


async def test_a_token_the_api_server_rejects_is_401(client: TestClient[web.Request, web.Application]) -> None:
    status, text = await _get(client, "forged")
    assert status == 401
    assert "did not accept" in text


async def test_a_user_without_get_on_metrics_is_403_naming_the_user(
    client: TestClient[web.Request, web.Application],
) -> None:
    status, text = await _get(client, "other-token")
    assert status == 403
    assert "'someone' may not get /metrics" in text


async def test_an_allowed_user_gets_the_metrics_and_is_asked_about_exactly_get_on_the_path(
    client: TestClient[web.Request, web.Application], api: _ApiServer
) -> None:
    assert await _get(client, "reader-token") == (200, "kueue_build_info 1\n")
    (token_path, token_review), (access_path, access_review) = api.requests
    assert (token_path, token_review["spec"]) == (TOKEN_REVIEWS, {"token": "reader-token"})
    assert access_path == SUBJECT_ACCESS_REVIEWS
    assert access_review["spec"] == {
        "user": READER["username"],
        "uid": "u-1",
        "groups": ["system:authenticated"],
        "extra": {},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


async def test_answers_are_reused_until_they_expire(
    client: TestClient[web.Request, web.Application], api: _ApiServer, clock: _Clock
) -> None:
    for _ in range(3):
        assert (await _get(client, "reader-token"))[0] == 200
    assert len(api.requests) == 2
    clock.now += 61  # the token's review has expired, the allowed decision (5 minutes) has not
    assert (await _get(client, "reader-token"))[0] == 200
    assert [path for path, _ in api.requests] == [TOKEN_REVIEWS, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS]


async def test_a_denial_is_remembered_briefly_so_a_new_grant_takes_effect(
    client: TestClient[web.Request, web.Application], api: _ApiServer, clock: _Clock
) -> None:
    assert (await _get(client, "other-token"))[0] == 403
    api.allowed.add("someone")
    assert (await _get(client, "other-token"))[0] == 403  # within the 30 s a denial is kept
    clock.now += 31
    assert (await _get(client, "other-token"))[0] == 200


async def test_an_unreachable_api_server_is_503_and_nothing_is_remembered(
    client: TestClient[web.Request, web.Application], api: _ApiServer
) -> None:
    api.down = True
    assert (await _get(client, "reader-token"))[0] == 503
    api.down = False
    assert (await _get(client, "reader-token"))[0] == 200
