"""Who may read the manager's ``/metrics``: the secure endpoint's check, as Kueue's (controller-runtime's
``filters.WithAuthenticationAndAuthorization``) does it.

The caller's bearer token is reviewed by the API server (TokenReview), and the user it names must be allowed
the request's verb on the non-resource URL it asked for (SubjectAccessReview: ``get`` on ``/metrics``, which
the chart's ``<release>-metrics-reader`` ClusterRole grants). No token, or one the API server does not accept:
401; a user without that permission: 403; the API server unreachable: 503, so Prometheus retries. Answers are
cached as controller-runtime caches them (tokens 1 minute, allowed 5 minutes, denied 30 seconds), keyed by a
hash of the token, never the token itself, so a scrape every 15 s costs the API server two reviews a minute.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from kuota.http_serving import Handler
from kuota.kube.client import KubeApi
from kuota.kube.errors import KubeApiError
from kuota.webhook.access_reviews import DEFAULT_CACHE_TIMES, AccessReviews, CacheTimes, ExpiringAnswers, User

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


class MetricsAccess:
    """An aiohttp middleware letting through only requests whose token may ``get`` the path asked for."""

    def __init__(
        self, api: KubeApi, times: CacheTimes = DEFAULT_CACHE_TIMES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._api = api
        self._times = times
        self._users = ExpiringAnswers(clock)
        self._reviews = AccessReviews(api, times, clock)

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return _refusal(401, "Unauthorized: send a bearer token (Authorization: Bearer <token>)")
        try:
            user = await self._authenticate(token)
            if user is None:
                return _refusal(401, "Unauthorized: the API server did not accept the bearer token")
            verb = request.method.lower()
            if not await self._reviews.allows(user, "nonResourceAttributes", {"path": request.path, "verb": verb}):
                return _refusal(403, f"Forbidden: user {user.name!r} may not {verb} {request.path}")
        except KubeApiError as error:
            log.warning("could not check a /metrics caller with the API server: %s", error)
            return _refusal(503, "the API server could not be asked who the caller is; retry")
        return await handler(request)

    async def _authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        known, user = self._users.get(key)
        if known:
            return user  # type: ignore[no-any-return]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        answer = (await self._api.request("POST", TOKEN_REVIEWS, body=review)).object().get("status") or {}
        user = _user(answer.get("user") or {}) if answer.get("authenticated") else None
        self._users.put(key, user, self._times.authenticated)
        return user


def _user(info: dict[str, Any]) -> User:
    extra = info.get("extra") or {}
    return User(
        name=str(info.get("username", "")),
        uid=str(info.get("uid", "")),
        groups=tuple(str(group) for group in info.get("groups") or ()),
        extra=tuple(sorted((str(name), tuple(str(v) for v in values or ())) for name, values in extra.items())),
    )


def _refusal(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n")
