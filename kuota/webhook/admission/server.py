"""The aiohttp application that answers the API server's AdmissionReviews.

Routes: ``POST /mutate-batch-v1-job``, ``POST /validate-batch-v1-job``, ``POST /validate-<kind path>`` for
each queueing kind given, ``GET /healthz`` (the process answers), ``GET /readyz`` (certificates loaded and
caches synced). Bodies over ``max_body_bytes`` get 413 (before they are read when Content-Length says so).
It is served through :func:`kuota.http_serving.serve`: header and body deadlines, a bound on slow bodies, one
WARNING line per request cut short.

A review that cannot be addressed (no JSON, no uid) gets HTTP 400 with a JSON message; any other problem is a
denying AdmissionReview. A bug in a rule is logged with its traceback and answered as a denial with code 500
inside the review, which is what ``failurePolicy: Fail`` would do anyway, instead of a bare HTTP 500.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from aiohttp import web

from kuota.http_serving import HttpServer, ServingLimits, json_response, request_body, serve
from kuota.webhook.admission.errors import MalformedReviewError
from kuota.webhook.admission.reviews import AdmissionRequest, Verdict, decode_json, parse_review, response

log = logging.getLogger(__name__)

# The API server caps objects at ~1.5 MiB in etcd and a review carries object and oldObject.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024

Rule = Callable[[AdmissionRequest], Verdict]


@dataclass(frozen=True)
class ReadinessCheck:
    """One condition /readyz waits for; ``describe`` says what is missing while it is false."""

    name: str
    ready: Callable[[], bool]


@dataclass(frozen=True)
class AdmissionRoutes:
    rules: Mapping[str, Rule]
    readiness: Sequence[ReadinessCheck] = field(default=())
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


def _bad_request(message: str) -> web.Response:
    return json_response({"error": message}, status=400)


def _review_handler(rule: Rule) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        body = await request_body(request)
        try:
            review = parse_review(decode_json(body))
        except MalformedReviewError as error:
            if error.uid is None:
                return _bad_request(error.message)
            return json_response(response(error.uid, Verdict.deny(error.message, code=400)))
        try:
            verdict = rule(review)
        except MalformedReviewError as error:
            verdict = Verdict.deny(error.message, code=400)
        except Exception:
            log.exception(
                "admission rule %s failed on %s %s/%s (uid %s)",
                request.path,
                review.operation,
                review.namespace,
                review.name,
                review.uid,
            )
            verdict = Verdict.deny(
                f"kuota's webhook failed to evaluate {request.path} for {review.kind}; see the manager log "
                f"(uid {review.uid})",
                code=500,
            )
        return json_response(response(review.uid, verdict))

    return handle


def build_app(routes: AdmissionRoutes) -> web.Application:
    app = web.Application(client_max_size=routes.max_body_bytes)
    for path, rule in routes.rules.items():
        app.router.add_post(path, _review_handler(rule))

    async def healthz(request: web.Request) -> web.Response:
        del request
        return web.Response(text="ok")

    async def readyz(request: web.Request) -> web.Response:
        del request
        missing = [check.name for check in routes.readiness if not check.ready()]
        if missing:
            return web.Response(status=503, text="not ready: " + "; ".join(missing))
        return web.Response(text="ok")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@dataclass
class AdmissionServer:
    """Serves the application over TLS until cancelled."""

    app: web.Application
    ssl_context: ssl.SSLContext
    host: str = "0.0.0.0"
    port: int = 9443
    limits: ServingLimits = field(default_factory=ServingLimits)
    bound_port: int = 0
    serving: HttpServer | None = None

    async def start(self) -> web.AppRunner:
        self.serving = await serve(
            self.app,
            self.host,
            self.port,
            limits=self.limits,
            ssl_context=self.ssl_context,
            backlog=1024,
        )
        self.bound_port = self.serving.port
        log.info("admission webhook listening on https://%s:%d", self.host, self.bound_port)
        return self.serving.runner

    async def serve(self) -> None:
        runner = await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
