"""The one test harness for a real Prometheus (Debian's ``prometheus`` package, 2.42, and its ``promtool``).

Tests that need PromQL answered by the real engine use this module instead of mocking the HTTP API:

- :func:`backfill_openmetrics` turns OpenMetrics text (a week of generated history, say) into TSDB blocks with
  ``promtool tsdb create-blocks-from openmetrics``;
- :meth:`PrometheusServer.start` runs ``prometheus`` on a free loopback port in a temp folder, scraping the
  given targets and/or serving a given TSDB folder, and returns once ``/-/ready`` answers;
- :meth:`PrometheusServer.stop` terminates it and waits, so no process outlives the test;
- a :class:`WebConfig` serves it over TLS and/or behind basic auth or client certificates
  (``--web.config.file``), as a managed Prometheus is; the harness's own checks present what it says.

Backfilled series carry no staleness markers (only a live scrape writes them), so an instant selector keeps
seeing a series' last sample for the whole lookback delta after it ended. Tests that need exact time-weighted
figures from backfilled data pass ``lookback_delta`` shorter than their sample spacing.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import yaml

APT_PACKAGE = "prometheus"
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 15.0
_BACKFILL_TIMEOUT_S = 600.0


class PrometheusHarnessError(RuntimeError):
    """The test Prometheus could not be found, fed or started; the message says what to do."""


@dataclass(frozen=True)
class PrometheusBinaries:
    prometheus: Path
    promtool: Path


def find_binaries() -> PrometheusBinaries:
    """Locate ``prometheus`` and ``promtool`` (Debian installs both in /usr/bin)."""
    found: dict[str, Path] = {}
    for name in ("prometheus", "promtool"):
        path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if path is None:
            raise PrometheusHarnessError(
                f"{name} not found on PATH or in /usr/bin: install the Debian package with "
                f"'apt-get install -y {APT_PACKAGE}' (Prometheus 2.42 and promtool)"
            )
        found[name] = Path(path)
    return PrometheusBinaries(prometheus=found["prometheus"], promtool=found["promtool"])


def backfill_openmetrics(source: str | Path, tsdb_dir: Path, timeout_s: float = _BACKFILL_TIMEOUT_S) -> None:
    """Write TSDB blocks for the samples in ``source`` (OpenMetrics text, or a path to a file of it).

    The text must end with ``# EOF`` and keep each metric family's samples together, as promtool requires.
    """
    binaries = find_binaries()
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(source, Path):
        input_path = source
    else:
        input_path = tsdb_dir.parent / f"{tsdb_dir.name}.backfill.om"
        input_path.write_text(source if source.endswith("\n") else source + "\n", encoding="utf-8")
    try:
        completed = subprocess.run(
            [
                str(binaries.promtool),
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "--quiet",
                str(input_path),
                str(tsdb_dir),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    finally:
        if not isinstance(source, Path):
            input_path.unlink(missing_ok=True)
    if completed.returncode != 0:
        raise PrometheusHarnessError(
            f"promtool could not backfill {input_path} into {tsdb_dir} (exit {completed.returncode}): "
            f"{completed.stderr.strip()[-2000:]}"
        )


@dataclass(frozen=True)
class WebConfig:
    """Prometheus' ``--web.config.file`` and what the harness presents to get through it.

    ``document`` is the file as YAML would hold it (``tls_server_config``, ``basic_auth_users``); with a
    ``tls_server_config`` the server's URL is https. ``ssl_context`` (the CA, maybe a client certificate) and
    ``headers`` (maybe basic auth) are what the readiness and series checks send.
    """

    document: Mapping[str, object]
    ssl_context: ssl.SSLContext | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return "https" if "tls_server_config" in self.document else "http"


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrometheusServer:
    """A running ``prometheus`` process on 127.0.0.1; use :meth:`start`, then :meth:`stop` (or ``with``)."""

    def __init__(
        self, process: subprocess.Popen[bytes], url: str, workdir: Path, log_path: Path, web: WebConfig | None = None
    ) -> None:
        self._process = process
        self.url = url
        self.workdir = workdir
        self.log_path = log_path
        self._web = web if web is not None else WebConfig({})

    @classmethod
    def start(
        cls,
        workdir: Path,
        *,
        scrape_targets: Sequence[str] = (),
        scrape_interval: str = "1s",
        tsdb: Path | None = None,
        lookback_delta: str | None = None,
        ready_timeout_s: float = _READY_TIMEOUT_S,
        web: WebConfig | None = None,
        scrape_configs: Sequence[Mapping[str, object]] = (),
    ) -> PrometheusServer:
        """Start Prometheus scraping ``scrape_targets`` ("host:port", path /metrics) every ``scrape_interval``,
        and with ``scrape_configs`` (entries of prometheus.yml's ``scrape_configs``) besides.

        ``tsdb`` is the storage folder (e.g. one filled by :func:`backfill_openmetrics`); without it a fresh
        folder under ``workdir`` is used. Retention is unlimited so backfilled history of any age stays.
        ``web`` puts TLS, basic auth or client certificates in front of it (:class:`WebConfig`).
        """
        binaries = find_binaries()
        workdir.mkdir(parents=True, exist_ok=True)
        storage = tsdb if tsdb is not None else workdir / "tsdb"
        storage.mkdir(parents=True, exist_ok=True)
        config: dict[str, object] = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": (
                [
                    {
                        "job_name": "targets",
                        "scrape_interval": scrape_interval,
                        "scrape_timeout": scrape_interval,
                        "static_configs": [{"targets": list(scrape_targets)}],
                    }
                ]
                if scrape_targets
                else []
            )
            + [dict(config) for config in scrape_configs],
        }
        config_path = workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
        port = _free_loopback_port()
        log_path = workdir / "prometheus.log"
        command = [
            str(binaries.prometheus),
            f"--config.file={config_path}",
            f"--storage.tsdb.path={storage}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=100y",
            "--web.enable-lifecycle",
        ]
        if lookback_delta is not None:
            command.append(f"--query.lookback-delta={lookback_delta}")
        if web is not None:
            web_config_path = workdir / "web.yml"
            web_config_path.write_text(yaml.safe_dump(dict(web.document)), encoding="utf-8")
            command.append(f"--web.config.file={web_config_path}")
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        scheme = web.scheme if web is not None else "http"
        server = cls(process, f"{scheme}://127.0.0.1:{port}", workdir, log_path, web)
        try:
            server._wait_ready(ready_timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise PrometheusHarnessError(
                    f"prometheus exited with {self._process.returncode} before becoming ready; "
                    f"its log ({self.log_path}) ends: {self._log_tail()}"
                )
            with (
                contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
                self._open("/-/ready", timeout_s=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.1)
        raise PrometheusHarnessError(
            f"prometheus at {self.url} was not ready within {timeout_s:.0f} s; log ends: {self._log_tail()}"
        )

    def wait_for_series(self, selector: str, timeout_s: float = 30.0) -> None:
        """Block until an instant query for ``selector`` returns at least one series (e.g. after scrapes)."""
        deadline = time.monotonic() + timeout_s
        query = urllib.parse.urlencode({"query": selector})
        while time.monotonic() < deadline:
            with self._open(f"/api/v1/query?{query}", timeout_s=5) as response:
                body = json.loads(response.read())
            if body.get("status") == "success" and body["data"]["result"]:
                return
            time.sleep(0.2)
        raise PrometheusHarnessError(f"no series for {selector!r} at {self.url} within {timeout_s:.0f} s")

    def _open(self, path: str, timeout_s: float) -> contextlib.AbstractContextManager[http.client.HTTPResponse]:
        request = urllib.request.Request(f"{self.url}{path}", headers=dict(self._web.headers))
        response: http.client.HTTPResponse = urllib.request.urlopen(
            request, timeout=timeout_s, context=self._web.ssl_context
        )
        return response

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        except OSError as error:
            return f"(log unreadable: {error})"

    def stop(self) -> None:
        """Terminate Prometheus and wait for it; kill it if it ignores SIGTERM."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=_STOP_TIMEOUT_S)

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def running_prometheus(
    workdir: Path,
    *,
    scrape_targets: Sequence[str] = (),
    scrape_interval: str = "1s",
    tsdb: Path | None = None,
    lookback_delta: str | None = None,
) -> Iterator[PrometheusServer]:
    """``with running_prometheus(tmp_path, ["127.0.0.1:9400"]) as prom: ... prom.url``."""
    server = PrometheusServer.start(
        workdir,
        scrape_targets=scrape_targets,
        scrape_interval=scrape_interval,
        tsdb=tsdb,
        lookback_delta=lookback_delta,
    )
    try:
        yield server
    finally:
        server.stop()
