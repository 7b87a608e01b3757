"""The exporter's HTTP endpoints: ``/metrics`` (Prometheus text), ``/healthz`` (the process serves),
``/readyz`` (NVML is open and has been read, and the kubelet's PodResources socket answers; 503 with the reason
otherwise).

Rendering a scrape is pure CPU over the latest snapshot (well under a millisecond once a snapshot's text
is cached), so it runs on the event loop and never waits on NVML, the kubelet or the API server. The service
serves it through :func:`kuota.http_serving.serve`, whose deadlines keep slow clients from holding it.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from kuota.exporter.exposition import CONTENT_TYPE, DEFAULT_HOSTNAME_LABEL, ScrapeRenderer
from kuota.exporter.snapshot import Snapshot


def build_app(snapshot: Callable[[], Snapshot], hostname_label: str = DEFAULT_HOSTNAME_LABEL) -> web.Application:
    renderer = ScrapeRenderer(snapshot, hostname_label)

    async def metrics(request: web.Request) -> web.StreamResponse:
        cached, health = renderer.chunks()
        response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE})
        response.content_length = len(cached) + len(health)
        await response.prepare(request)
        await response.write(cached)
        await response.write(health)
        await response.write_eof()
        return response

    async def healthz(request: web.Request) -> web.Response:
        del request
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        del request
        current = snapshot()
        if current.ready:
            return web.Response(text="ready\n")
        return web.Response(status=503, text=f"not ready: {current.not_ready_reason}\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
