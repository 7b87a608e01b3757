"""Runs ``kuota exporter`` as its own process against the fake NVML (through LD_LIBRARY_PATH, as on a node)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.waiting import wait_until

REPO = Path(__file__).parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class ExporterProcess:
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @classmethod
    def start(cls, workdir: Path, nvml_dir: Path, scenario: Path, args: list[str]) -> ExporterProcess:
        port = free_port()
        env = {
            **os.environ,
            "LD_LIBRARY_PATH": str(nvml_dir),
            "FAKE_NVML_SCENARIO": str(scenario),
            "PYTHONPATH": str(REPO),
        }
        env.pop("NODE_NAME", None)
        log_path = workdir / f"exporter-{port}.log"
        command = [sys.executable, "-m", "kuota", "exporter", "--listen", f"127.0.0.1:{port}", *args]
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        exporter = cls(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)
        try:
            wait_until(lambda: exporter.get("/healthz")[0] == 200, f"{exporter.url}/healthz", timeout=30)
        except BaseException:
            exporter.stop()
            raise
        return exporter

    def get(self, path: str) -> tuple[int, str]:
        """(status, body); (0, reason) while nothing listens yet."""
        if self.process.poll() is not None:
            raise AssertionError(f"the exporter exited with {self.process.returncode}: {self.log()[-3000:]}")
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            return 0, str(error)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(kib) * 1024

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextlib.contextmanager
def running_exporter(workdir: Path, nvml_dir: Path, scenario: Path, args: list[str]) -> Iterator[ExporterProcess]:
    exporter = ExporterProcess.start(workdir, nvml_dir, scenario, args)
    try:
        yield exporter
    finally:
        exporter.stop()
