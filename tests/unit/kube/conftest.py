"""A small aiohttp app standing in for the API server, over plain HTTP or TLS, and kubeconfig writing."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from tests.cluster.pki import ControlPlanePki, write_pki

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Routes = dict[tuple[str, str], Handler]
ServerFactory = Callable[..., Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[ServerFactory]:
    """``await serve({(method, path): handler}, ssl_context=None)`` starts the app; returns its base URL."""
    runners: list[web.AppRunner] = []

    async def start(routes: Routes, ssl_context: ssl.SSLContext | None = None) -> str:
        app = web.Application()
        for (method, path), handler in routes.items():
            app.router.add_route(method, path, handler)
        # A short shutdown: a handler that never answers (a timeout test) must not hold teardown for a minute.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        port = runner.addresses[0][1]
        return f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ControlPlanePki:
    """A CA, a serving pair for localhost/127.0.0.1/kubernetes.default.svc, and an admin client pair."""
    return write_pki(tmp_path_factory.mktemp("pki"))


def server_context(pki: ControlPlanePki, client_ca: Path | None = None) -> ssl.SSLContext:
    """The TLS side of a test API server; with ``client_ca``, client certificates it signed are required."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.serving_cert, pki.serving_key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(
    path: Path,
    cluster: dict[str, Any],
    user: dict[str, Any],
    current: str = "ctx",
) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": current,
            }
        )
    )
    return path
