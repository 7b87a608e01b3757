"""Asking the API server who a caller is and what they may do, with the answers cached.

A user is what a TokenReview or the front proxy's request headers name; :class:`AccessReviews` asks a
SubjectAccessReview whether that user may do something (a verb on a non-resource URL, or on a resource), and
caches the answer as controller-runtime does: allowed 5 minutes, denied 30 seconds (:class:`CacheTimes`), at
most ``_MOST_REMEMBERED`` answers, so a scrape or a poll every few seconds costs the API server a review a few
times an hour, and callers with random credentials cannot grow the cache without bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kuota.kube.client import KubeApi

SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
_MOST_REMEMBERED = 1024  # answers kept per cache: enough for every scraper, bounded against random tokens


@dataclass(frozen=True)
class User:
    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class CacheTimes:
    authenticated: float = 60.0
    allowed: float = 300.0
    denied: float = 30.0


DEFAULT_CACHE_TIMES = CacheTimes()


class ExpiringAnswers:
    """Answers until they expire, at most ``_MOST_REMEMBERED`` of them (the oldest are forgotten first)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._answers: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> tuple[bool, Any]:
        found = self._answers.get(key)
        if found is None or found[0] <= self._clock():
            self._answers.pop(key, None)
            return False, None
        return True, found[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        now = self._clock()
        if len(self._answers) >= _MOST_REMEMBERED:
            self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
            while len(self._answers) >= _MOST_REMEMBERED:
                del self._answers[next(iter(self._answers))]
        self._answers[key] = (now + ttl, value)


AttributesKind = Literal["nonResourceAttributes", "resourceAttributes"]


class AccessReviews:
    """Whether the API server's authorizer allows a user the given attributes (a SubjectAccessReview's
    ``nonResourceAttributes`` or ``resourceAttributes``), each answer cached for its ``CacheTimes``. Raises
    KubeApiError when the API server cannot be asked."""

    def __init__(self, api: KubeApi, times: CacheTimes, clock: Callable[[], float] = time.monotonic) -> None:
        self._api = api
        self._times = times
        self._decisions = ExpiringAnswers(clock)

    async def allows(self, user: User, kind: AttributesKind, attributes: Mapping[str, str]) -> bool:
        key = (user, kind, tuple(sorted(attributes.items())))
        known, allowed = self._decisions.get(key)
        if known:
            return bool(allowed)
        spec: dict[str, Any] = {
            "user": user.name,
            "uid": user.uid,
            "groups": list(user.groups),
            "extra": {name: list(values) for name, values in user.extra},
            kind: dict(attributes),
        }
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        answer = (await self._api.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)).object().get("status") or {}
        allowed = bool(answer.get("allowed"))
        self._decisions.put(key, allowed, self._times.allowed if allowed else self._times.denied)
        return allowed
