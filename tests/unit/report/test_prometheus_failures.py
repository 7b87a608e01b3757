"""Prometheus unreachable or answering errors: a clear message and a non-zero exit, never an empty report."""

from __future__ import annotations

import contextlib
import http.server
import io
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuota.cli import main


def _report(url: str, out: Path) -> tuple[int, str]:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(["report", "--prometheus", url, "--out", str(out), "--timeout", "5"])
    return code, stderr.getvalue()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"status":"error","errorType":"execution","error":"query processing would load too many samples"}'
        self.send_response(422)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        # the report cancels its other queries after the first error, so their connections close early
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@pytest.fixture
def failing_prometheus() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def test_unreachable_prometheus_exits_non_zero_naming_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, stderr = _report(url, tmp_path)
    assert code == 3
    assert f"Prometheus at {url} did not answer" in stderr
    assert not (tmp_path / "report.json").exists()


def test_prometheus_error_exits_non_zero_with_its_message_and_the_query(
    failing_prometheus: str, tmp_path: Path
) -> None:
    code, stderr = _report(failing_prometheus, tmp_path)
    assert code == 3
    assert "HTTP 422" in stderr and "too many samples" in stderr and "count(count_over_time(" in stderr
    assert not (tmp_path / "report.json").exists()
