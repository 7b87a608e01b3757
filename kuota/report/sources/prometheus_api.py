"""A small asynchronous client for Prometheus' HTTP API (instant and range queries), and the parser of its answers.

It only moves JSON: it never interprets what a series means. Every request has a timeout, and every failure
becomes a :class:`~kuota.report.errors.PrometheusError` whose one-line message names the URL and the query.
Credentials, headers and TLS come from a :class:`~kuota.report.sources.prometheus_access.PrometheusAccess`; a failed
TLS handshake and a 401 or 403 answer say which of them were refused, never a secret.

Answers are read whole, so their size is bounded: at most ``MAX_ANSWER_BYTES`` (64 MiB) per query, counted
after decompression. That holds an hourly week of some 100,000 series (a big cluster's pods), and parsed it
stays well inside the report CronJob's memory; a larger answer is refused with the query named. The parser
then holds each answer to the shapes the API documents (``vector`` and ``scalar`` for instant queries,
``matrix`` for range queries; ``[time, "value"]`` pairs), so an answer of any other shape is an error, never a
``KeyError`` or ``TypeError`` deep in the report.

Sample values keep PromQL's meaning: ``"NaN"``, ``"+Inf"`` and ``"-Inf"`` arrive as the floats they are, and
what a non-finite value means for a figure (no data, or an error) is the caller's decision per query. A finite
value must lie within ``VALUE_RANGE``: every figure the report reads (GPU-hours, counts, steps) is far inside
it, and sums, ratios and prices of values inside it stay finite.
"""

from __future__ import annotations

import json
import math
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import NoReturn
from urllib.parse import urlsplit

import aiohttp

from kuota.report.errors import (
    PrometheusAccessError,
    PrometheusQueryError,
    PrometheusUnreachableError,
    ReportInputError,
)
from kuota.report.sources.prometheus_access import PrometheusAccess
from kuota.report.sources.quoting import excerpt, quoted

MAX_ANSWER_BYTES = 64 * 2**20
# Smallest and largest magnitude of a non-zero finite value; see the module's docstring.
VALUE_RANGE = (1e-200, 1e15)
_READ_CHUNK = 256 * 1024


@dataclass(frozen=True)
class InstantSample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class RangeSeries:
    labels: dict[str, str]
    points: dict[float, float]  # Unix seconds -> value (an integral time equals, and hashes as, its int)


def prometheus_url(text: str) -> str:
    """``--prometheus``: an http(s) URL with a host (and maybe a path prefix), without its trailing slash."""
    try:
        parts = urlsplit(text.strip())
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a bad port or IPv6 literal
        valid = False
    if not valid or parts.query or parts.fragment:
        raise ReportInputError(
            f"--prometheus {quoted(text)} is not an http(s) URL of a server: give e.g. http://prometheus:9090"
        )
    if parts.username is not None or parts.password is not None:
        # a password in the URL would be in every message that names the server
        raise ReportInputError(
            "--prometheus carries credentials (user:password@): give the URL without them, and "
            "--prometheus-basic-auth USER with --prometheus-password-file FILE"
        )
    return text.strip().rstrip("/")


class _Answer:
    """Where an answer came from, for messages, and its refusal: ``_Answer(url, query).refuse("why")``."""

    def __init__(self, url: str, query: str) -> None:
        self.url = url
        self.query = query

    def refuse(self, what: str) -> NoReturn:
        raise PrometheusQueryError(
            f"Prometheus at {self.url} answered query {self.query!r} with {what}; "
            "check that --prometheus points at Prometheus' API and the server's log"
        )


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def answer_data(status: int, body: bytes, url: str, query: str) -> Mapping[str, object]:
    """The ``data`` object of a successful answer; any other answer is a :class:`PrometheusQueryError`."""
    answer = _Answer(url, query)
    try:
        # NaN and Infinity are not JSON: Prometheus writes sample values as strings
        document: object = json.loads(body, parse_constant=_refuse_constant) if body else None
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict):
        text = body[:400].decode("utf-8", "replace")
        shown = excerpt(text) if text.strip() else "an empty body"
        raise PrometheusQueryError(
            f"Prometheus at {url} answered HTTP {status} for query {query!r} with something that is not a JSON "
            f"object ({shown}); check that --prometheus points at Prometheus' API (not a dashboard or proxy page)"
        )
    if document.get("status") != "success":
        kind, detail = document.get("errorType"), document.get("error")
        said = f"{excerpt(kind)}: " if isinstance(kind, str) and kind else ""
        said += excerpt(detail) if isinstance(detail, str) and detail else f"status {quoted(document.get('status'))}"
        raise PrometheusQueryError(
            f"Prometheus at {url} answered HTTP {status} for query {query!r}: {said}; "
            "check the query's limits and the server's log"
        )
    data = document.get("data")
    if not isinstance(data, dict):
        answer.refuse(f"'data' {_kind(data)}, not an object")
    return data


def _kind(value: object) -> str:
    return "missing" if value is None else f"a {type(value).__name__} {quoted(value)}"


def _labels(raw: object, where: str, answer: _Answer) -> dict[str, str]:
    if not isinstance(raw, dict):
        answer.refuse(f"{where}'s 'metric' {_kind(raw)}, not an object of labels")
    for value in raw.values():
        if not isinstance(value, str):
            answer.refuse(f"{where}'s label value {quoted(value)}, not a string")
    return raw


def _time(raw: object, where: str, answer: _Answer) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        answer.refuse(f"{where}: time {quoted(raw)}, not Unix seconds")
    return raw


def sample_value(raw: object, where: str, answer: _Answer) -> float:
    """A sample's value: a string PromQL wrote ("1.5", "NaN", "+Inf"), inside ``VALUE_RANGE`` when finite."""
    if not isinstance(raw, str):
        answer.refuse(f'{where}: value {quoted(raw)}, not a string such as "1.5"')
    try:
        value = float(raw)
    except ValueError:
        answer.refuse(f"{where}: value {quoted(raw)}, not a number")
    smallest, largest = VALUE_RANGE
    if math.isfinite(value) and value != 0 and not smallest <= abs(value) <= largest:
        answer.refuse(f"{where}: value {quoted(raw)}, beyond any figure the report reads ({smallest:g} to {largest:g})")
    return value


def _pair(raw: object, where: str, answer: _Answer) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        answer.refuse(f'{where}: {_kind(raw)}, not a [time, "value"] pair')
    return _time(raw[0], where, answer), sample_value(raw[1], where, answer)


def _series_list(data: Mapping[str, object], expected: tuple[str, ...], answer: _Answer) -> list[dict[str, object]]:
    kind = data.get("resultType")
    if kind not in expected:
        answer.refuse(f"resultType {quoted(kind)}, not {' or '.join(expected)}")
    result = data.get("result")
    if kind == "scalar":
        return [{"metric": {}, "value": result}]
    if not isinstance(result, list):
        answer.refuse(f"'result' {_kind(result)}, not a list of series")
    for index, item in enumerate(result):
        if not isinstance(item, dict):
            answer.refuse(f"series {index} {_kind(item)}, not an object")
    return result


def instant_samples(data: Mapping[str, object], url: str, query: str) -> list[InstantSample]:
    """The samples of an instant query's ``data`` (a vector, or a scalar as one sample without labels)."""
    answer = _Answer(url, query)
    samples = []
    for index, item in enumerate(_series_list(data, ("vector", "scalar"), answer)):
        where = f"series {index}"
        labels = _labels(item.get("metric"), where, answer)
        if "value" not in item:
            answer.refuse(f"{where} without 'value'")
        samples.append(InstantSample(labels, _pair(item["value"], where, answer)[1]))
    return samples


def range_series(data: Mapping[str, object], url: str, query: str) -> list[RangeSeries]:
    """The series of a range query's ``data`` (a matrix)."""
    answer = _Answer(url, query)
    series = []
    for index, item in enumerate(_series_list(data, ("matrix",), answer)):
        where = f"series {index}"
        labels = _labels(item.get("metric"), where, answer)
        values = item.get("values")
        if not isinstance(values, list):
            answer.refuse(f"{where}'s 'values' {_kind(values)}, not a list of [time, \"value\"] pairs")
        points = dict(_pair(pair, f"{where} point {n}", answer) for n, pair in enumerate(values))
        series.append(RangeSeries(labels, points))
    return series


def _is_tls_failure(error: aiohttp.ClientConnectionError) -> bool:
    """A refused certificate: while connecting, or (TLS 1.3) as the server's alert on the first read."""
    return isinstance(error, aiohttp.ClientSSLError) or isinstance(error.__cause__, ssl.SSLError)


def _size(count: int) -> str:
    return f"{count / 2**20:g} MiB" if count >= 2**20 else f"{count} bytes"


class PrometheusClient:
    """``async with PrometheusClient(url) as prom: await prom.instant("up", at)``."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 120.0,
        max_answer_bytes: int | None = None,
        access: PrometheusAccess | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._max_answer_bytes = MAX_ANSWER_BYTES if max_answer_bytes is None else max_answer_bytes
        self._access = access if access is not None else PrometheusAccess()
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> PrometheusClient:
        context = self._access.ssl_context
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
            connector=aiohttp.TCPConnector(ssl=context if context is not None else True),
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()

    async def _fetch(self, path: str, params: Mapping[str, str]) -> tuple[int, bytes]:
        """(HTTP status, body) of one POST, the body at most ``max_answer_bytes`` long."""
        if self._session is None:
            raise RuntimeError("PrometheusClient used outside 'async with'")
        query = params.get("query", "")
        limit = self._max_answer_bytes
        too_large = PrometheusQueryError(
            f"Prometheus at {self.url} answered query {query!r} with more than {_size(limit)}, more than "
            "the report reads for one query; shorten --window or aggregate the series it reads"
        )
        try:
            async with self._session.post(
                f"{self.url}{path}",
                data=dict(params),
                headers=self._access.request_headers(),
                server_hostname=self._access.server_name,
            ) as response:
                if response.content_length is not None and response.content_length > limit:
                    raise too_large
                body = bytearray()
                async for chunk in response.content.iter_chunked(_READ_CHUNK):
                    body += chunk
                    if len(body) > limit:
                        raise too_large
        except TimeoutError as error:
            raise PrometheusUnreachableError(
                f"Prometheus at {self.url} did not answer query {query!r} within {self._timeout_s:g} s; "
                "check that the server is up, or give it longer with --timeout"
            ) from error
        except aiohttp.ClientConnectionError as error:
            if _is_tls_failure(error):
                raise PrometheusAccessError(
                    f"the TLS handshake with Prometheus at {self.url} failed ({excerpt(str(error))}); check "
                    "--prometheus-ca-file (the CA of the server's certificate), --prometheus-server-name, and "
                    "--prometheus-cert-file with --prometheus-key-file where the server wants a client certificate"
                ) from error
            raise PrometheusUnreachableError(
                f"Prometheus at {self.url} did not answer ({type(error).__name__}: {excerpt(str(error))}); "
                "check --prometheus and that the server is up"
            ) from error
        except aiohttp.ClientError as error:
            raise PrometheusQueryError(
                f"Prometheus at {self.url} failed for query {query!r}: {type(error).__name__}: {excerpt(str(error))}"
            ) from error
        if response.status in (401, 403):
            said = excerpt(self._access.redact(body[:400].decode("utf-8", "replace")))
            raise PrometheusAccessError(
                f"Prometheus at {self.url} refused {self._access.described} (HTTP {response.status}"
                f"{': ' + said if said else ''}); check the credentials, and the tenant header where the server "
                "is multi-tenant"
            )
        return response.status, bytes(body)

    async def instant(self, query: str, at: int) -> list[InstantSample]:
        status, body = await self._fetch("/api/v1/query", {"query": query, "time": str(at)})
        return instant_samples(answer_data(status, body, self.url, query), self.url, query)

    async def range(self, query: str, start: int, end: int, step_s: int) -> list[RangeSeries]:
        params = {"query": query, "start": str(start), "end": str(end), "step": str(step_s)}
        status, body = await self._fetch("/api/v1/query_range", params)
        return range_series(answer_data(status, body, self.url, query), self.url, query)
