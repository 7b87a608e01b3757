"""Fixtures for the report's unit tests: a fake Prometheus on loopback, and ``kuota report`` run in process.

The fake is a small aiohttp app on its own event loop in a thread (``kuota report`` runs its own loop with
``asyncio.run``); an ``Answer`` function decides each answer from the API path and the query.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from kuota.cli import main

# (HTTP status, body) or a coroutine-free special: "hang" never answers
Answer = Callable[[str, str], tuple[int, bytes] | str]
END = 1_790_006_400  # a whole hour, so a 3h window's hour ends are END - 7200, END - 3600 and END


def vector(*samples: tuple[dict[str, str], str]) -> bytes:
    result = [{"metric": labels, "value": [END, value]} for labels, value in samples]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def matrix(*series: tuple[dict[str, str], list[str]]) -> bytes:
    result = [
        {"metric": labels, "values": [[END - 3600 * (len(values) - 1 - i), v] for i, v in enumerate(values)]}
        for labels, values in series
    ]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


def every_series_present(path: str, query: str) -> tuple[int, bytes]:
    """Every presence query finds its series, every other query answers nothing: an empty but valid week."""
    if path.endswith("/query_range"):
        return 200, matrix()
    return 200, vector(({}, "1")) if query.startswith("count(count_over_time(") else vector()


@dataclass
class FakePrometheus:
    answer: Answer
    url: str = ""
    queries: list[str] = field(default_factory=list)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        query = str(form.get("query", ""))
        self.queries.append(query)
        answer = self.answer(request.path, query)
        if answer == "hang":
            await asyncio.sleep(3600)
        if answer == "stream":  # no Content-Length: the client must count what it reads
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            for _ in range(64):
                await response.write(b" " * 1024)
            return response
        assert isinstance(answer, tuple)
        status, body = answer
        return web.Response(status=status, body=body, content_type="application/json")


@contextlib.contextmanager
def serving(answer: Answer) -> Iterator[FakePrometheus]:
    fake = FakePrometheus(answer)
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/api/v1/query", fake._handle)
    app.router.add_post("/api/v1/query_range", fake._handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5, handler_cancellation=True)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    fake.url = f"http://127.0.0.1:{port}"
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


@pytest.fixture
def fake_prometheus() -> Callable[[Answer], contextlib.AbstractContextManager[FakePrometheus]]:
    return serving


@dataclass(frozen=True)
class ReportRun:
    exit_code: int
    stderr: str
    out: Path

    @property
    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("kuota report: error:")]

    def assert_one_error_line(self) -> str:
        """The run failed with one line on stderr saying why, and nothing else but progress lines."""
        assert "Traceback" not in self.stderr, self.stderr
        assert all(line.startswith("kuota report: ") for line in self.stderr.splitlines()), self.stderr
        assert len(self.errors) == 1, self.stderr
        return self.errors[0]


def run_report(*args: str, out: Path, end: int = END, window: str = "3h") -> ReportRun:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(["report", "--end", str(end), "--window", window, *args, "--out", str(out)])
    return ReportRun(code, stderr.getvalue(), out)
