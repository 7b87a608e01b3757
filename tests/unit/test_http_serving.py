"""kuota.http_serving: every server kuota runs drops clients too slow with their headers or body, bounds the
bodies it awaits at once, logs one WARNING line per request cut short, and gives the memory back.

The clients are raw sockets, so a test decides exactly which bytes arrive and when the client stalls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kuota.certs.authority import ServingIdentity, issue_bundle
from kuota.certs.serving_context import ReloadableServerContext
from kuota.exporter import service as exporter_service
from kuota.exporter.sampling import SamplerSettings
from kuota.exporter.service import ExporterService, ServiceSettings
from kuota.exporter.snapshot import Snapshot
from kuota.http_serving import HttpServer, ServingLimits, serve
from kuota.malloc_trim import release_free_pages
from kuota.webhook import manager
from kuota.webhook.admission.endpoints import kuota_rules
from kuota.webhook.admission.server import AdmissionRoutes, AdmissionServer, build_app
from tests.unit.webhook.admission.conftest import POLICY, job_request, make_app
from tests.unit.webhook.admission.static_facts import StaticClusterFacts
from tests.waiting import async_wait_until

MIB = 1024 * 1024
FAST = ServingLimits(header_timeout=0.5, body_timeout=0.5, max_unfinished_bodies=4)
# A client stalled this long would outlast every deadline in FAST: what the server does with it shows.
PATIENT = ServingLimits(header_timeout=60, body_timeout=60, max_unfinished_bodies=2)
# How late a deadline may fire on a loaded two-core machine.
SLACK = 5.0
REVIEW_PATH = "/validate-batch-v1-job"


def _head(content_length: int, path: str = REVIEW_PATH, method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: kuota\r\nContent-Type: application/json\r\n"
        f"Content-Length: {content_length}\r\n\r\n"
    ).encode()


@dataclass(frozen=True)
class Tls:
    server: ssl.SSLContext
    client: ssl.SSLContext


@pytest.fixture(scope="module")
def tls() -> Tls:
    bundle = issue_bundle(ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",)), datetime.now(UTC))
    context = ReloadableServerContext()
    context.load(bundle.cert_pem, bundle.key_pem)
    return Tls(context.context, ssl.create_default_context(cadata=bundle.ca_cert_pem.decode()))


StartAdmission = Callable[[ServingLimits], Awaitable[HttpServer]]


@pytest.fixture
async def admission(tls: Tls) -> AsyncIterator[StartAdmission]:
    """``await admission(limits)``: the webhook's own TLS server on loopback, with the admission test app."""
    runners: list[web.AppRunner] = []

    async def start(limits: ServingLimits) -> HttpServer:
        server = AdmissionServer(make_app(), tls.server, host="127.0.0.1", port=0, limits=limits)
        runners.append(await server.start())
        assert server.serving is not None
        return server.serving

    yield start
    for runner in runners:
        await runner.cleanup()


@dataclass
class Client:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    peer: str  # how the server names this client: its own address

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self) -> tuple[int, bytes]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), SLACK)
        status = int(head.split(b" ", 2)[1])
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        return status, await asyncio.wait_for(self.reader.readexactly(length), SLACK)

    async def closed_by_server(self, within: float) -> bytes:
        """Everything the server sends until it closes the connection, which must happen ``within`` seconds."""
        received = bytearray()
        async with asyncio.timeout(within):
            try:
                while chunk := await self.reader.read(65536):
                    received += chunk
            except (ConnectionResetError, ssl.SSLError):
                pass
        return bytes(received)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionResetError, ssl.SSLError):
            await self.writer.wait_closed()


async def _connect(port: int, tls: Tls | None = None) -> Client:
    context = tls.client if tls else None
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1" if context else None
    )
    host, port = writer.get_extra_info("sockname")[:2]
    return Client(reader, writer, f"{host}:{port}")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno >= logging.WARNING]


def _the_one_warning(caplog: pytest.LogCaptureFixture, *fragments: str) -> str:
    """The only WARNING-or-worse record: from kuota.http_serving, without a traceback, naming every fragment."""
    records = _warnings(caplog)
    assert len(records) == 1, [record.getMessage() for record in records]
    record = records[0]
    message = record.getMessage()
    assert record.name == "kuota.http_serving"
    assert record.levelno == logging.WARNING
    assert record.exc_info is None and record.exc_text is None
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


async def _settled(server: HttpServer) -> None:
    """Wait until the server has finished with every connection, so nothing more will be logged."""
    aiohttp_server = server.runner.server
    assert aiohttp_server is not None
    await async_wait_until(
        lambda: not aiohttp_server.connections and server.unfinished_bodies == 0, "every connection finished", SLACK
    )


async def test_headers_incomplete_at_the_header_timeout_close_the_connection_with_one_warning(
    admission: StartAdmission, tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    server = await admission(FAST)
    started = time.monotonic()
    client = await _connect(server.port, tls)
    await client.send(b"POST " + REVIEW_PATH.encode() + b" HTTP/1.1\r\nHost: kuota\r\nContent-Le")
    assert await client.closed_by_server(within=FAST.header_timeout + SLACK) == b""
    assert time.monotonic() - started >= FAST.header_timeout
    await _settled(server)
    _the_one_warning(caplog, REVIEW_PATH, client.peer, "headers were not complete within 0.5s")


async def test_a_connection_that_sends_nothing_is_closed_at_the_header_timeout_without_a_warning(
    admission: StartAdmission, tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    server = await admission(FAST)
    client = await _connect(server.port, tls)
    assert await client.closed_by_server(within=FAST.header_timeout + SLACK) == b""
    await _settled(server)
    assert _warnings(caplog) == []


async def test_a_keep_alive_connection_may_idle_past_the_header_timeout_between_requests(
    admission: StartAdmission, tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    server = await admission(FAST)
    client = await _connect(server.port, tls)
    healthz = b"GET /healthz HTTP/1.1\r\nHost: kuota\r\n\r\n"
    await client.send(healthz)
    assert await client.response() == (200, b"ok")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.reader.read(1), timeout=3 * FAST.header_timeout)
    await client.send(healthz)
    assert await client.response() == (200, b"ok")
    await client.close()
    assert _warnings(caplog) == []


async def test_a_body_incomplete_at_the_body_timeout_gets_408_and_the_connection_closes_with_one_warning(
    admission: StartAdmission, tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    server = await admission(FAST)
    client = await _connect(server.port, tls)
    await client.send(_head(1000) + b"{" * 100)
    started = time.monotonic()
    answer = await client.closed_by_server(within=FAST.body_timeout + SLACK)
    assert time.monotonic() - started >= FAST.body_timeout * 0.9
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"Connection: close" in answer
    await _settled(server)
    _the_one_warning(caplog, f"POST {REVIEW_PATH}", client.peer, "body (1000 bytes) was not complete within 0.5s")


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        (b"POST " + REVIEW_PATH.encode() + b" HTTP/1.1\r\nHost: ku", "went away during the headers"),
        (_head(1000) + b"{" * 100, "went away during the body"),
    ],
    ids=["headers", "body"],
)
async def test_a_client_that_gives_up_mid_request_leaves_one_warning_line_and_no_traceback(
    admission: StartAdmission, tls: Tls, caplog: pytest.LogCaptureFixture, sent: bytes, reason: str
) -> None:
    server = await admission(PATIENT)
    client = await _connect(server.port, tls)
    await client.send(sent)
    if b"\r\n\r\n" in sent:
        await async_wait_until(lambda: server.unfinished_bodies == 1, "the body awaited", SLACK)
    await client.close()
    await _settled(server)
    _the_one_warning(caplog, REVIEW_PATH, client.peer, reason)


async def test_beyond_the_bound_a_slow_body_gets_503_at_once_while_healthz_and_whole_reviews_are_answered(
    admission: StartAdmission, tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    server = await admission(PATIENT)
    stalled = [await _connect(server.port, tls) for _ in range(PATIENT.max_unfinished_bodies)]
    for client in stalled:
        await client.send(_head(1000) + b"{")
    await async_wait_until(lambda: server.unfinished_bodies == 2, "both body slots held", SLACK)

    refused = await _connect(server.port, tls)
    await refused.send(_head(1000) + b"{")
    answer = await refused.closed_by_server(within=SLACK)
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert b"Retry-After: 1" in answer
    _the_one_warning(caplog, f"POST {REVIEW_PATH}", refused.peer, "2 request bodies are already arriving")

    probe = await _connect(server.port, tls)
    await probe.send(b"GET /healthz HTTP/1.1\r\nHost: kuota\r\n\r\n")
    assert await probe.response() == (200, b"ok")
    review = json.dumps(job_request({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}})).encode()
    await probe.send(_head(len(review)) + review)
    status, body = await probe.response()
    assert status == 200
    assert json.loads(body)["response"]["uid"] == "uid-1"
    assert server.unfinished_bodies == 2

    for client in (*stalled, probe):
        await client.close()
    await _settled(server)


def _resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_the_memory_of_48_stalled_4_mib_bodies_is_returned_once_they_time_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Plain HTTP, so the figure is the server's and not this client's TLS buffers; otherwise the webhook's setup:
    # its application with the 4 MiB cap, and the heap trim it passes.
    limits = ServingLimits(header_timeout=10, body_timeout=4, max_unfinished_bodies=48)
    app = build_app(AdmissionRoutes(kuota_rules(POLICY, StaticClusterFacts())))
    server = await serve(app, "127.0.0.1", 0, limits=limits)
    loop = asyncio.get_running_loop()
    body = memoryview(b"{" * (4 * MIB - 1024))
    sockets: list[socket.socket] = []

    async def stall() -> None:
        sock = socket.socket()
        sock.setblocking(False)
        sockets.append(sock)
        await loop.sock_connect(sock, ("127.0.0.1", server.port))
        await loop.sock_sendall(sock, _head(4 * MIB))
        await loop.sock_sendall(sock, body)  # no copy: every client sends the same buffer

    async def closed(sock: socket.socket) -> None:
        while await loop.sock_recv(sock, 65536):
            pass

    try:
        release_free_pages()
        baseline = _resident_bytes()
        await asyncio.gather(*(stall() for _ in range(48)))
        peak = await async_wait_until(
            lambda: (held := _resident_bytes() - baseline) > 150 * MIB and held, "the bodies held", limits.body_timeout
        )
        async with asyncio.timeout(limits.body_timeout + SLACK):
            await asyncio.gather(*(closed(sock) for sock in sockets))
        await async_wait_until(
            lambda: _resident_bytes() - baseline < 32 * MIB,
            f"resident memory back within 32 MiB of its baseline (it rose by {peak / MIB:.0f} MiB)",
            SLACK,
        )
    finally:
        for sock in sockets:
            sock.close()
        await server.runner.cleanup()
    assert len(_warnings(caplog)) == 48
    assert all(record.exc_info is None for record in caplog.records)


class _IdleSampler:
    snapshot = Snapshot(node_name="gpu-node-1")

    async def run(self) -> None:
        await asyncio.Event().wait()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[HttpServer]:
    """Every server the exporter's and the manager's code start through kuota.http_serving.serve."""
    started: list[HttpServer] = []

    async def recording(*args: Any, **kwargs: Any) -> HttpServer:
        server = await serve(*args, **kwargs)
        started.append(server)
        return server

    monkeypatch.setattr(exporter_service, "serve", recording)
    monkeypatch.setattr(manager, "serve", recording)
    return started


async def _exporter() -> AsyncIterator[None]:
    settings = ServiceSettings(SamplerSettings(node_name="gpu-node-1"), "127.0.0.1", 0, None, watch_pods=False)
    task = asyncio.create_task(ExporterService(settings, sampler=_IdleSampler()).run())  # type: ignore[arg-type]
    yield
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _manager_health() -> AsyncIterator[None]:
    runner = await manager.Manager._plain_server(build_app(AdmissionRoutes({})), "127.0.0.1", 0)
    yield
    await runner.cleanup()


@pytest.mark.parametrize("serving", [_exporter, _manager_health], ids=["exporter", "manager"])
async def test_the_exporter_and_the_manager_serve_under_the_default_bound_on_slow_bodies(
    serving: Callable[[], AsyncIterator[None]], served: list[HttpServer]
) -> None:
    running = serving()
    await anext(running)
    await async_wait_until(lambda: served, "the server started", SLACK)
    server = served[0]
    bound = ServingLimits().max_unfinished_bodies
    clients = [await _connect(server.port) for _ in range(bound + 1)]
    try:
        for client in clients[:bound]:
            await client.send(_head(100, "/healthz", "GET") + b"x")
        await async_wait_until(lambda: server.unfinished_bodies == bound, "every body slot held", SLACK)
        await clients[bound].send(_head(100, "/healthz", "GET") + b"x")
        assert (await clients[bound].closed_by_server(within=SLACK)).startswith(b"HTTP/1.1 503 ")
    finally:
        for client in clients:
            await client.close()
        await _settled(server)
        with pytest.raises(StopAsyncIteration):
            await anext(running)
