"""A small asynchronous client for Prometheus' HTTP API (instant and range queries), and nothing else.

It only moves JSON: it never interprets what a series means. Every request has a timeout; every failure
becomes a :class:`~kuota.report.errors.PrometheusError` naming the URL and the query.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp

from kuota.report.errors import PrometheusQueryError, PrometheusUnreachableError


@dataclass(frozen=True)
class InstantSample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class RangeSeries:
    labels: dict[str, str]
    points: dict[int, float]  # Unix seconds -> value


def _number(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else math.nan


class PrometheusClient:
    """``async with PrometheusClient(url) as prom: await prom.instant("up", at)``."""

    def __init__(self, url: str, timeout_s: float = 120.0) -> None:
        self._url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> PrometheusClient:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()

    async def _get(self, path: str, params: dict[str, str]) -> Any:
        if self._session is None:
            raise RuntimeError("PrometheusClient used outside 'async with'")
        url = f"{self._url}{path}"
        query = params.get("query", "")
        try:
            async with self._session.post(url, data=params) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientConnectionError, TimeoutError) as error:
            raise PrometheusUnreachableError(
                f"Prometheus at {self._url} did not answer ({type(error).__name__}: {error}); "
                "check --prometheus and that the server is up"
            ) from error
        except aiohttp.ClientError as error:
            raise PrometheusQueryError(f"Prometheus at {self._url} failed for query {query!r}: {error}") from error
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") != "success":
            detail = body.get("error") if isinstance(body, dict) else text[:300]
            raise PrometheusQueryError(
                f"Prometheus at {self._url} answered HTTP {status} for query {query!r}: {detail}; "
                "check the URL points at Prometheus' API (not a dashboard) and the server's log"
            )
        return body["data"]

    async def instant(self, query: str, at: int) -> list[InstantSample]:
        data = await self._get("/api/v1/query", {"query": query, "time": str(at)})
        if data.get("resultType") == "scalar":
            return [InstantSample({}, _number(data["result"][1]))]
        return [InstantSample(dict(item["metric"]), _number(item["value"][1])) for item in data["result"]]

    async def range(self, query: str, start: int, end: int, step_s: int) -> list[RangeSeries]:
        data = await self._get(
            "/api/v1/query_range",
            {"query": query, "start": str(start), "end": str(end), "step": str(step_s)},
        )
        return [
            RangeSeries(dict(item["metric"]), {int(t): _number(v) for t, v in item["values"]})
            for item in data["result"]
        ]
