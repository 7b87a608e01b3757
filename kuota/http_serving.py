"""The one way kuota serves HTTP: every aiohttp server (the admission webhook, the manager's metrics and health
endpoints, the exporter) listens through :func:`serve`, under limits a slow or hostile client cannot outlast.

aiohttp itself waits as long as a client likes for a request's headers and body, and its ``request.read()``
grows one buffer per connection up to the whole body; 48 connections trickling 4 MiB bodies held 330 MB for
good, and each one that gave up logged a traceback. Here:

- a request's headers must be complete ``header_timeout`` after their first byte (after the TLS handshake, for
  a connection's first request); otherwise the connection is closed. A connection that never sends a byte is
  closed at the same deadline without a log line, and one idle between requests after ``idle_timeout``;
- its body must be complete ``body_timeout`` after the headers; otherwise the client gets 408 and the
  connection is closed. Bodies are read in the pieces the socket delivers, at most the application's
  ``client_max_size`` (413 beyond, before reading when Content-Length says so), and handed to the handler
  through :func:`request_body`;
- at most ``max_unfinished_bodies`` bodies may be arriving at once; a request whose body is still arriving
  beyond that gets 503 with ``Retry-After: 1`` at once and the connection is closed. A body that arrives with
  its headers, as the API server sends small reviews, needs no slot, nor does a request without a body, so
  ``/healthz`` and ordinary reviews are answered while slow clients hold every slot;
- each request cut short (timed out, refused, or abandoned by its client) logs exactly one WARNING line, no
  traceback, naming the peer and the path, and hands the freed heap pages back to the operating system
  (:mod:`kuota.malloc_trim`), at most once a second.

This module belongs to no plane and must import none: every plane that serves HTTP serves through it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kuota import strict_json
from kuota.malloc_trim import release_free_pages

log = logging.getLogger(__name__)

BODY = web.RequestKey("kuota.http_serving.body", bytes)

# Enough of a request's first bytes to name its path in a log line.
_HEAD_SAMPLE_BYTES = 256
_RELEASE_INTERVAL = 1.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ServingLimits:
    """How long a client may take, and how many slow bodies one server holds at once.

    The API server gives up on a webhook after at most 30 s, so a body slower than that is awaited by no one;
    at the default bound, slow clients pin at most 16 bodies (64 MiB at the webhook's 4 MiB cap). A TLS
    handshake gets ``header_timeout`` too.
    """

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_unfinished_bodies: int = 16
    # Longer than the 90 s a Go client keeps an idle connection, so the API server closes idle ones first.
    idle_timeout: float = 120.0


@dataclass
class HttpServer:
    """One application listening under :class:`ServingLimits`; ``await runner.cleanup()`` stops it."""

    runner: web.AppRunner
    port: int
    _bodies: _UnfinishedBodies

    @property
    def unfinished_bodies(self) -> int:
        """Requests whose body is being awaited now, each holding one of ``max_unfinished_bodies`` slots."""
        return self._bodies.count


async def serve(
    app: web.Application,
    host: str,
    port: int,
    *,
    limits: ServingLimits = ServingLimits(),
    ssl_context: ssl.SSLContext | None = None,
    backlog: int = 128,
) -> HttpServer:
    """Start serving ``app`` (not started yet: its body guard goes first among its middlewares) on
    ``host:port``; port 0 picks a free one, see :attr:`HttpServer.port`."""
    bodies = _UnfinishedBodies(limits, _MemoryRelease())
    app.middlewares.insert(0, bodies.guard)
    # Access logs would be one line per request: far too much at the API server's or Prometheus's rate.
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = _GuardedSite(runner, host, port, limits, ssl_context=ssl_context, backlog=backlog)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return HttpServer(runner, runner.addresses[0][1], bodies)


def json_response(value: Any, status: int = 200) -> web.Response:
    """``value`` as a JSON answer, encoded by :mod:`kuota.strict_json` (every review and API answer kuota serves)."""
    return web.Response(body=strict_json.dumps(value), status=status, content_type="application/json")


async def request_body(request: web.Request) -> bytes:
    """The request's body, as :func:`serve` read it before the handler ran; an application served some other
    way (aiohttp's test server) has it read here, with the size cap but without the deadline or the bound."""
    if BODY in request:
        return request[BODY]
    return await _read_body(request)


async def _read_body(request: web.Request) -> bytes:
    limit = request.client_max_size
    if request.content_length is not None and request.content_length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
        chunks.append(chunk)
    return b"".join(chunks)


def _peer(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return "an unknown peer"


def _printable(raw: bytes) -> str:
    """A client's bytes fit for one log line: control and non-ASCII bytes escaped."""
    return "".join(chr(byte) if 0x20 < byte < 0x7F else f"\\x{byte:02x}" for byte in raw)


def _peer_of(request: web.BaseRequest) -> str:
    protocol = request.protocol
    if isinstance(protocol, _GuardedRequestHandler):
        return protocol.peer_name
    return _peer(request.transport.get_extra_info("peername") if request.transport else None)


def _closing(status: int, text: str, **headers: str) -> web.Response:
    answer = web.Response(status=status, text=text + "\n", headers=headers)
    answer.force_close()
    return answer


class _MemoryRelease:
    """Trims the heap soon after a request was cut short, at most once per second: a trim walks the heap."""

    def __init__(self) -> None:
        self._pending: asyncio.TimerHandle | None = None
        self._last = -math.inf

    def soon(self) -> None:
        if self._pending is not None:
            return
        loop = asyncio.get_running_loop()
        self._pending = loop.call_at(max(loop.time(), self._last + _RELEASE_INTERVAL), self._run, loop)

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        self._pending = None
        self._last = loop.time()
        release_free_pages()


class _UnfinishedBodies:
    """Reads every body before its handler runs, under the body deadline and the bound on slow bodies."""

    def __init__(self, limits: ServingLimits, memory: _MemoryRelease) -> None:
        self._limits = limits
        self._memory = memory
        self.count = 0

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        # No body, or a route that answers 404/405 without reading one (the connection closes after it).
        if not request.body_exists or request.match_info.http_exception is not None:
            return await handler(request)
        if request.content.is_eof():
            request[BODY] = await _read_body(request)
            return await handler(request)
        limits = self._limits
        what = f"{request.method} {request.rel_url.raw_path} from {_peer_of(request)}"
        if self.count >= limits.max_unfinished_bodies:
            log.warning("refused %s with 503: %d request bodies are already arriving", what, self.count)
            return _closing(503, "too many slow request bodies; retry", **{"Retry-After": "1"})
        self.count += 1
        try:
            async with asyncio.timeout(limits.body_timeout):
                body = await _read_body(request)
        except TimeoutError:
            size = "chunked" if request.content_length is None else f"{request.content_length} bytes"
            log.warning("dropped %s: its body (%s) was not complete within %gs", what, size, limits.body_timeout)
            self._memory.soon()
            return _closing(408, f"request body not complete within {limits.body_timeout:g}s")
        except (ConnectionError, web.RequestPayloadError) as error:
            log.warning("dropped %s: the client went away during the body (%s)", what, error)
            self._memory.soon()
            return _closing(400, "request body incomplete")
        finally:
            self.count -= 1
        request[BODY] = body
        return await handler(request)


class _GuardedRequestHandler(web.RequestHandler):
    """aiohttp's connection protocol plus the header deadline aiohttp lacks.

    A head is awaited from the connection's start and again after each response; its deadline starts then for
    the first request and at the first byte of each later one, and ends when aiohttp's parser queues the whole
    head (``_messages``), from where the body deadline takes over.
    """

    __slots__ = ("_awaiting_head", "_head_deadline", "_head_sample", "_header_timeout", "peer_name")

    def __init__(self, manager: web.Server, *, loop: asyncio.AbstractEventLoop, limits: ServingLimits) -> None:
        super().__init__(
            manager,
            loop=loop,
            keepalive_timeout=limits.idle_timeout,
            # A body still arriving after the response is not drained: the connection closes instead.
            lingering_time=0,
            access_log=None,  # type: ignore[arg-type]  # None turns access logs off; aiohttp annotates a Logger
        )
        self._header_timeout = limits.header_timeout
        self._awaiting_head = True
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_sample = bytearray()
        self.peer_name = "an unknown peer"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.peer_name = _peer(transport.get_extra_info("peername"))
        super().connection_made(transport)
        self._start_head_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._awaiting_head:
            return
        if self._messages:
            self._awaiting_head = False
            self._head_sample.clear()
            self._stop_head_deadline()
        elif data:
            self._head_sample += data[: _HEAD_SAMPLE_BYTES - len(self._head_sample)]
            if self._head_deadline is None:
                self._start_head_deadline()

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        answered = await super().finish_response(request, resp, start_time)
        # After a response that ends the connection, or ahead of a body's unread rest, no head is due.
        self._awaiting_head = not self._messages and bool(resp.keep_alive) and request.content.is_eof()
        return answered

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_head_deadline()
        if self._awaiting_head and self._head_sample:
            self._warn_head("the client went away during the headers")
        super().connection_lost(exc)

    def _start_head_deadline(self) -> None:
        self._head_deadline = self._loop.call_later(self._header_timeout, self._head_overdue)

    def _stop_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_overdue(self) -> None:
        self._head_deadline = None
        if not self._awaiting_head or self.transport is None:
            return
        if self._head_sample:
            self._warn_head(f"its headers were not complete within {self._header_timeout:g}s")
        else:
            log.debug("closed a connection from %s that sent nothing for %gs", self.peer_name, self._header_timeout)
        self.force_close()

    def _warn_head(self, reason: str) -> None:
        parts = bytes(self._head_sample).split(b"\r", 1)[0].split(b" ")
        path = _printable(parts[1]) if len(parts) > 1 and parts[1] else "(not sent yet)"
        self._head_sample.clear()
        log.warning("dropped a request for %s from %s: %s", path, self.peer_name, reason)


class _GuardedSite(web.BaseSite):
    """aiohttp's TCP site, listening with :class:`_GuardedRequestHandler` as the protocol."""

    __slots__ = ("_host", "_limits", "_port")

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        limits: ServingLimits,
        *,
        ssl_context: ssl.SSLContext | None,
        backlog: int,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host = host
        self._port = port
        self._limits = limits

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        limits = self._limits

        def connection() -> _GuardedRequestHandler:
            return _GuardedRequestHandler(server, loop=loop, limits=limits)

        self._server = await loop.create_server(
            connection,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=limits.header_timeout if self._ssl_context else None,
        )
